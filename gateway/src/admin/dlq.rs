//! `GET /v1/dlq` (a page of dead letters, newest first) and `DELETE /v1/dlq` (oldest first,
//! up to `limit`; with an archive only rows whose hook is archived). Both take the same filter;
//! a tenant-limited token is held to its tenants (`Caller::resolve_tenant`).
//!
//! It imports the admin state and extractors and `api_error`.

use std::sync::Arc;

use ankusa_api::{DeadFilter, DeadPage, DeleteDead};
use ankusa_store::{DeadCursor, ErrorClass};
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use super::caller::{Caller, DlqRead, DlqWrite};
use super::params::{Params, check_tenant, limit, number};
use super::state::{AdminState, StoredHooks};
use crate::api_error::ApiError;

pub fn router() -> Router<Arc<AdminState>> {
    Router::new().route("/v1/dlq", get(list_dlq).delete(delete_dlq))
}

/// `GET|DELETE /v1/dlq` parameters, as text so a bad value is `invalid_filter` naming it.
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

impl DlqQuery {
    fn filter<S>(&self, caller: &Caller<S>) -> Result<DeadFilter, ApiError> {
        check_tenant(&self.tenant)?;
        let error_class = match &self.error_class {
            None => None,
            Some(c) => Some(ErrorClass::parse(c).ok_or_else(|| {
                ApiError::filter("error_class", "must be permanent, throttled or transient")
            })?),
        };
        Ok(DeadFilter {
            tenant: caller.resolve_tenant(self.tenant.clone())?,
            source_id: self.source_id.clone(),
            id: None,
            sink: number("sink", &self.sink)?,
            error_class,
            since: number("since", &self.since)?,
            until: number("until", &self.until)?,
        })
    }
}

async fn list_dlq(
    State(s): State<Arc<AdminState>>,
    caller: Caller<DlqRead>,
    _: StoredHooks,
    Params(q): Params<DlqQuery>,
) -> Result<Json<DeadPage>, ApiError> {
    let filter = q.filter(&caller)?;
    let limit = limit(&q.limit, 100, 1000)?;
    let cursor = match &q.cursor {
        None => None,
        Some(c) => Some(
            DeadCursor::decode(c)
                .ok_or_else(|| ApiError::filter("cursor", "is not a cursor this API returned"))?,
        ),
    };
    let page = s
        .store(move |store| store.list_dead(&filter, cursor, limit))
        .await?;
    Ok(Json(page))
}

async fn delete_dlq(
    State(s): State<Arc<AdminState>>,
    caller: Caller<DlqWrite>,
    _: StoredHooks,
    Params(q): Params<DlqQuery>,
) -> Result<Json<DeleteDead>, ApiError> {
    let filter = q.filter(&caller)?;
    let limit = limit(&q.limit, 1000, 10_000)?;
    let deleted = s
        .store(move |store| store.delete_dead(&filter, limit))
        .await?;
    Ok(Json(deleted))
}
