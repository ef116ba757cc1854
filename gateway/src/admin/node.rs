//! The node's own routes: `GET /metrics` (scope `metrics:read`), `GET /v1/status`,
//! `GET|PUT /v1/config`, `POST /v1/config/reload`, `GET /v1/wal`, `GET /v1/store/corrupt` and
//! `GET /asyncapi.json`.
//! All are node-wide (`NodeCaller`): a tenant-limited token is refused.
//!
//! It imports the admin state and extractors, `api_error`, and the status types of the
//! subsystems it reports on (through the state's handles).

use std::sync::Arc;

use ankusa_api::{CorruptRow, CorruptRows, DeliveryCounts, ReloadReply, Status, WalStatus};
use ankusa_config::ConfigError;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::caller::{ConfigRead, ConfigWrite, MetricsRead, NodeCaller};
use super::params::{Params, limit};
use super::state::{AdminState, StoredHooks};
use crate::api_error::ApiError;

type AdminResult<T> = Result<Json<T>, ApiError>;

pub fn router() -> Router<Arc<AdminState>> {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/v1/status", get(status))
        .route("/v1/config", get(get_config).put(put_config))
        .route("/v1/config/reload", post(reload_config))
        .route("/v1/wal", get(wal))
        .route("/v1/store/corrupt", get(corrupt_rows))
        .route("/asyncapi.json", get(asyncapi))
}

/// The AsyncAPI 3.0 document of what this node publishes (`crate::asyncapi`).
async fn asyncapi(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<ConfigRead>,
) -> Json<serde_json::Value> {
    Json(crate::asyncapi::document(&s.config.live().config))
}

async fn metrics(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<MetricsRead>,
) -> impl IntoResponse {
    // Set here too: a reload of the file (app.rs) does not pass through `reloaded`.
    set_restart_gauge(&s);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.scrape.render().await,
    )
}

async fn status(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<ConfigRead>,
) -> AdminResult<Status> {
    let mut st = s.config.status();
    if let Some(h) = &s.sink_health {
        st.failing_sinks = h.snapshot(&s.config.live());
    }
    let max_bytes = s.config.live().config.quarantine.max_bytes;
    let (pen, archive, dlq) = {
        let (p, a, d) = (s.pen.clone(), s.archive.clone(), s.dlq.clone());
        s.store(move |store| {
            Ok((
                crate::quarantine::status(store, &p, max_bytes)?,
                a.as_ref().map(|x| x.status()),
                d.status(),
            ))
        })
        .await?
    };
    st.quarantine = Some(pen);
    st.archive = archive;
    st.dlq = Some(dlq);
    st.backup = s.backup.as_ref().map(|b| b.status());
    st.intake = s.intake.as_ref().map(|i| i.status());
    Ok(Json(st))
}

async fn get_config(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<ConfigRead>,
) -> Json<serde_json::Value> {
    Json(ankusa_config::redacted_json(&s.config.live().config))
}

/// Installs a config sent as YAML (the operator pushes what it rendered, so a pod need not
/// wait for the kubelet to refresh its mounted Secret). The file, when there is one, is not
/// rewritten; the next change of the file reloads from it.
async fn put_config(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<ConfigWrite>,
    body: String,
) -> AdminResult<ReloadReply> {
    // Without tokens every local process is an admin; letting any of them replace the
    // configuration (sources, secrets, sinks) is more than a loopback-only API should grant.
    if s.config.live().config.admin.tokens.is_empty() {
        return Err(ApiError::TokenRequired {
            message: "PUT /v1/config needs admin.tokens to be configured",
        });
    }
    let r = s.config.reload_from_text(&body).await;
    reloaded(&s, r)
}

async fn reload_config(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<ConfigWrite>,
) -> AdminResult<ReloadReply> {
    let r = s.config.reload_from_file().await;
    reloaded(&s, r)
}

/// The answer to a push or reload, counted in `ankusa_config_reloads_total`.
fn reloaded(s: &AdminState, r: Result<bool, ConfigError>) -> AdminResult<ReloadReply> {
    let m = &s.metrics;
    match r {
        Ok(changed) => {
            if changed {
                m.config.reloads.with_label_values(&["ok"]).inc();
                m.config.generation.set(s.config.live().generation as i64);
            }
            set_restart_gauge(s);
            let st = s.config.status();
            Ok(Json(ReloadReply {
                changed,
                config_hash: st.config_hash,
                generation: st.generation,
                restart_required: st.restart_required,
            }))
        }
        Err(e) => {
            m.config.reloads.with_label_values(&["error"]).inc();
            if e.message
                .starts_with(ankusa_config::RETRY_EXCEEDS_CLAIM_EXPIRY)
            {
                return Err(ApiError::RetryExceedsClaimExpiry {
                    field: e.field,
                    message: e.message,
                });
            }
            Err(ApiError::InvalidConfig {
                field: e.field,
                message: e.message,
            })
        }
    }
}

/// `ankusa_config_restart_required`: 1 while `restart_required` is not empty.
fn set_restart_gauge(s: &AdminState) {
    let pending = !s.config.restart_required().is_empty();
    s.metrics.config.restart_required.set(i64::from(pending));
}

async fn wal(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<ConfigRead>,
    _: StoredHooks,
) -> AdminResult<WalStatus> {
    let intake = s.intake.as_ref().map(|i| i.status());
    let wal = s
        .store(move |store| {
            let t = store.totals()?;
            Ok(WalStatus {
                next_seq: store.next_seq(),
                hooks: t.hooks,
                hook_bytes: t.hook_bytes,
                deliveries: DeliveryCounts {
                    pending: t.pending,
                    dead: t.dead,
                },
                disk_bytes: store.disk_bytes(),
                last_sync_ok_ms: store.health.last_sync_ok_ms(),
                last_failure_ms: store.health.last_failure_ms(),
                last_failure_class: store.health.last_failure_class().map(String::from),
                path: store.path().display().to_string(),
                intake,
            })
        })
        .await?;
    Ok(Json(wal))
}

#[derive(Deserialize)]
struct CorruptQuery {
    limit: Option<String>,
}

/// Rows that did not decode and were set aside (key, error, size; not the bytes).
async fn corrupt_rows(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<ConfigRead>,
    Params(q): Params<CorruptQuery>,
) -> AdminResult<CorruptRows> {
    let limit = limit(&q.limit, 100, 10_000)?;
    let (total, rows) = s
        .store(move |store| Ok((store.corrupt_count()?, store.corrupt_rows(limit)?)))
        .await?;
    let rows = rows
        .into_iter()
        .map(|r| CorruptRow {
            family: r.family,
            key: r.key,
            at: r.at,
            error: r.error,
            size: r.size,
        })
        .collect();
    Ok(Json(CorruptRows { total, rows }))
}
