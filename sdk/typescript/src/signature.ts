/**
 * Standard Webhooks verification of the gateway's HTTP deliveries: `webhook-id`,
 * `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<ts>.<body>")>`.
 *
 * The checks run in the contract's order (invalid_secret → missing_header → invalid_timestamp
 * → timestamp_out_of_tolerance → no_matching_signature), so the same bad input names the same
 * code in every SDK. Comparisons are Web Crypto's `subtle.verify`, constant time.
 */

import { type BodyInput, decodeBase64, subtle, toBytes, utf8 } from './bytes.js';
import { InvalidSignatureError } from './errors.js';
import { type HeadersInput, headerMap, nonEmpty } from './headers.js';

/** The window a timestamp may be off from now, either way, by default (seconds). */
export const DEFAULT_TOLERANCE_S = 300;

/** Above this many (entry, secret) pairs the body is hashed once per secret instead of per pair. */
const DIRECT_PAIRS = 4;

/**
 * Secrets imported once as HMAC keys (`prepareSecrets`): pass it as `secrets` to skip the
 * import on every delivery. The key bytes are not extractable.
 */
export class SigningKeys {
  readonly #keys: readonly CryptoKey[];
  /** @internal Use `prepareSecrets`. */
  constructor(keys: readonly CryptoKey[], token: symbol) {
    if (token !== INTERNAL) throw new TypeError('use prepareSecrets(secrets) to make SigningKeys');
    this.#keys = keys;
  }
  /** @internal */
  get keys(): readonly CryptoKey[] {
    return this.#keys;
  }
  get size(): number {
    return this.#keys.length;
  }
}

const INTERNAL = Symbol('ankusa.internal');

export type Secrets = readonly string[] | SigningKeys;

export interface VerifySignatureOptions {
  headers: HeadersInput;
  body: BodyInput;
  /** `whsec_<base64>` secrets (the key is the decoded bytes) or raw strings (their UTF-8). */
  secrets: Secrets;
  /** Unix seconds; defaults to the clock. */
  now?: number;
  /** Seconds a timestamp may be off from `now`, either way; defaults to 300. */
  toleranceS?: number;
}

export interface VerifiedSignature {
  /** `webhook-id`. */
  id: string;
  /** `webhook-timestamp`, unix seconds. */
  timestamp: number;
}

/** The HMAC key bytes of one secret, or `null` when it cannot be one. */
function keyBytes(secret: unknown): Uint8Array | null {
  if (typeof secret !== 'string' || secret === '') return null;
  if (secret.startsWith('whsec_')) {
    const key = decodeBase64(secret.slice('whsec_'.length));
    return key && key.length > 0 ? key : null;
  }
  return utf8(secret);
}

/**
 * Imports the secrets as HMAC keys. Fails with `InvalidSignatureError` `invalid_secret` (field
 * `secrets`) when there is none, or one is empty or a `whsec_` secret that is not base64: a
 * configuration error is never hidden by another secret that works.
 */
