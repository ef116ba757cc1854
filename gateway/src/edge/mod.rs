//! HTTP ingest. The request path, in order: route → resolver (tenant, `404`) → declared
//! `Content-Length` (`413`, unread) → source lookup (`404`) → header bytes (`400`) → body read
//! within the limit → verify (`401`; a `quarantine` source's failed hook goes to the pen
//! instead, `202`/`413`/`429`/`503`, see `pen`) → tenant rate limit (`429`) → dedupe key → group commit
//! (`commit.rs`; `503` overload or store failure) → `201`. Nothing is stored before the commit, and a `201`
//! is sent only after the hook's batch is fsynced.
// Handlers return `Result<_, Response>`: the error is the HTTP answer, built once per refused
// request, so boxing it would only add an allocation.
#![allow(clippy::result_large_err)]

pub mod client;
pub mod dedupe;
mod pen;
pub mod ratelimit;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use serde_json::json;

use ankusa_config::OnVerifyFailure;
use ankusa_format::request::{route, valid_traceparent};

use ankusa_core::{Envelope, Verification, VerifyStatus};

use crate::app::App;
use crate::commit::CommitError;
use crate::live::LiveSource;
use crate::metrics::Metrics;
use crate::store::{Dedupe, IngestRecord, IngestResult};

/// Headers not kept in the stored hook: credentials, framing and hop-by-hop.
pub const NOT_STORED: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "expect",
];

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/health", get(crate::probes::health))
        .route("/ready", get(crate::probes::ready))
        .fallback(ingest)
        .with_state(app)
}

/// A JSON error body `{"error": code, ...}`.
pub fn error(status: StatusCode, code: &str, extra: Option<serde_json::Value>) -> Response {
    let mut body = json!({ "error": code });
    if let (Some(serde_json::Value::Object(extra)), Some(obj)) = (extra, body.as_object_mut()) {
        obj.extend(extra);
    }
    (status, axum::Json(body)).into_response()
}

fn with_retry_after(mut r: Response, secs: u64) -> Response {
    r.headers_mut()
        .insert(header::RETRY_AFTER, secs.max(1).into());
    r
}

