//! `GET /health` (the process answers) and `GET /ready` (a synced store write succeeded within
//! the last second and none failed in the last five), on the ingest and admin ports.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::app::App;
use ankusa_core::now_ms;

/// A synced write older than this is refreshed by a probe write.
const PROBE_MAX_AGE_MS: u64 = 1_000;
/// A write failure this recent makes the node unready.
const FAILURE_WINDOW_MS: u64 = 5_000;

pub async fn health(State(app): State<Arc<App>>) -> Response {
    axum::Json(json!({
        "status": "ok",
        "instance": app.config.live().config.node.instance,
        "version": env!("CARGO_PKG_VERSION"),
    }))
    .into_response()
}

pub async fn ready(State(app): State<Arc<App>>) -> Response {
    // `wal.type: dual`: no hook can be acked while the intake log is recovering or down.
    if let Some(i) = &app.intake
        && i.state() != "ready"
    {
        let mut r = (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "status": "unavailable", "intake": i.state() })),
        )
            .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, i.retry_after_s().into());
        return r;
    }
    let (ok, reason) = check_ready(&app).await;
    if ok {
        return axum::Json(json!({ "status": "ready" })).into_response();
    }
    let mut r = (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(json!({ "status": "unavailable", "store": reason })),
    )
        .into_response();
    r.headers_mut().insert(header::RETRY_AFTER, 1.into());
    r
}

/// (ready, reason when not): `write_failed` after a recent failure, `store_unavailable` when
/// the probe write itself fails.
pub async fn check_ready(app: &Arc<App>) -> (bool, &'static str) {
    let health = &app.store.health;
    let now = now_ms();
    let failed_recently = |now: u64| {
        let f = health.last_failure_ms();
        f != 0 && now.saturating_sub(f) < FAILURE_WINDOW_MS
    };
    if failed_recently(now) {
        return (false, "write_failed");
    }
    if now.saturating_sub(health.last_sync_ok_ms()) <= PROBE_MAX_AGE_MS {
        return (true, "");
    }
    let _one_probe = app.probe_lock.lock().await;
    if now_ms().saturating_sub(health.last_sync_ok_ms()) <= PROBE_MAX_AGE_MS {
        return (true, "");
    }
    let store = app.store.clone();
    let probe = tokio::task::spawn_blocking(move || {
        let r = store.probe();
        if r.as_ref().is_err_and(|e| e.is_io()) {
            store.maybe_reopen();
        }
        r
    })
    .await;
    match probe {
        Ok(Ok(())) if !failed_recently(now_ms()) => (true, ""),
        _ => (false, "store_unavailable"),
    }
}
