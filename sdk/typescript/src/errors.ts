/**
 * The SDK's errors. Every one is an `AnkusaError` carrying the conformance contract's fields:
 * `code` (a stable snake_case code), `retryable` (whether the same input may succeed later:
 * requeue rather than dead-letter), `field` (the header, key or parameter at fault, or `null`)
 * and `status` (the HTTP status a receiver answers, or the one a server answered, or `null`).
 *
 * Messages name fields and codes, never a secret, a token or a body.
 */

export interface AnkusaErrorOptions {
  retryable?: boolean;
  field?: string | null;
  status?: number | null;
  cause?: unknown;
}

export class AnkusaError extends Error {
  override name = 'AnkusaError';
  readonly code: string;
  readonly retryable: boolean;
  readonly field: string | null;
  readonly status: number | null;

  constructor(code: string, message: string, options: AnkusaErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.field = options.field ?? null;
    this.status = options.status ?? null;
  }
}

/** A Standard Webhooks signature that does not verify (or secrets that cannot verify one). */
export type SignatureErrorCode =
  | 'invalid_secret'
  | 'missing_header'
  | 'invalid_timestamp'
  | 'timestamp_out_of_tolerance'
  | 'no_matching_signature';

export class InvalidSignatureError extends AnkusaError {
  override name = 'InvalidSignatureError';
  declare readonly code: SignatureErrorCode;
  constructor(code: SignatureErrorCode, field: string, message: string, status: number | null = null) {
    super(code, message, { field, status, retryable: false });
  }
}

/** A delivery whose `x-ankusa-*` headers are unusable (answered `400`). */
export type DeliveryErrorCode = 'missing_header' | 'id_mismatch';

export class InvalidDeliveryError extends AnkusaError {
  override name = 'InvalidDeliveryError';
  declare readonly code: DeliveryErrorCode;
  constructor(code: DeliveryErrorCode, field: string, message: string) {
    super(code, message, { field, status: 400, retryable: false });
  }
}

/** A queue message that does not decode. Never retryable: the same bytes fail the same way. */
export type MessageErrorCode =
  | 'invalid_json'
  | 'not_an_object'
  | 'unsupported_version'
  | 'invalid_field'
  | 'ambiguous_body'
  | 'missing_body'
  | 'invalid_body_base64'
  | 'invalid_claim_ref'
  | 'size_mismatch'
  | 'integrity'
  | 'tenant_mismatch';

export class MessageDecodeError extends AnkusaError {
  override name = 'MessageDecodeError';
  declare readonly code: MessageErrorCode;
  constructor(code: MessageErrorCode, field: string | null, message: string) {
    super(code, message, { field, retryable: false });
  }
}

/** A claim reference (`urn:ankusa:claim:v1:<tenant>:<claim_id>`) that does not parse. */
export class InvalidClaimRefError extends AnkusaError {
  override name = 'InvalidClaimRefError';
  constructor(message: string) {
    super('invalid_claim_ref', message, { field: 'claim', retryable: false });
  }
}

/** The claim check answered `404`: the claim is gone (retention). Dead-letter the message. */
export class ClaimNotFoundError extends AnkusaError {
  override name = 'ClaimNotFoundError';
  constructor(message: string) {
    super('claim_not_found', message, { status: 404, retryable: false });
  }
}

/**
 * The claim check could not answer now (no connection, the timeout, `408`, `429`, `5xx`, or a
 * redirect, which is never followed). Requeue the message with a delay.
 */
export class ClaimCheckUnavailableError extends AnkusaError {
  override name = 'ClaimCheckUnavailableError';
  constructor(message: string, status: number | null, cause?: unknown) {
    super('claim_check_unavailable', message, { status, retryable: true, cause });
  }
}

/** The claim check refused the request (`401`, `403`, another `4xx`, an unexpected `2xx`). */
export class ClaimRejectedError extends AnkusaError {
  override name = 'ClaimRejectedError';
  constructor(message: string, status: number) {
    super('claim_rejected', message, { status, retryable: false });
  }
}

/** The claimed bytes do not have the message's `size` and `sha256`. */
export class ClaimIntegrityError extends AnkusaError {
  override name = 'ClaimIntegrityError';
  constructor(message: string) {
    super('claim_integrity', message, { field: 'sha256', retryable: false });
  }
}

/** A lifecycle CloudEvent that does not decode. */
export type LifecycleErrorCode =
  | 'invalid_json'
  | 'not_an_object'
  | 'unsupported_specversion'
  | 'invalid_field'
  | 'not_a_lifecycle_event';

export class LifecycleEventError extends AnkusaError {
  override name = 'LifecycleEventError';
  declare readonly code: LifecycleErrorCode;
  constructor(code: LifecycleErrorCode, field: string | null, message: string) {
    super(code, message, { field, retryable: false });
  }
}

/**
 * An admin API call that failed. `code` is the API's JSON `error` code (`unauthorized`,
 * `forbidden`, `invalid_filter`, ...); `transport_error` or `timeout` when no answer came;
 * `http_error` for an answer without a JSON error body; `invalid_response` for a success whose
 * body is not the expected JSON. Retryable for `408`, `429`, `5xx` and transport failures.
 */
export class AdminError extends AnkusaError {
  override name = 'AdminError';
  /** The error body the API answered (its `error`, `field`, `message`, `scope`, ...), if any. */
  readonly body: Record<string, unknown> | null;
  /** Seconds of the answer's `Retry-After` header, when it had one. */
  readonly retryAfterS: number | null;

  constructor(
    code: string,
    message: string,
    options: AnkusaErrorOptions & { body?: Record<string, unknown> | null; retryAfterS?: number | null },
  ) {
    super(code, message, options);
    this.body = options.body ?? null;
    this.retryAfterS = options.retryAfterS ?? null;
  }
}
