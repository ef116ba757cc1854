//! The edge's side of the quarantine pen: a hook that failed verification on a source with
//! `on_verify_failure: quarantine` leaves the ingest order here. In order: its body against
//! `quarantine.max_body_bytes` (`413 payload_too_large`, nothing spent) → the source's bucket
//! (`429 quarantine_rate_limited`) → the node cap, the source's share and the tenant's share
//! (`503 quarantine_full`) → the pen's waiting writes (`503 overload`) → the pen's group commit
//! (`503 store_unavailable`) → `202`, sent only once the entry is on disk (the provider does not
//! retry a `202`). Every refusal stores nothing. The decisions are `crate::quarantine`'s; this
//! module builds the entry and maps each outcome to its answer.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;

use ankusa_core::{Envelope, Verification, VerifyStatus};
use ankusa_format::request::valid_traceparent;

use super::{error, stored_headers, trace_header, with_retry_after};
use crate::app::App;
use crate::live::{Live, LiveSource};
use crate::quarantine::PenError;
use crate::store::{PenSummary, PenWrite};

/// A request that failed verification on a `quarantine` source, as the pen keeps it.
pub(super) struct Held<'a> {
    pub tenant: String,
    pub url_tenant: bool,
    pub method: String,
    pub path: String,
    pub headers: &'a HeaderMap,
    pub body: Bytes,
    pub now: u64,
    pub reason: &'static str,
}

/// Puts a hook that failed verification in the pen: `202` once it is on disk, or the pen's
/// refusal (nothing stored).
pub(super) async fn hold(
    app: &App,
    live: &Live,
    source: &LiveSource,
    h: Held<'_>,
) -> (&'static str, Response) {
    let limits = app.pen.limits(live);
    if h.body.len() as u64 > limits.max_body_bytes {
        return (
            "quarantine_too_large",
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                Some(json!({ "max_body_bytes": limits.max_body_bytes })),
            ),
        );
    }
    let now_us = h.now.saturating_mul(1000);
    if let Err(e) = app.pen.take_token(&source.id, &limits, now_us) {
        return refusal(source, e);
    }
    let envelope = Envelope {
        id: uuid::Uuid::now_v7(),
        seq: 0,
        received_at: h.now,
        tenant: h.tenant,
        source_id: source.id.clone(),
        headers: stored_headers(h.headers),
        content_type: h
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(String::from),
        verification: Verification {
            status: VerifyStatus::Failed,
            flagged: false,
        },
        dedupe_key: None,
        traceparent: trace_header(h.headers, "traceparent").filter(|v| valid_traceparent(v)),
        tracestate: trace_header(h.headers, "tracestate").filter(|v| v.len() <= 512),
        body: h.body,
    };
    let encoded = crate::store::encode_envelope(&envelope);
    let id = envelope.id;
    let write = PenWrite {
        summary: PenSummary {
            id,
            source_id: envelope.source_id.clone(),
            tenant: envelope.tenant.clone(),
            received_at: h.now,
            reason: h.reason.to_string(),
            size: encoded.len() as u64,
            method: h.method,
            path: h.path,
            url_tenant: h.url_tenant,
        },
        envelope: encoded,
    };
    match app.pen.hold_with_token(write, &limits, now_us).await {
        Ok(()) => {
            tracing::debug!(source = %source.id, %id, reason = h.reason, "hook quarantined");
            (
                "quarantined",
                (
                    StatusCode::ACCEPTED,
                    axum::Json(json!({ "id": id, "status": "quarantined", "quarantined": true })),
                )
                    .into_response(),
            )
        }
        Err(e) => refusal(source, e),
    }
}

/// The answer to a hook the pen refused (nothing of it stored).
fn refusal(source: &LiveSource, e: PenError) -> (&'static str, Response) {
    match e {
        PenError::RateLimited(wait_ms) => (
            "quarantine_rate_limited",
            with_retry_after(
                error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "quarantine_rate_limited",
                    None,
                ),
                wait_ms.div_ceil(1000),
            ),
        ),
        // The node cap, the source's share or the tenant's: the same answer (which one is
        // `ankusa_quarantine_full_total{scope}`).
        PenError::Full(_) => (
            "quarantine_full",
            with_retry_after(
                error(StatusCode::SERVICE_UNAVAILABLE, "quarantine_full", None),
                60,
            ),
        ),
        PenError::Overload => (
            "overload",
            with_retry_after(error(StatusCode::SERVICE_UNAVAILABLE, "overload", None), 1),
        ),
        PenError::StoreUnavailable(why) => {
            tracing::warn!(source = %source.id, error = %why, "quarantine write not confirmed; answering 503");
            (
                "store_unavailable",
                with_retry_after(
                    error(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", None),
                    5,
                ),
            )
        }
    }
}
