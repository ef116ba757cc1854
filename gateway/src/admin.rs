//! The admin API (default `127.0.0.1:4002`).
//!
//! `/health`, `/ready` and `/metrics` are open; every `/v1` route needs a bearer token with
//! the route's scope when `admin.tokens` is set (the config refuses an open admin API off
//! loopback). A token holding `tenant:<id>` scopes (and not `tenant:*` or `*`) sees and acts on
//! those tenants' dead letters, jobs and hooks only: another tenant's job is `404`, naming
//! another tenant is `403`. Node-wide routes (status, config, wal, a source's deliveries) need
//! a token that is not tenant-limited.

// Handlers return `Result<_, Response>`: the error is the HTTP answer, built once per refused
// request, so boxing it would only add an allocation.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use ankusa_api::{
    CreateReplay, DeadFilter, DeadLettered, FieldError, JobList, PatchReplay, ReloadReply,
};
use ankusa_core::now_ms;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::app::App;
use crate::edge::error;
use crate::replay::ReplayError;
use crate::store::{DeadCursor, ErrorClass, StoreError};

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/health", get(crate::probes::health))
        .route("/ready", get(crate::probes::ready))
        .route("/metrics", get(metrics))
        .route("/v1/status", get(status))
        .route("/v1/config", get(get_config).put(put_config))
        .route("/v1/store/corrupt", get(corrupt_rows))
        .route("/v1/config/reload", post(reload_config))
        .route("/v1/wal", get(wal))
        .route("/v1/hooks/{id}", get(get_hook))
        .route("/v1/archive/hooks/{id}", get(get_archived_hook))
        .route("/v1/dlq", get(list_dlq).delete(delete_dlq))
        .route("/v1/replays", get(list_replays).post(create_replay))
        .route("/v1/replays/{id}", get(get_replay).patch(patch_replay))
        .route("/v1/sources/{id}/deliveries", get(source_deliveries))
        .route("/v1/sources/{id}/dead_letter", post(dead_letter_source))
        .route(
            "/v1/quarantine",
            get(list_quarantine).delete(purge_quarantine),
        )
        .with_state(app)
}

/// The tenants a caller may act on.
#[derive(Debug, Clone, PartialEq)]
enum Tenants {
    All,
    Only(Vec<String>),
}

struct Caller {
    scopes: Vec<String>,
}

impl Caller {
    fn has(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == "*" || s == scope)
    }

    fn tenants(&self) -> Tenants {
        if self.scopes.iter().any(|s| s == "*" || s == "tenant:*") {
            return Tenants::All;
        }
        let only: Vec<String> = self
            .scopes
            .iter()
            .filter_map(|s| s.strip_prefix("tenant:"))
            .map(String::from)
            .collect();
        if only.is_empty() {
            Tenants::All
        } else {
            Tenants::Only(only)
        }
    }

    /// The tenant a tenant-filtered request acts on: the one it names (if allowed), or a
    /// limited token's only tenant.
    fn resolve_tenant(&self, named: Option<String>) -> Result<Option<String>, Response> {
        match (self.tenants(), named) {
            (Tenants::All, named) => Ok(named),
            (Tenants::Only(list), Some(t)) if list.contains(&t) => Ok(Some(t)),
            (Tenants::Only(_), Some(t)) => Err(error(
                StatusCode::FORBIDDEN,
                "forbidden",
                Some(json!({ "scope": format!("tenant:{t}") })),
            )),
            (Tenants::Only(list), None) if list.len() == 1 => Ok(Some(list[0].clone())),
            (Tenants::Only(_), None) => Err(error(
                StatusCode::BAD_REQUEST,
                "invalid_filter",
                Some(
                    json!({ "field": "tenant", "message": "this token holds several tenants: name one" }),
                ),
            )),
        }
    }

    fn sees_tenant(&self, tenant: Option<&str>) -> bool {
        match self.tenants() {
            Tenants::All => true,
            Tenants::Only(list) => tenant.is_some_and(|t| list.iter().any(|x| x == t)),
        }
    }
}

