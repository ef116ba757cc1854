//! `apply` of the ReplayJob controller (see the parent module's header for the order), and
//! the status writes: the controller's field manager (`ankusa-operator/replayjob`) is named
//! here.
//!
//! May import: `context`, crate `pods`, `admin_tls`, `render::replay`, `status`, and the
//! siblings `controllers::replay::{dry_run, pods, ttl}`.

use std::time::Duration;

use ankusa_api::CreateReplay;
use ankusa_crds::names::RESUME_ANNOTATION;
use ankusa_crds::{Gateway, ReplayJob, ReplayJobStatus, ReplayPhase, Source};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use crate::admin_tls::admin_access;
use crate::context::{Ctx, Error, Result};
use crate::controllers::replay::dry_run;
use crate::controllers::replay::pods::{Fleet, resume_paused, sync_all};
use crate::controllers::replay::ttl::{Ttl, ttl};
use crate::pods::gateway_pods;
use crate::render::replay::build_request;
use crate::status::now_rfc3339;
use crate::status::replay::{
    JobReport, job_status, pending_status, refused_status, refused_status_because, request_kind,
};

pub const CONTROLLER: &str = "replayjob";

pub async fn apply(rj: &ReplayJob, ctx: &Ctx, key: &str) -> Result<Action> {
    let old = rj.status.clone().unwrap_or_default();
    if old.phase.is_some_and(ReplayPhase::is_terminal) {
        return finished(rj, ctx).await;
    }
    if let Some(wait) = ctx.poll_due(key, ctx.settings.replay_poll) {
        return Ok(Action::requeue(wait));
    }
    let ns = rj.namespace().unwrap_or_default();
    let now = now_rfc3339();
    let gws: Api<Gateway> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(gw) = gws.get_opt(&rj.spec.gateway_ref.name).await? else {
        return gateway_missing(ctx, rj, &old, &now).await;
    };
    let job_id = rj.uid().unwrap_or_default();
    if gw.is_direct() && old.phase.is_none() {
        let why = format!(
            "Gateway {} is direct (spec.durability.mode: direct): its pods keep no hook, so there is nothing to replay; replay from the sinks' own retention instead",
            gw.name_any()
        );
        return refuse(ctx, rj, &old, "DirectGateway", &why, &job_id, &now).await;
    }
    if rj.spec.dry_run {
        return match dry_run::ask_pods(ctx, rj, &gw, &old, &job_id, &now).await? {
            Ok(status) => publish_status(ctx, rj, &old, status).await,
            Err(why) => refuse(ctx, rj, &old, "InvalidSpec", &why, &job_id, &now).await,
        };
    }
    let sources = Api::<Source>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    // The request is kept in the status as JSON (the CRD's `status.request`), and sent typed.
    let current = build_request(&rj.spec, &job_id, &sources)
        .and_then(|r| serde_json::to_value(r).map_err(|e| e.to_string()));
    let (request, spec_changed) = match (&old.request, current) {
        (Some(stored), Ok(cur)) => (stored.clone(), *stored != cur),
        (Some(stored), Err(_)) => (stored.clone(), true),
        (None, Ok(cur)) => (cur, false),
        (None, Err(e)) => return refuse(ctx, rj, &old, "InvalidSpec", &e, &job_id, &now).await,
    };
    let body: CreateReplay = serde_json::from_value(request.clone())
        .map_err(|e| Error::Invalid(format!("status.request is not a replay request: {e}")))?;
    let fleet = Fleet {
        access: admin_access(ctx, &gw).await?,
        pods: gateway_pods(&ctx.client, &gw).await?,
        gw: &gw,
    };
    let mut records = sync_all(ctx, rj, &fleet, &old, &body, &now).await;
    if rj.annotations().contains_key(RESUME_ANNOTATION) {
        resume_paused(ctx, rj, &fleet, &mut records, request_kind(&body), &now).await?;
    }
    let report = JobReport {
        job_id,
        request,
        kind: request_kind(&body),
        records,
        spec_changed,
    };
    publish(ctx, rj, &old, report, &now).await
}