export async function prepareSecrets(secrets: readonly string[]): Promise<SigningKeys> {
  if (!Array.isArray(secrets) || secrets.length === 0) {
    throw new InvalidSignatureError(
      'invalid_secret',
      'secrets',
      'secrets: must be a non-empty array of secrets (whsec_<base64> or raw strings)',
    );
  }
  const raw: Uint8Array[] = [];
  for (let i = 0; i < secrets.length; i++) {
    const key = keyBytes(secrets[i]);
    if (!key) {
      throw new InvalidSignatureError(
        'invalid_secret',
        'secrets',
        `secrets[${i}]: empty, or a whsec_ secret whose rest is not standard base64`,
      );
    }
    raw.push(key);
  }
  const s = subtle();
  const keys = await Promise.all(
    raw.map((k) =>
      s.importKey('raw', k as Uint8Array<ArrayBuffer>, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']),
    ),
  );
  return new SigningKeys(keys, INTERNAL);
}

/**
 * Verifies a Standard Webhooks signature. Resolves to the signed id and timestamp; rejects
 * with `InvalidSignatureError` (`status` null: `receiveDelivery` is what answers 401).
 */
export async function verifySignature(options: VerifySignatureOptions): Promise<VerifiedSignature> {
  const { headers, body, secrets } = options;
  const keys = secrets instanceof SigningKeys ? secrets : await prepareSecrets(secrets);
  const map = headerMap(headers);

  const id = nonEmpty(map, 'webhook-id');
  if (id === null) throw missing('webhook-id');
  const rawTs = nonEmpty(map, 'webhook-timestamp');
  if (rawTs === null) throw missing('webhook-timestamp');
  const header = nonEmpty(map, 'webhook-signature');
  if (header === null) throw missing('webhook-signature');

  const ts = parseTimestamp(rawTs);
  if (ts === null) {
    throw new InvalidSignatureError(
      'invalid_timestamp',
      'webhook-timestamp',
      'webhook-timestamp: not a decimal integer (unix seconds)',
    );
  }
  const now = wholeNumber(options.now ?? Date.now() / 1000, 'now');
  const tolerance = wholeNumber(options.toleranceS ?? DEFAULT_TOLERANCE_S, 'toleranceS');
  if (!withinTolerance(ts, now, tolerance)) {
    throw new InvalidSignatureError(
      'timestamp_out_of_tolerance',
      'webhook-timestamp',
      `webhook-timestamp: more than ${tolerance} s away from now`,
    );
  }

  const signed = signedContent(id, rawTs, toBytes(body));
  if (!(await anyMatch(keys.keys, signed, candidates(header)))) {
    throw new InvalidSignatureError(
      'no_matching_signature',
      'webhook-signature',
      'webhook-signature: no v1 entry matches any secret',
    );
  }
  return { id, timestamp: Number(ts) };
}

function missing(name: string): InvalidSignatureError {
  return new InvalidSignatureError('missing_header', name, `${name}: absent or empty`);
}

/** An optionally signed decimal integer, or `null`. */
function parseTimestamp(raw: string): bigint | null {
  if (!/^[+-]?[0-9]+$/.test(raw)) return null;
  const negative = raw.startsWith('-');
  const digits = raw.replace(/^[+-]?0*/, '');
  // More than 20 digits is further from any clock than a tolerance can cover; BigInt on a
  // hostile megabyte of digits would cost more than the answer is worth.
  if (digits.length > 20) return negative ? -(10n ** 21n) : 10n ** 21n;
  const v = digits === '' ? 0n : BigInt(digits);
  return negative ? -v : v;
}

function wholeNumber(v: number, name: string): bigint {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new TypeError(`${name} must be a finite number`);
  return BigInt(Math.floor(v));
}

function withinTolerance(ts: bigint, now: bigint, tolerance: bigint): boolean {
  const diff = ts > now ? ts - now : now - ts;
  return diff <= tolerance;
}

function signedContent(id: string, rawTs: string, body: Uint8Array): Uint8Array {
  const prefix = utf8(`${id}.${rawTs}.`);
  const out = new Uint8Array(prefix.length + body.length);
  out.set(prefix, 0);
  out.set(body, prefix.length);
  return out;
}

/** The distinct `v1,` entries that decode to 32 bytes (an HMAC-SHA256); others are ignored. */
function candidates(header: string): Uint8Array[] {
  const seen = new Set<string>();
  const out: Uint8Array[] = [];
  for (const entry of header.split(' ')) {
    if (!entry.startsWith('v1,') || seen.has(entry)) continue;
    seen.add(entry);
    const sig = decodeBase64(entry.slice(3));
    if (sig && sig.length === 32) out.push(sig);
  }
  return out;
}

async function anyMatch(keys: readonly CryptoKey[], signed: Uint8Array, sigs: Uint8Array[]): Promise<boolean> {
  if (sigs.length === 0) return false;
  const s = subtle();
  const data = signed as Uint8Array<ArrayBuffer>;
  if (sigs.length * keys.length <= DIRECT_PAIRS) {
    for (const key of keys) {
      for (const sig of sigs) {
        if (await s.verify('HMAC', key, sig as Uint8Array<ArrayBuffer>, data)) return true;
      }
    }
    return false;
  }
  // Many entries (or secrets): hash the body once per secret, then compare each entry with
  // that MAC in constant time as HMAC(r, entry) == HMAC(r, mac) under a random key r
  // (subtle.verify compares), so the cost is one body hash per secret, not per pair.
  const r = await comparisonKey();
  for (const key of keys) {
    const mac = await s.sign('HMAC', key, data);
    const tag = await s.sign('HMAC', r, mac);
    for (const sig of sigs) {
      if (await s.verify('HMAC', r, tag, sig as Uint8Array<ArrayBuffer>)) return true;
    }
  }
  return false;
}

let comparison: Promise<CryptoKey> | undefined;

function comparisonKey(): Promise<CryptoKey> {
  comparison ??= subtle().generateKey({ name: 'HMAC', hash: 'SHA-256', length: 256 }, false, [
    'sign',
    'verify',
  ]) as Promise<CryptoKey>;
  return comparison;
}