/// Authenticates the request and checks `scope`.
fn authorize(app: &App, headers: &HeaderMap, scope: &str) -> Result<Caller, Response> {
    let tokens = &app.config.live().config.admin.tokens;
    if tokens.is_empty() {
        return Ok(Caller {
            scopes: vec!["*".into()],
        });
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(presented) = presented else {
        return Err(error(StatusCode::UNAUTHORIZED, "unauthorized", None));
    };
    let found = tokens.iter().find(|t| {
        use subtle::ConstantTimeEq;
        t.token.len() == presented.len()
            && bool::from(t.token.as_bytes().ct_eq(presented.as_bytes()))
    });
    let Some(token) = found else {
        return Err(error(StatusCode::UNAUTHORIZED, "unauthorized", None));
    };
    let caller = Caller {
        scopes: token.scopes.clone(),
    };
    if !caller.has(scope) {
        return Err(error(
            StatusCode::FORBIDDEN,
            "forbidden",
            Some(json!({ "scope": scope })),
        ));
    }
    Ok(caller)
}

/// `authorize`, for a route about the whole node rather than some tenants' data.
fn authorize_node(app: &App, headers: &HeaderMap, scope: &str) -> Result<Caller, Response> {
    let caller = authorize(app, headers, scope)?;
    if caller.tenants() != Tenants::All {
        return Err(error(
            StatusCode::FORBIDDEN,
            "forbidden",
            Some(json!({ "scope": "tenant:*" })),
        ));
    }
    Ok(caller)
}

/// The answer names the failure's class only: RocksDB's messages carry file paths, and the
/// log has the whole error.
fn store_error(e: StoreError) -> Response {
    tracing::warn!(error = %e, "admin request failed in the store");
    let mut r = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        Some(json!({ "class": e.class() })),
    );
    r.headers_mut().insert(header::RETRY_AFTER, 1.into());
    r
}

/// Runs a store call on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(store_error(e)),
        Err(e) => Err(store_error(StoreError::Unavailable {
            class: "other",
            message: e.to_string(),
        })),
    }
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(r) => return r,
        }
    };
}

/// Counters kept elsewhere (the store's, the sinks') are copied into their series here, so
/// they are current whenever they are scraped.
async fn metrics(State(app): State<Arc<App>>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    let store = app.store.clone();
    // A counter that cannot be read shows as 0 rather than failing the scrape.
    let (totals, disk, corrupt) = tokio::task::spawn_blocking(move || {
        (
            store.totals().unwrap_or_default(),
            store.disk_bytes(),
            store.corrupt_count().unwrap_or(0),
        )
    })
    .await
    .unwrap_or_default();
    let m = &app.metrics;
    m.store_hooks.set(totals.hooks);
    m.store_hook_bytes.set(totals.hook_bytes);
    m.queue_pending.set(totals.pending);
    m.queue_dead.set(totals.dead);
    m.store_disk_bytes.set(disk as i64);
    let c = &m.store_corrupt_rows;
    c.inc_by((corrupt.max(0) as u64).saturating_sub(c.get()));
    if let Some(c) = &app.commit {
        m.commit_queued.set(c.queued() as i64);
    }
    crate::quarantine::gauges(&app);
    if let Some(b) = &app.backup {
        b.gauges();
    }
    {
        let a = app.clone();
        let _ = tokio::task::spawn_blocking(move || {
            a.dlq.status();
            if let Some(x) = &a.archive {
                x.gauges();
            }
        })
        .await;
    }
    for (class, n) in app.store.health.failures() {
        let c = m.store_write_failures.with_label_values(&[class]);
        c.inc_by(n.saturating_sub(c.get()));
    }
    let bump = |c: prometheus::IntCounter, v: u64| c.inc_by(v.saturating_sub(c.get()));
    let sinks = app.config.sinks();
    let pools = sinks.pools();
    m.http_pools.set(pools.len() as i64);
    let ps = pools.stats();
    for (counter, label, v) in [
        (&m.http_pool_closed, "idle", &ps.closed_idle),
        (&m.http_pool_closed, "lru", &ps.closed_lru),
        (&m.http_pool_refused, "tenant", &ps.refused_tenant),
        (&m.http_pool_refused, "instance", &ps.refused_instance),
    ] {
        bump(counter.with_label_values(&[label]), v.load(Relaxed));
    }
    for (sink, st) in [
        ("sqs", &sinks.sqs_stats),
        ("google_pubsub", &sinks.pubsub_stats),
    ] {
        bump(
            m.sink_batch_requests.with_label_values(&[sink]),
            st.requests.load(Relaxed),
        );
        bump(
            m.sink_batch_entries.with_label_values(&[sink]),
            st.entries.load(Relaxed),
        );
        bump(
            m.sink_batch_bisections.with_label_values(&[sink]),
            st.bisections.load(Relaxed),
        );
        bump(
            m.sink_batch_refused.with_label_values(&[sink, "entries"]),
            st.refused_entries.load(Relaxed),
        );
        bump(
            m.sink_batch_refused.with_label_values(&[sink, "bytes"]),
            st.refused_bytes.load(Relaxed),
        );
        bump(
            m.sink_batch_refused.with_label_values(&[sink, "tenant"]),
            st.refused_tenant.load(Relaxed),
        );
    }
    let (ok, failed) = app.store.health.reopens();
    let c = m.store_reopen.with_label_values(&["ok"]);
    c.inc_by(ok.saturating_sub(c.get()));
    let c = m.store_reopen.with_label_values(&["error"]);
    c.inc_by(failed.saturating_sub(c.get()));
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        m.render(),
    )
        .into_response()
}

