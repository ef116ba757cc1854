//! HTTP ingest. The request path, in order, one stage each — `handle` reads as this list:
//! 1. `limits` (`admit.rs`): the client's rate limit (`400`/`429`) → route and the URL
//!    tenant's grammar (`404`) → method (`405`) → declared `Content-Length` (`413`, unread);
//! 2. `source` (`admit.rs`): source lookup (`404`) → header bytes (`400`);
//! 3. `body` (`admit.rs`): the in-flight budget (`503`) → the read within the limit (`413`,
//!    `400`);
//! 4. `verify` (`accept.rs`): `401`; a `quarantine` source's failed hook goes to the pen
//!    instead (`pen.rs`: `202`/`413`/`429`/`503`), an `accept_flag` source's is flagged;
//! 5. `rate_limit` (`accept.rs`): the tenant's (`429`);
//! 6. `record` (`accept.rs` → `hook::record`): dedupe key, ordering lanes, sinks;
//! 7. with `fleet`, a keyed hook whose key another pod owns is committed there (`forward.rs`:
//!    the owner's answer relayed, `503 owner_unavailable` without one); the fleet listener's
//!    side is `fleet_in.rs`;
//!    `commit` (`accept.rs` → `commit.rs`): `503` dlq full, overload, intake or store failure;
//!    under `wal.type: none` (`accept.rs` → `direct`) the publish to every sink instead: `503`
//!    unless all confirmed;
//! 8. `answer`: `201`.
//!
//! Nothing is stored before the commit, and a `201` is sent only after the hook's batch is
//! fsynced (under `wal.type: none`, only after every sink confirmed it). Every refusal is an `ApiError`; a refusal before the body is read closes the
//! connection (what is left of the body would be read as the next request).
//!
//! With `telemetry.otlp`, a request is an `ingest` span (children `verify` and `commit`) whose
//! parent is the request's `traceparent`, and the hook stores the `ingest` span's context so
//! that its deliveries join the trace (`telemetry`).
//!
//! Imports `hook`, `commit`, `direct`, `fleet`, `live`, `quarantine` (the pen), `archive::dlq_bounds` (the DLQ's
//! bound), `api_error`, `metrics`, `telemetry`, `lifecycle::Emitter` (pen counts as events);
//! `app.rs` builds its `EdgeState` and nothing
//! imports the edge back.

mod accept;
mod admit;
pub mod client;
mod fleet_in;
mod forward;
mod pen;
pub mod ratelimit;
mod state;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use ankusa_config::OnVerifyFailure;
use tracing::Instrument;
use tracing::field::Empty;

use crate::api_error::ApiError;
use crate::telemetry;

pub use fleet_in::router as fleet_router;
pub use state::{Ack, Clock, EdgeState, SystemClock};

/// The ingest listener's router: `probes` (`/health`, `/ready`, with their own state) and
/// every other request through the ingest stages.
pub fn router(edge: Arc<EdgeState>, probes: Router) -> Router {
    Router::new()
        .fallback(ingest)
        .with_state(edge)
        .merge(probes)
}

/// A hook taken: its answer and its `ankusa_ingest_requests_total` outcome.
struct Answer {
    outcome: &'static str,
    response: Response,
}

/// A request refused: the answer, its `ankusa_ingest_requests_total` outcome, and the reason it
/// counts under in `ankusa_ingest_refused_total` when it does.
struct Refused {
    outcome: &'static str,
    reason: Option<&'static str>,
    error: ApiError,
}

impl Refused {
    fn new(outcome: &'static str, error: ApiError) -> Refused {
        Refused {
            outcome,
            reason: None,
            error,
        }
    }

    /// Counted in `ankusa_ingest_refused_total{reason}`.
    fn counted(self, reason: &'static str) -> Refused {
        Refused {
            reason: Some(reason),
            ..self
        }
    }
}

