//! `GET /v1/archive/hooks/{id}`: one archived hook read back from the blob store (a ranged GET
//! checked against its catalogued sha256), body as base64. `404 archive_not_configured`
//! without `storage`, `404 hook_not_archived`, `500 archive_corrupt`, `503 archive_unavailable`.
//!
//! A tenant-limited token's access is decided from the store's catalogue entry, before any
//! read of the blob store: it learns nothing of another tenant's hook, not even by the time or
//! the error of a read. An entry written before tenants were catalogued has none, and only a
//! token that sees every tenant reads it.
//!
//! It imports the admin state and extractors, `api_error` and the archive's error.

use std::sync::Arc;

use ankusa_api::ArchivedHook;
use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use sha2::Digest;

use super::caller::{Caller, HooksRead};
use super::hooks::hook_id;
use super::state::{AdminState, StoredHooks};
use crate::api_error::ApiError;
use crate::archive::ArchiveError;

pub fn router() -> Router<Arc<AdminState>> {
    Router::new().route("/v1/archive/hooks/{id}", get(get_archived_hook))
}

async fn get_archived_hook(
    State(s): State<Arc<AdminState>>,
    caller: Caller<HooksRead>,
    _: StoredHooks,
    Path(id): Path<String>,
) -> Result<Json<ArchivedHook>, ApiError> {
    let id = hook_id(&id)?;
    let archive = s.archive.as_ref().ok_or(ApiError::ArchiveNotConfigured)?;
    let found = archive.lookup(&id).await.map_err(|e| {
        tracing::warn!(hook = %id, error = %e, "archive catalogue read failed");
        ApiError::ArchiveUnavailable
    })?;
    let found = found
        .filter(|f| caller.sees(f.entry.tenant.as_deref()))
        .ok_or(ApiError::HookNotArchived)?;
    let (h, seg) = archive.read_hook(found).await.map_err(|e| match e {
        ArchiveError::Corrupt(why) => {
            tracing::error!(hook = %id, error = %why, "an archived record failed its sha256 check");
            ApiError::ArchiveCorrupt
        }
        e => {
            tracing::warn!(hook = %id, error = %e, "archive read failed");
            ApiError::ArchiveUnavailable
        }
    })?;
    if !caller.sees(Some(&h.tenant)) {
        return Err(ApiError::HookNotArchived);
    }
    Ok(Json(ArchivedHook {
        id: h.id,
        seq: h.seq,
        tenant: h.tenant,
        source_id: h.source_id,
        received_at: h.received_at,
        size: h.body.len() as u64,
        content_type: h.content_type,
        dedupe_key: h.dedupe_key,
        segment: seg.key,
        body_sha256: hex::encode(sha2::Sha256::digest(&h.body)),
        body_base64: base64::engine::general_purpose::STANDARD.encode(&h.body),
    }))
}
