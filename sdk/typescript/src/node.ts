/**
 * `ankusa/node`: the Node-only helpers, kept out of the main entry so that one runs on edge
 * runtimes.
 *
 * - `nodeFetchWithCa(ca)`: a fetch that trusts a CA bundle (a PEM file path or PEM text), for
 *   an admin API or claim port served with a private CA. Node's global fetch has no per-call
 *   CA option, so this one speaks through `node:https`.
 * - `toNodeListener(handler)`: serves a fetch handler (`createHandler`) with `node:http`.
 * - Importing this module installs `node:crypto`'s Web Crypto as `globalThis.crypto` where the
 *   runtime has none (Node 18 without `--experimental-global-webcrypto`).
 */

import { webcrypto } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import { Readable } from 'node:stream';

if (!(globalThis as { crypto?: unknown }).crypto) {
  Object.defineProperty(globalThis, 'crypto', { value: webcrypto, configurable: true, writable: true });
}

export type NodeFetch = (input: string, init?: RequestInit) => Promise<Response>;

export interface CaOptions {
  /** A PEM file with one or more CA certificates. */
  caFile?: string;
  /** PEM text with one or more CA certificates. */
  caPem?: string;
}

/**
 * A fetch for `AdminClient` / `ClaimClient` that verifies `https://` servers against the given
 * CA bundle instead of the system's roots (`http://` URLs are fetched plainly). Redirects are
 * never followed. Supports the subset of fetch those clients use: method, headers, a string or
 * bytes body, and an abort signal.
 */
export function nodeFetchWithCa(ca: string | CaOptions): NodeFetch {
  const pem = caText(ca);
  const agent = new https.Agent({ ca: pem, keepAlive: true });
  return (input, init = {}) => request(input, init, agent);
}

function caText(ca: string | CaOptions): string {
  if (typeof ca === 'string') {
    return ca.includes('-----BEGIN') ? ca : readFileSync(ca, 'utf8');
  }
  if (ca.caPem) return ca.caPem;
  if (ca.caFile) return readFileSync(ca.caFile, 'utf8');
  throw new TypeError('nodeFetchWithCa: give a PEM file path, PEM text, { caFile } or { caPem }');
}

/** Statuses whose response has no body (the Response constructor refuses one). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

function request(input: string, init: RequestInit, agent: https.Agent): Promise<Response> {
  return new Promise((resolve, reject) => {
    const url = new URL(input);
    const secure = url.protocol === 'https:';
    if (!secure && url.protocol !== 'http:') {
      reject(new TypeError(`unsupported protocol ${url.protocol}`));
      return;
    }
    const signal = init.signal ?? undefined;
    if (signal?.aborted) {
      reject(signal.reason ?? new Error('aborted'));
      return;
    }
    const headers = new Headers(init.headers);
    const body = bodyBytes(init.body);
    if (body) headers.set('content-length', String(body.length));
    const options: https.RequestOptions = {
      method: init.method ?? 'GET',
      headers: Object.fromEntries(headers),
      ...(signal && { signal }),
      ...(secure && { agent }),
    };
    const req = (secure ? https : http).request(url, options, (res) => {
      const status = res.statusCode ?? 0;
      const responseHeaders = new Headers();
      for (const [name, value] of Object.entries(res.headers)) {
        if (Array.isArray(value)) for (const v of value) responseHeaders.append(name, v);
        else if (value !== undefined) responseHeaders.set(name, value);
      }
      if (NULL_BODY.has(status) || (init.method ?? 'GET').toUpperCase() === 'HEAD') {
        res.resume();
        resolve(new Response(null, { status, headers: responseHeaders }));
        return;
      }
      const stream = Readable.toWeb(res) as unknown as ReadableStream<Uint8Array>;
      resolve(new Response(stream, { status, headers: responseHeaders }));
    });
    req.on('error', reject);
    if (body) req.end(body);
    else req.end();
  });
}

/**
 * The request body as a web stream. Cancelling it (a handler that stops at its size limit)
 * pauses the socket's reading instead of destroying it, and asks for the connection to close
 * after the answer, so the client still receives that answer (`413`).
 */
function requestBody(req: http.IncomingMessage, res: http.ServerResponse): ReadableStream<Uint8Array> {
  let done = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        req.on('data', (chunk: Buffer) => {
          if (done) return;
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 0) <= 0) req.pause();
        });
        req.on('end', () => {
          if (!done) controller.close();
          done = true;
        });
        req.on('error', (e) => {
          if (!done) controller.error(e);
          done = true;
        });
      },
      pull() {
        req.resume();
      },
      cancel() {
        done = true;
        req.pause();
        res.shouldKeepAlive = false;
      },
    },
    { highWaterMark: 4 },
  );
}

/** The request's URL; a Host header that does not make one is replaced by `localhost`. */
function requestUrl(req: http.IncomingMessage): string {
  const path = req.url ?? '/';
  try {
    return new URL(path, `http://${req.headers.host ?? 'localhost'}`).href;
  } catch {
    return new URL(path.startsWith('/') ? path : '/', 'http://localhost').href;
  }
}

function bodyBytes(body: RequestInit['body']): Uint8Array | null {
  if (body === undefined || body === null) return null;
  if (typeof body === 'string') return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError('nodeFetchWithCa: the body must be a string or bytes');
}

/**
 * A `node:http` request listener serving a fetch handler:
 *
 *     http.createServer(toNodeListener(createHandler({ secrets, handle }))).listen(8080)
 */
export function toNodeListener(
  handler: (request: Request) => Promise<Response>,
): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  return (req, res) => {
    void serve(handler, req, res);
  };
}

async function serve(
  handler: (request: Request) => Promise<Response>,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  try {
    const headers = new Headers();
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      headers.append(req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string);
    }
    const method = req.method ?? 'GET';
    const hasBody = method !== 'GET' && method !== 'HEAD';
    const controller = new AbortController();
    res.on('close', () => controller.abort());
    const request = new Request(requestUrl(req), {
      method,
      headers,
      signal: controller.signal,
      ...(hasBody && { body: requestBody(req, res), duplex: 'half' }),
    } as RequestInit);
    const response = await handler(request);
    res.statusCode = response.status;
    response.headers.forEach((value, name) => res.setHeader(name, value));
    if (!response.body) {
      res.end();
      return;
    }
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk);
    res.end();
  } catch (e) {
    if (!res.headersSent) {
      res.statusCode = 500;
      res.setHeader('content-type', 'application/json');
      res.end('{"error":"internal_error"}');
    } else {
      res.destroy(e instanceof Error ? e : undefined);
    }
  }
}