async fn ingest(State(app): State<Arc<App>>, req: Request) -> Response {
    let started = Instant::now();
    let mut body_read = false;
    let (outcome, mut resp) = handle(&app, req, &mut body_read).await;
    if !body_read {
        // Refused before the whole body was read (404, 405, 413, 400): what is left of it
        // would be read as the next request, so the connection ends with this answer, and the
        // header tells a keep-alive client not to send its next request on it.
        resp.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    app.metrics
        .ingest_requests
        .with_label_values(&[outcome])
        .inc();
    app.metrics
        .ingest_duration_seconds
        .observe(started.elapsed().as_secs_f64());
    resp
}

fn refuse(
    app: &App,
    reason: &'static str,
    status: StatusCode,
    code: &str,
    extra: Option<serde_json::Value>,
) -> (&'static str, Response) {
    app.metrics
        .ingest_refused
        .with_label_values(&[reason])
        .inc();
    ("refused", error(status, code, extra))
}

/// `body_read` is set once the whole request body has been read.
async fn handle(app: &App, req: Request, body_read: &mut bool) -> (&'static str, Response) {
    let live = app.config.live();
    let cfg = &live.config;
    let (parts, body) = req.into_parts();

    if let Some(limit) = &cfg.http.client_rate_limit {
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        let Some(client) =
            peer.and_then(|p| client::address(p, &parts.headers, &live.trusted_proxies))
        else {
            return refuse(
                app,
                "invalid_header",
                StatusCode::BAD_REQUEST,
                "invalid_header",
                Some(json!({ "header": "x-forwarded-for" })),
            );
        };
        let now_us = app.clock.now_ms().saturating_mul(1000);
        if let Err(wait_ms) = app
            .client_limiter
            .check(&client::key(client), limit, now_us)
        {
            app.metrics
                .ingest_refused
                .with_label_values(&["client_rate_limited"])
                .inc();
            let r = error(StatusCode::TOO_MANY_REQUESTS, "client_rate_limited", None);
            return ("rate_limited", with_retry_after(r, wait_ms.div_ceil(1000)));
        }
    }

    let Some((url_tenant, source_id)) = route(parts.uri.path(), &cfg.http.prefix, cfg.http.routing)
    else {
        return refuse(
            app,
            "unknown_source",
            StatusCode::NOT_FOUND,
            "not_found",
            None,
        );
    };
    if let Some(t) = url_tenant
        && !ankusa_config::valid_id(t)
    {
        return refuse(
            app,
            "invalid_tenant",
            StatusCode::NOT_FOUND,
            "invalid_tenant",
            None,
        );
    }
    if parts.method != Method::POST {
        let mut r = error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", None);
        r.headers_mut()
            .insert(header::ALLOW, "POST".parse().expect("static header"));
        return ("refused", r);
    }
    let max = cfg.http.max_body_bytes;
    if let Some(len) = parts.headers.get(header::CONTENT_LENGTH) {
        match len.to_str().ok().and_then(|s| s.parse::<u64>().ok()) {
            Some(n) if n > max => {
                return refuse(
                    app,
                    "payload_too_large",
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    Some(json!({ "max_body_bytes": max })),
                );
            }
            Some(_) => {}
            None => {
                return refuse(
                    app,
                    "invalid_header",
                    StatusCode::BAD_REQUEST,
                    "invalid_header",
                    Some(json!({ "header": "content-length" })),
                );
            }
        }
    }
    let Some(source) = live.sources.get(source_id).cloned() else {
        return refuse(
            app,
            "unknown_source",
            StatusCode::NOT_FOUND,
            "unknown_source",
            None,
        );
    };
    let tenant = match url_tenant {
        Some(t) => {
            let pinned = source.cfg.tenant.as_deref().filter(|p| *p != "default");
            if pinned.is_some_and(|p| p != t) {
                return refuse(
                    app,
                    "unknown_source",
                    StatusCode::NOT_FOUND,
                    "unknown_source",
                    None,
                );
            }
            t.to_string()
        }
        None => source.tenant().to_string(),
    };
    if let Some(bad) = invalid_header(&parts.headers) {
        return refuse(
            app,
            "invalid_header",
            StatusCode::BAD_REQUEST,
            "invalid_header",
            Some(json!({ "header": bad })),
        );
    }

    // Bytes of bodies being read at once are bounded across connections: reserve this body's
    // declared length (the most it may be, when chunked) before reading a byte of it.
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(max);
    let Ok(_reserved) = app
        .body_budget
        .clone()
        .try_acquire_many_owned(u32::try_from(declared.max(1)).unwrap_or(u32::MAX))
    else {
        app.metrics
            .ingest_refused
            .with_label_values(&["inflight_body_bytes"])
            .inc();
        return (
            "overload",
            with_retry_after(error(StatusCode::SERVICE_UNAVAILABLE, "overload", None), 1),
        );
    };
    let body = match read_body(body, max, Duration::from_millis(cfg.http.body_timeout_ms)).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return refuse(
                app,
                "payload_too_large",
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                Some(json!({ "max_body_bytes": max })),
            );
        }
        Err(BodyError::Read(why)) => {
            return refuse(
                app,
                "body_read_failed",
                StatusCode::BAD_REQUEST,
                "body_read_failed",
                Some(json!({ "reason": why })),
            );
        }
    };
    *body_read = true;

    let now = app.clock.now_ms();
    let verification = match verify(app, &source, &parts.headers, &body, now).await {
        Ok(v) => v,
        Err(reason) if source.cfg.on_verify_failure == OnVerifyFailure::Quarantine => {
            let request = pen::Held {
                tenant,
                url_tenant: url_tenant.is_some(),
                path: parts.uri.path().to_string(),
                method: parts.method.as_str().to_string(),
                headers: &parts.headers,
                body,
                now,
                reason,
            };
            return pen::hold(app, &live, &source, request).await;
        }
        Err(_) => {
            return (
                "unauthorized",
                error(StatusCode::UNAUTHORIZED, "invalid_signature", None),
            );
        }
    };

    let limit = cfg
        .rate_limits
        .tenants
        .get(&tenant)
        .or(cfg.rate_limits.default.as_ref());
    if let Some(limit) = limit
        && let Err(wait_ms) = app.limiter.check(&tenant, limit, now.saturating_mul(1000))
    {
        app.metrics.rate_limit_rejected.inc();
        let r = error(StatusCode::TOO_MANY_REQUESTS, "rate_limited", None);
        return ("rate_limited", with_retry_after(r, wait_ms.div_ceil(1000)));
    }

    // A hook accepted despite a failed check never takes (nor carries) a dedupe key: a forged
    // copy must not pre-empt the real event at the consumer.
    let dedupe = match (&source.cfg.dedupe, verification.flagged) {
        (Some(d), false) => dedupe::extract(d, &parts.headers, &body).map(|k| (k, d.ttl_seconds)),
        _ => None,
    };
    let envelope = Envelope {
        id: uuid::Uuid::now_v7(),
        seq: 0,
        received_at: now,
        tenant: tenant.clone(),
        source_id: source.id.clone(),
        headers: stored_headers(&parts.headers),
        content_type: parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(String::from),
        verification,
        dedupe_key: dedupe.as_ref().map(|(k, _)| k.clone()),
        traceparent: trace_header(&parts.headers, "traceparent").filter(|v| valid_traceparent(v)),
        tracestate: trace_header(&parts.headers, "tracestate").filter(|v| v.len() <= 512),
        body,
    };
    let lanes = lanes(&app.metrics, &source, &parts.headers, &envelope.body);
    let record = IngestRecord {
        lanes,
        dedupe: dedupe.map(|(key, ttl)| Dedupe {
            key,
            ttl_ms: ttl.saturating_mul(1000),
            source_wide: url_tenant.is_some() && source.shared() && !source.cfg.trust_url_tenant,
        }),
        envelope,
        sinks: source.sink_types.clone(),
    };
    // The DLQ is over a bound and nothing archived is left to evict: taking more hooks would
    // grow it without end (or make the reaper delete what it must not).
    if app.dlq.is_full() {
        app.metrics
            .ingest_refused
            .with_label_values(&["dlq_full"])
            .inc();
        return (
            "dlq_full",
            with_retry_after(error(StatusCode::SERVICE_UNAVAILABLE, "dlq_full", None), 60),
        );
    }
    let Some(commit) = &app.commit else {
        return (
            "store_unavailable",
            with_retry_after(
                error(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", None),
                5,
            ),
        );
    };
    match commit.commit(record).await {
        Ok(IngestResult::Accepted { id, .. }) => (
            if verification.flagged {
                "flagged"
            } else {
                "accepted"
            },
            (
                StatusCode::CREATED,
                axum::Json(json!({ "status": "accepted", "id": id })),
            )
                .into_response(),
        ),
        Ok(IngestResult::Duplicate { id }) => (
            "duplicate",
            (
                StatusCode::CREATED,
                axum::Json(json!({ "status": "accepted", "id": id, "duplicate": true })),
            )
                .into_response(),
        ),
        Err(CommitError::Overload) | Err(CommitError::Expired) => (
            "overload",
            with_retry_after(error(StatusCode::SERVICE_UNAVAILABLE, "overload", None), 1),
        ),
        Err(CommitError::IntakeUnavailable) => (
            "intake_unavailable",
            with_retry_after(
                error(StatusCode::SERVICE_UNAVAILABLE, "intake_unavailable", None),
                intake_retry_after(app),
            ),
        ),
        Err(CommitError::IntakePending) => (
            "intake_pending",
            with_retry_after(
                error(StatusCode::SERVICE_UNAVAILABLE, "intake_pending", None),
                intake_retry_after(app),
            ),
        ),
        Err(CommitError::StoreUnavailable(_)) => (
            "store_unavailable",
            with_retry_after(
                error(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", None),
                5,
            ),
        ),
    }
}

/// `Retry-After` of the intake refusals (`intake.retry_after_s`).
fn intake_retry_after(app: &App) -> u64 {
    app.intake
        .as_ref()
        .map(|i| u64::from(i.retry_after_s()))
        .unwrap_or(2)
}

/// Bodies at least this large are verified on a blocking thread: an HMAC over megabytes would
/// otherwise hold an async worker (and every connection queued on it) for milliseconds.
const BLOCKING_VERIFY_BYTES: usize = 64 << 10;

/// The hook's verification, or why it failed on a source that does not accept failed hooks
/// (`reject`, `quarantine`): `VerifyFailure::code`.
async fn verify(
    app: &App,
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
            app.metrics
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

/// Per sink index, the ordering lane key of each ordered sink entry (`""`: the keyless lane);
/// empty when the source has no ordered sink.
pub(crate) fn lanes(
    metrics: &Metrics,
    source: &LiveSource,
    headers: &HeaderMap,
    body: &[u8],
) -> Vec<Option<String>> {
    if !source.cfg.sinks.iter().any(|s| s.ordering().0) {
        return Vec::new();
    }
    source
        .cfg
        .sinks
        .iter()
        .map(|s| match s.ordering() {
            (false, _) => None,
            (true, None) => Some(String::new()),
            (true, Some(k)) => Some(dedupe::ordering_key(k, headers, body).unwrap_or_else(|| {
                metrics
                    .dispatch_lane_key_missing
                    .with_label_values(&[s.type_name()])
                    .inc();
                String::new()
            })),
        })
        .collect()
}

/// The first header whose value has a byte outside 0x20..=0x7E and tab (no obs-text).
fn invalid_header(headers: &HeaderMap) -> Option<String> {
    for (name, value) in headers {
        let ok = value
            .as_bytes()
            .iter()
            .all(|&b| b == b'\t' || (0x20..=0x7e).contains(&b));
        let name_ok = name.as_str().bytes().all(|b| (0x21..=0x7e).contains(&b));
        if !ok || !name_ok {
            return Some(name.as_str().to_string());
        }
    }
    None
}

fn stored_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(n, _)| !NOT_STORED.contains(&n.as_str()))
        .filter_map(|(n, v)| {
            v.to_str()
                .ok()
                .map(|v| (n.as_str().to_string(), v.to_string()))
        })
        .collect()
}

fn trace_header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
}

enum BodyError {
    TooLarge,
    Read(&'static str),
}

async fn read_body(body: Body, max: u64, timeout: Duration) -> Result<Bytes, BodyError> {
    let limited = Limited::new(body, max as usize);
    match tokio::time::timeout(timeout, limited.collect()).await {
        Err(_) => Err(BodyError::Read("timeout")),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(BodyError::TooLarge)
            } else {
                Err(BodyError::Read("read_error"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes() {
        let mut h = HeaderMap::new();
        h.insert("x-ok", "plain\tvalue".parse().unwrap());
        assert_eq!(invalid_header(&h), None);
        h.insert(
            "x-bad",
            http::HeaderValue::from_bytes("caf\u{e9}".as_bytes()).unwrap(),
        );
        assert_eq!(invalid_header(&h), Some("x-bad".into()));
    }
}