async fn status(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    tri!(authorize_node(&app, &headers, "config:read"));
    let mut st = app.config.status();
    if let Some(d) = &app.dispatcher {
        st.failing_sinks = d.health.snapshot(&app.config.live());
    }
    let a = app.clone();
    let (pen, archive, dlq) = tri!(
        blocking(move || Ok((
            crate::quarantine::status(&a)?,
            a.archive.as_ref().map(|x| x.status()),
            a.dlq.status(),
        )))
        .await
    );
    st.quarantine = Some(pen);
    st.archive = archive;
    st.dlq = Some(dlq);
    st.backup = app.backup.as_ref().map(|b| b.status());
    st.intake = app.intake.as_ref().map(|i| i.status());
    Json(st).into_response()
}

/// `GET /v1/archive/hooks/{id}`: one archived hook read back from the blob store (a ranged GET
/// checked against its catalogued sha256), body as base64.
async fn get_archived_hook(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    use base64::Engine;
    let caller = tri!(authorize(&app, &headers, "hooks:read"));
    let Ok(id) = uuid::Uuid::parse_str(&id) else {
        return error(StatusCode::BAD_REQUEST, "invalid_id", None);
    };
    let Some(archive) = &app.archive else {
        return error(StatusCode::NOT_FOUND, "archive_not_configured", None);
    };
    // The tenant check comes from the catalogue entry, before any read of the blob store: a
    // tenant-limited token learns nothing of another tenant's hook, not even by the time or
    // the error of a read. An entry written before tenants were catalogued has none, and
    // only a token that sees every tenant reads it.
    let found = match archive.lookup(&id).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(hook = %id, error = %e, "archive catalogue read failed");
            return error(StatusCode::SERVICE_UNAVAILABLE, "archive_unavailable", None);
        }
    };
    let Some(found) = found.filter(|f| caller.sees_tenant(f.entry.tenant.as_deref())) else {
        return error(StatusCode::NOT_FOUND, "hook_not_archived", None);
    };
    let (h, seg) = match archive.read_hook(found).await {
        Ok(found) => found,
        Err(crate::archive::ArchiveError::Corrupt(why)) => {
            tracing::error!(hook = %id, error = %why, "an archived record failed its sha256 check");
            return error(StatusCode::INTERNAL_SERVER_ERROR, "archive_corrupt", None);
        }
        Err(e) => {
            tracing::warn!(hook = %id, error = %e, "archive read failed");
            return error(StatusCode::SERVICE_UNAVAILABLE, "archive_unavailable", None);
        }
    };
    if !caller.sees_tenant(Some(&h.tenant)) {
        return error(StatusCode::NOT_FOUND, "hook_not_archived", None);
    }
    use sha2::Digest;
    Json(json!({
        "id": h.id, "seq": h.seq, "tenant": h.tenant, "source_id": h.source_id,
        "received_at": h.received_at, "size": h.body.len(), "content_type": h.content_type,
        "dedupe_key": h.dedupe_key, "segment": seg.key,
        "body_sha256": hex::encode(sha2::Sha256::digest(&h.body)),
        "body_base64": base64::engine::general_purpose::STANDARD.encode(&h.body),
    }))
    .into_response()
}

async fn get_config(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    tri!(authorize_node(&app, &headers, "config:read"));
    Json(ankusa_config::redacted_json(&app.config.live().config)).into_response()
}

