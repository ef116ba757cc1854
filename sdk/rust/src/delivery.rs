//! An HTTP delivery of the gateway's `http` sink: the `x-ankusa-*` headers
//! ([`parse_headers`]) and the receiver's whole decision ([`receive_delivery`]): closed by
//! default, the signature judged before anything else of the request.

use std::ops::Deref;
use std::time::Duration;

use bytes::Bytes;

use crate::errors::{
    DeliveryErrorKind, Error, InvalidDeliveryError, InvalidSignatureError, SignatureErrorKind,
};
use crate::headers::{Headers, non_empty};
use crate::signature::{DEFAULT_TOLERANCE, VerifyOptions, verify_signature};
use crate::verification::{Verification, idempotency_key, trusted};

/// The `x-ankusa-*` headers of one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryHeaders {
    /// `x-ankusa-id`: the hook id.
    pub id: String,
    /// `x-ankusa-source`.
    pub source_id: Option<String>,
    /// `x-ankusa-tenant`; `None` for the default tenant.
    pub tenant_id: Option<String>,
    /// `x-ankusa-idempotency-key`, else the hook id (a sender that predates the header).
    pub idempotency_key: String,
    /// `x-ankusa-dedupe-key`: the provider's event id, when the source extracts one.
    pub dedupe_key: Option<String>,
    /// `x-ankusa-replay-id`: the replay job, when this delivery is a replay.
    pub replay_id: Option<String>,
    /// `x-ankusa-ordering-key`: the lane of an ordered sink.
    pub ordering_key: Option<String>,
    /// `content-type`.
    pub content_type: Option<String>,
    /// `x-ankusa-verification` and `-flagged`; `None` from a node older than the field.
    pub verification: Option<Verification>,
    /// Advisory `x-ankusa-received-at` (unix ms); `None` when absent or malformed.
    pub received_at: Option<u64>,
    /// Advisory `x-ankusa-body-sha256`; `None` when absent or not 64 lowercase hex digits.
    pub body_sha256: Option<String>,
}

impl DeliveryHeaders {
    /// The tenant: `tenant_id`, else `default`.
    pub fn tenant(&self) -> &str {
        self.tenant_id.as_deref().unwrap_or("default")
    }

    /// The key to dedupe on; with `include_replay`, `<key>#replay:<replay_id>` for a replay.
    pub fn idempotency_key(&self, include_replay: bool) -> String {
        idempotency_key(
            &self.idempotency_key,
            self.replay_id.as_deref(),
            include_replay,
        )
    }

    /// True only when the edge verified the provider's signature and did not flag the hook.
    pub fn is_trusted(&self) -> bool {
        trusted(self.verification.as_ref())
    }
}

/// Parses the delivery headers without judging a signature. Only a missing `x-ankusa-id` is an
/// error; the advisory headers read as `None` when malformed.
pub fn parse_headers<H: Headers + ?Sized>(
    headers: &H,
) -> Result<DeliveryHeaders, InvalidDeliveryError> {
    let text = |name: &str| non_empty(headers, name).map(str::to_string);
    let id = text("x-ankusa-id").ok_or_else(|| {
        InvalidDeliveryError::new(DeliveryErrorKind::MissingHeader, "x-ankusa-id is missing")
    })?;
    let verification = text("x-ankusa-verification").map(|status| Verification {
        status,
        // Fail closed: only an absent header or `false` leaves the hook unflagged.
        flagged: headers.has_header("x-ankusa-verification-flagged")
            && !headers
                .header("x-ankusa-verification-flagged")
                .is_some_and(|v| v.eq_ignore_ascii_case("false")),
    });
    let received_at = headers
        .header("x-ankusa-received-at")
        .filter(|v| (1..=16).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse().ok());
    let body_sha256 = headers
        .header("x-ankusa-body-sha256")
        .filter(|v| is_sha256_hex(v))
        .map(str::to_string);
    Ok(DeliveryHeaders {
        idempotency_key: text("x-ankusa-idempotency-key").unwrap_or_else(|| id.clone()),
        id,
        source_id: text("x-ankusa-source"),
        tenant_id: text("x-ankusa-tenant"),
        dedupe_key: text("x-ankusa-dedupe-key"),
        replay_id: text("x-ankusa-replay-id"),
        ordering_key: text("x-ankusa-ordering-key"),
        content_type: text("content-type"),
        verification,
        received_at,
        body_sha256,
    })
}

