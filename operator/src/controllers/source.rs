//! Source: the deletion finalizer. A Source whose pods still hold queued deliveries stays
//! (and stays in the rendered config) until they drained on every pod, or until the user
//! annotates it `ankusa.dev/deliveries: dead_letter`, after which the operator moves them to
//! each pod's DLQ as `source_gone: <id>` and lets the Source go. Also reports a Source whose
//! Gateway does not exist (the Gateway controller writes every other status). The statuses
//! themselves are computed in `status::source`.
//!
//! May import: `context`, `pods`, `admin_tls`, `render` (the source id), `status`.

use std::sync::Arc;
use std::time::Duration;

use ankusa_crds::names::{DELIVERIES_ANNOTATION, DELIVERIES_DEAD_LETTER, SOURCE_FINALIZER};
use ankusa_crds::source::QueuedOnPod;
use ankusa_crds::{Gateway, Source};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event, finalizer};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::admin::PodTarget;
use crate::admin_tls::admin_access;
use crate::context::{Ctx, Error, Result};
use crate::pods::{gateway_pods, pod_target};
use crate::render;
use crate::status::source::{drain_status, gateway_missing};
use crate::status::{now_rfc3339, same_conditions};

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
    let old = src.status.clone().unwrap_or_default();
    let status = gateway_missing(src, &old, &now_rfc3339());
    if !same_conditions(&old.conditions, &status.conditions) {
        let msg = format!("Gateway {} not found", src.spec.gateway_ref.name);
        ctx.event(src, EventType::Warning, "GatewayNotFound", msg)
            .await;
        ctx.patch_status(src, CONTROLLER, &status).await?;
    }
    Ok(Action::requeue(Duration::from_secs(30)))
}

/// Whether the user asked to dead-letter the queued deliveries.
pub fn wants_dead_letter(src: &Source) -> bool {
    src.annotations()
        .get(DELIVERIES_ANNOTATION)
        .is_some_and(|v| v == DELIVERIES_DEAD_LETTER)
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
    if gw.is_direct() {
        // A direct Gateway's pods queue nothing: the Source goes at once.
        ctx.event(
            src,
            EventType::Normal,
            "Drained",
            "direct Gateway: no deliveries are queued on its pods; removed from the config"
                .to_string(),
        )
        .await;
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
                ctx.patch_status(src, CONTROLLER, &json!({ "drain": drain }))
                    .await?;
            }
            Err(Error::Waiting(drain.message.unwrap_or_default()))
        }
    }
}
