//! The edge's side of the quarantine pen: a hook that failed verification on a source with
//! `on_verify_failure: quarantine` leaves the ingest order here. In order: its body against
//! `quarantine.max_body_bytes` (`413 payload_too_large`, nothing spent) → the source's bucket
//! (`429 quarantine_rate_limited`) → the node cap, the source's share and the tenant's share
//! (`503 quarantine_full`) → the pen's waiting writes (`503 overload`) → the pen's group commit
//! (`503 store_unavailable`) → `202`, sent only once the entry is on disk (the provider does not
//! retry a `202`). Every refusal stores nothing. The decisions are `crate::quarantine`'s; this
//! module builds the entry (`hook::envelope`, verification failed) and maps each outcome to its
//! answer.

use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use bytes::Bytes;
use serde::Serialize;

use ankusa_core::{Verification, VerifyStatus};
use ankusa_store::{PenSummary, PenWrite};

use super::admit::Target;
use super::state::EdgeState;
use super::{Answer, Refused};
use crate::api_error::ApiError;
use crate::hook;
use crate::lifecycle::EventType;
use crate::live::{Live, LiveSource};
use crate::quarantine::PenError;

/// A request that failed verification on a `quarantine` source, as the pen keeps it.
pub(super) struct Held<'a> {
    pub target: Target,
    pub parts: &'a Parts,
    pub body: Bytes,
    pub now: u64,
    pub reason: &'static str,
}

/// The `202` body.
#[derive(Serialize)]
struct Quarantined {
    id: uuid::Uuid,
    quarantined: bool,
    status: &'static str,
}

/// Puts a hook that failed verification in the pen: `202` once it is on disk, or the pen's
/// refusal (nothing stored).
pub(super) async fn hold(edge: &EdgeState, live: &Live, h: Held<'_>) -> Result<Answer, Refused> {
    let source = &h.target.source;
    let limits = edge.pen.limits(live);
    if h.body.len() as u64 > limits.max_body_bytes {
        let e = ApiError::PayloadTooLarge {
            max_body_bytes: limits.max_body_bytes,
        };
        return Err(Refused::new("quarantine_too_large", e));
    }
    let now_us = h.now.saturating_mul(1000);
    if let Err(e) = edge.pen.take_token(&source.id, &limits, now_us) {
        return Err(refusal(source, e));
    }
    let failed = Verification {
        status: VerifyStatus::Failed,
        flagged: false,
    };
    let envelope = hook::envelope(
        h.target.tenant,
        source.id.clone(),
        &h.parts.headers,
        h.body,
        h.now,
        failed,
    );
    let encoded = ankusa_store::encode_envelope(&envelope);
    let id = envelope.id;
    let envelope_tenant = envelope.tenant.clone();
    let write = PenWrite {
        summary: PenSummary {
            id,
            source_id: envelope.source_id.clone(),
            tenant: envelope.tenant.clone(),
            received_at: h.now,
            reason: h.reason.to_string(),
            size: encoded.len() as u64,
            method: h.parts.method.as_str().to_string(),
            path: h.parts.uri.path().to_string(),
            url_tenant: h.target.url_tenant,
        },
        envelope: encoded,
    };
    match edge.pen.hold_with_token(write, &limits, now_us).await {
        Ok(()) => {
            tracing::debug!(source = %source.id, %id, reason = h.reason, "hook quarantined");
            if let Some(events) = &edge.lifecycle {
                events.count(EventType::QuarantineHeld, &envelope_tenant, &source.id, 1);
            }
            let body = Quarantined {
                id,
                quarantined: true,
                status: "quarantined",
            };
            Ok(Answer {
                outcome: "quarantined",
                response: (StatusCode::ACCEPTED, axum::Json(body)).into_response(),
            })
        }
        Err(e) => Err(refusal(source, e)),
    }
}

/// The answer to a hook the pen refused (nothing of it stored).
fn refusal(source: &LiveSource, e: PenError) -> Refused {
    match e {
        PenError::RateLimited(wait_ms) => {
            let e = ApiError::QuarantineRateLimited {
                retry_after: wait_ms.div_ceil(1000),
            };
            Refused::new("quarantine_rate_limited", e)
        }
        // The node cap, the source's share or the tenant's: the same answer (which one is
        // `ankusa_quarantine_full_total{scope}`).
        PenError::Full(_) => Refused::new("quarantine_full", ApiError::QuarantineFull),
        PenError::Overload => Refused::new("overload", ApiError::Overload),
        PenError::StoreUnavailable(why) => {
            tracing::warn!(source = %source.id, error = %why, "quarantine write not confirmed; answering 503");
            Refused::new("store_unavailable", ApiError::StoreWriteFailed)
        }
    }
}