/// The Gateway it names does not exist: `Pending`, a Warning Event when that is new.
async fn gateway_missing(
    ctx: &Ctx,
    rj: &ReplayJob,
    old: &ReplayJobStatus,
    now: &str,
) -> Result<Action> {
    let msg = format!("Gateway {} not found", rj.spec.gateway_ref.name);
    if old.message.as_deref() != Some(msg.as_str()) {
        ctx.event(rj, EventType::Warning, "GatewayNotFound", msg.clone())
            .await;
    }
    let status = pending_status(old, &msg, rj.metadata.generation, now);
    if status != *old {
        ctx.patch_status(rj, CONTROLLER, &status).await?;
    }
    Ok(Action::requeue(Duration::from_secs(15)))
}

/// The spec is refused before anything started: terminal, like a failed prerequisite.
async fn refuse(
    ctx: &Ctx,
    rj: &ReplayJob,
    old: &ReplayJobStatus,
    reason: &'static str,
    why: &str,
    job_id: &str,
    now: &str,
) -> Result<Action> {
    ctx.event(rj, EventType::Warning, reason, why.to_string())
        .await;
    let status = if reason == "InvalidSpec" {
        refused_status(old, why, job_id, rj.metadata.generation, now)
    } else {
        refused_status_because(old, reason, why, job_id, rj.metadata.generation, now)
    };
    ctx.patch_status(rj, CONTROLLER, &status).await?;
    Ok(Action::await_change())
}

/// The status from the pods' records (see `publish_status`).
async fn publish(
    ctx: &Ctx,
    rj: &ReplayJob,
    old: &ReplayJobStatus,
    report: JobReport,
    now: &str,
) -> Result<Action> {
    let (status, _) = job_status(old, report, rj.metadata.generation, now);
    publish_status(ctx, rj, old, status).await
}

/// A new status: an Event when the phase changes, a write when anything did; terminal phases
/// stop requeueing.
async fn publish_status(
    ctx: &Ctx,
    rj: &ReplayJob,
    old: &ReplayJobStatus,
    status: ReplayJobStatus,
) -> Result<Action> {
    let phase = status.phase.unwrap_or(ReplayPhase::Running);
    let message = status.message.clone().unwrap_or_default();
    if old.phase != Some(phase) {
        let (t, reason) = match phase {
            ReplayPhase::Running => (EventType::Normal, "Started"),
            ReplayPhase::Succeeded => (EventType::Normal, "Succeeded"),
            ReplayPhase::Failed => (EventType::Warning, "Failed"),
            ReplayPhase::Cancelled => (EventType::Warning, "Cancelled"),
            ReplayPhase::Pending => (EventType::Normal, "Pending"),
        };
        ctx.event(rj, t, reason, message).await;
    }
    if status != *old {
        ctx.patch_status(rj, CONTROLLER, &status).await?;
    }
    Ok(if phase.is_terminal() {
        // The TTL counts from the completion time just written.
        Action::requeue(Duration::from_secs(1))
    } else {
        Action::requeue(ctx.settings.replay_poll * 2)
    })
}

/// A finished job: deleted once its `ttlSecondsAfterFinished` has passed, else looked at
/// again when it will have.
async fn finished(rj: &ReplayJob, ctx: &Ctx) -> Result<Action> {
    match ttl(rj, k8s_openapi::jiff::Timestamp::now()) {
        Ttl::Keep => Ok(Action::await_change()),
        Ttl::Wait(left) => Ok(Action::requeue(left + Duration::from_millis(500))),
        Ttl::Expired => {
            let ns = rj.namespace().unwrap_or_default();
            let api: Api<ReplayJob> = Api::namespaced(ctx.client.clone(), &ns);
            tracing::info!(replayjob = %rj.name_any(), "ttlSecondsAfterFinished passed: deleting the finished ReplayJob");
            match api.delete(&rj.name_any(), &Default::default()).await {
                Ok(_) => Ok(Action::await_change()),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(Action::await_change()),
                Err(e) => Err(e.into()),
            }
        }
    }
}
