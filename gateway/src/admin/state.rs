//! The admin listener's state: exactly the parts its routes read or act on, each shared
//! (`Arc`) with the subsystem that owns it. Built once per process; the tokens are not copied
//! here but read from the live config per request (`Caller`), so a reload applies at once.
//!
//! It may import the subsystems whose handles it holds; routes reach them only through it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ankusa_config::AdminToken;
use ankusa_store::{DeadLetterResume, Store, StoreError};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::api_error::ApiError;
use crate::archive::Archive;
use crate::archive::dlq_bounds::DlqGuard;
use crate::backup::Backup;
use crate::dispatch::health::SinkHealth;
use crate::intake::Intake;
use crate::live::ConfigHandle;
use crate::metrics::Metrics;
use crate::metrics::collect::Scrape;
use crate::quarantine::Pen;
use crate::replay::Replayer;

use super::caller::TokenSource;

/// Most sources whose `POST /v1/sources/{id}/dead_letter` position is kept (ids come from the
/// URL: the map stays small whatever callers send).
pub const MAX_RESUME_POSITIONS: usize = 1024;

pub struct AdminState {
    pub config: Arc<ConfigHandle>,
    pub store: Arc<Store>,
    pub metrics: Arc<Metrics>,
    /// What `GET /metrics` refreshes before it renders.
    pub scrape: Scrape,
    /// Dispatch's record of failing sinks (`GET /v1/status`), on a node with the `dispatch`
    /// role.
    pub sink_health: Option<Arc<SinkHealth>>,
    /// Replay jobs, on a node with the `dispatch` role.
    pub replayer: Option<Arc<Replayer>>,
    pub pen: Arc<Pen>,
    pub archive: Option<Arc<Archive>>,
    pub dlq: Arc<DlqGuard>,
    pub backup: Option<Arc<Backup>>,
    pub intake: Option<Arc<Intake>>,
    /// Where the next `POST /v1/sources/{id}/dead_letter` page starts, per source (at most
    /// `MAX_RESUME_POSITIONS`).
    pub dead_letter_resume: Mutex<HashMap<String, DeadLetterResume>>,
}

impl AdminState {
    /// Runs a store call on a blocking thread; a failure is `503 store_unavailable`.
    pub async fn store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || f(&store)).await {
            Ok(r) => Ok(r?),
            Err(e) => Err(StoreError::Unavailable {
                class: "other",
                message: e.to_string(),
            }
            .into()),
        }
    }
}

/// The replayer, extracted after the caller and before a body: `409 role_not_enabled` on a
/// node without the `dispatch` role.
pub struct Jobs(pub Arc<Replayer>);

impl FromRequestParts<Arc<AdminState>> for Jobs {
    type Rejection = ApiError;

    async fn from_request_parts(p: &mut Parts, s: &Arc<AdminState>) -> Result<Self, ApiError> {
        StoredHooks::from_request_parts(p, s).await?;
        s.replayer
            .clone()
            .map(Jobs)
            .ok_or(ApiError::RoleNotEnabled { role: "dispatch" })
    }
}

/// A route over stored hooks (the WAL, the DLQ, hooks, the archive, replays): `409
/// wal_disabled` under `wal.type: none`, which stores none. Extracted after the caller, so an
/// unknown caller learns nothing about the node.
pub struct StoredHooks;

impl FromRequestParts<Arc<AdminState>> for StoredHooks {
    type Rejection = ApiError;

    async fn from_request_parts(_: &mut Parts, s: &Arc<AdminState>) -> Result<Self, ApiError> {
        match s.config.live().config.wal.wal_type {
            ankusa_config::WalType::None => Err(ApiError::WalDisabled),
            _ => Ok(StoredHooks),
        }
    }
}

impl TokenSource for AdminState {
    fn with_tokens<R>(&self, f: impl FnOnce(&[AdminToken]) -> R) -> R {
        f(&self.config.live().config.admin.tokens)
    }
}
