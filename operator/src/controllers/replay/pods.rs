//! The ReplayJob's calls to each pod of its Gateway: create or poll the job (asking a
//! recreated pod again, with the same job id), resume the pods whose job paused itself, cancel
//! it everywhere on deletion. A pod that does not answer is reported in its record, never
//! fails the pass.
//!
//! May import: `context`, crate `pods`, `resources`, `status::replay` (the records).

use std::collections::BTreeSet;

use ankusa_api::{CreateReplay, JobState};
use ankusa_crds::names::RESUME_ANNOTATION;
use ankusa_crds::{Gateway, ReplayJob, ReplayJobStatus, ReplayKind, ReplayPodStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, Patch};
use kube::runtime::events::EventType;
use serde_json::json;

use crate::admin::PodTarget;
use crate::context::{Ctx, Result};
use crate::pods::{AdminAccess, pod_target};
use crate::resources;
use crate::status::replay::{new_record, request_kind, update_from_view};

/// A Gateway's pods and how to reach them.
pub struct Fleet<'a> {
    pub gw: &'a Gateway,
    /// Its pods (`crate::pods::gateway_pods`).
    pub pods: Vec<Pod>,
    pub access: AdminAccess,
}

impl Fleet<'_> {
    /// The admin API of the pod `name`, when it runs.
    pub fn target(&self, name: &str) -> Option<PodTarget> {
        self.pods
            .iter()
            .find(|p| p.name_any() == name)
            .and_then(|p| pod_target(p, self.gw.spec.ports.admin, &self.access))
    }
}

/// Every pod the job concerns (those the Gateway should run and those that exist), synced at
/// once; a `PodRestarted` Event for each asked again after it was recreated.
pub async fn sync_all(
    ctx: &Ctx,
    rj: &ReplayJob,
    fleet: &Fleet<'_>,
    old: &ReplayJobStatus,
    body: &CreateReplay,
    now: &str,
) -> Vec<ReplayPodStatus> {
    let job_id = rj.uid().unwrap_or_default();
    let mut names: BTreeSet<String> = resources::pod_names(fleet.gw, fleet.gw.spec.replicas)
        .into_iter()
        .collect();
    names.extend(fleet.pods.iter().map(|p| p.name_any()));
    let work = names.iter().map(|name| {
        let rec = old
            .pods
            .iter()
            .find(|r| &r.pod == name)
            .cloned()
            .unwrap_or_else(|| new_record(name, &job_id));
        sync_pod(ctx, fleet.target(name), rec, body, now)
    });
    let results = futures::future::join_all(work).await;
    let mut records = Vec::with_capacity(results.len());
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
    records
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

/// The user asked (annotation) to resume the pods whose job paused itself: sets each back to
/// `running`, then removes the annotation once none is left paused, so a later pause needs a
/// new request.
pub async fn resume_paused(
    ctx: &Ctx,
    rj: &ReplayJob,
    fleet: &Fleet<'_>,
    records: &mut [ReplayPodStatus],
    kind: ReplayKind,
    now: &str,
) -> Result<()> {
    let mut resumed = Vec::new();
    let mut left = Vec::new();
    for rec in records.iter_mut().filter(|r| r.state == "paused") {
        let Some(t) = fleet.target(&rec.pod) else {
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

/// Cancels the job on every pod whose record is not done; answers the pods cancelled, or why
/// some could not be (a pod that will come back would resume the job: it is waited for).
pub async fn cancel_all(
    ctx: &Ctx,
    fleet: &Fleet<'_>,
    old: &ReplayJobStatus,
    job_id: &str,
) -> Result<Vec<String>, Vec<String>> {
    let mut failures = Vec::new();
    let mut cancelled = Vec::new();
    for rec in old.pods.iter().filter(|r| !r.done) {
        let expected =
            resources::ordinal(fleet.gw, &rec.pod).is_some_and(|o| o < fleet.gw.spec.replicas);
        match fleet.target(&rec.pod) {
            Some(t) => {
                let r = ctx
                    .admin
                    .set_replay_state(&t, job_id, JobState::Cancelled)
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
    if failures.is_empty() {
        Ok(cancelled)
    } else {
        Err(failures)
    }
}
