//! Consumer SDK of the Ankusa webhook gateway.
//!
//! - **HTTP deliveries** of the `http` sink: [`receive_delivery`] verifies the Standard
//!   Webhooks signature over the raw body ([`verify_signature`]) and parses the `x-ankusa-*`
//!   headers ([`parse_headers`]); closed by default. With the `axum` feature,
//!   [`axum::VerifiedDelivery`] does it as an extractor.
//! - **Queue messages** of the Kafka, RabbitMQ, NATS, Redis, SQS and Pub/Sub sinks:
//!   [`decode_message`], then [`to_hook`] to have the body in hand (a claim check redeemed
//!   from the gateway's claim port and checked against the message's digest).
//! - **Lifecycle events** (CloudEvents): [`decode_lifecycle_event`].
//! - **The admin API** (dead letters, replays, quarantine): [`AdminClient`].
//!
//! Every error is one of the classes of the conformance contract, each with `code()`,
//! `retryable()`, `field()` and `status()`; [`Error`] wraps them all. Dedupe on
//! [`Hook::idempotency_key`]; trust a hook only when [`Hook::is_trusted`].
//!
//! Features: `client` (default) for [`ClaimClient`]/[`to_hook`] and [`AdminClient`]
//! (reqwest with rustls); `axum` for the extractor.

mod claim_ref;
mod delivery;
mod errors;
mod headers;
mod hook;
mod lifecycle;
mod message;
mod signature;
mod verification;

#[cfg(feature = "client")]
mod admin;
#[cfg(feature = "axum")]
pub mod axum;
#[cfg(feature = "client")]
mod claims;
#[cfg(feature = "client")]
mod transport;

pub use claim_ref::ClaimRef;
pub use delivery::{Delivery, DeliveryHeaders, ReceiveOptions, parse_headers, receive_delivery};
pub use errors::{
    AdminError, ClaimCheckUnavailableError, ClaimIntegrityError, ClaimNotFoundError,
    ClaimRejectedError, DeliveryErrorKind, Error, InvalidClaimRefError, InvalidDeliveryError,
    InvalidSignatureError, LifecycleErrorKind, LifecycleEventError, MessageDecodeError,
    MessageErrorKind, SignatureErrorKind,
};
pub use headers::Headers;
pub use hook::Hook;
pub use lifecycle::{
    EVENT_TYPES, LIFECYCLE_SOURCE, LifecycleEvent, decode_lifecycle_event, decode_lifecycle_message,
};
pub use message::{Message, MessageBody, SUPPORTED_VERSIONS, decode_message};
pub use signature::{DEFAULT_TOLERANCE, SignedHeaders, VerifyOptions, verify_signature};
pub use verification::Verification;

#[cfg(feature = "client")]
pub use admin::{
    AdminClient, ArchiveWindow, DEFAULT_ADMIN_TIMEOUT, DeadEntry, DeadPage, DlqQuery, ErrorClass,
    KIND_ARCHIVE, KIND_DLQ, KIND_LIFECYCLE, KIND_QUARANTINE, PenEntry, QuarantinePage,
    QuarantineQuery, ReplayFilter, ReplayJob, ReplayRequest, ReplayState,
};
#[cfg(feature = "client")]
pub use claims::{ClaimClient, DEFAULT_CLAIM_TIMEOUT, to_hook};
#[cfg(feature = "client")]
pub use transport::TlsConfigError;

/// The SDK's version: the gateway release it matches.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
