//! The error classes of the conformance contract (`conformance/README.md`, "Error classes").
//!
//! Each class is its own type so that a consumer can match on what it can act on (requeue a
//! [`ClaimCheckUnavailableError`], dead-letter a [`MessageDecodeError`]); every one answers the
//! same four questions: [`code`](Error::code) (the contract's stable string), whether it is
//! worth trying again ([`retryable`](Error::retryable)), which input field it is about
//! ([`field`](Error::field)) and which HTTP status belongs to it ([`status`](Error::status): the
//! status a receiver answers, or the one the claim gateway answered). [`Error`] wraps them all.
//!
//! Messages name fields and positions, never a secret or a token.

use std::fmt;

/// Why [`verify_signature`](crate::verify_signature) refused a delivery, in the order the checks
/// run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignatureErrorKind {
    /// No secret, an empty one, or a `whsec_` secret that is not standard base64 (`secrets`).
    InvalidSecret,
    /// `webhook-id`, `webhook-timestamp` or `webhook-signature` absent or empty.
    MissingHeader,
    /// `webhook-timestamp` is not an optionally signed decimal integer.
    InvalidTimestamp,
    /// `webhook-timestamp` is further from now than the tolerance.
    TimestampOutOfTolerance,
    /// No `v1,` entry of `webhook-signature` matches any secret.
    NoMatchingSignature,
}

impl SignatureErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidSecret => "invalid_secret",
            Self::MissingHeader => "missing_header",
            Self::InvalidTimestamp => "invalid_timestamp",
            Self::TimestampOutOfTolerance => "timestamp_out_of_tolerance",
            Self::NoMatchingSignature => "no_matching_signature",
        }
    }
}

/// A delivery whose Standard Webhooks signature does not hold. Never retryable; a receiver
/// answers `401`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("InvalidSignatureError: {} ({field}): {detail}", kind.as_str())]
pub struct InvalidSignatureError {
    kind: SignatureErrorKind,
    field: &'static str,
    detail: String,
}

impl InvalidSignatureError {
    pub(crate) fn new(
        kind: SignatureErrorKind,
        field: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        InvalidSignatureError {
            kind,
            field,
            detail: detail.into(),
        }
    }

    pub fn kind(&self) -> SignatureErrorKind {
        self.kind
    }
    pub fn code(&self) -> &'static str {
        self.kind.as_str()
    }
    pub fn retryable(&self) -> bool {
        false
    }
    /// `secrets`, or the lowercase name of the header at fault.
    pub fn field(&self) -> Option<&str> {
        Some(self.field)
    }
    /// `401`: what a receiver answers.
    pub fn status(&self) -> Option<u16> {
        Some(401)
    }
}

/// Why a delivery's `x-ankusa-*` headers were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryErrorKind {
    /// `x-ankusa-id` absent or empty.
    MissingHeader,
    /// A signed delivery whose `x-ankusa-id` is not its `webhook-id`.
    IdMismatch,
}

impl DeliveryErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingHeader => "missing_header",
            Self::IdMismatch => "id_mismatch",
        }
    }
}

/// A delivery that is not an Ankusa hook (no `x-ankusa-id`, or one the signature does not
/// cover). Never retryable; a receiver answers `400`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("InvalidDeliveryError: {} (x-ankusa-id): {detail}", kind.as_str())]
pub struct InvalidDeliveryError {
    kind: DeliveryErrorKind,
    detail: String,
}

impl InvalidDeliveryError {
    pub(crate) fn new(kind: DeliveryErrorKind, detail: impl Into<String>) -> Self {
        InvalidDeliveryError {
            kind,
            detail: detail.into(),
        }
    }

    pub fn kind(&self) -> DeliveryErrorKind {
        self.kind
    }
    pub fn code(&self) -> &'static str {
        self.kind.as_str()
    }
    pub fn retryable(&self) -> bool {
        false
    }
    /// Always `x-ankusa-id`.
    pub fn field(&self) -> Option<&str> {
        Some("x-ankusa-id")
    }
    /// `400`: what a receiver answers.
    pub fn status(&self) -> Option<u16> {
        Some(400)
    }
}