/// 64 lowercase hex digits.
pub(crate) fn is_sha256_hex(v: &str) -> bool {
    v.len() == 64 && v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What a receiver accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiveOptions {
    /// The sink's signing secrets (`whsec_...` or raw strings); any may match (rotation).
    pub secrets: Vec<String>,
    /// Accept deliveries without judging a signature when no secret is configured. Off by
    /// default: a receiver without secrets refuses everything.
    pub allow_unsigned: bool,
    /// Unix seconds to judge `webhook-timestamp` against; `None`: the system clock.
    pub now: Option<i64>,
    /// How far `webhook-timestamp` may be from now (300 s by default).
    pub tolerance: Duration,
}

impl Default for ReceiveOptions {
    fn default() -> Self {
        ReceiveOptions {
            secrets: Vec::new(),
            allow_unsigned: false,
            now: None,
            tolerance: DEFAULT_TOLERANCE,
        }
    }
}

impl ReceiveOptions {
    /// Options that verify against `secrets`.
    pub fn with_secrets<S: Into<String>>(secrets: impl IntoIterator<Item = S>) -> Self {
        ReceiveOptions {
            secrets: secrets.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }
}

/// A delivery a receiver accepted: its headers (through `Deref`), whether a signature was
/// verified, and the raw body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub headers: DeliveryHeaders,
    /// A signature was verified (false only under `allow_unsigned` without secrets).
    pub signed: bool,
    /// The body exactly as received.
    pub body: Bytes,
}

impl Deref for Delivery {
    type Target = DeliveryHeaders;
    fn deref(&self) -> &DeliveryHeaders {
        &self.headers
    }
}

/// The receiver's decision over one request, before any parsing of its body:
///
/// 1. With secrets, the signature must verify ([`InvalidSignatureError`], status `401`).
/// 2. Without secrets, only `allow_unsigned: true` lets a delivery through (otherwise
///    `invalid_secret`, `401`): an unconfigured receiver is never open.
/// 3. The `x-ankusa-*` headers ([`InvalidDeliveryError`], `400`, without `x-ankusa-id`).
/// 4. A signed delivery's `x-ankusa-id` must be its `webhook-id` (`id_mismatch`, `400`).
pub fn receive_delivery<H: Headers + ?Sized>(
    headers: &H,
    body: &[u8],
    options: &ReceiveOptions,
) -> Result<Delivery, Error> {
    receive_bytes(headers, Bytes::copy_from_slice(body), options)
}

/// [`receive_delivery`] over a body already held as [`Bytes`] (no copy).
pub(crate) fn receive_bytes<H: Headers + ?Sized>(
    headers: &H,
    body: Bytes,
    options: &ReceiveOptions,
) -> Result<Delivery, Error> {
    let signed = if !options.secrets.is_empty() {
        let verify = VerifyOptions {
            now: options.now,
            tolerance: options.tolerance,
        };
        Some(verify_signature(headers, &body, &options.secrets, verify)?)
    } else if options.allow_unsigned {
        None
    } else {
        return Err(InvalidSignatureError::new(
            SignatureErrorKind::InvalidSecret,
            "secrets",
            "no secret configured and allow_unsigned is off",
        )
        .into());
    };
    let parsed = parse_headers(headers)?;
    if let Some(s) = &signed
        && s.id != parsed.id
    {
        return Err(InvalidDeliveryError::new(
            DeliveryErrorKind::IdMismatch,
            "x-ankusa-id differs from the signed webhook-id",
        )
        .into());
    }
    Ok(Delivery {
        headers: parsed,
        signed: signed.is_some(),
        body,
    })
}
