/**
 * The HTTP plumbing the claim and admin clients share: a `fetch` (the global one, or one the
 * caller gives, e.g. `ankusa/node`'s `nodeFetchWithCa`), a deadline over the whole exchange
 * (headers and body), and bounded body reads.
 */

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export function resolveFetch(given: FetchLike | undefined): FetchLike {
  if (given) return given;
  if (typeof globalThis.fetch !== 'function') {
    throw new TypeError('no global fetch in this runtime: pass the client a fetch function');
  }
  return (input, init) => globalThis.fetch(input, init);
}

/** The base URL without trailing slashes; refuses what is not an http(s) URL. */
export function normalizeBaseUrl(baseUrl: string, what: string): string {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`${what}: baseUrl is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`${what}: baseUrl must be http:// or https://`);
  }
  if (url.username || url.password) {
    throw new TypeError(`${what}: baseUrl must not carry credentials (use token)`);
  }
  return baseUrl.replace(/\/+$/, '');
}

export class DeadlineExceeded extends Error {
  constructor(ms: number) {
    super(`no complete answer within ${ms} ms`);
    this.name = 'DeadlineExceeded';
  }
}

/**
 * Runs `work` with an abort signal that fires after `ms`, and rejects with `DeadlineExceeded`
 * at that time even if `work` ignores the signal (a custom fetch that does not honour it).
 */
export async function withDeadline<T>(ms: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const e = new DeadlineExceeded(ms);
      controller.abort(e);
      reject(e);
    }, ms);
  });
  try {
    return await Promise.race([work(controller.signal), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Reads a response body, at most `limit` bytes: `null` when it holds more (the rest is not
 * read: the stream is cancelled).
 */
export async function readAtMost(response: Response, limit: number): Promise<Uint8Array | null> {
  if (!response.body) return new Uint8Array(0);
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
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
  } finally {
    reader.releaseLock();
  }
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Discards a body we do not read, so the connection can be reused or closed. */
export async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => undefined);
}