/// The first rule a queue message breaks (`conformance/README.md`, `decode_message`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageErrorKind {
    InvalidJson,
    NotAnObject,
    UnsupportedVersion,
    InvalidField,
    AmbiguousBody,
    MissingBody,
    InvalidBodyBase64,
    InvalidClaimRef,
    SizeMismatch,
    Integrity,
    TenantMismatch,
}

impl MessageErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::NotAnObject => "not_an_object",
            Self::UnsupportedVersion => "unsupported_version",
            Self::InvalidField => "invalid_field",
            Self::AmbiguousBody => "ambiguous_body",
            Self::MissingBody => "missing_body",
            Self::InvalidBodyBase64 => "invalid_body_base64",
            Self::InvalidClaimRef => "invalid_claim_ref",
            Self::SizeMismatch => "size_mismatch",
            Self::Integrity => "integrity",
            Self::TenantMismatch => "tenant_mismatch",
        }
    }
}

/// Bytes that are not a queue message this SDK can hand on. Never retryable: the same bytes
/// fail the same way, so dead-letter the message rather than requeue it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MessageDecodeError: {}{}: {detail}", kind.as_str(), field.map(|f| format!(" ({f})")).unwrap_or_default())]
pub struct MessageDecodeError {
    kind: MessageErrorKind,
    field: Option<&'static str>,
    detail: String,
}

impl MessageDecodeError {
    pub(crate) fn new(
        kind: MessageErrorKind,
        field: Option<&'static str>,
        detail: impl Into<String>,
    ) -> Self {
        MessageDecodeError {
            kind,
            field,
            detail: detail.into(),
        }
    }

    pub fn kind(&self) -> MessageErrorKind {
        self.kind
    }
    pub fn code(&self) -> &'static str {
        self.kind.as_str()
    }
    pub fn retryable(&self) -> bool {
        false
    }
    /// The message key at fault, if the rule names one.
    pub fn field(&self) -> Option<&str> {
        self.field
    }
    pub fn status(&self) -> Option<u16> {
        None
    }
}

/// A claim reference that is not `urn:ankusa:claim:v1:<tenant>:<claim_id>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("InvalidClaimRefError: invalid_claim_ref (claim): {detail}")]
pub struct InvalidClaimRefError {
    detail: String,
}

impl InvalidClaimRefError {
    pub(crate) fn new(detail: impl Into<String>) -> Self {
        InvalidClaimRefError {
            detail: detail.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        "invalid_claim_ref"
    }
    pub fn retryable(&self) -> bool {
        false
    }
    pub fn field(&self) -> Option<&str> {
        Some("claim")
    }
    pub fn status(&self) -> Option<u16> {
        None
    }
}

/// The claim gateway answered `404`: the claim is gone (retention) or never existed. Permanent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ClaimNotFoundError: claim_not_found: the claim gateway answered 404")]
pub struct ClaimNotFoundError {
    _private: (),
}

impl ClaimNotFoundError {
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn new() -> Self {
        ClaimNotFoundError { _private: () }
    }

    pub fn code(&self) -> &'static str {
        "claim_not_found"
    }
    pub fn retryable(&self) -> bool {
        false
    }
    pub fn field(&self) -> Option<&str> {
        None
    }
    pub fn status(&self) -> Option<u16> {
        Some(404)
    }
}

/// The claim could not be fetched now: no connection, a timeout, `408`, `429`, `5xx` or a
/// redirect (never followed). Retryable: requeue the message with a delay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ClaimCheckUnavailableError: claim_check_unavailable: {detail}")]
pub struct ClaimCheckUnavailableError {
    status: Option<u16>,
    detail: String,
}

