//! The ingest stages once the body is read, in order: `verify` (`401`, or the hook is flagged
//! under `accept_flag`, or diverted to the pen under `quarantine`), `rate_limit` (the tenant's,
//! `429`), `record` (`hook::record`: dedupe key, lanes, sinks), `commit` (`503 dlq_full`, then
//! group commit: `503` overload, intake or store failure; under `wal.type: none` the publish to
//! every sink, `503 sink_unavailable`) and `answer` (`201`, sent only after the hook's batch is
//! fsynced, or every sink confirmed it).

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use bytes::Bytes;
use serde::Serialize;

use ankusa_config::{Config, OnVerifyFailure};
use ankusa_core::{Verification, VerifyStatus};
use ankusa_store::{IngestRecord, IngestResult};

use super::admit::Target;
use super::state::{Ack, EdgeState};
use super::{Answer, Refused};
use crate::api_error::ApiError;
use crate::commit::CommitError;
use crate::hook::{self, Keyed};
use crate::live::{Live, LiveSource};

/// Bodies at least this large are verified on a blocking thread: an HMAC over megabytes would
/// otherwise hold an async worker (and every connection queued on it) for milliseconds.
const BLOCKING_VERIFY_BYTES: usize = 64 << 10;

/// Stage 4: the hook's verification, or why it failed on a source that does not accept failed
/// hooks (`reject`, `quarantine`): `VerifyFailure::code`.
pub(super) async fn verify(
    edge: &EdgeState,
    source: &Arc<LiveSource>,
    headers: &HeaderMap,
    body: &Bytes,
    now_ms: u64,
) -> Result<Verification, &'static str> {
    let Some(v) = &source.verifier else {
        return Ok(Verification::SKIPPED);
    };
    let now_s = (now_ms / 1000) as i64;
    let result = if body.len() >= BLOCKING_VERIFY_BYTES {
        let (src, headers, body) = (source.clone(), headers.clone(), body.clone());
        tokio::task::spawn_blocking(move || {
            src.verifier
                .as_ref()
                .map(|v| v.verify(&headers, &body, now_s))
        })
        .await
        .ok()
        .flatten()
        .unwrap_or(Err(ankusa_verify::VerifyFailure::BadSecret))
    } else {
        v.verify(headers, body, now_s)
    };
    match result {
        Ok(_) => Ok(Verification::OK),
        Err(why) => {
            edge.metrics
                .ingest
                .verify_failures
                .with_label_values(&[v.scheme()])
                .inc();
            tracing::info!(source = %source.id, reason = why.code(), "signature verification failed");
            match source.cfg.on_verify_failure {
                OnVerifyFailure::AcceptFlag => Ok(Verification {
                    status: VerifyStatus::Failed,
                    flagged: true,
                }),
                OnVerifyFailure::Reject | OnVerifyFailure::Quarantine => Err(why.code()),
            }
        }
    }
}

/// Stage 5: the tenant's rate limit (`rate_limits`), charged after verification and before
/// the durable write.
pub(super) fn rate_limit(
    edge: &EdgeState,
    config: &Config,
    tenant: &str,
    now_ms: u64,
) -> Result<(), Refused> {
    let limits = &config.rate_limits;
    let Some(limit) = limits.tenants.get(tenant).or(limits.default.as_ref()) else {
        return Ok(());
    };
    edge.limiter
        .check(tenant, limit, now_ms.saturating_mul(1000))
        .map_err(|wait_ms| {
            edge.metrics.ingest.rate_limit_rejected.inc();
            let e = ApiError::RateLimited {
                retry_after: wait_ms.div_ceil(1000),
            };
            Refused::new("rate_limited", e)
        })
}

/// Stage 6: the record group commit takes. A hook accepted despite a failed check never takes
/// (nor carries) a dedupe key: a forged copy must not pre-empt the real event at the consumer.
pub(super) fn record(
    edge: &EdgeState,
    target: Target,
    headers: &HeaderMap,
    body: Bytes,
    now_ms: u64,
    verification: Verification,
) -> IngestRecord {
    let Target {
        source,
        tenant,
        url_tenant,
    } = target;
    let keyed = if verification.flagged {
        Keyed::Never
    } else {
        Keyed::BySource { url_tenant }
    };
    let envelope = hook::envelope(
        tenant,
        source.id.clone(),
        headers,
        body,
        now_ms,
        verification,
    );
    hook::record(&source, envelope, headers, keyed, &edge.metrics)
}

/// Stage 7: the durable write. The DLQ is over a bound and nothing archived is left to evict:
/// taking more hooks would grow it without end (or make the reaper delete what it must not).
/// Under `wal.type: none`, the publish to every sink of the source (`direct`) instead.
pub(super) async fn commit(
    edge: &EdgeState,
    live: &Arc<Live>,
    record: IngestRecord,
) -> Result<IngestResult, Refused> {
    let committer = match &edge.ack {
        Ack::Commit(c) => c,
        Ack::Direct(d) => {
            return d.publish(live.clone(), record).await.map_err(|u| {
                let e = ApiError::SinkUnavailable {
                    retry_after: u.retry_after,
                };
                Refused::new("sink_unavailable", e)
            });
        }
    };
    if edge.dlq.is_full() {
        return Err(Refused::new("dlq_full", ApiError::DlqFull).counted("dlq_full"));
    }
    committer.commit(record).await.map_err(|e| match e {
        CommitError::Overload | CommitError::Expired => {
            Refused::new("overload", ApiError::Overload)
        }
        CommitError::IntakeUnavailable => {
            let e = ApiError::IntakeUnavailable {
                retry_after: edge.intake_retry_after,
            };
            Refused::new("intake_unavailable", e)
        }
        CommitError::IntakePending => {
            let e = ApiError::IntakePending {
                retry_after: edge.intake_retry_after,
            };
            Refused::new("intake_pending", e)
        }
        CommitError::StoreUnavailable(_) => {
            Refused::new("store_unavailable", ApiError::StoreWriteFailed)
        }
    })
}

/// The `201` body (fields in this order, as the JSON has always been written).
#[derive(Serialize)]
struct Accepted {
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    duplicate: bool,
    id: uuid::Uuid,
    status: &'static str,
}

/// Stage 8: `201` with the hook's id — the original one for a duplicate of a dedupe key.
pub(super) fn answer(result: IngestResult, flagged: bool) -> Answer {
    let (outcome, id, duplicate) = match result {
        IngestResult::Accepted { id, .. } if flagged => ("flagged", id, false),
        IngestResult::Accepted { id, .. } => ("accepted", id, false),
        IngestResult::Duplicate { id } => ("duplicate", id, true),
    };
    let body = Accepted {
        duplicate,
        id,
        status: "accepted",
    };
    Answer {
        outcome,
        response: (StatusCode::CREATED, axum::Json(body)).into_response(),
    }
}