async fn ingest(State(edge): State<Arc<EdgeState>>, req: Request) -> Response {
    let started = Instant::now();
    let mut body_read = false;
    let span = tracing::info_span!(
        target: telemetry::TARGET,
        "ingest",
        otel.kind = "server",
        source = Empty,
        tenant = Empty,
        hook_id = Empty,
        outcome = Empty,
        http.response.status_code = Empty,
    );
    if !span.is_disabled() {
        let h = req.headers();
        let header = |n: &str| h.get(n).and_then(|v| v.to_str().ok());
        telemetry::set_remote_parent(&span, header("traceparent"), header("tracestate"));
    }
    let handled = handle(&edge, req, &mut body_read)
        .instrument(span.clone())
        .await;
    let (outcome, mut resp) = match handled {
        Ok(a) => (a.outcome, a.response),
        Err(r) => {
            if let Some(reason) = r.reason {
                edge.metrics
                    .ingest
                    .refused
                    .with_label_values(&[reason])
                    .inc();
            }
            (r.outcome, r.error.into_response())
        }
    };
    span.record("outcome", outcome);
    span.record("http.response.status_code", resp.status().as_u16());
    if !body_read {
        // Refused before the whole body was read (404, 405, 413, 400): what is left of it
        // would be read as the next request, so the connection ends with this answer, and the
        // header tells a keep-alive client not to send its next request on it.
        resp.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    edge.metrics
        .ingest
        .requests
        .with_label_values(&[outcome])
        .inc();
    edge.metrics
        .ingest
        .duration_seconds
        .observe(started.elapsed().as_secs_f64());
    resp
}

/// The ingest order (see the module header). `body_read` is set once the whole request body
/// has been read.
async fn handle(edge: &EdgeState, req: Request, body_read: &mut bool) -> Result<Answer, Refused> {
    let live = edge.config.live();
    let (parts, body) = req.into_parts();
    let route = admit::limits(edge, &live, &parts)?;
    let declared = route.declared;
    let target = admit::source(&live, &parts.headers, route)?;
    let span = tracing::Span::current();
    span.record("source", target.source.id.as_str());
    span.record("tenant", target.tenant.as_str());
    let (body, _reserved) = admit::body(edge, &live.config.http, declared, body).await?;
    *body_read = true;

    let now = edge.clock.now_ms();
    let verify_span = tracing::info_span!(target: telemetry::TARGET, "verify", outcome = Empty);
    let verified = accept::verify(edge, &target.source, &parts.headers, &body, now)
        .instrument(verify_span.clone())
        .await;
    verify_span.record(
        "outcome",
        match &verified {
            Ok(v) => v.status.as_str(),
            Err(reason) => reason,
        },
    );
    let verification = match verified {
        Ok(v) => v,
        Err(reason) if target.source.cfg.on_verify_failure == OnVerifyFailure::Quarantine => {
            let held = pen::Held {
                target,
                parts: &parts,
                body,
                now,
                reason,
            };
            return pen::hold(edge, &live, held).await;
        }
        Err(_) => return Err(Refused::new("unauthorized", ApiError::InvalidSignature)),
    };
    accept::rate_limit(edge, &live.config, &target.tenant, now)?;
    let mut record = accept::record(edge, target, &parts.headers, body, now, verification);
    // With traces exported, the hook carries the `ingest` span's context: its deliveries
    // become children of this span (in the provider's trace when it sent one).
    if let Some(tp) = telemetry::traceparent_of(&span) {
        record.envelope.traceparent = Some(tp);
    }
    span.record("hook_id", tracing::field::display(record.envelope.id));
    // Part of the `ingest` span: the hop's time is `ankusa_fleet_forward_duration_seconds`.
    if let forward::Routed::Answered(result) = forward::route(edge, &live, &record).await? {
        return Ok(accept::answer(result, verification.flagged));
    }
    let result = accept::commit(edge, &live, record)
        .instrument(tracing::info_span!(target: telemetry::TARGET, "commit"))
        .await?;
    Ok(accept::answer(result, verification.flagged))
}
