//! `GET /health` (the process answers) and `GET /ready` (every configured listener is bound, a
//! synced store write succeeded within the last second and none failed in the last five), on
//! the ingest and admin ports.
//!
//! Imports the store, the live config and the intake log it reads; `app.rs` builds one
//! `Probes` and both listeners mount its router; a metrics scrape asks it `is_ready` for the
//! `ankusa_ready` gauge.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use ankusa_api::{Health, Ready};
use ankusa_core::now_ms;
use ankusa_store::Store;

use crate::intake::Intake;
use crate::live::ConfigHandle;

/// A synced write older than this is refreshed by a probe write.
const PROBE_MAX_AGE_MS: u64 = 1_000;
/// A write failure this recent makes the node unready.
const FAILURE_WINDOW_MS: u64 = 5_000;

/// What the probes read: the store's write health (and the store for a probe write), the
/// instance name, the intake log's state.
pub struct Probes {
    pub config: Arc<ConfigHandle>,
    pub store: Arc<Store>,
    pub intake: Option<Arc<Intake>>,
    /// One probe write at a time, however many probes arrive.
    pub probe_lock: tokio::sync::Mutex<()>,
    /// The listeners served, set once every configured one is bound: until then the ingest
    /// port may answer while the admin or claim check port still refuses connections.
    pub serving: std::sync::OnceLock<Vec<&'static str>>,
}

impl Probes {
    pub fn new(config: Arc<ConfigHandle>, store: Arc<Store>, intake: Option<Arc<Intake>>) -> Self {
        Probes {
            config,
            store,
            intake,
            probe_lock: tokio::sync::Mutex::new(()),
            serving: std::sync::OnceLock::new(),
        }
    }
}

/// `/health` and `/ready` over one shared `Probes`.
pub fn router(probes: Arc<Probes>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .with_state(probes)
}

async fn health(State(app): State<Arc<Probes>>) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        instance: app.config.live().config.node.instance.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
    })
}

async fn ready(State(app): State<Arc<Probes>>) -> Response {
    match verdict(&app).await {
        Verdict::Ready(listeners) => Json(Ready {
            status: "ready".into(),
            listeners,
            ..Ready::default()
        })
        .into_response(),
        Verdict::Unavailable(body, retry_after_s) => unavailable(body, retry_after_s),
    }
}

impl Probes {
    /// Whether `GET /ready` would answer 200 now: the `ankusa_ready` gauge, read at scrape.
    pub async fn is_ready(&self) -> bool {
        matches!(verdict(self).await, Verdict::Ready(_))
    }
}

/// What `/ready` answers: the listeners served, or the body and `Retry-After` of a 503.
enum Verdict {
    Ready(Vec<String>),
    Unavailable(Ready, u64),
}

async fn verdict(app: &Probes) -> Verdict {
    let Some(serving) = app.serving.get() else {
        let body = Ready {
            status: "starting".into(),
            ..Ready::default()
        };
        return Verdict::Unavailable(body, 1);
    };
    // `wal.type: dual`: no hook can be acked while the intake log is recovering or down.
    if let Some(i) = &app.intake
        && i.state() != "ready"
    {
        let body = Ready {
            status: "unavailable".into(),
            intake: Some(i.state().into()),
            ..Ready::default()
        };
        return Verdict::Unavailable(body, i.retry_after_s().into());
    }
    let (ok, reason) = check_ready(app).await;
    if ok {
        return Verdict::Ready(serving.iter().map(|l| l.to_string()).collect());
    }
    let body = Ready {
        status: "unavailable".into(),
        store: Some(reason.into()),
        ..Ready::default()
    };
    Verdict::Unavailable(body, 1)
}

fn unavailable(body: Ready, retry_after_s: u64) -> Response {
    let mut r = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, retry_after_s.into());
    r
}

/// (ready, reason when not): `write_failed` after a recent failure, `store_unavailable` when
/// the probe write itself fails.
async fn check_ready(app: &Probes) -> (bool, &'static str) {
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
