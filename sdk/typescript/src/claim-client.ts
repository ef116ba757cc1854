/**
 * The claim check from the consumer's side (docs/sinks.md): a body too large to inline is
 * fetched from the gateway's claim port, `GET <base>/v1/claims/<tenant>/<claim_id>`, and
 * checked against the message's `size` and `sha256` before anyone sees it.
 *
 * What each answer means for the message: `404` → `ClaimNotFoundError` (gone: dead-letter);
 * `408`, `429`, `5xx`, a redirect (never followed), no connection or the timeout →
 * `ClaimCheckUnavailableError` (retryable: requeue with a delay); any other status →
 * `ClaimRejectedError` (fix the token, not the timing); bytes that do not match →
 * `ClaimIntegrityError`.
 */

import { sha256Hex } from './bytes.js';
import type { ClaimRef } from './claim-ref.js';
import {
  AnkusaError,
  ClaimCheckUnavailableError,
  ClaimIntegrityError,
  ClaimNotFoundError,
  ClaimRejectedError,
} from './errors.js';
import { type FetchLike, DeadlineExceeded, discard, normalizeBaseUrl, readAtMost, resolveFetch, withDeadline } from './http.js';
import type { QueueMessage } from './message.js';

export const DEFAULT_CLAIM_TIMEOUT_MS = 5000;

export interface ClaimClientOptions {
  /** The claim port, e.g. `http://ankusa:4001`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <token>` when the port has `claim_check.tokens`. */
  token?: string;
  /** Bounds the whole redeem (connection, headers and body). Default 5000. */
  timeoutMs?: number;
  /** A fetch to use instead of the global one (e.g. `nodeFetchWithCa` for a private CA). */
  fetch?: FetchLike;
}

/** What the claimed bytes must be. */
export interface ClaimExpectation {
  size: number;
  sha256: string;
}

/** A hook with its body in hand: an inline message as is, or a claim redeemed and checked. */
export interface Hook extends Omit<QueueMessage, 'body'> {
  body: Uint8Array;
}

export class ClaimClient {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly #token: string | undefined;
  readonly #fetch: FetchLike;

  constructor(options: ClaimClientOptions) {
    this.baseUrl = normalizeBaseUrl(options.baseUrl, 'ClaimClient');
    this.timeoutMs = options.timeoutMs ?? DEFAULT_CLAIM_TIMEOUT_MS;
    if (!(this.timeoutMs > 0)) throw new TypeError('ClaimClient: timeoutMs must be > 0');
    this.#token = options.token;
    this.#fetch = resolveFetch(options.fetch);
  }

  /** Fetches a claim's bytes and checks them; reads no more than `size + 1` bytes. */
  async fetchClaim(ref: ClaimRef, expect: ClaimExpectation): Promise<Uint8Array> {
    const path = `/v1/claims/${encodeURIComponent(ref.tenant)}/${encodeURIComponent(ref.claimId)}`;
    const headers: Record<string, string> = { accept: 'application/octet-stream' };
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`;
    try {
      return await withDeadline(this.timeoutMs, async (signal) => {
        const response = await this.#fetch(this.baseUrl + path, {
          method: 'GET',
          headers,
          redirect: 'manual',
          signal,
        });
        return await this.#judge(response, expect);
      });
    } catch (e) {
      if (e instanceof AnkusaError) throw e;
      const why = e instanceof DeadlineExceeded ? `no answer within ${this.timeoutMs} ms` : 'no connection';
      throw new ClaimCheckUnavailableError(`claim check: ${why}`, null, e);
    }
  }

  async #judge(response: Response, expect: ClaimExpectation): Promise<Uint8Array> {
    const status = response.status;
    if (status === 200) {
      const body = await readAtMost(response, expect.size);
      if (body === null || body.length !== expect.size) {
        throw new ClaimIntegrityError(`claim: the body is not the message's size (${expect.size} bytes)`);
      }
      if ((await sha256Hex(body)) !== expect.sha256) {
        throw new ClaimIntegrityError("claim: the body does not match the message's sha256");
      }
      return body;
    }
    await discard(response);
    if (status === 404) throw new ClaimNotFoundError('claim check: 404, the claim is gone');
    // A browser's manual redirect is an opaque answer of status 0: a redirect all the same.
    if (status === 0 || status === 408 || status === 429 || (status >= 300 && status < 400) || status >= 500) {
      throw new ClaimCheckUnavailableError(`claim check: answered ${status}`, status === 0 ? null : status);
    }
    throw new ClaimRejectedError(`claim check: answered ${status}`, status);
  }
}

/**
 * The hook of a decoded message: an inline one as is (no request), a claim redeemed through
 * `claimClient` and checked against the message's `size` and `sha256`.
 */
export async function toHook(message: QueueMessage, claimClient?: ClaimClient): Promise<Hook> {
  const { body, ...rest } = message;
  if (body !== null) return { ...rest, body };
  if (!message.claim) throw new TypeError('toHook: the message has neither a body nor a claim');
  if (!claimClient) throw new TypeError('toHook: the message carries a claim: pass a ClaimClient to redeem it');
  const bytes = await claimClient.fetchClaim(message.claim, { size: message.size, sha256: message.sha256 });
  return { ...rest, body: bytes };
}
