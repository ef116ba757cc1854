//! Replay jobs: `POST /v1/replays` (create: `202`, or `200` for the same `job_id` and filter
//! again), `GET /v1/replays`, `GET|PATCH /v1/replays/{id}`. They need the `dispatch` role
//! (`Jobs`: `409 role_not_enabled`). A tenant-limited token creates jobs for its tenants only
//! and sees only jobs whose filter names one of them; another's job is `404 replay_not_found`.
//!
//! It imports the admin state and extractors, `api_error` and the replayer's error.

use std::sync::Arc;

use ankusa_api::{CreateReplay, DeadFilter, JobList, JobView, PatchReplay};
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};

use super::caller::{Caller, DlqRead, ReplaysWrite};
use super::params::JsonBody;
use super::state::{AdminState, Jobs};
use crate::api_error::ApiError;
use crate::replay::{MAX_LIVE_JOBS, ReplayError, Replayer};

pub fn router() -> Router<Arc<AdminState>> {
    Router::new()
        .route("/v1/replays", get(list_replays).post(create_replay))
        .route("/v1/replays/{id}", get(get_replay).patch(patch_replay))
}

impl From<ReplayError> for ApiError {
    fn from(e: ReplayError) -> Self {
        match e {
            ReplayError::InvalidFilter { field, message } => ApiError::filter(field, message),
            ReplayError::NotFound => ApiError::ReplayNotFound,
            ReplayError::InvalidState(message) => ApiError::InvalidState { message },
            ReplayError::TooManyJobs => ApiError::TooManyJobs {
                max_live_jobs: MAX_LIVE_JOBS,
            },
            ReplayError::Store(e) => e.into(),
        }
    }
}

async fn create_replay(
    caller: Caller<ReplaysWrite>,
    Jobs(r): Jobs,
    JsonBody(mut req): JsonBody<CreateReplay>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let filter = req.filter().map_err(ReplayError::from)?;
    let tenant = caller.resolve_tenant(filter.tenant.clone())?;
    if tenant != filter.tenant {
        req = req.with_filter(DeadFilter { tenant, ..filter });
    }
    let (view, created) = r.create(req).await?;
    let status = if created {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)))
}

async fn list_replays(caller: Caller<DlqRead>, Jobs(r): Jobs) -> Result<Json<JobList>, ApiError> {
    let jobs = r
        .list()
        .await?
        .into_iter()
        .filter(|j| caller.sees(j.job.filter.tenant.as_deref()))
        .collect();
    Ok(Json(JobList { jobs }))
}

/// The job, if it is the caller's to see.
async fn job_of<S>(r: &Replayer, caller: &Caller<S>, id: &str) -> Result<JobView, ApiError> {
    let v = r.get(id).await?;
    if !caller.sees(v.job.filter.tenant.as_deref()) {
        return Err(ApiError::ReplayNotFound);
    }
    Ok(v)
}

async fn get_replay(
    caller: Caller<DlqRead>,
    Jobs(r): Jobs,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    Ok(Json(job_of(&r, &caller, &id).await?))
}

async fn patch_replay(
    caller: Caller<ReplaysWrite>,
    Jobs(r): Jobs,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<PatchReplay>,
) -> Result<Json<JobView>, ApiError> {
    job_of(&r, &caller, &id).await?;
    Ok(Json(r.set_state(&id, &req.state).await?))
}
