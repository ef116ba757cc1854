//! Every error answer the gateway's HTTP listeners give (ingest, admin, claim check), as one
//! enum: each variant fixes its status, its JSON `error` code, the fields it adds beside the
//! code and its `Retry-After`, so a handler returns `Result<_, ApiError>` and never builds an
//! error body itself. The table this module implements is docs/admin-api.md's (its `Errors`,
//! `Ingest status codes` and claim port tables; a unit test parses them, so the two cannot
//! drift).
//!
//! A leaf: it imports nothing of this crate (the store's error is an outside crate's), so every
//! listener may use it without reaching into another. Bodies carry codes, field names and
//! limits, never a value from a request, a config or the store (a store error's message, with
//! its file paths, goes to the log only).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

/// An error answer: `{"error": <code>, ...extra fields}` with its status and headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// `400`: a query parameter or a filter is invalid.
    InvalidFilter {
        field: String,
        message: String,
    },
    /// `400`: a request body is not the expected JSON (unknown keys included).
    InvalidBody {
        message: String,
    },
    /// `400`: a path id that is not a UUID.
    InvalidId,
    /// `400`: a replay job state that is unknown or cannot be set.
    InvalidState {
        message: String,
    },
    /// `400`: a pushed or reloaded config was refused (`field` is `null` when the error is not
    /// about one key).
    InvalidConfig {
        field: Option<String>,
        message: String,
    },
    /// `422`: a pushed or reloaded config has a source whose retries, DLQ retention and redeem
    /// grace outlast `claim_check.bucket_expiry_days`.
    RetryExceedsClaimExpiry {
        field: Option<String>,
        message: String,
    },
    /// `400` (ingest): a header with bytes outside the allowed ones, or a `Content-Length` or
    /// `X-Forwarded-For` that does not parse; `header` names it.
    InvalidHeader {
        header: String,
    },
    /// `400` (ingest): the body did not arrive (`timeout`) or the connection failed
    /// (`read_error`).
    BodyReadFailed {
        reason: &'static str,
    },
    /// `401`: no bearer token, or an unknown one.
    Unauthorized,
    /// `401` (ingest): the signature did not verify on a `reject` source.
    InvalidSignature,
    /// `403`: the token lacks `scope` (a route's, `tenant:<id>` or `tenant:*`); the claim
    /// port's tenant refusal names none.
    Forbidden {
        scope: Option<String>,
    },
    /// `403`: `PUT /v1/config` on an admin API without tokens.
    TokenRequired {
        message: &'static str,
    },
    /// `404` (ingest): the path is not an ingest route.
    NotFound,
    /// `404` (ingest): the URL's tenant is not a valid id.
    InvalidTenant,
    /// `404` (ingest): no such source, or one pinned to another tenant.
    UnknownSource,
    HookNotFound,
    ReplayNotFound,
    /// `404` (claim port).
    ClaimNotFound,
    /// `404`: `GET /v1/archive/hooks/{id}` on a node without `storage`.
    ArchiveNotConfigured,
    HookNotArchived,
    /// `405` (ingest), with `Allow: POST`.
    MethodNotAllowed,
    /// `409`: a route that needs a role this node does not run.
    RoleNotEnabled {
        role: &'static str,
    },
    /// `413`: the body is over `max_body_bytes`.
    PayloadTooLarge {
        max_body_bytes: u64,
    },
    /// `429` (ingest): `http.client_rate_limit`; `Retry-After` in seconds.
    ClientRateLimited {
        retry_after: u64,
    },
    /// `429` (ingest): the tenant's rate limit.
    RateLimited {
        retry_after: u64,
    },
    /// `429` (ingest): a `quarantine` source's pen bucket is empty.
    QuarantineRateLimited {
        retry_after: u64,
    },
    /// `429`: too many replay jobs running or paused; `Retry-After: 10`.
    TooManyJobs {
        max_live_jobs: usize,
    },
    /// `500`: an archived record failed its sha256 check.
    ArchiveCorrupt,
    /// `503`: a queue or budget is full; `Retry-After: 1`.
    Overload,
    /// `503`: the store could not be read or written (`class` as in
    /// `ankusa_store_write_failures_total`, when known); `Retry-After: 1`.
    StoreUnavailable {
        class: Option<&'static str>,
    },
    /// `503` (claim port): the claim store refuses the gateway (credentials, permissions);
    /// `Retry-After: 60`.
    StoreForbidden,
    /// `503 store_unavailable` (ingest): the hook's synced write failed; `Retry-After: 5`.
    StoreWriteFailed,
    /// `503` (ingest): the DLQ is over a bound with nothing archived to evict; `Retry-After: 60`.
    DlqFull,
    /// `503` (ingest): the pen's cap (the node's, the source's or the tenant's share);
    /// `Retry-After: 60`.
    QuarantineFull,
    /// `503` (ingest): the intake log did not confirm (`intake.retry_after_s`).
    IntakeUnavailable {
        retry_after: u64,
    },
    /// `503` (ingest): a duplicate whose original the intake log has not confirmed yet.
    IntakePending {
        retry_after: u64,
    },
    /// `503`: the archive's blob store cannot be read.
    ArchiveUnavailable,
    /// `409`: a route over stored hooks (the WAL, DLQ, replays, hooks, archive) on a node under
    /// `wal.type: none`, which stores none.
    WalDisabled,
    /// `503` (ingest), `wal.type: none`: a sink of the source refused the hook, did not confirm
    /// it within `wal.publish_timeout_ms`, or its breaker is open (`wal.retry_after_s`, or what
    /// is left of the breaker's open period). Names no sink.
    SinkUnavailable {
        retry_after: u64,
    },
    /// `503` (ingest), `fleet`: the pod owning the hook's dedupe key (or, during a handover,
    /// its previous owner) did not answer, or the forwards in flight are at
    /// `fleet.max_in_flight` (`fleet.retry_after_s`). Names no pod.
    OwnerUnavailable {
        retry_after: u64,
    },
    /// `503` (claim port), `claim_check.token_review`: the API server did not answer a
    /// TokenReview (unreachable, timed out, or it refused the gateway's own credential).
    AuthUnavailable,
}