impl ClaimCheckUnavailableError {
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn new(status: Option<u16>, detail: impl Into<String>) -> Self {
        ClaimCheckUnavailableError {
            status,
            detail: detail.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        "claim_check_unavailable"
    }
    pub fn retryable(&self) -> bool {
        true
    }
    pub fn field(&self) -> Option<&str> {
        None
    }
    /// The status the claim gateway answered; `None` when there was no answer.
    pub fn status(&self) -> Option<u16> {
        self.status
    }
}

/// The claim gateway refused the request (`401`, `403`, another `4xx`, an unexpected `2xx`):
/// fix the token or the configuration, not the timing. Permanent for that message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ClaimRejectedError: claim_rejected: the claim gateway answered {status}")]
pub struct ClaimRejectedError {
    status: u16,
}

impl ClaimRejectedError {
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn new(status: u16) -> Self {
        ClaimRejectedError { status }
    }

    pub fn code(&self) -> &'static str {
        "claim_rejected"
    }
    pub fn retryable(&self) -> bool {
        false
    }
    pub fn field(&self) -> Option<&str> {
        None
    }
    pub fn status(&self) -> Option<u16> {
        Some(self.status)
    }
}

/// The claimed bytes do not have the message's `size` and `sha256`. Permanent: the message
/// names other bytes than the gateway holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ClaimIntegrityError: claim_integrity (sha256): {detail}")]
pub struct ClaimIntegrityError {
    detail: String,
}

impl ClaimIntegrityError {
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn new(detail: impl Into<String>) -> Self {
        ClaimIntegrityError {
            detail: detail.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        "claim_integrity"
    }
    pub fn retryable(&self) -> bool {
        false
    }
    pub fn field(&self) -> Option<&str> {
        Some("sha256")
    }
    pub fn status(&self) -> Option<u16> {
        None
    }
}

/// Why a lifecycle CloudEvent was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LifecycleErrorKind {
    InvalidJson,
    NotAnObject,
    UnsupportedSpecversion,
    InvalidField,
    NotALifecycleEvent,
}

impl LifecycleErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::NotAnObject => "not_an_object",
            Self::UnsupportedSpecversion => "unsupported_specversion",
            Self::InvalidField => "invalid_field",
            Self::NotALifecycleEvent => "not_a_lifecycle_event",
        }
    }
}

/// Bytes that are not a lifecycle CloudEvent of Ankusa. Never retryable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("LifecycleEventError: {}{}: {detail}", kind.as_str(), field.map(|f| format!(" ({f})")).unwrap_or_default())]
pub struct LifecycleEventError {
    kind: LifecycleErrorKind,
    field: Option<&'static str>,
    detail: String,
}

impl LifecycleEventError {
    pub(crate) fn new(
        kind: LifecycleErrorKind,
        field: Option<&'static str>,
        detail: impl Into<String>,
    ) -> Self {
        LifecycleEventError {
            kind,
            field,
            detail: detail.into(),
        }
    }

    pub fn kind(&self) -> LifecycleErrorKind {
        self.kind
    }
    pub fn code(&self) -> &'static str {
        self.kind.as_str()
    }
    pub fn retryable(&self) -> bool {
        false
    }
    pub fn field(&self) -> Option<&str> {
        self.field
    }
    pub fn status(&self) -> Option<u16> {
        None
    }
}

/// A failed admin API call: the API's JSON `error` code and its extra fields, or one of the
/// SDK's own codes when there was no such answer:
///
/// - `transport_error`: no answer (connection refused, TLS handshake, timeout); retryable.
/// - `unexpected_status`: an error status without a JSON `error` body (e.g. `404` of an
///   unknown route); retryable by status.
/// - `invalid_response`: a success status whose body is not the documented JSON; not retryable.
/// - `invalid_url`, `invalid_id`: a base URL that does not parse, a job id that is not one path
///   segment; refused before any request, not retryable.
///
/// Retryable exactly when the status is `408`, `429` or `5xx`, or there was no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct AdminError {
    /// The API's `error` code (`unauthorized`, `forbidden`, `invalid_filter`, ...).
    pub code: String,
    /// The answer's status; `None` when there was no answer.
    pub status: Option<u16>,
    pub retryable: bool,
    /// `field` of `invalid_filter` and `invalid_config`.
    pub field: Option<String>,
    /// `message` of the answer, or what went wrong without one.
    pub message: Option<String>,
    /// `scope` of `403 forbidden`: the scope or tenant the token lacks.
    pub scope: Option<String>,
}

