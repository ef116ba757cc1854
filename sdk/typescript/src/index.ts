/**
 * `ankusa`: the consumer SDK of the Ankusa webhook gateway. Web APIs only (Web Crypto, fetch,
 * streams), so it runs on Node 18+, Deno, Bun, Cloudflare Workers and Vercel Edge; the
 * Node-only helpers are in `ankusa/node`.
 */

export {
  AnkusaError,
  type AnkusaErrorOptions,
  AdminError,
  ClaimCheckUnavailableError,
  ClaimIntegrityError,
  ClaimNotFoundError,
  ClaimRejectedError,
  type DeliveryErrorCode,
  InvalidClaimRefError,
  InvalidDeliveryError,
  InvalidSignatureError,
  LifecycleEventError,
  type LifecycleErrorCode,
  MessageDecodeError,
  type MessageErrorCode,
  type SignatureErrorCode,
} from './errors.js';
export type { BodyInput } from './bytes.js';
export type { HeadersInput, HeaderValue } from './headers.js';
export {
  DEFAULT_TOLERANCE_S,
  prepareSecrets,
  type Secrets,
  SigningKeys,
  type VerifiedSignature,
  verifySignature,
  type VerifySignatureOptions,
} from './signature.js';
export {
  type Delivery,
  type DeliveryHeaders,
  parseHeaders,
  receiveDelivery,
  type ReceiveDeliveryOptions,
} from './delivery.js';
export { type HookIdentity, idempotencyKey, type IdempotencyKeyOptions, isTrusted, type Verification } from './hook.js';
export { decodeMessage, type QueueMessage } from './message.js';
export { type ClaimRef, parseClaimRef } from './claim-ref.js';
export {
  ClaimClient,
  type ClaimClientOptions,
  type ClaimExpectation,
  DEFAULT_CLAIM_TIMEOUT_MS,
  type Hook,
  toHook,
} from './claim-client.js';
export {
  decodeLifecycleEvent,
  LIFECYCLE_EVENT_TYPES,
  LIFECYCLE_SOURCE,
  type LifecycleCarrier,
  type LifecycleEvent,
  type LifecycleEventType,
} from './lifecycle.js';
export {
  createHandler,
  DEFAULT_MAX_BODY_BYTES,
  expressReceiver,
  type JsonResponse,
  type RawBodyRequest,
  type ReceiverOptions,
} from './receiver.js';
export type { FetchLike } from './http.js';
export { AdminClient, type AdminClientOptions, DEFAULT_ADMIN_TIMEOUT_MS } from './admin/client.js';
export type {
  ArchiveWindow,
  CreateReplay,
  DeadEntry,
  DeadFilter,
  DeadPage,
  DlqQuery,
  ErrorClass,
  JobList,
  JobState,
  JobView,
  PatchableJobState,
  PenEntry,
  QuarantinePage,
  QuarantineQuery,
  ReplayCreated,
  ReplayJob,
  ReplayKind,
} from './admin/types.js';

/** This SDK's version: the gateway version it was built with. */
export const VERSION = '0.1.0';