impl ApiError {
    /// A `400 invalid_filter` naming `field`.
    pub fn filter(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::InvalidFilter {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A `403 forbidden` naming the scope the caller lacks.
    pub fn forbidden(scope: impl Into<String>) -> Self {
        ApiError::Forbidden {
            scope: Some(scope.into()),
        }
    }

    pub fn status(&self) -> StatusCode {
        use ApiError::*;
        match self {
            InvalidFilter { .. }
            | InvalidBody { .. }
            | InvalidId
            | InvalidState { .. }
            | InvalidConfig { .. }
            | InvalidHeader { .. }
            | BodyReadFailed { .. } => StatusCode::BAD_REQUEST,
            Unauthorized | InvalidSignature => StatusCode::UNAUTHORIZED,
            Forbidden { .. } | TokenRequired { .. } => StatusCode::FORBIDDEN,
            NotFound | InvalidTenant | UnknownSource | HookNotFound | ReplayNotFound
            | ClaimNotFound | ArchiveNotConfigured | HookNotArchived => StatusCode::NOT_FOUND,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            RetryExceedsClaimExpiry { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            RoleNotEnabled { .. } | WalDisabled => StatusCode::CONFLICT,
            PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ClientRateLimited { .. }
            | RateLimited { .. }
            | QuarantineRateLimited { .. }
            | TooManyJobs { .. } => StatusCode::TOO_MANY_REQUESTS,
            ArchiveCorrupt => StatusCode::INTERNAL_SERVER_ERROR,
            Overload
            | StoreUnavailable { .. }
            | StoreForbidden
            | StoreWriteFailed
            | DlqFull
            | QuarantineFull
            | IntakeUnavailable { .. }
            | IntakePending { .. }
            | SinkUnavailable { .. }
            | OwnerUnavailable { .. }
            | AuthUnavailable
            | ArchiveUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The body's `error`.
    pub fn code(&self) -> &'static str {
        use ApiError::*;
        match self {
            InvalidFilter { .. } => "invalid_filter",
            InvalidBody { .. } => "invalid_body",
            InvalidId => "invalid_id",
            InvalidState { .. } => "invalid_state",
            InvalidConfig { .. } => "invalid_config",
            RetryExceedsClaimExpiry { .. } => "retry_exceeds_claim_expiry",
            InvalidHeader { .. } => "invalid_header",
            BodyReadFailed { .. } => "body_read_failed",
            Unauthorized => "unauthorized",
            InvalidSignature => "invalid_signature",
            Forbidden { .. } => "forbidden",
            TokenRequired { .. } => "token_required",
            NotFound => "not_found",
            InvalidTenant => "invalid_tenant",
            UnknownSource => "unknown_source",
            HookNotFound => "hook_not_found",
            ReplayNotFound => "replay_not_found",
            ClaimNotFound => "claim_not_found",
            ArchiveNotConfigured => "archive_not_configured",
            HookNotArchived => "hook_not_archived",
            MethodNotAllowed => "method_not_allowed",
            RoleNotEnabled { .. } => "role_not_enabled",
            PayloadTooLarge { .. } => "payload_too_large",
            ClientRateLimited { .. } => "client_rate_limited",
            RateLimited { .. } => "rate_limited",
            QuarantineRateLimited { .. } => "quarantine_rate_limited",
            TooManyJobs { .. } => "too_many_jobs",
            ArchiveCorrupt => "archive_corrupt",
            Overload => "overload",
            StoreUnavailable { .. } | StoreWriteFailed => "store_unavailable",
            StoreForbidden => "store_forbidden",
            DlqFull => "dlq_full",
            QuarantineFull => "quarantine_full",
            IntakeUnavailable { .. } => "intake_unavailable",
            IntakePending { .. } => "intake_pending",
            ArchiveUnavailable => "archive_unavailable",
            WalDisabled => "wal_disabled",
            SinkUnavailable { .. } => "sink_unavailable",
            OwnerUnavailable { .. } => "owner_unavailable",
            AuthUnavailable => "auth_unavailable",
        }
    }

    /// Seconds of the `Retry-After` header, when the answer has one (at least 1).
    pub fn retry_after(&self) -> Option<u64> {
        use ApiError::*;
        let secs = match self {
            ClientRateLimited { retry_after }
            | RateLimited { retry_after }
            | QuarantineRateLimited { retry_after }
            | IntakeUnavailable { retry_after }
            | IntakePending { retry_after }
            | SinkUnavailable { retry_after }
            | OwnerUnavailable { retry_after } => *retry_after,
            TooManyJobs { .. } => 10,
            Overload | StoreUnavailable { .. } => 1,
            StoreWriteFailed | AuthUnavailable => 5,
            DlqFull | QuarantineFull | StoreForbidden => 60,
            _ => return None,
        };
        Some(secs.max(1))
    }

    /// The fields beside `error`, in the body.
    pub fn extra(&self) -> Map<String, Value> {
        use ApiError::*;
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        match self {
            InvalidFilter { field, message } => {
                put("field", field.as_str().into());
                put("message", message.as_str().into());
            }
            InvalidConfig { field, message } | RetryExceedsClaimExpiry { field, message } => {
                put("field", field.clone().map_or(Value::Null, Value::from));
                put("message", message.as_str().into());
            }
            InvalidBody { message } | InvalidState { message } => {
                put("message", message.as_str().into())
            }
            TokenRequired { message } => put("message", (*message).into()),
            InvalidHeader { header } => put("header", header.as_str().into()),
            BodyReadFailed { reason } => put("reason", (*reason).into()),
            Forbidden { scope: Some(scope) } => put("scope", scope.as_str().into()),
            RoleNotEnabled { role } => put("role", (*role).into()),
            PayloadTooLarge { max_body_bytes } => put("max_body_bytes", (*max_body_bytes).into()),
            TooManyJobs { max_live_jobs } => put("max_live_jobs", (*max_live_jobs).into()),
            StoreUnavailable { class: Some(class) } => put("class", (*class).into()),
            _ => {}
        }
        m
    }

    /// The whole JSON body.
    pub fn body(&self) -> Value {
        let mut m = self.extra();
        m.insert("error".into(), self.code().into());
        Value::Object(m)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status(), axum::Json(self.body())).into_response();
        if let Some(secs) = self.retry_after() {
            r.headers_mut().insert(header::RETRY_AFTER, secs.into());
        }
        if self == ApiError::MethodNotAllowed {
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        r
    }
}

/// A store call that failed: the answer names the failure's class only (RocksDB's messages
/// carry file paths); the log has the whole error.
impl From<ankusa_store::StoreError> for ApiError {
    fn from(e: ankusa_store::StoreError) -> Self {
        tracing::warn!(error = %e, "request failed in the store");
        ApiError::StoreUnavailable {
            class: Some(e.class()),
        }
    }
}

#[cfg(test)]
#[path = "api_error_tests.rs"]
mod tests;