impl fmt::Display for AdminError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AdminError: {}", self.code)?;
        if let Some(s) = self.status {
            write!(f, " (status {s})")?;
        }
        if let Some(field) = &self.field {
            write!(f, " field {field}")?;
        }
        if let Some(scope) = &self.scope {
            write!(f, " scope {scope}")?;
        }
        if let Some(m) = &self.message {
            write!(f, ": {m}")?;
        }
        Ok(())
    }
}

impl AdminError {
    /// Whether a call that got `status` (or no answer) is worth making again.
    pub fn retryable_status(status: Option<u16>) -> bool {
        match status {
            None => true,
            Some(s) => s == 408 || s == 429 || (500..600).contains(&s),
        }
    }

    pub fn code(&self) -> &str {
        &self.code
    }
    pub fn retryable(&self) -> bool {
        self.retryable
    }
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }
    pub fn status(&self) -> Option<u16> {
        self.status
    }
}

/// Any error of this SDK. [`class`](Error::class) is the contract's class name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    InvalidSignature(#[from] InvalidSignatureError),
    #[error(transparent)]
    InvalidDelivery(#[from] InvalidDeliveryError),
    #[error(transparent)]
    MessageDecode(#[from] MessageDecodeError),
    #[error(transparent)]
    InvalidClaimRef(#[from] InvalidClaimRefError),
    #[error(transparent)]
    ClaimNotFound(#[from] ClaimNotFoundError),
    #[error(transparent)]
    ClaimCheckUnavailable(#[from] ClaimCheckUnavailableError),
    #[error(transparent)]
    ClaimRejected(#[from] ClaimRejectedError),
    #[error(transparent)]
    ClaimIntegrity(#[from] ClaimIntegrityError),
    #[error(transparent)]
    LifecycleEvent(#[from] LifecycleEventError),
    #[error(transparent)]
    Admin(#[from] AdminError),
}

/// Calls the same accessor on whichever class `self` holds.
macro_rules! each_class {
    ($self:ident, $e:ident => $body:expr) => {
        match $self {
            Error::InvalidSignature($e) => $body,
            Error::InvalidDelivery($e) => $body,
            Error::MessageDecode($e) => $body,
            Error::InvalidClaimRef($e) => $body,
            Error::ClaimNotFound($e) => $body,
            Error::ClaimCheckUnavailable($e) => $body,
            Error::ClaimRejected($e) => $body,
            Error::ClaimIntegrity($e) => $body,
            Error::LifecycleEvent($e) => $body,
            Error::Admin($e) => $body,
        }
    };
}

impl Error {
    /// The contract's class name: `InvalidSignatureError`, `ClaimCheckUnavailableError`, ...
    pub fn class(&self) -> &'static str {
        match self {
            Error::InvalidSignature(_) => "InvalidSignatureError",
            Error::InvalidDelivery(_) => "InvalidDeliveryError",
            Error::MessageDecode(_) => "MessageDecodeError",
            Error::InvalidClaimRef(_) => "InvalidClaimRefError",
            Error::ClaimNotFound(_) => "ClaimNotFoundError",
            Error::ClaimCheckUnavailable(_) => "ClaimCheckUnavailableError",
            Error::ClaimRejected(_) => "ClaimRejectedError",
            Error::ClaimIntegrity(_) => "ClaimIntegrityError",
            Error::LifecycleEvent(_) => "LifecycleEventError",
            Error::Admin(_) => "AdminError",
        }
    }
    pub fn code(&self) -> &str {
        each_class!(self, e => e.code())
    }
    pub fn retryable(&self) -> bool {
        each_class!(self, e => e.retryable())
    }
    pub fn field(&self) -> Option<&str> {
        each_class!(self, e => e.field())
    }
    pub fn status(&self) -> Option<u16> {
        each_class!(self, e => e.status())
    }
}
