/**
 * The receiver side of the gateway's HTTP sink: the `x-ankusa-*` headers (`parseHeaders`) and
 * the whole decision on a delivery (`receiveDelivery`), closed by default: with no secret and
 * no explicit `allowUnsigned: true` nothing is accepted, and the signature is judged before
 * anything else is read, so an unsigned request learns nothing from a 400.
 */

import { type BodyInput, SHA256_HEX, toBytes } from './bytes.js';
import { InvalidDeliveryError, InvalidSignatureError } from './errors.js';
import { type HeaderMap, type HeadersInput, headerMap, nonEmpty } from './headers.js';
import type { Verification } from './hook.js';
import { type Secrets, SigningKeys, verifySignature } from './signature.js';

export interface DeliveryHeaders {
  /** `x-ankusa-id`: the stored hook's id (the same on every redelivery). */
  id: string;
  /** `x-ankusa-source`, or `null`. */
  sourceId: string | null;
  /** `x-ankusa-tenant`, or `null` for the default tenant. */
  tenantId: string | null;
  /** `tenantId`, else `"default"`. */
  tenant: string;
  /** `x-ankusa-idempotency-key`, else the id (a sender that predates the header). Dedupe on it. */
  idempotencyKey: string;
  dedupeKey: string | null;
  /** The replay job's id when this delivery is a replay. */
  replayId: string | null;
  orderingKey: string | null;
  contentType: string | null;
  /** `null` when the gateway sent no `x-ankusa-verification` (a node older than the field). */
  verification: Verification | null;
  /** Advisory: `x-ankusa-received-at` (unix ms) when well formed, else `null`; never an error. */
  receivedAt: number | null;
  /** Advisory: `x-ankusa-body-sha256` when 64 lowercase hex digits, else `null`; never an error. */
  bodySha256: string | null;
  /** Every request header by lowercase name (the provider's forwarded ones included). */
  headers: Record<string, string>;
}

export interface Delivery extends DeliveryHeaders {
  /** Whether a signature was verified (`false` only with `allowUnsigned` and no secret). */
  signed: boolean;
  /** The raw body, exactly as signed. */
  body: Uint8Array;
}

/**
 * Parses the `x-ankusa-*` delivery headers without judging a signature. Throws
 * `InvalidDeliveryError` (`missing_header`, field `x-ankusa-id`, status 400).
 */
export function parseHeaders(headers: HeadersInput): DeliveryHeaders {
  return fromMap(headerMap(headers));
}

function fromMap(map: HeaderMap): DeliveryHeaders {
  const id = nonEmpty(map, 'x-ankusa-id');
  if (id === null) {
    throw new InvalidDeliveryError('missing_header', 'x-ankusa-id', 'x-ankusa-id: absent or empty');
  }
  const tenantId = nonEmpty(map, 'x-ankusa-tenant') ?? null;
  const status = map.get('x-ankusa-verification');
  const flagged = map.get('x-ankusa-verification-flagged');
  const receivedAt = map.get('x-ankusa-received-at');
  const sha = map.get('x-ankusa-body-sha256');
  return {
    id,
    sourceId: nonEmpty(map, 'x-ankusa-source') ?? null,
    tenantId,
    tenant: tenantId ?? 'default',
    idempotencyKey: nonEmpty(map, 'x-ankusa-idempotency-key') ?? id,
    dedupeKey: nonEmpty(map, 'x-ankusa-dedupe-key') ?? null,
    replayId: nonEmpty(map, 'x-ankusa-replay-id') ?? null,
    orderingKey: nonEmpty(map, 'x-ankusa-ordering-key') ?? null,
    contentType: nonEmpty(map, 'content-type') ?? null,
    verification:
      status === undefined
        ? null
        : // Anything but an absent or `false` flag is flagged: fail closed.
          { status, flagged: !(flagged === undefined || flagged.toLowerCase() === 'false') },
    receivedAt: receivedAt !== undefined && /^[0-9]{1,16}$/.test(receivedAt) ? Number(receivedAt) : null,
    bodySha256: sha !== undefined && SHA256_HEX.test(sha) ? sha : null,
    headers: Object.fromEntries(map),
  };
}

export interface ReceiveDeliveryOptions {
  headers: HeadersInput;
  body: BodyInput;
  /** The sink's signing secrets (several while rotating), or `prepareSecrets(...)`'s keys. */
  secrets?: Secrets | null;
  /** Accept deliveries without a signature, only when no secret is given. Default `false`. */
  allowUnsigned?: boolean;
  /** Unix seconds; defaults to the clock. */
  now?: number;
  /** Defaults to 300 s. */
  toleranceS?: number;
}

/**
 * The receiver's decision on one delivery. Rejects with `InvalidSignatureError` (status 401)
 * when the signature does not verify or no secret is configured without `allowUnsigned`, and
 * with `InvalidDeliveryError` (status 400) when the headers are unusable or `x-ankusa-id`
 * differs from the signed `webhook-id`.
 */
export async function receiveDelivery(options: ReceiveDeliveryOptions): Promise<Delivery> {
  const { secrets, allowUnsigned = false } = options;
  const map = headerMap(options.headers);
  const body = toBytes(options.body);
  const hasSecrets = secrets instanceof SigningKeys ? secrets.size > 0 : secrets != null && secrets.length > 0;

  let signedId: string | null = null;
  if (hasSecrets) {
    try {
      const v = await verifySignature({
        headers: map,
        body,
        secrets: secrets as Secrets,
        ...(options.now !== undefined && { now: options.now }),
        ...(options.toleranceS !== undefined && { toleranceS: options.toleranceS }),
      });
      signedId = v.id;
    } catch (e) {
      if (e instanceof InvalidSignatureError) {
        throw new InvalidSignatureError(e.code, e.field ?? 'secrets', e.message, 401);
      }
      throw e;
    }
  } else if (allowUnsigned !== true) {
    throw new InvalidSignatureError(
      'invalid_secret',
      'secrets',
      'secrets: none configured; pass the sink\'s secret, or allowUnsigned: true to accept unsigned deliveries',
      401,
    );
  }

  const parsed = fromMap(map);
  if (signedId !== null && parsed.id !== signedId) {
    throw new InvalidDeliveryError(
      'id_mismatch',
      'x-ankusa-id',
      'x-ankusa-id: differs from the signed webhook-id',
    );
  }
  return { ...parsed, signed: signedId !== null, body };
}