fn reload_result(app: &App, r: Result<bool, ankusa_config::ConfigError>) -> Response {
    match r {
        Ok(changed) => {
            if changed {
                app.metrics.config_reloads.with_label_values(&["ok"]).inc();
                app.metrics
                    .config_generation
                    .set(app.config.live().generation as i64);
            }
            let st = app.config.status();
            Json(ReloadReply {
                changed,
                config_hash: st.config_hash,
                generation: st.generation,
                restart_required: st.restart_required,
            })
            .into_response()
        }
        Err(e) => {
            app.metrics
                .config_reloads
                .with_label_values(&["error"])
                .inc();
            let body = FieldError {
                error: "invalid_config".into(),
                field: e.field,
                message: e.message,
            };
            (StatusCode::BAD_REQUEST, Json(body)).into_response()
        }
    }
}

/// Installs a config sent as YAML (the operator pushes what it rendered, so a pod need not
/// wait for the kubelet to refresh its mounted Secret). The file, when there is one, is not
/// rewritten; the next change of the file reloads from it.
async fn put_config(State(app): State<Arc<App>>, headers: HeaderMap, body: String) -> Response {
    // Without tokens every local process is an admin; letting any of them replace the
    // configuration (sources, secrets, sinks) is more than a loopback-only API should grant.
    if app.config.live().config.admin.tokens.is_empty() {
        return error(
            StatusCode::FORBIDDEN,
            "token_required",
            Some(json!({ "message": "PUT /v1/config needs admin.tokens to be configured" })),
        );
    }
    tri!(authorize_node(&app, &headers, "config:write"));
    let r = app.config.reload_from_text(&body).await;
    reload_result(&app, r)
}

async fn reload_config(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    tri!(authorize_node(&app, &headers, "config:write"));
    let r = app.config.reload_from_file().await;
    reload_result(&app, r)
}

#[derive(Deserialize, Default)]
struct CorruptQuery {
    limit: Option<String>,
}

/// Rows that did not decode and were set aside (key, error, size; not the bytes).
async fn corrupt_rows(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<CorruptQuery>,
) -> Response {
    tri!(authorize_node(&app, &headers, "config:read"));
    let limit: usize = tri!(parse_num("limit", &q.limit)).unwrap_or(100);
    if limit == 0 || limit > 10_000 {
        return bad_filter("limit", "must be 1..=10000");
    }
    let store = app.store.clone();
    let (total, rows) =
        tri!(blocking(move || Ok((store.corrupt_count()?, store.corrupt_rows(limit)?))).await);
    Json(json!({ "total": total, "rows": rows })).into_response()
}

async fn wal(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    tri!(authorize_node(&app, &headers, "config:read"));
    let store = app.store.clone();
    let intake = app.intake.as_ref().map(|i| i.status());
    let v = tri!(
        blocking(move || {
            let t = store.totals()?;
            Ok(json!({
                "next_seq": store.next_seq(),
                "hooks": t.hooks,
                "hook_bytes": t.hook_bytes,
                "deliveries": { "pending": t.pending, "dead": t.dead },
                "disk_bytes": store.disk_bytes(),
                "last_sync_ok_ms": store.health.last_sync_ok_ms(),
                "last_failure_ms": store.health.last_failure_ms(),
                "last_failure_class": store.health.last_failure_class(),
                "path": store.path().display().to_string(),
                "intake": intake,
            }))
        })
        .await
    );
    Json(v).into_response()
}

