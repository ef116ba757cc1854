//! The quarantine pen: `GET /v1/quarantine` (its entries, newest first, without bodies) and
//! `DELETE /v1/quarantine` (matching entries, oldest first, their bytes freed against the
//! cap). A tenant-limited token is held to its tenants as for the DLQ.
//!
//! It imports the admin state and extractors and `api_error`.

use std::sync::Arc;

use ankusa_api::{PenEntry, QuarantinePage, QuarantinePurged};
use ankusa_store::{PenFilter, PenSummary};
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use super::caller::{Caller, DlqRead, DlqWrite};
use super::params::{Params, check_tenant, limit, number};
use super::state::AdminState;
use crate::api_error::ApiError;

pub fn router() -> Router<Arc<AdminState>> {
    Router::new().route(
        "/v1/quarantine",
        get(list_quarantine).delete(purge_quarantine),
    )
}

/// `GET|DELETE /v1/quarantine` parameters, as text so a bad value is `invalid_filter` naming it.
#[derive(Debug, Deserialize, Default)]
struct PenQuery {
    tenant: Option<String>,
    source_id: Option<String>,
    id: Option<String>,
    since: Option<String>,
    until: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

impl PenQuery {
    fn filter<S>(&self, caller: &Caller<S>) -> Result<PenFilter, ApiError> {
        check_tenant(&self.tenant)?;
        let id = match &self.id {
            None => None,
            Some(s) => Some(
                uuid::Uuid::parse_str(s)
                    .map_err(|_| ApiError::filter("id", "must be a hook id (a UUID)"))?,
            ),
        };
        let f = PenFilter {
            tenant: caller.resolve_tenant(self.tenant.clone())?,
            source_id: self.source_id.clone(),
            id,
            since: number("since", &self.since)?,
            until: number("until", &self.until)?,
        };
        if let (Some(s), Some(u)) = (f.since, f.until)
            && s > u
        {
            return Err(ApiError::filter("since", "must not be after until"));
        }
        Ok(f)
    }

    /// The cursor: the last summary key the previous page examined (`s`, then 24 bytes).
    fn cursor(&self) -> Result<Option<Vec<u8>>, ApiError> {
        match &self.cursor {
            None => Ok(None),
            Some(c) => match hex::decode(c) {
                Ok(k) if k.len() == 25 && k[0] == b's' => Ok(Some(k)),
                _ => Err(ApiError::filter(
                    "cursor",
                    "must be a next_cursor of a previous page",
                )),
            },
        }
    }
}

async fn list_quarantine(
    State(s): State<Arc<AdminState>>,
    caller: Caller<DlqRead>,
    Params(q): Params<PenQuery>,
) -> Result<Json<QuarantinePage>, ApiError> {
    let filter = q.filter(&caller)?;
    let limit = limit(&q.limit, 100, 1000)?;
    let before = q.cursor()?;
    let whole = filter == PenFilter::default();
    let ((entries, next), totals) = s
        .store(move |store| {
            Ok((
                store.pen_list_page(&filter, limit, before.as_deref())?,
                store.pen_totals()?,
            ))
        })
        .await?;
    // The pen's size is node-wide: a tenant-limited caller sees only its entries.
    let (total, bytes) = match whole {
        true => (Some(totals.0), Some(totals.1)),
        false => (None, None),
    };
    Ok(Json(QuarantinePage {
        entries: entries.into_iter().map(entry).collect(),
        total,
        bytes,
        next_cursor: next.map(hex::encode),
    }))
}

fn entry(p: PenSummary) -> PenEntry {
    PenEntry {
        id: p.id,
        source_id: p.source_id,
        tenant: p.tenant,
        received_at: p.received_at,
        reason: p.reason,
        size: p.size,
        method: p.method,
        path: p.path,
        url_tenant: p.url_tenant,
    }
}

async fn purge_quarantine(
    State(s): State<Arc<AdminState>>,
    caller: Caller<DlqWrite>,
    Params(q): Params<PenQuery>,
) -> Result<Json<QuarantinePurged>, ApiError> {
    let filter = q.filter(&caller)?;
    let limit = limit(&q.limit, 1000, 10_000)?;
    let purged = s
        .store(move |store| store.pen_purge(&filter, limit))
        .await?;
    s.pen.removed(purged);
    if purged.deleted > 0 {
        tracing::info!(
            deleted = purged.deleted,
            bytes = purged.bytes,
            "quarantine purged"
        );
    }
    Ok(Json(QuarantinePurged {
        deleted: purged.deleted,
        bytes: purged.bytes,
    }))
}
