/**
 * Queue message v1 (docs/sinks.md "The message (v1)"): the JSON every broker sink publishes,
 * byte for byte the same on Kafka, RabbitMQ, NATS, Redis, SQS and Pub/Sub.
 *
 * The rules run in the contract's order and the first that fails names the code; every
 * failure is `MessageDecodeError`, never retryable (the same bytes fail the same way: send
 * them to your dead-letter queue, never requeue them).
 */

import { type ClaimRef, matchClaimRef } from './claim-ref.js';
import { type BodyInput, SHA256_HEX, decodeBase64, decodeUtf8, sha256Hex, toBytes } from './bytes.js';
import { MessageDecodeError } from './errors.js';
import type { Verification } from './hook.js';

export interface QueueMessage {
  /** The format's major version: 1, or 2 (v1 plus additive fields). */
  v: number;
  /** The stored hook's id; every redelivery of the hook carries the same. */
  id: string;
  sourceId: string;
  /** `null` for the default tenant. */
  tenantId: string | null;
  /** `tenantId`, else `"default"`. */
  tenant: string;
  /** Unix ms the edge accepted the request. */
  receivedAt: number;
  contentType: string | null;
  /** The body's length and lowercase hex SHA-256 (checked for inline bodies, and by `toHook`). */
  size: number;
  sha256: string;
  dedupeKey: string | null;
  replayId: string | null;
  /** Dedupe on this (the id when the message predates it). */
  idempotencyKey: string;
  verification: Verification | null;
  /** The forwarded provider headers, lowercase names (`{}` when absent). */
  headers: Record<string, string>;
  instance: string | null;
  region: string | null;
  traceparent: string | null;
  tracestate: string | null;
  orderingKey: string | null;
  /** The inline body (checked against `size` and `sha256`), or `null` for a claim. */
  body: Uint8Array | null;
  /** The claim reference of a checked-in body, or `null` for an inline one. */
  claim: ClaimRef | null;
}

const OPTIONAL_STRINGS = [
  'tenant_id',
  'content_type',
  'dedupe_key',
  'replay_id',
  'idempotency_key',
  'instance',
  'region',
  'traceparent',
  'tracestate',
  'ordering_key',
] as const;

type Json = Record<string, unknown>;

/** Parses bytes as one UTF-8 JSON value; `undefined` when they are not one. */
export function parseJson(bytes: Uint8Array): { value: unknown } | undefined {
  const text = decodeUtf8(bytes);
  if (text === null) return undefined;
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A key of a parsed JSON object (own keys only: `constructor` is not a field). */
export function own(o: Json, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(o, key) ? o[key] : undefined;
}

/** Decodes one queue message (the Kafka value, the SQS body, the Pub/Sub data, ...). */
export async function decodeMessage(bytes: BodyInput): Promise<QueueMessage> {
  const parsed = parseJson(toBytes(bytes));
  if (!parsed) throw new MessageDecodeError('invalid_json', null, 'message: not UTF-8 JSON');
  const o = parsed.value;
  if (!isObject(o)) throw new MessageDecodeError('not_an_object', null, 'message: JSON, but not an object');

  const v = own(o, 'v');
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 2) {
    throw new MessageDecodeError('unsupported_version', 'v', 'v: this SDK reads message versions 1 and 2');
  }

  const id = nonEmptyString(o, 'id');
  const sourceId = nonEmptyString(o, 'source_id');
  const receivedAt = count(o, 'received_at');
  const size = count(o, 'size');
  const sha256 = own(o, 'sha256');
  if (typeof sha256 !== 'string' || !SHA256_HEX.test(sha256)) throw invalid('sha256', '64 lowercase hex digits');
  const opt: Partial<Record<(typeof OPTIONAL_STRINGS)[number], string | null>> = {};
  for (const key of OPTIONAL_STRINGS) {
    const value = own(o, key);
    if (value !== undefined && value !== null && typeof value !== 'string') throw invalid(key, 'a string or null');
    opt[key] = (value as string | null | undefined) ?? null;
  }
  const headers = stringMap(o);
  const verification = verificationOf(o);

  const tenantId = opt.tenant_id ?? null;
  const tenant = tenantId ?? 'default';
  const common = {
    v,
    id,
    sourceId,
    tenantId,
    tenant,
    receivedAt,
    contentType: opt.content_type ?? null,
    size,
    sha256,
    dedupeKey: opt.dedupe_key ?? null,
    replayId: opt.replay_id ?? null,
    idempotencyKey: opt.idempotency_key ?? id,
    verification,
    headers,
    instance: opt.instance ?? null,
    region: opt.region ?? null,
    traceparent: opt.traceparent ?? null,
    tracestate: opt.tracestate ?? null,
    orderingKey: opt.ordering_key ?? null,
  };

  const inline = own(o, 'body_base64');
  const claimRef = own(o, 'claim');
  const hasInline = inline !== undefined && inline !== null;
  const hasClaim = claimRef !== undefined && claimRef !== null;
  if (hasInline && hasClaim) {
    throw new MessageDecodeError('ambiguous_body', null, 'message: both body_base64 and claim are set');
  }
  if (!hasInline && !hasClaim) {
    throw new MessageDecodeError('missing_body', null, 'message: neither body_base64 nor claim is set');
  }

  if (hasInline) {
    const body = typeof inline === 'string' ? decodeBase64(inline) : null;
    if (!body) {
      throw new MessageDecodeError('invalid_body_base64', 'body_base64', 'body_base64: not standard, padded base64');
    }
    if (body.length !== size) {
      throw new MessageDecodeError('size_mismatch', 'size', `size: the body has ${body.length} bytes, not ${size}`);
    }
    if ((await sha256Hex(body)) !== sha256) {
      throw new MessageDecodeError('integrity', 'sha256', 'sha256: the body does not match it');
    }
    return { ...common, body, claim: null };
  }

  const claim = matchClaimRef(claimRef);
  if (!claim) {
    throw new MessageDecodeError(
      'invalid_claim_ref',
      'claim',
      'claim: not a reference of the form urn:ankusa:claim:v1:<tenant>:<claim_id>',
    );
  }
  if (claim.tenant !== tenant) {
    throw new MessageDecodeError('tenant_mismatch', 'claim', "claim: its tenant is not the message's tenant");
  }
  return { ...common, body: null, claim };
}

function invalid(field: string, expected: string): MessageDecodeError {
  return new MessageDecodeError('invalid_field', field, `${field}: must be ${expected}`);
}

function nonEmptyString(o: Json, key: string): string {
  const v = own(o, key);
  if (typeof v !== 'string' || v === '') throw invalid(key, 'a non-empty string');
  return v;
}

function count(o: Json, key: string): number {
  const v = own(o, key);
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw invalid(key, 'an integer ≥ 0');
  return v;
}

function stringMap(o: Json): Record<string, string> {
  const h = own(o, 'headers');
  if (h === undefined || h === null) return {};
  if (!isObject(h)) throw invalid('headers', 'an object of strings');
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(h)) {
    if (typeof value !== 'string') throw invalid('headers', 'an object of strings');
    Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

function verificationOf(o: Json): Verification | null {
  const v = own(o, 'verification');
  if (v === undefined || v === null) return null;
  if (!isObject(v)) throw invalid('verification', 'an object {status, flagged}');
  const status = own(v, 'status');
  const flagged = own(v, 'flagged');
  if (typeof status !== 'string' || typeof flagged !== 'boolean') {
    throw invalid('verification', 'an object with a string status and a boolean flagged');
  }
  return { status, flagged };
}