/// One stored hook and its delivery rows (no body): `404` once delivered everywhere.
async fn get_hook(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let caller = tri!(authorize(&app, &headers, "hooks:read"));
    let Ok(id) = uuid::Uuid::parse_str(&id) else {
        return error(StatusCode::BAD_REQUEST, "invalid_id", None);
    };
    let store = app.store.clone();
    let found = tri!(
        blocking(move || match store.get_hook_by_id(&id)? {
            Some(h) => {
                let rows = store.rows_of(h.seq)?;
                Ok(Some((h, rows)))
            }
            None => Ok(None),
        })
        .await
    );
    let Some((h, rows)) = found else {
        return error(StatusCode::NOT_FOUND, "hook_not_found", None);
    };
    if !caller.sees_tenant(Some(&h.tenant)) {
        return error(StatusCode::NOT_FOUND, "hook_not_found", None);
    }
    let deliveries: Vec<_> = rows
        .iter()
        .map(|(sink, r)| {
            json!({
                "sink": sink, "type": r.sink_type, "state": r.state, "attempts": r.attempts,
                "due_at": r.due_at, "first_attempt_at": r.first_attempt_at, "last_error": r.last_error,
                "error_class": r.error_class, "dead_at": r.dead_at, "replay_id": r.replay_id,
            })
        })
        .collect();
    Json(json!({
        "id": h.id, "seq": h.seq, "tenant": h.tenant, "source_id": h.source_id,
        "received_at": h.received_at, "size": h.body.len(), "content_type": h.content_type,
        "verification": h.verification, "dedupe_key": h.dedupe_key,
        "idempotency_key": h.idempotency_key(), "deliveries": deliveries,
    }))
    .into_response()
}

/// `GET|DELETE /v1/dlq` parameters: the filter as text, so a bad value is `invalid_filter`
/// naming it (see `DlqQuery::filter`).
#[derive(Debug, Deserialize, Default)]
struct DlqQuery {
    tenant: Option<String>,
    source_id: Option<String>,
    sink: Option<String>,
    error_class: Option<String>,
    since: Option<String>,
    until: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

fn bad_filter(field: &str, message: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "invalid_filter",
        Some(json!({ "field": field, "message": message })),
    )
}

fn parse_num<T: std::str::FromStr>(field: &str, v: &Option<String>) -> Result<Option<T>, Response> {
    match v {
        None => Ok(None),
        Some(s) => s
            .parse()
            .map(Some)
            .map_err(|_| bad_filter(field, "must be a non-negative integer")),
    }
}

fn dead_filter(q: &DlqQuery, caller: &Caller) -> Result<DeadFilter, Response> {
    if let Some(t) = &q.tenant
        && let Err(e) = DeadFilter::check_tenant(t)
    {
        return Err(bad_filter(e.field, &e.message));
    }
    let error_class = match &q.error_class {
        None => None,
        Some(c) => Some(ErrorClass::parse(c).ok_or_else(|| {
            bad_filter("error_class", "must be permanent, throttled or transient")
        })?),
    };
    Ok(DeadFilter {
        tenant: caller.resolve_tenant(q.tenant.clone())?,
        source_id: q.source_id.clone(),
        id: None,
        sink: parse_num("sink", &q.sink)?,
        error_class,
        since: parse_num("since", &q.since)?,
        until: parse_num("until", &q.until)?,
    })
}

async fn list_dlq(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<DlqQuery>,
) -> Response {
    let caller = tri!(authorize(&app, &headers, "dlq:read"));
    let filter = tri!(dead_filter(&q, &caller));
    let limit: usize = tri!(parse_num("limit", &q.limit)).unwrap_or(100);
    if limit == 0 || limit > 1000 {
        return bad_filter("limit", "must be 1..=1000");
    }
    let cursor = match &q.cursor {
        None => None,
        Some(c) => match DeadCursor::decode(c) {
            Some(c) => Some(c),
            None => return bad_filter("cursor", "is not a cursor this API returned"),
        },
    };
    let store = app.store.clone();
    let page = tri!(blocking(move || store.list_dead(&filter, cursor, limit)).await);
    Json(page).into_response()
}

async fn delete_dlq(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<DlqQuery>,
) -> Response {
    let caller = tri!(authorize(&app, &headers, "dlq:write"));
    let filter = tri!(dead_filter(&q, &caller));
    let limit: usize = tri!(parse_num("limit", &q.limit)).unwrap_or(1000);
    if limit == 0 || limit > 10_000 {
        return bad_filter("limit", "must be 1..=10000");
    }
    let store = app.store.clone();
    let deleted = tri!(blocking(move || store.delete_dead(&filter, limit)).await);
    Json(deleted).into_response()
}

/// A JSON request body; `400 invalid_body` when it is not one (unknown keys included).
fn json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Response> {
    serde_json::from_slice(body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            Some(json!({ "message": e.to_string() })),
        )
    })
}

