//! `GET /v1/hooks/{id}`: one stored hook and its delivery rows, without the body. A hook is
//! deleted once delivered everywhere, so a delivered hook is `404 hook_not_found`, as is
//! another tenant's for a tenant-limited token.
//!
//! It imports the admin state and extractors and `api_error`.

use std::sync::Arc;

use ankusa_api::{DeliveryView, HookVerification, HookView};
use ankusa_core::Envelope;
use ankusa_store::{DeliveryRow, RowState};
use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};

use super::caller::{Caller, HooksRead};
use super::state::{AdminState, StoredHooks};
use crate::api_error::ApiError;

pub fn router() -> Router<Arc<AdminState>> {
    Router::new().route("/v1/hooks/{id}", get(get_hook))
}

/// A path's hook id; `400 invalid_id` when it is not a UUID.
pub fn hook_id(id: &str) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::parse_str(id).map_err(|_| ApiError::InvalidId)
}

async fn get_hook(
    State(s): State<Arc<AdminState>>,
    caller: Caller<HooksRead>,
    _: StoredHooks,
    Path(id): Path<String>,
) -> Result<Json<HookView>, ApiError> {
    let id = hook_id(&id)?;
    let found = s
        .store(move |store| match store.get_hook_by_id(&id)? {
            Some(h) => {
                let rows = store.rows_of(h.seq)?;
                Ok(Some((h, rows)))
            }
            None => Ok(None),
        })
        .await?;
    match found {
        Some((h, rows)) if caller.sees(Some(&h.tenant)) => Ok(Json(view(h, rows))),
        _ => Err(ApiError::HookNotFound),
    }
}

fn view(h: Envelope, rows: Vec<(u16, DeliveryRow)>) -> HookView {
    let deliveries = rows
        .into_iter()
        .map(|(sink, r)| DeliveryView {
            state: row_state(&r),
            sink,
            sink_type: r.sink_type,
            attempts: r.attempts,
            due_at: r.due_at,
            first_attempt_at: r.first_attempt_at,
            last_error: r.last_error,
            error_class: r.error_class,
            dead_at: r.dead_at,
            replay_id: r.replay_id,
        })
        .collect();
    HookView {
        idempotency_key: h.idempotency_key(),
        id: h.id,
        seq: h.seq,
        tenant: h.tenant,
        source_id: h.source_id,
        received_at: h.received_at,
        size: h.body.len() as u64,
        content_type: h.content_type,
        verification: HookVerification {
            status: h.verification.status.as_str().to_string(),
            flagged: h.verification.flagged,
        },
        dedupe_key: h.dedupe_key,
        deliveries,
    }
}

/// The row's state as the store writes it.
fn row_state(r: &DeliveryRow) -> String {
    match r.state {
        RowState::Pending => "pending",
        RowState::Inflight => "inflight",
        RowState::Dead => "dead",
    }
    .to_string()
}
