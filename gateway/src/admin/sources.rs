//! A source's delivery rows: `GET /v1/sources/{id}/deliveries` (its queued and dead rows, from
//! counters) and `POST /v1/sources/{id}/dead_letter` (its queued rows dead-lettered as
//! `source_gone`, a page per call, so a source can be deleted without dropping them). Both are
//! node-wide: a tenant-limited token is refused.
//!
//! It imports the admin state and extractors and `api_error`.

use std::sync::Arc;

use ankusa_api::{DeadLettered, SourceDeliveries};
use ankusa_core::now_ms;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::caller::{DlqRead, DlqWrite, NodeCaller};
use super::params::{Params, limit};
use super::state::{AdminState, MAX_RESUME_POSITIONS, StoredHooks};
use crate::api_error::ApiError;

pub fn router() -> Router<Arc<AdminState>> {
    Router::new()
        .route("/v1/sources/{id}/deliveries", get(source_deliveries))
        .route("/v1/sources/{id}/dead_letter", post(dead_letter_source))
}

async fn source_deliveries(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<DlqRead>,
    _: StoredHooks,
    Path(id): Path<String>,
) -> Result<Json<SourceDeliveries>, ApiError> {
    let counts = s.store(move |store| store.source_counts(&id)).await?;
    Ok(Json(counts))
}

#[derive(Deserialize)]
struct DeadLetterQuery {
    limit: Option<String>,
}

/// Dead-letters the source's queued (not in-flight) deliveries as `source_gone`. Answers what
/// moved and what is still queued.
async fn dead_letter_source(
    State(s): State<Arc<AdminState>>,
    _: NodeCaller<DlqWrite>,
    _: StoredHooks,
    Path(id): Path<String>,
    Params(q): Params<DeadLetterQuery>,
) -> Result<Json<DeadLettered>, ApiError> {
    let limit = limit(&q.limit, 10_000, 100_000)?;
    let reason = format!("source_gone: {id}");
    // Each call reads one page of rows and the next call goes on from there (wrapping to the
    // start once the end is reached), so a caller repeating it until `pending` is 0 neither
    // rescans the whole store per call nor stalls behind other sources' rows.
    let from = s
        .dead_letter_resume
        .lock()
        .ok()
        .and_then(|m| m.get(&id).copied());
    let (moved, more, next) = {
        let sid = id.clone();
        s.store(move |store| {
            store.dead_letter_source(&sid, &reason, now_ms(), limit, from.as_ref())
        })
        .await?
    };
    if let Ok(mut m) = s.dead_letter_resume.lock() {
        match next {
            Some(n) => {
                if m.len() >= MAX_RESUME_POSITIONS && !m.contains_key(&id) {
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
    let counts = s.store(move |store| store.source_counts(&id)).await?;
    Ok(Json(DeadLettered {
        dead_lettered: moved as i64,
        more,
        pending: counts.pending,
        dead: counts.dead,
    }))
}
