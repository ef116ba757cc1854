//! Source: the deletion finalizer. A Source whose pods still hold queued deliveries stays
//! (and stays in the rendered config) until they drained on every pod, or until the user
//! annotates it `ankusa.dev/deliveries: dead_letter`, after which the operator moves them to
//! each pod's DLQ as `source_gone: <id>` and lets the Source go. Also reports a Source whose
//! Gateway does not exist (the Gateway controller writes every other status).

use std::sync::Arc;
use std::time::Duration;

use ankusa_crds::names::{DELIVERIES_ANNOTATION, DELIVERIES_DEAD_LETTER, SOURCE_FINALIZER};
use ankusa_crds::source::{DrainStatus, QueuedOnPod};
use ankusa_crds::{Gateway, Source, SourceStatus};
use kube::api::{Api, Patch};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event, finalizer};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::admin::PodTarget;
use crate::admin_tls::admin_access;
use crate::context::{Ctx, Error, Result, pod_target, status_params};
use crate::pods::gateway_pods;
use crate::render;
use crate::status::{Conds, conditions, now_rfc3339, same_conditions};

pub const CONTROLLER: &str = "source";

pub async fn reconcile(src: Arc<Source>, ctx: Arc<Ctx>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    let ns = src
        .namespace()
        .ok_or_else(|| Error::Invalid("Source without namespace".into()))?;
    let api: Api<Source> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, SOURCE_FINALIZER, src, |ev| async {
        match ev {
            Event::Apply(src) => apply(&src, &ctx).await,
            Event::Cleanup(src) => cleanup(&src, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

pub fn error_policy(_src: Arc<Source>, err: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.metrics.error(CONTROLLER, err.label());
    if err.is_waiting() {
        tracing::debug!(error = %err, "source deletion waits");
        Action::requeue(Duration::from_secs(3))
    } else {
        tracing::warn!(error = %err, "source reconcile failed");
        Action::requeue(Duration::from_secs(10))
    }
}

async fn apply(src: &Source, ctx: &Ctx) -> Result<Action> {
    let ns = src.namespace().unwrap_or_default();
    let gws: Api<Gateway> = Api::namespaced(ctx.client.clone(), &ns);
    if gws.get_opt(&src.spec.gateway_ref.name).await?.is_some() {
        return Ok(Action::await_change());
    }
    let msg = format!("Gateway {} not found", src.spec.gateway_ref.name);
    let old = src.status.clone().unwrap_or_default();
    let conds = conditions(
        &old.conditions,
        Conds::blocked("GatewayNotFound", msg.clone()),
        src.metadata.generation,
        &now_rfc3339(),
    );
    if !same_conditions(&old.conditions, &conds) {
        ctx.event(src, EventType::Warning, "GatewayNotFound", msg)
            .await;
        let status = SourceStatus {
            observed_generation: src.metadata.generation,
            conditions: conds,
            ..Default::default()
        };
        patch_status(ctx, src, &status).await?;
    }
    Ok(Action::requeue(Duration::from_secs(30)))
}

async fn patch_status(ctx: &Ctx, src: &Source, status: &SourceStatus) -> Result<()> {
    let api: Api<Source> =
        Api::namespaced(ctx.client.clone(), &src.namespace().unwrap_or_default());
    let body = json!({ "apiVersion": "ankusa.dev/v1alpha1", "kind": "Source", "status": status });
    api.patch_status(
        &src.name_any(),
        &status_params(CONTROLLER),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

/// Whether the user asked to dead-letter the queued deliveries.
pub fn wants_dead_letter(src: &Source) -> bool {
    src.annotations()
        .get(DELIVERIES_ANNOTATION)
        .is_some_and(|v| v == DELIVERIES_DEAD_LETTER)
}

/// The drain status from what each pod answered; `None` when nothing is queued anywhere
/// (the Source may go).
pub fn drain_status(dead_letter: bool, pods: Vec<QueuedOnPod>) -> Option<DrainStatus> {
    let pending: i64 = pods.iter().filter_map(|p| p.pending).sum();
    let unknown: Vec<&str> = pods
        .iter()
        .filter(|p| p.pending.is_none())
        .map(|p| p.pod.as_str())
        .collect();
    if pending == 0 && unknown.is_empty() {
        return None;
    }
    let where_: Vec<String> = pods
        .iter()
        .filter(|p| p.pending.unwrap_or(0) > 0)
        .map(|p| format!("{} on {}", p.pending.unwrap_or(0), p.pod))
        .collect();
    let mut message = if dead_letter {
        format!("dead-lettering {pending} queued deliveries")
    } else {
        format!(
            "waiting for {pending} queued deliveries to drain ({}); annotate {DELIVERIES_ANNOTATION}={DELIVERIES_DEAD_LETTER} to dead-letter them",
            where_.join(", ")
        )
    };
    if !unknown.is_empty() {
        message.push_str(&format!("; no answer from {}", unknown.join(", ")));
    }
    Some(DrainStatus {
        phase: if dead_letter {
            "DeadLettering"
        } else {
            "Draining"
        }
        .into(),
        pending,
        pods,
        message: Some(message),
    })
}

async fn query_pod(ctx: &Ctx, t: &PodTarget, id: &str, dead_letter: bool) -> QueuedOnPod {
    let mut q = QueuedOnPod {
        pod: t.name.clone(),
        ..Default::default()
    };
    if dead_letter {
        // Each call moves a bounded page; repeat while the pod says there is more.
        for _ in 0..20 {
            let r = ctx.admin.dead_letter_source(t, id).await;
            ctx.metrics.pod_call("dead_letter_source", &r);
            match r {
                Ok(d) => {
                    q.pending = Some(d.pending);
                    q.dead = Some(d.dead);
                    if !d.more {
                        break;
                    }
                }
                Err(e) => {
                    q.pending = None;
                    q.error = Some(e.to_string());
                    break;
                }
            }
        }
    } else {
        let r = ctx.admin.source_deliveries(t, id).await;
        ctx.metrics.pod_call("source_deliveries", &r);
        match r {
            Ok(d) => {
                q.pending = Some(d.pending);
                q.dead = Some(d.dead);
            }
            Err(e) => q.error = Some(e.to_string()),
        }
    }
    q
}

async fn cleanup(src: &Source, ctx: &Ctx) -> Result<Action> {
    let ns = src.namespace().unwrap_or_default();
    let gws: Api<Gateway> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(gw) = gws.get_opt(&src.spec.gateway_ref.name).await? else {
        return Ok(Action::await_change());
    };
    if gw.meta().deletion_timestamp.is_some() {
        // The whole Gateway goes, volumes and all: nothing to wait for.
        return Ok(Action::await_change());
    }
    let id = render::source_id(src);
    let dead_letter = wants_dead_letter(src);
    let access = admin_access(ctx, &gw).await?;
    let pods = gateway_pods(&ctx.client, &gw).await?;
    let mut answers = Vec::new();
    for p in &pods {
        match pod_target(p, gw.spec.ports.admin, &access) {
            Some(t) => answers.push(query_pod(ctx, &t, &id, dead_letter).await),
            None => answers.push(QueuedOnPod {
                pod: p.name_any(),
                error: Some("pod not running".into()),
                ..Default::default()
            }),
        }
    }
    let old = src.status.clone().unwrap_or_default();
    match drain_status(dead_letter, answers.clone()) {
        None => {
            let moved: i64 = if dead_letter {
                answers.iter().filter_map(|a| a.dead).sum()
            } else {
                0
            };
            let note = if dead_letter {
                format!(
                    "queued deliveries dead-lettered as source_gone: {id} ({moved} of this source now in the pods' DLQ); removed from the config"
                )
            } else {
                "no deliveries queued on any pod; removed from the config".to_string()
            };
            ctx.event(src, EventType::Normal, "Drained", note).await;
            Ok(Action::await_change())
        }
        Some(drain) => {
            if old.drain.as_ref().map(|d| (&d.phase, d.pending))
                != Some((&drain.phase, drain.pending))
            {
                let reason = if dead_letter {
                    "DeadLettering"
                } else {
                    "Draining"
                };
                ctx.event(
                    src,
                    EventType::Normal,
                    reason,
                    drain.message.clone().unwrap_or_default(),
                )
                .await;
                let api: Api<Source> = Api::namespaced(ctx.client.clone(), &ns);
                let body = json!({
                    "apiVersion": "ankusa.dev/v1alpha1",
                    "kind": "Source",
                    "status": { "drain": drain },
                });
                api.patch_status(
                    &src.name_any(),
                    &status_params(CONTROLLER),
                    &Patch::Apply(&body),
                )
                .await?;
            }
            Err(Error::Waiting(drain.message.unwrap_or_default()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pod: &str, pending: Option<i64>) -> QueuedOnPod {
        QueuedOnPod {
            pod: pod.into(),
            pending,
            ..Default::default()
        }
    }

    #[test]
    fn drained_only_when_every_pod_answered_zero() {
        assert!(drain_status(false, vec![q("g-0", Some(0)), q("g-1", Some(0))]).is_none());
        let d = drain_status(false, vec![q("g-0", Some(3)), q("g-1", Some(0))]).unwrap();
        assert_eq!((d.phase.as_str(), d.pending), ("Draining", 3));
        assert!(d.message.as_ref().unwrap().contains("3 on g-0"), "{d:?}");
        assert!(
            d.message
                .unwrap()
                .contains("ankusa.dev/deliveries=dead_letter")
        );
        let d = drain_status(false, vec![q("g-0", Some(0)), q("g-1", None)]).unwrap();
        assert!(d.message.unwrap().contains("no answer from g-1"));
        let d = drain_status(true, vec![q("g-0", Some(2))]).unwrap();
        assert_eq!(d.phase, "DeadLettering");
    }
}
