//! ReplayJob: `POST /v1/replays` on every pod of the Gateway with `job_id` = the object's UID
//! and the body of its kind (`dlq`, `archive` with its window and sinks, `quarantine`),
//! polls each pod, aggregates; a pod whose UID changed (recreated) is asked again with the
//! same job id (the gateway finds the existing job, nothing is duplicated); deletion while
//! running cancels the job on every pod first (finalizer); terminal phases stop requeueing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ankusa_api::{CreateReplay, DeadFilter, JobState, JobView};
use ankusa_crds::names::{REPLAY_FINALIZER, RESUME_ANNOTATION};
use ankusa_crds::{
    Gateway, ReplayJob, ReplayJobSpec, ReplayJobStatus, ReplayKind, ReplayPhase, ReplayPodStatus,
    Source,
};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event, finalizer};
use serde_json::json;

use crate::admin::PodTarget;
use crate::admin_tls::admin_access;
use crate::context::{Ctx, Error, Result, pod_target, status_params};
use crate::pods::gateway_pods;
use crate::render;
use crate::resources;
use crate::status::{Conds, conditions, fraction, now_rfc3339, replay_aggregate};

pub const CONTROLLER: &str = "replayjob";

pub async fn reconcile(rj: Arc<ReplayJob>, ctx: Arc<Ctx>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    let ns = rj
        .namespace()
        .ok_or_else(|| Error::Invalid("ReplayJob without namespace".into()))?;
    let api: Api<ReplayJob> = Api::namespaced(ctx.client.clone(), &ns);
    let key = format!("replayjob/{ns}/{}", rj.name_any());
    let r = finalizer(&api, REPLAY_FINALIZER, rj, |ev| async {
        match ev {
            Event::Apply(rj) => apply(&rj, &ctx, &key).await,
            Event::Cleanup(rj) => cleanup(&rj, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)));
    if matches!(r, Ok(ref a) if *a == Action::await_change()) {
        ctx.forget_poll(&key);
    }
    r
}

pub fn error_policy(_rj: Arc<ReplayJob>, err: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.metrics.error(CONTROLLER, err.label());
    if !err.is_waiting() {
        tracing::warn!(error = %err, "replayjob reconcile failed");
    }
    Action::requeue(Duration::from_secs(if err.is_waiting() { 3 } else { 10 }))
}

/// An RFC 3339 time of the spec as unix milliseconds; errors name `field`, not the text (the
/// parser's message quotes what it was given).
fn unix_ms(field: &str, v: &str) -> Result<u64, String> {
    v.parse::<k8s_openapi::jiff::Timestamp>()
        .map_err(|_| format!("{field} is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)"))
        .and_then(|t| {
            u64::try_from(t.as_millisecond()).map_err(|_| format!("{field} is before 1970"))
        })
}

/// The position of Sink `sink` among `src`'s sinks (the gateway's sink index).
fn sink_index(src: &Source, sink: &str, field: &str) -> Result<u16, String> {
    let idx = src
        .spec
        .sinks
        .iter()
        .position(|r| r.name == sink)
        .ok_or_else(|| format!("{field}: Source {} has no sink {sink:?}", src.name_any()))?;
    u16::try_from(idx).map_err(|_| format!("{field}: {sink:?} is past sink 65535"))
}

/// The request every pod receives (`POST /v1/replays`), from the spec; the Source and Sink
/// names are resolved to the gateway's source id and sink indexes. The rules the CRD states
/// in CEL are checked here as well (servers before 1.25 do not enforce CEL).
pub fn build_request(
    spec: &ReplayJobSpec,
    job_id: &str,
    sources: &[Source],
) -> Result<CreateReplay, String> {
    let kind = spec.kind;
    let f = &spec.filter;
    let refuse = |field: &str, why: &str| Err(format!("{field}: {why}"));
    match kind {
        ReplayKind::Archive => {
            for (set, field) in [
                (f.sink.is_some(), "filter.sink"),
                (f.error_class.is_some(), "filter.errorClass"),
                (f.since.is_some(), "filter.since"),
                (f.until.is_some(), "filter.until"),
            ] {
                if set {
                    return refuse(
                        field,
                        "not a filter of kind archive (it takes filter.tenant, filter.source and filter.id; the window is archive.from and archive.to, the sinks archive.sinks)",
                    );
                }
            }
            if spec.archive.is_none() {
                return refuse(
                    "archive",
                    "kind archive requires archive.from and archive.to",
                );
            }
        }
        ReplayKind::Quarantine | ReplayKind::Dlq => {
            if spec.archive.is_some() {
                return refuse("archive", "is only for kind archive");
            }
            if kind == ReplayKind::Quarantine {
                if f.sink.is_some() {
                    return refuse("filter.sink", "not a filter of kind quarantine");
                }
                if f.error_class.is_some() {
                    return refuse("filter.errorClass", "not a filter of kind quarantine");
                }
            }
        }
    }
    let mut filter = DeadFilter {
        tenant: f.tenant.clone(),
        ..Default::default()
    };
    let source = f
        .source
        .as_ref()
        .map(|name| sources.iter().find(|s| &s.name_any() == name).ok_or(name));
    filter.source_id = match source {
        // No such Source object (any more): the name is taken as the source id.
        Some(Err(name)) => Some(name.clone()),
        Some(Ok(s)) => Some(render::source_id(s)),
        None => None,
    };
    if let Some(sink) = &f.sink {
        let Some(Ok(src)) = source else {
            return Err(format!(
                "filter.sink {sink:?} needs filter.source naming an existing Source"
            ));
        };
        filter.sink = Some(sink_index(src, sink, "filter.sink")?);
    }
    filter.error_class = f.error_class;
    if let Some(id) = &f.id {
        filter.id = Some(
            serde_json::from_value(serde_json::Value::String(id.clone()))
                .map_err(|_| "filter.id: not a hook id (a UUID)".to_string())?,
        );
    }
    let since = f
        .since
        .as_deref()
        .map(|v| unix_ms("filter.since", v))
        .transpose()?;
    let until = f
        .until
        .as_deref()
        .map(|v| unix_ms("filter.until", v))
        .transpose()?;
    if let (Some(s), Some(u)) = (since, until)
        && s > u
    {
        return Err("filter.since is after filter.until".into());
    }
    filter.since = since;
    filter.until = until;
    if let Some(r) = spec.rate {
        ankusa_api::check_rate(r).map_err(|m| format!("rate {m}"))?;
    }
    let mut body = CreateReplay {
        rate: spec.rate,
        max_lag_ms: spec.max_lag_ms,
        pause_after_dead: spec.pause_after_dead,
        ..CreateReplay::dlq(job_id, filter)
    };
    body.kind = kind.as_str().to_string();
    if let Some(a) = &spec.archive {
        let from = unix_ms("archive.from", &a.from)?;
        let to = unix_ms("archive.to", &a.to)?;
        if from >= to {
            return Err("archive.from must be before archive.to".into());
        }
        body.from = Some(from);
        body.to = Some(to);
        if !a.sinks.is_empty() {
            let Some(Ok(src)) = source else {
                return Err(
                    "archive.sinks needs filter.source naming an existing Source (the sinks are that Source's)"
                        .into(),
                );
            };
            let mut idx = Vec::with_capacity(a.sinks.len());
            for (i, sink) in a.sinks.iter().enumerate() {
                let n = sink_index(src, sink, &format!("archive.sinks[{i}]"))?;
                if idx.contains(&n) {
                    return Err(format!("archive.sinks[{i}]: names Sink {sink:?} twice"));
                }
                idx.push(n);
            }
            if idx.len() > ankusa_api::MAX_ARCHIVE_SINKS {
                return Err(format!(
                    "archive.sinks: names at most {} sinks",
                    ankusa_api::MAX_ARCHIVE_SINKS
                ));
            }
            body.sinks = Some(idx);
        }
    }
    Ok(body)
}

/// The kind of a request sent earlier (`status.request`).
fn request_kind(body: &CreateReplay) -> ReplayKind {
    match body.kind.as_str() {
        ankusa_api::KIND_ARCHIVE => ReplayKind::Archive,
        ankusa_api::KIND_QUARANTINE => ReplayKind::Quarantine,
        _ => ReplayKind::Dlq,
    }
}

fn update_from_view(rec: &mut ReplayPodStatus, kind: ReplayKind, v: &JobView, now: &str) {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    rec.state = v.job.state.as_str().to_string();
    rec.moved = count(v.job.moved);
    rec.scanned = count(v.job.scanned);
    rec.released = (kind != ReplayKind::Dlq).then(|| count(v.job.released));
    rec.skipped = (kind != ReplayKind::Dlq).then(|| count(v.job.skipped));
    rec.corrupt_segments = (kind == ReplayKind::Archive).then(|| count(v.job.corrupt_segments));
    rec.delivered = v.delivered;
    rec.failed = v.failed;
    rec.outstanding = v.outstanding;
    rec.done = v.done;
    rec.last_error = None;
    rec.updated_at = Some(now.to_string());
}

/// One pod: create the job when the pod is new to it (or was recreated: new UID), else poll.
/// Returns the record and whether the pod was asked again after a restart.
async fn sync_pod(
    ctx: &Ctx,
    target: Option<PodTarget>,
    mut rec: ReplayPodStatus,
    body: &CreateReplay,
    now: &str,
) -> (ReplayPodStatus, bool) {
    let Some(t) = target else {
        if !rec.done {
            rec.last_error = Some("pod not running".into());
        }
        return (rec, false);
    };
    let restarted = rec.pod_uid.as_ref().is_some_and(|u| *u != t.uid);
    if rec.done && !restarted {
        return (rec, false);
    }
    let known = rec.pod_uid.as_deref() == Some(t.uid.as_str());
    let result = if known {
        let r = ctx.admin.get_replay(&t, &rec.job_id).await;
        ctx.metrics.pod_call("get_replay", &r);
        match r {
            Ok(Some(v)) => Ok(v),
            // The pod lost the job (its store was replaced): ask again.
            Ok(None) => {
                let r = ctx.admin.create_replay(&t, body).await;
                ctx.metrics.pod_call("create_replay", &r);
                r
            }
            Err(e) => Err(e),
        }
    } else {
        let r = ctx.admin.create_replay(&t, body).await;
        ctx.metrics.pod_call("create_replay", &r);
        r
    };
    match result {
        Ok(v) => {
            update_from_view(&mut rec, request_kind(body), &v, now);
            rec.pod_uid = Some(t.uid.clone());
        }
        Err(e) => {
            rec.last_error = Some(e.to_string());
            rec.updated_at = Some(now.to_string());
        }
    }
    (rec, restarted)
}

async fn write_status(ctx: &Ctx, rj: &ReplayJob, status: &ReplayJobStatus) -> Result<()> {
    let api: Api<ReplayJob> =
        Api::namespaced(ctx.client.clone(), &rj.namespace().unwrap_or_default());
    let body =
        json!({ "apiVersion": "ankusa.dev/v1alpha1", "kind": "ReplayJob", "status": status });
    api.patch_status(
        &rj.name_any(),
        &status_params(CONTROLLER),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

/// Status conditions of a ReplayJob in a phase.
pub fn replay_conditions(
    old: &[ankusa_crds::Condition],
    phase: ReplayPhase,
    message: &str,
    degraded: Option<String>,
    generation: Option<i64>,
    now: &str,
) -> Vec<ankusa_crds::Condition> {
    let m = message.to_string();
    let ready = match phase {
        ReplayPhase::Succeeded => (true, "Succeeded", m.clone()),
        ReplayPhase::Failed => (false, "Failed", m.clone()),
        ReplayPhase::Cancelled => (false, "Cancelled", m.clone()),
        ReplayPhase::Running => (false, "Running", m.clone()),
        ReplayPhase::Pending => (false, "Pending", m.clone()),
    };
    let progressing = if phase.is_terminal() {
        (false, "Complete", m.clone())
    } else {
        (true, ready.1, m.clone())
    };
    let degraded = match (phase, degraded) {
        (ReplayPhase::Failed, _) => (true, "Failed", m),
        (_, Some(d)) => (true, "PodErrors", d),
        _ => (false, "AsExpected", String::new()),
    };
    conditions(
        old,
        Conds {
            ready,
            progressing,
            degraded,
        },
        generation,
        now,
    )
}

async fn apply(rj: &ReplayJob, ctx: &Ctx, key: &str) -> Result<Action> {
    let old = rj.status.clone().unwrap_or_default();
    if old.phase.is_some_and(ReplayPhase::is_terminal) {
        return Ok(Action::await_change());
    }
    if let Some(wait) = ctx.poll_due(key, ctx.settings.replay_poll) {
        return Ok(Action::requeue(wait));
    }
    let ns = rj.namespace().unwrap_or_default();
    let now = now_rfc3339();
    let generation = rj.metadata.generation;
    let gws: Api<Gateway> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(gw) = gws.get_opt(&rj.spec.gateway_ref.name).await? else {
        let msg = format!("Gateway {} not found", rj.spec.gateway_ref.name);
        if old.message.as_deref() != Some(msg.as_str()) {
            ctx.event(rj, EventType::Warning, "GatewayNotFound", msg.clone())
                .await;
        }
        let status = ReplayJobStatus {
            observed_generation: generation,
            conditions: replay_conditions(
                &old.conditions,
                ReplayPhase::Pending,
                &msg,
                None,
                generation,
                &now,
            ),
            phase: Some(ReplayPhase::Pending),
            message: Some(msg),
            ..old.clone()
        };
        if status != old {
            write_status(ctx, rj, &status).await?;
        }
        return Ok(Action::requeue(Duration::from_secs(15)));
    };
    let job_id = rj.uid().unwrap_or_default();
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
        (None, Err(e)) => {
            // Refused before anything started: terminal, like a failed prerequisite.
            ctx.event(rj, EventType::Warning, "InvalidSpec", e.clone())
                .await;
            let status = ReplayJobStatus {
                observed_generation: generation,
                conditions: replay_conditions(
                    &old.conditions,
                    ReplayPhase::Failed,
                    &e,
                    None,
                    generation,
                    &now,
                ),
                phase: Some(ReplayPhase::Failed),
                job_id: Some(job_id),
                completion_time: Some(now.clone()),
                message: Some(e),
                ..old.clone()
            };
            write_status(ctx, rj, &status).await?;
            return Ok(Action::await_change());
        }
    };
    let body: CreateReplay = serde_json::from_value(request.clone())
        .map_err(|e| Error::Invalid(format!("status.request is not a replay request: {e}")))?;
    let access = admin_access(ctx, &gw).await?;
    let pods = gateway_pods(&ctx.client, &gw).await?;
    let mut names: BTreeSet<String> = resources::pod_names(&gw, gw.spec.replicas)
        .into_iter()
        .collect();
    names.extend(pods.iter().map(|p| p.name_any()));
    let work = names.iter().map(|name| {
        let rec = old
            .pods
            .iter()
            .find(|r| &r.pod == name)
            .cloned()
            .unwrap_or_else(|| ReplayPodStatus {
                pod: name.clone(),
                job_id: job_id.clone(),
                state: "unknown".into(),
                ..Default::default()
            });
        let target = pods
            .iter()
            .find(|p| &p.name_any() == name)
            .and_then(|p| pod_target(p, gw.spec.ports.admin, &access));
        sync_pod(ctx, target, rec, &body, &now)
    });
    let results = futures::future::join_all(work).await;
    let mut records = Vec::new();
    for (rec, restarted) in results {
        if restarted {
            ctx.event(
                rj,
                EventType::Normal,
                "PodRestarted",
                format!(
                    "{} was recreated; asked it again for job {}",
                    rec.pod, rec.job_id
                ),
            )
            .await;
        }
        records.push(rec);
    }
    if rj.annotations().contains_key(RESUME_ANNOTATION) {
        let targets = |name: &str| {
            pods.iter()
                .find(|p| p.name_any() == name)
                .and_then(|p| pod_target(p, gw.spec.ports.admin, &access))
        };
        resume_paused(ctx, rj, &mut records, targets, request_kind(&body), &now).await?;
    }
    let agg = replay_aggregate(request_kind(&body), &records);
    let mut degraded = agg.degraded.clone();
    if spec_changed {
        let m = "the spec changed after the job started; ReplayJob specs are immutable, the original request is kept (create a new ReplayJob)".to_string();
        degraded = Some(match degraded {
            Some(d) => format!("{m}; {d}"),
            None => m,
        });
    }
    let status = ReplayJobStatus {
        observed_generation: generation,
        conditions: replay_conditions(
            &old.conditions,
            agg.phase,
            &agg.message,
            degraded,
            generation,
            &now,
        ),
        phase: Some(agg.phase),
        progress: Some(fraction(agg.done, agg.total)),
        job_id: Some(job_id),
        request: Some(request),
        start_time: old.start_time.clone().or_else(|| Some(now.clone())),
        completion_time: agg.phase.is_terminal().then(|| now.clone()),
        moved: agg.moved,
        delivered: agg.delivered,
        failed: agg.failed,
        released: agg.released,
        skipped: agg.skipped,
        corrupt_segments: agg.corrupt_segments,
        pods: records,
        message: Some(agg.message.clone()),
    };
    if old.phase != Some(agg.phase) {
        let (t, reason) = match agg.phase {
            ReplayPhase::Running => (EventType::Normal, "Started"),
            ReplayPhase::Succeeded => (EventType::Normal, "Succeeded"),
            ReplayPhase::Failed => (EventType::Warning, "Failed"),
            ReplayPhase::Cancelled => (EventType::Warning, "Cancelled"),
            ReplayPhase::Pending => (EventType::Normal, "Pending"),
        };
        ctx.event(rj, t, reason, agg.message.clone()).await;
    }
    if status != old {
        write_status(ctx, rj, &status).await?;
    }
    Ok(if agg.phase.is_terminal() {
        Action::await_change()
    } else {
        Action::requeue(ctx.settings.replay_poll * 2)
    })
}

/// The user asked (annotation) to resume the pods whose job paused itself: sets each back to
/// `running`, then removes the annotation once none is left paused, so a later pause needs a
/// new request.
async fn resume_paused(
    ctx: &Ctx,
    rj: &ReplayJob,
    records: &mut [ReplayPodStatus],
    target: impl Fn(&str) -> Option<PodTarget>,
    kind: ReplayKind,
    now: &str,
) -> Result<()> {
    let mut resumed = Vec::new();
    let mut left = Vec::new();
    for rec in records.iter_mut().filter(|r| r.state == "paused") {
        let Some(t) = target(&rec.pod) else {
            left.push(format!("{}: pod not running", rec.pod));
            continue;
        };
        let r = ctx
            .admin
            .set_replay_state(&t, &rec.job_id, JobState::Running)
            .await;
        ctx.metrics.pod_call("resume_replay", &r);
        match r {
            Ok(Some(v)) => {
                update_from_view(rec, kind, &v, now);
                resumed.push(rec.pod.clone());
            }
            Ok(None) => left.push(format!("{}: job not found", rec.pod)),
            Err(e) => {
                rec.last_error = Some(e.to_string());
                left.push(format!("{}: {e}", rec.pod));
            }
        }
    }
    if !resumed.is_empty() {
        ctx.event(
            rj,
            EventType::Normal,
            "Resumed",
            format!("resumed on {}", resumed.join(", ")),
        )
        .await;
    }
    if !left.is_empty() {
        tracing::info!(replayjob = %rj.name_any(), left = %left.join("; "), "resume pending");
        return Ok(());
    }
    let api: Api<ReplayJob> =
        Api::namespaced(ctx.client.clone(), &rj.namespace().unwrap_or_default());
    let body = json!({ "metadata": { "annotations": { RESUME_ANNOTATION: null } } });
    api.patch(
        &rj.name_any(),
        &kube::api::PatchParams::default(),
        &Patch::Merge(&body),
    )
    .await?;
    Ok(())
}

async fn cleanup(rj: &ReplayJob, ctx: &Ctx) -> Result<Action> {
    let old = rj.status.clone().unwrap_or_default();
    if old.phase.is_some_and(ReplayPhase::is_terminal) || old.pods.is_empty() {
        return Ok(Action::await_change());
    }
    let ns = rj.namespace().unwrap_or_default();
    let gws: Api<Gateway> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(gw) = gws.get_opt(&rj.spec.gateway_ref.name).await? else {
        return Ok(Action::await_change());
    };
    let access = admin_access(ctx, &gw).await?;
    let pods = gateway_pods(&ctx.client, &gw).await?;
    let job_id = rj.uid().unwrap_or_default();
    let mut failures = Vec::new();
    let mut cancelled = Vec::new();
    for rec in old.pods.iter().filter(|r| !r.done) {
        let pod = pods.iter().find(|p| p.name_any() == rec.pod);
        let expected = resources::ordinal(&gw, &rec.pod).is_some_and(|o| o < gw.spec.replicas);
        match pod.and_then(|p| pod_target(p, gw.spec.ports.admin, &access)) {
            Some(t) => {
                let r = ctx
                    .admin
                    .set_replay_state(&t, &job_id, JobState::Cancelled)
                    .await;
                ctx.metrics.pod_call("cancel_replay", &r);
                match r {
                    Ok(_) => cancelled.push(rec.pod.clone()),
                    Err(e) => failures.push(format!("{}: {e}", rec.pod)),
                }
            }
            // A pod that will come back would resume the job: wait for it.
            None if expected => failures.push(format!("{}: not running", rec.pod)),
            None => {}
        }
    }
    if !failures.is_empty() {
        return Err(Error::Waiting(format!(
            "cancelling job {job_id}: {}",
            failures.join("; ")
        )));
    }
    ctx.event(
        rj,
        EventType::Normal,
        "Cancelled",
        format!("job {job_id} cancelled on {}", cancelled.join(", ")),
    )
    .await;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_crds::replay::{ErrorClass, ReplayFilterSpec};
    use ankusa_crds::{ArchiveReplaySpec, LocalRef};

    fn spec(filter: ReplayFilterSpec) -> ReplayJobSpec {
        ReplayJobSpec {
            gateway_ref: LocalRef { name: "gw".into() },
            kind: Default::default(),
            filter,
            archive: None,
            rate: Some(50),
            max_lag_ms: None,
            pause_after_dead: None,
        }
    }

    fn source(name: &str, id: Option<&str>, sinks: &[&str]) -> Source {
        let mut s: Source = serde_json::from_value(json!({
            "apiVersion": "ankusa.dev/v1alpha1", "kind": "Source",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"gatewayRef": {"name": "gw"}, "sinks": sinks.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}
        }))
        .unwrap();
        s.spec.id = id.map(String::from);
        s
    }

    #[test]
    fn request_resolves_names_and_times() {
        let sources = [source("orders", Some("orders-v2"), &["a", "b"])];
        let body = build_request(
            &spec(ReplayFilterSpec {
                tenant: Some("acme".into()),
                source: Some("orders".into()),
                sink: Some("b".into()),
                error_class: Some(ErrorClass::Transient),
                id: None,
                since: Some("2026-01-01T00:00:00Z".into()),
                until: None,
            }),
            "0b7f9f0e-1111-4222-8333-444455556666",
            &sources,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(body).unwrap(),
            json!({
                "job_id": "0b7f9f0e-1111-4222-8333-444455556666",
                "kind": "dlq",
                "filter": {"tenant": "acme", "source_id": "orders-v2", "sink": 1,
                           "error_class": "transient", "since": 1767225600000u64},
                "rate": 50
            })
        );
    }

    #[test]
    fn request_refusals() {
        let sources = [source("orders", None, &["a"])];
        let bad_sink = spec(ReplayFilterSpec {
            source: Some("orders".into()),
            sink: Some("zzz".into()),
            ..Default::default()
        });
        assert!(
            build_request(&bad_sink, "j", &sources)
                .unwrap_err()
                .contains("no sink")
        );
        let sink_without_source = spec(ReplayFilterSpec {
            sink: Some("a".into()),
            ..Default::default()
        });
        assert!(build_request(&sink_without_source, "j", &sources).is_err());
        let bad_time = spec(ReplayFilterSpec {
            since: Some("yesterday".into()),
            ..Default::default()
        });
        assert!(
            build_request(&bad_time, "j", &sources)
                .unwrap_err()
                .contains("RFC 3339")
        );
        // A deleted Source's name is taken as the source id.
        let gone = spec(ReplayFilterSpec {
            source: Some("old".into()),
            ..Default::default()
        });
        let gone = serde_json::to_value(build_request(&gone, "j", &sources).unwrap()).unwrap();
        assert_eq!(gone["filter"]["source_id"], "old");
    }

    fn orders_filter() -> ReplayFilterSpec {
        ReplayFilterSpec {
            tenant: Some("acme".into()),
            source: Some("orders".into()),
            ..Default::default()
        }
    }

    fn archive(from: &str, to: &str, sinks: &[&str]) -> Option<ArchiveReplaySpec> {
        Some(ArchiveReplaySpec {
            from: from.into(),
            to: to.into(),
            sinks: sinks.iter().map(|s| s.to_string()).collect(),
        })
    }

    #[test]
    fn archive_requests_carry_the_window_and_sink_indexes() {
        let sources = [source("orders", Some("orders-v2"), &["a", "b", "c"])];
        let mut s = spec(orders_filter());
        s.kind = ReplayKind::Archive;
        s.archive = archive("2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z", &["c", "a"]);
        let body = build_request(&s, "j", &sources).unwrap();
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({
                "job_id": "j",
                "kind": "archive",
                "filter": {"tenant": "acme", "source_id": "orders-v2"},
                "rate": 50,
                "from": 1_767_225_600_000u64,
                "to": 1_767_229_200_000u64,
                "sinks": [2, 0]
            })
        );
        // What the gateway checks of it passes.
        let w = body.archive_window().unwrap().unwrap();
        assert_eq!(
            (w.from, w.to, w.sinks),
            (1_767_225_600_000, 1_767_229_200_000, vec![0, 2])
        );
        // Without sinks: every sink of each hook's source, and no source needed.
        s.filter.source = None;
        s.archive = archive("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", &[]);
        let body = serde_json::to_value(build_request(&s, "j", &sources).unwrap()).unwrap();
        assert!(body.get("sinks").is_none(), "{body}");
        assert_eq!(body["filter"], json!({"tenant": "acme"}));
        // One hook by its id.
        s.filter.id = Some("0190a5b2-1111-7222-8333-444455556666".into());
        let body = serde_json::to_value(build_request(&s, "j", &sources).unwrap()).unwrap();
        assert_eq!(
            body["filter"],
            json!({"tenant": "acme", "id": "0190a5b2-1111-7222-8333-444455556666"})
        );
    }

    #[test]
    fn quarantine_requests_take_a_receive_window_and_a_hook_id() {
        let sources = [source("orders", None, &["a"])];
        let mut s = spec(ReplayFilterSpec {
            id: Some("0190a5b2-1111-7222-8333-444455556666".into()),
            since: Some("2026-01-01T00:00:00Z".into()),
            until: Some("2026-01-01T00:00:01Z".into()),
            ..orders_filter()
        });
        s.kind = ReplayKind::Quarantine;
        let body = serde_json::to_value(build_request(&s, "j", &sources).unwrap()).unwrap();
        assert_eq!(
            body,
            json!({
                "job_id": "j",
                "kind": "quarantine",
                "filter": {"tenant": "acme", "source_id": "orders",
                           "id": "0190a5b2-1111-7222-8333-444455556666",
                           "since": 1_767_225_600_000u64, "until": 1_767_225_601_000u64},
                "rate": 50
            })
        );
    }

    #[test]
    fn kind_rules_hold_without_cel() {
        let sources = [source("orders", None, &["a", "b"])];
        let err = |kind, filter: ReplayFilterSpec, a: Option<ArchiveReplaySpec>| {
            let mut s = spec(filter);
            s.kind = kind;
            s.archive = a;
            build_request(&s, "j", &sources).unwrap_err()
        };
        let window = || archive("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", &[]);
        let cases = [
            (
                err(ReplayKind::Archive, orders_filter(), None),
                "archive: kind archive requires",
            ),
            (
                err(ReplayKind::Dlq, orders_filter(), window()),
                "archive: is only for kind archive",
            ),
            (
                err(ReplayKind::Quarantine, orders_filter(), window()),
                "archive: is only for kind archive",
            ),
            (
                err(
                    ReplayKind::Archive,
                    ReplayFilterSpec {
                        since: Some("2026-01-01T00:00:00Z".into()),
                        ..orders_filter()
                    },
                    window(),
                ),
                "filter.since: not a filter of kind archive",
            ),
            (
                err(
                    ReplayKind::Archive,
                    ReplayFilterSpec {
                        sink: Some("a".into()),
                        ..orders_filter()
                    },
                    window(),
                ),
                "filter.sink: not a filter of kind archive",
            ),
            (
                err(
                    ReplayKind::Quarantine,
                    ReplayFilterSpec {
                        sink: Some("a".into()),
                        ..orders_filter()
                    },
                    None,
                ),
                "filter.sink: not a filter of kind quarantine",
            ),
            (
                err(
                    ReplayKind::Quarantine,
                    ReplayFilterSpec {
                        error_class: Some(ErrorClass::Permanent),
                        ..orders_filter()
                    },
                    None,
                ),
                "filter.errorClass: not a filter of kind quarantine",
            ),
            (
                err(
                    ReplayKind::Archive,
                    ReplayFilterSpec::default(),
                    archive("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", &["a"]),
                ),
                "archive.sinks needs filter.source",
            ),
            (
                err(
                    ReplayKind::Archive,
                    orders_filter(),
                    archive("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", &["zz"]),
                ),
                "archive.sinks[0]: Source orders has no sink \"zz\"",
            ),
            (
                err(
                    ReplayKind::Archive,
                    orders_filter(),
                    archive("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", &["a", "a"]),
                ),
                "archive.sinks[1]: names Sink \"a\" twice",
            ),
            (
                err(
                    ReplayKind::Archive,
                    orders_filter(),
                    archive("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z", &[]),
                ),
                "archive.from must be before archive.to",
            ),
            (
                err(
                    ReplayKind::Archive,
                    orders_filter(),
                    archive("yesterday", "2026-01-01T00:00:00Z", &[]),
                ),
                "archive.from is not an RFC 3339 time",
            ),
            (
                err(
                    ReplayKind::Dlq,
                    ReplayFilterSpec {
                        id: Some("nope".into()),
                        ..orders_filter()
                    },
                    None,
                ),
                "filter.id: not a hook id",
            ),
        ];
        for (got, want) in cases {
            assert!(
                got.starts_with(want),
                "{got:?} does not start with {want:?}"
            );
        }
    }
}
