/**
 * Byte helpers on `Uint8Array` only (no `Buffer`, no `atob`), so the main entry runs on every
 * runtime with Web APIs: standard base64 (strict, padded), lowercase hex, UTF-8, and the
 * SHA-256 digest through Web Crypto.
 */

/** What the SDK accepts as a body: bytes, or a string taken as its UTF-8 bytes. */
export type BodyInput = Uint8Array | ArrayBuffer | ArrayBufferView | string;

const encoder = new TextEncoder();

/** The bytes of a body input (a view over the same memory where it can be). */
export function toBytes(body: BodyInput): Uint8Array {
  if (typeof body === 'string') return encoder.encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  throw new TypeError('body must be a Uint8Array, an ArrayBuffer, a typed array view or a string');
}

export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** Strict UTF-8 to text: `null` on invalid UTF-8. A leading BOM is kept (JSON refuses it). */
export function decodeUtf8(bytes: Uint8Array): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return null;
  }
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const DECODE = new Int16Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) DECODE[ALPHABET.charCodeAt(i)] = i;

/**
 * Standard base64 (RFC 4648 §4, `+/`, padded to a multiple of 4) to bytes; `null` when the
 * text is anything else (another alphabet, missing padding, whitespace, padding inside).
 */
export function decodeBase64(text: string): Uint8Array | null {
  const n = text.length;
  if (n % 4 !== 0) return null;
  if (n === 0) return new Uint8Array(0);
  let pad = 0;
  if (text.charCodeAt(n - 1) === 61 /* = */) pad = text.charCodeAt(n - 2) === 61 ? 2 : 1;
  const out = new Uint8Array((n / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < n; i += 4) {
    const last = i + 4 === n;
    const a = sextet(text, i);
    const b = sextet(text, i + 1);
    const c = last && pad === 2 ? 0 : sextet(text, i + 2);
    const d = last && pad >= 1 ? 0 : sextet(text, i + 3);
    if (a < 0 || b < 0 || c < 0 || d < 0) return null;
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    out[o++] = v >> 16;
    if (o < out.length) out[o++] = (v >> 8) & 0xff;
    if (o < out.length) out[o++] = v & 0xff;
  }
  return out;
}

function sextet(text: string, i: number): number {
  const c = text.charCodeAt(i);
  return c < 128 ? (DECODE[c] as number) : -1;
}

/** Bytes to standard, padded base64. */
export function encodeBase64(bytes: Uint8Array): string {
  let out = '';
  const n = bytes.length;
  let i = 0;
  for (; i + 2 < n; i += 3) {
    const v = ((bytes[i] as number) << 16) | ((bytes[i + 1] as number) << 8) | (bytes[i + 2] as number);
    out += ALPHABET[v >> 18]! + ALPHABET[(v >> 12) & 63]! + ALPHABET[(v >> 6) & 63]! + ALPHABET[v & 63]!;
  }
  if (i < n) {
    const b0 = bytes[i] as number;
    const b1 = i + 1 < n ? (bytes[i + 1] as number) : 0;
    const v = (b0 << 16) | (b1 << 8);
    out += ALPHABET[v >> 18]! + ALPHABET[(v >> 12) & 63]!;
    out += i + 1 < n ? ALPHABET[(v >> 6) & 63]! + '=' : '==';
  }
  return out;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export function hex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += HEX[b];
  return out;
}

/** 64 lowercase hex digits: the form of every sha256 the gateway writes. */
export const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Web Crypto's `SubtleCrypto`, or a clear error where the runtime has none. */
export function subtle(): SubtleCrypto {
  const s = (globalThis as { crypto?: Crypto }).crypto?.subtle;
  if (!s) {
    throw new Error(
      'ankusa: Web Crypto (globalThis.crypto.subtle) is not available. On Node 18, import "ankusa/node" ' +
        'once at start-up (it installs the Web Crypto of Node itself) or run node with --experimental-global-webcrypto.',
    );
  }
  return s;
}

/** Lowercase hex SHA-256 of the bytes. */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  return hex(new Uint8Array(await subtle().digest('SHA-256', bytes as Uint8Array<ArrayBuffer>)));
}
