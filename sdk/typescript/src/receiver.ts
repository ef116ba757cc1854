/**
 * Receiver helpers: the gateway's HTTP sink posts here. The raw body is read first and the
 * signature judged on those exact bytes before anything parses them; then your `handle` runs
 * and its outcome becomes the status the gateway acts on:
 *
 * | Outcome | Status | The gateway |
 * |---|---|---|
 * | `handle` resolved (anything but `false`) | `202` | delivered |
 * | signature refused, no secret configured | `401 {"error": code}` | dead-letters (permanent) |
 * | headers unusable | `400 {"error": code}` | dead-letters |
 * | body over `maxBodyBytes` | `413 {"error": "body_too_large"}` | dead-letters |
 * | `handle` resolved `false`, or threw an error whose `retryable` is `true` | `503` | retries |
 * | `handle` threw anything else | `500` | retries |
 *
 * `createHandler` is for fetch-style runtimes (`(Request) => Promise<Response>`: Deno,
 * Bun, Cloudflare Workers, Vercel Edge, Node through `ankusa/node`'s `toNodeListener`);
 * `expressReceiver` is Express middleware behind `express.raw(...)`.
 */

import { AnkusaError, InvalidSignatureError } from './errors.js';
import { type Delivery, receiveDelivery } from './delivery.js';
import type { HeadersInput } from './headers.js';
import { type Secrets, SigningKeys, prepareSecrets } from './signature.js';

/** Larger than the gateway's default `http.max_body_bytes` (8 MB). */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;

export interface ReceiverOptions<R = unknown> {
  /** The HTTP sink's signing secrets (several while rotating). */
  secrets?: Secrets | null;
  /** Accept unsigned deliveries; only honoured when no secret is given. Default `false`. */
  allowUnsigned?: boolean;
  /** Your processing. Resolve to accept; resolve `false` or throw a retryable error to be retried. */
  handle: (delivery: Delivery, request: R) => unknown;
  /** Seconds a signature's timestamp may be off; default 300. */
  toleranceS?: number;
  /** Bodies above this are refused `413` unread. Default 16 MiB. */
  maxBodyBytes?: number;
  /** Where refusals and failures are reported; default `console.error`. Never given a secret. */
  log?: (message: string, error?: unknown) => void;
}

interface Outcome {
  status: number;
  payload: Record<string, unknown>;
}

/** The part both helpers share: one delivery's bytes and headers in, a status out. */
export class ReceiverCore<R> {
  readonly #options: ReceiverOptions<R>;
  readonly #keys: Promise<Secrets | null>;
  readonly maxBodyBytes: number;
  readonly log: (message: string, error?: unknown) => void;

  constructor(options: ReceiverOptions<R>) {
    if (typeof options?.handle !== 'function') throw new TypeError('receiver: handle must be a function');
    this.#options = options;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.log = options.log ?? ((m, e) => (e === undefined ? console.error(m) : console.error(m, e)));
    const s = options.secrets;
    // Import the keys once, not per delivery; a bad secret is reported now and answered 401.
    this.#keys =
      s == null || s instanceof SigningKeys || s.length === 0 ? Promise.resolve(s ?? null) : prepareSecrets(s);
    this.#keys.catch((e: unknown) => this.log(`ankusa receiver: ${describe(e)}; every delivery will be refused`));
  }

