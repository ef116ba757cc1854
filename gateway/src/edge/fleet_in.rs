//! The fleet listener's routes (mutual TLS, HTTP/2; `app.rs` binds it): what another pod of
//! the Gateway asks of this one as a key's owner.
//! - `POST /fleet/v1/commit`: a forwarded keyed hook (`fleet::wire`), committed here through
//!   the same stages as a local one (the handover look-up, the DLQ bound, group commit);
//!   answers `{id, duplicate}`, or the refusal a local request would get.
//! - `POST /fleet/v1/lookup`: which hook holds a dedupe key here (the handover's question).
//!
//! The peer proved it holds a certificate of the Gateway's CA; what it sends is still checked
//! like any input: the record must decode, name a source of this pod's config and exactly that
//! source's sink types.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;

use ankusa_store::{IngestResult, Store};

use super::forward::{self, Routed};
use super::state::EdgeState;
use crate::api_error::ApiError;
use crate::fleet::wire::{self, CommitAnswer, LookupAnswer};

/// Room for a forward's envelope and metadata beside the largest body.
const FORWARD_OVERHEAD: usize = 1 << 20;

#[derive(Clone)]
struct FleetState {
    edge: Arc<EdgeState>,
    store: Arc<Store>,
}

pub fn router(edge: Arc<EdgeState>, store: Arc<Store>, max_body_bytes: u64) -> Router {
    let limit = usize::try_from(max_body_bytes)
        .unwrap_or(usize::MAX)
        .saturating_add(FORWARD_OVERHEAD);
    Router::new()
        .route(wire::COMMIT_PATH, post(commit))
        .route(wire::LOOKUP_PATH, post(lookup))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(FleetState { edge, store })
}

async fn commit(State(s): State<FleetState>, body: Bytes) -> Response {
    let edge = &s.edge;
    let received = |outcome: &str| {
        edge.metrics
            .fleet
            .received
            .with_label_values(&[outcome])
            .inc()
    };
    let (sender, rec) = match wire::decode_commit(&body) {
        Ok(r) => r,
        Err(e) => {
            received("invalid");
            tracing::warn!(reason = %e, "a forwarded commit was refused");
            let message = e.to_string();
            return ApiError::InvalidBody { message }.into_response();
        }
    };
    let live = edge.config.live();
    let Some(source) = live.sources.get(&rec.envelope.source_id) else {
        received("invalid");
        tracing::warn!(sender = %sender, "a forwarded commit names a source this pod's config does not have");
        return ApiError::UnknownSource.into_response();
    };
    if source.sink_types != rec.sinks
        || (!rec.lanes.is_empty() && rec.lanes.len() != rec.sinks.len())
        || rec
            .skip_sinks
            .iter()
            .any(|&i| usize::from(i) >= rec.sinks.len())
        || rec.envelope.body.len() as u64 > live.config.http.max_body_bytes
        || !ankusa_config::valid_id(&rec.envelope.tenant)
    {
        received("invalid");
        tracing::warn!(sender = %sender, source = %source.id, "a forwarded commit does not match this pod's config of its source");
        let message = "the forward does not match this pod's config of its source".to_string();
        return ApiError::InvalidBody { message }.into_response();
    }
    let routed = match forward::consult(edge, &live, &rec).await {
        Ok(r) => r,
        Err(refused) => {
            received("refused");
            return refused.error.into_response();
        }
    };
    let result = match routed {
        Routed::Answered(r) => Ok(r),
        Routed::Here => super::accept::commit(edge, &live, rec).await,
    };
    match result {
        Ok(IngestResult::Accepted { id, .. }) => {
            received("accepted");
            axum::Json(CommitAnswer {
                id,
                duplicate: false,
            })
            .into_response()
        }
        Ok(IngestResult::Duplicate { id }) => {
            received("duplicate");
            axum::Json(CommitAnswer {
                id,
                duplicate: true,
            })
            .into_response()
        }
        Err(refused) => {
            received("refused");
            refused.error.into_response()
        }
    }
}

async fn lookup(State(s): State<FleetState>, body: Bytes) -> Response {
    let Ok(q) = serde_json::from_slice::<wire::Lookup>(&body) else {
        let message = "the lookup is not the expected JSON".to_string();
        return ApiError::InvalidBody { message }.into_response();
    };
    let Some(dkey) = q.record().dedupe_key() else {
        return ApiError::InvalidBody {
            message: "the lookup names no key".into(),
        }
        .into_response();
    };
    let now = s.edge.clock.now_ms();
    let store = s.store.clone();
    let found = tokio::task::spawn_blocking(move || store.dedupe_holder(&dkey, now)).await;
    match found {
        Ok(Ok(id)) => axum::Json(LookupAnswer { id }).into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(_) => ApiError::StoreWriteFailed.into_response(),
    }
}