fn replay_error(e: ReplayError) -> Response {
    match e {
        ReplayError::InvalidFilter { field, message } => bad_filter(field, &message),
        ReplayError::NotFound => error(StatusCode::NOT_FOUND, "replay_not_found", None),
        ReplayError::InvalidState(m) => error(
            StatusCode::BAD_REQUEST,
            "invalid_state",
            Some(json!({ "message": m })),
        ),
        ReplayError::TooManyJobs => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_jobs",
                Some(json!({ "max_live_jobs": crate::replay::MAX_LIVE_JOBS })),
            );
            r.headers_mut().insert(header::RETRY_AFTER, 10.into());
            r
        }
        ReplayError::Store(e) => store_error(e),
    }
}

fn replayer(app: &App) -> Result<&Arc<crate::replay::Replayer>, Response> {
    app.replayer.as_ref().ok_or_else(|| {
        error(
            StatusCode::CONFLICT,
            "role_not_enabled",
            Some(json!({ "role": "dispatch" })),
        )
    })
}

async fn create_replay(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let caller = tri!(authorize(&app, &headers, "replays:write"));
    let r = tri!(replayer(&app));
    let mut req: CreateReplay = tri!(json_body(&body));
    let filter = tri!(req.filter().map_err(|e| replay_error(e.into())));
    let tenant = tri!(caller.resolve_tenant(filter.tenant.clone()));
    if tenant != filter.tenant {
        req = req.with_filter(DeadFilter { tenant, ..filter });
    }
    match r.create(req).await {
        Ok((view, created)) => {
            let status = if created {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            (status, Json(view)).into_response()
        }
        Err(e) => replay_error(e),
    }
}

async fn list_replays(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let caller = tri!(authorize(&app, &headers, "dlq:read"));
    let r = tri!(replayer(&app));
    match r.list().await {
        Ok(jobs) => {
            let jobs: Vec<_> = jobs
                .into_iter()
                .filter(|j| caller.sees_tenant(j.job.filter.tenant.as_deref()))
                .collect();
            Json(JobList { jobs }).into_response()
        }
        Err(e) => replay_error(e),
    }
}

async fn get_replay(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let caller = tri!(authorize(&app, &headers, "dlq:read"));
    let r = tri!(replayer(&app));
    match r.get(&id).await {
        Ok(v) if caller.sees_tenant(v.job.filter.tenant.as_deref()) => Json(v).into_response(),
        Ok(_) => replay_error(ReplayError::NotFound),
        Err(e) => replay_error(e),
    }
}

async fn patch_replay(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let caller = tri!(authorize(&app, &headers, "replays:write"));
    let r = tri!(replayer(&app));
    let req: PatchReplay = tri!(json_body(&body));
    match r.get(&id).await {
        Ok(v) if caller.sees_tenant(v.job.filter.tenant.as_deref()) => {}
        Ok(_) => return replay_error(ReplayError::NotFound),
        Err(e) => return replay_error(e),
    }
    match r.set_state(&id, &req.state).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => replay_error(e),
    }
}

async fn source_deliveries(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    tri!(authorize_node(&app, &headers, "dlq:read"));
    let store = app.store.clone();
    let c = tri!(blocking(move || store.source_counts(&id)).await);
    Json(c).into_response()
}

#[derive(Deserialize, Default)]
struct DeadLetterQuery {
    limit: Option<String>,
}

/// Dead-letters the source's queued (not in-flight) deliveries as `source_gone`, so a source
/// can be deleted without dropping them. Answers what moved and what is still queued.
async fn dead_letter_source(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<DeadLetterQuery>,
) -> Response {
    tri!(authorize_node(&app, &headers, "dlq:write"));
    let limit: usize = tri!(parse_num("limit", &q.limit)).unwrap_or(10_000);
    if limit == 0 || limit > 100_000 {
        return bad_filter("limit", "must be 1..=100000");
    }
    let store = app.store.clone();
    let reason = format!("source_gone: {id}");
    let sid = id.clone();
    // Each call reads one page of rows and the next call goes on from there (wrapping to the
    // start once the end is reached), so a caller repeating it until `pending` is 0 neither
    // rescans the whole store per call nor stalls behind other sources' rows.
    let from = app
        .dead_letter_resume
        .lock()
        .ok()
        .and_then(|m| m.get(&id).copied());
    let (moved, more, next) = tri!(
        blocking(move || store.dead_letter_source(&sid, &reason, now_ms(), limit, from.as_ref()))
            .await
    );
    if let Ok(mut m) = app.dead_letter_resume.lock() {
        match next {
            Some(n) => {
                // Ids come from the URL: keep the map small whatever callers send.
                if m.len() >= 1024 && !m.contains_key(&id) {
                    m.clear();
                }
                m.insert(id.clone(), n);
            }
            None => {
                m.remove(&id);
            }
        }
    }
    // A page that started mid-store has rows before it left to look at.
    let more = more || from.is_some();
    let store = app.store.clone();
    let counts = tri!(blocking(move || store.source_counts(&id)).await);
    Json(DeadLettered {
        dead_lettered: moved as i64,
        more,
        pending: counts.pending,
        dead: counts.dead,
    })
    .into_response()
}