  async decide(headers: HeadersInput, body: Uint8Array, request: R): Promise<Outcome> {
    let delivery: Delivery;
    try {
      const secrets = await this.#keys;
      delivery = await receiveDelivery({
        headers,
        body,
        secrets,
        allowUnsigned: this.#options.allowUnsigned === true,
        ...(this.#options.toleranceS !== undefined && { toleranceS: this.#options.toleranceS }),
      });
    } catch (e) {
      if (e instanceof InvalidSignatureError) return refuse(401, e.code);
      if (e instanceof AnkusaError && e.status !== null && e.status < 500) return refuse(e.status, e.code);
      this.log('ankusa receiver: could not judge a delivery', e);
      return refuse(500, 'internal_error');
    }
    try {
      const result = await this.#options.handle(delivery, request);
      if (result === false) return refuse(503, 'handler_declined');
      return { status: 202, payload: { id: delivery.id, status: 'accepted' } };
    } catch (e) {
      if (isRetryable(e)) {
        this.log(`ankusa receiver: hook ${delivery.id} will be retried: ${describe(e)}`);
        return refuse(503, e instanceof AnkusaError ? e.code : 'handler_unavailable');
      }
      this.log(`ankusa receiver: handle failed on hook ${delivery.id}`, e);
      return refuse(500, 'handler_failed');
    }
  }
}

function refuse(status: number, code: string): Outcome {
  return { status, payload: { error: code } };
}

function isRetryable(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { retryable?: unknown }).retryable === true;
}

function describe(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

function json(outcome: Outcome): Response {
  return new Response(JSON.stringify(outcome.payload), {
    status: outcome.status,
    headers: { 'content-type': 'application/json' },
  });
}

/**
 * A fetch handler: `(request: Request) => Promise<Response>`. Reads the body (at most
 * `maxBodyBytes`) before anything else, then answers as the table above says.
 */
export function createHandler(options: ReceiverOptions<Request>): (request: Request) => Promise<Response> {
  const core = new ReceiverCore<Request>(options);
  return async (request: Request): Promise<Response> => {
    if (request.method !== 'POST') {
      return new Response(JSON.stringify({ error: 'method_not_allowed' }), {
        status: 405,
        headers: { 'content-type': 'application/json', allow: 'POST' },
      });
    }
    const declared = Number(request.headers.get('content-length') ?? '0');
    if (declared > core.maxBodyBytes) return json(refuse(413, 'body_too_large'));
    const body = await readBody(request, core.maxBodyBytes);
    if (body === null) return json(refuse(413, 'body_too_large'));
    return json(await core.decide(request.headers, body, request));
  };
}

async function readBody(request: Request, limit: number): Promise<Uint8Array | null> {
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** The parts of an Express (or Node `http`) request the middleware reads. */
export interface RawBodyRequest {
  headers: HeadersInput;
  body?: unknown;
}

/** The parts of an Express (or Node `http`) response the middleware writes. */
export interface JsonResponse {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(chunk?: string): unknown;
}

/**
 * Express middleware. Mount it behind `express.raw(...)` so `req.body` is the raw bytes:
 *
 *     app.post('/ankusa', express.raw({ type: () => true }), expressReceiver({ secrets, handle }))
 *
 * It refuses to run on a parsed body (`express.json()` re-serialised is not what was signed):
 * every request is answered `500 {"error":"raw_body_required"}` and the reason is logged.
 */
export function expressReceiver<R extends RawBodyRequest = RawBodyRequest>(
  options: ReceiverOptions<R>,
): (req: R, res: JsonResponse, next?: (err?: unknown) => void) => Promise<void> {
  const core = new ReceiverCore<R>(options);
  let warned = false;
  return async (req, res) => {
    const send = (o: Outcome): void => {
      res.statusCode = o.status;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(o.payload));
    };
    if (!(req.body instanceof Uint8Array)) {
      if (!warned) {
        warned = true;
        core.log(
          'ankusa expressReceiver: req.body is not the raw bytes. Mount express.raw({ type: () => true, limit: "16mb" }) ' +
            'before it, on this route only, and no JSON or urlencoded parser ahead of it: the signature covers the exact bytes.',
        );
      }
      send(refuse(500, 'raw_body_required'));
      return;
    }
    if (req.body.length > core.maxBodyBytes) {
      send(refuse(413, 'body_too_large'));
      return;
    }
    send(await core.decide(req.headers, req.body, req));
  };
}
