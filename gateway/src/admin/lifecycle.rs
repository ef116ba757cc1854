//! `GET /v1/lifecycle`: a page of the audit trail of lifecycle events (oldest first), over
//! `since`/`until` (unix ms), `type`, `tenant`, `limit` (default 100, at most 1 000) and
//! `cursor`. Scope `dlq:read`. A tenant-limited token sees only its tenants' events; node-wide
//! events (config changes, which carry no tenant) only a node-wide token.
//!
//! It imports the admin state and extractors, `api_error` and `lifecycle::EventType` (the
//! types a `type` filter may name).

use std::sync::Arc;

use ankusa_api::{LifecycleEntry, LifecyclePage};
use ankusa_store::{AuditCursor, AuditFilter};
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use super::caller::{Caller, DlqRead};
use super::params::{Params, check_tenant, limit, number};
use super::state::AdminState;
use crate::api_error::ApiError;
use crate::lifecycle::EventType;

pub fn router() -> Router<Arc<AdminState>> {
    Router::new().route("/v1/lifecycle", get(list))
}

/// The parameters, as text so a bad value is `invalid_filter` naming it.
#[derive(Debug, Deserialize, Default)]
struct Query {
    since: Option<String>,
    until: Option<String>,
    #[serde(rename = "type")]
    event_type: Option<String>,
    tenant: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

async fn list(
    State(s): State<Arc<AdminState>>,
    caller: Caller<DlqRead>,
    Params(q): Params<Query>,
) -> Result<Json<LifecyclePage>, ApiError> {
    check_tenant(&q.tenant)?;
    let event_type = match &q.event_type {
        None => None,
        Some(t) => Some(
            EventType::parse(t)
                .ok_or_else(|| ApiError::filter("type", "is not a lifecycle event type"))?
                .as_str()
                .to_string(),
        ),
    };
    let after = match &q.cursor {
        None => None,
        Some(c) => Some(
            c.parse::<AuditCursor>()
                .map_err(|_| ApiError::filter("cursor", "is not a cursor this API returned"))?,
        ),
    };
    let tenants = match &q.tenant {
        Some(_) => caller.resolve_tenant(q.tenant.clone())?.map(|t| vec![t]),
        None => caller.tenant_list(),
    };
    let filter = AuditFilter {
        since: number("since", &q.since)?,
        until: number("until", &q.until)?,
        event_type,
        tenants,
        after,
    };
    let limit = limit(&q.limit, 100, 1000)?;
    let page = s
        .store(move |store| store.audit_page(&filter, limit))
        .await?;
    Ok(Json(LifecyclePage {
        events: page
            .events
            .into_iter()
            .map(|(_, e)| LifecycleEntry {
                id: e.id,
                event_type: e.event_type,
                tenant: e.tenant,
                time: e.time_ms,
                event: e.event,
            })
            .collect(),
        next_cursor: page.next.map(|c| c.to_string()),
    }))
}