/// `GET|DELETE /v1/quarantine` parameters, as text so a bad value is `invalid_filter` naming it.
#[derive(Debug, Deserialize, Default)]
struct PenQuery {
    tenant: Option<String>,
    source_id: Option<String>,
    id: Option<String>,
    since: Option<String>,
    until: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

/// The pen filter of a request; a tenant-limited token is held to its tenants like a DLQ read.
fn pen_filter(q: &PenQuery, caller: &Caller) -> Result<crate::store::PenFilter, Response> {
    if let Some(t) = &q.tenant
        && let Err(e) = DeadFilter::check_tenant(t)
    {
        return Err(bad_filter(e.field, &e.message));
    }
    let id = match &q.id {
        None => None,
        Some(s) => Some(
            uuid::Uuid::parse_str(s).map_err(|_| bad_filter("id", "must be a hook id (a UUID)"))?,
        ),
    };
    let f = crate::store::PenFilter {
        tenant: caller.resolve_tenant(q.tenant.clone())?,
        source_id: q.source_id.clone(),
        id,
        since: parse_num("since", &q.since)?,
        until: parse_num("until", &q.until)?,
    };
    if let (Some(s), Some(u)) = (f.since, f.until)
        && s > u
    {
        return Err(bad_filter("since", "must not be after until"));
    }
    Ok(f)
}

/// The pen's entries, newest first, without bodies.
async fn list_quarantine(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<PenQuery>,
) -> Response {
    let caller = tri!(authorize(&app, &headers, "dlq:read"));
    let filter = tri!(pen_filter(&q, &caller));
    let limit: usize = tri!(parse_num("limit", &q.limit)).unwrap_or(100);
    if limit == 0 || limit > 1000 {
        return bad_filter("limit", "must be 1..=1000");
    }
    // The cursor is the last summary key the previous page examined: `s`, then 24 bytes.
    let before = match &q.cursor {
        None => None,
        Some(c) => match hex::decode(c) {
            Ok(k) if k.len() == 25 && k[0] == b's' => Some(k),
            _ => return bad_filter("cursor", "must be a next_cursor of a previous page"),
        },
    };
    let whole = filter == crate::store::PenFilter::default();
    let store = app.store.clone();
    let ((entries, next), totals) = tri!(
        blocking(move || Ok((
            store.pen_list_page(&filter, limit, before.as_deref())?,
            store.pen_totals()?
        )))
        .await
    );
    let next_cursor = next.map(hex::encode);
    // The pen's size is node-wide: a tenant-limited caller sees only its entries.
    let (total, bytes) = if whole {
        (json!(totals.0), json!(totals.1))
    } else {
        (serde_json::Value::Null, serde_json::Value::Null)
    };
    Json(json!({ "entries": entries, "total": total, "bytes": bytes, "next_cursor": next_cursor }))
        .into_response()
}

/// Deletes matching entries, oldest first, and frees their bytes against the cap.
async fn purge_quarantine(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<PenQuery>,
) -> Response {
    let caller = tri!(authorize(&app, &headers, "dlq:write"));
    let filter = tri!(pen_filter(&q, &caller));
    let limit: usize = tri!(parse_num("limit", &q.limit)).unwrap_or(1000);
    if limit == 0 || limit > 10_000 {
        return bad_filter("limit", "must be 1..=10000");
    }
    let store = app.store.clone();
    let purged = tri!(blocking(move || store.pen_purge(&filter, limit)).await);
    app.pen.removed(purged);
    if purged.deleted > 0 {
        tracing::info!(
            deleted = purged.deleted,
            bytes = purged.bytes,
            "quarantine purged"
        );
    }
    Json(purged).into_response()
}
