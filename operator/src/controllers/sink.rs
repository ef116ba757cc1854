//! Sink: status from the Gateways that render it (`status.sinks` of each Gateway: how it was
//! rendered, and which pods fail to deliver to it), and a finalizer that keeps a Sink while a
//! Source still delivers to it (removing it would dead-letter that Source's queued deliveries
//! as `sink_gone`).

use std::sync::Arc;
use std::time::Duration;

use ankusa_crds::condition::DEGRADED;
use ankusa_crds::names::SINK_FINALIZER;
use ankusa_crds::{Gateway, Sink, SinkDeliveryError, SinkStatus, Source, find_condition};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event, finalizer};
use serde_json::json;

use crate::context::{Ctx, Error, Result, status_params};
use crate::status::{Conds, conditions, fraction, now_rfc3339, same_conditions};

pub const CONTROLLER: &str = "sink";

pub async fn reconcile(sink: Arc<Sink>, ctx: Arc<Ctx>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    let ns = sink
        .namespace()
        .ok_or_else(|| Error::Invalid("Sink without namespace".into()))?;
    let api: Api<Sink> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, SINK_FINALIZER, sink, |ev| async {
        match ev {
            Event::Apply(s) => apply(&s, &ctx).await,
            Event::Cleanup(s) => cleanup(&s, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

pub fn error_policy(_s: Arc<Sink>, err: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.metrics.error(CONTROLLER, err.label());
    if !err.is_waiting() {
        tracing::warn!(error = %err, "sink reconcile failed");
    }
    Action::requeue(Duration::from_secs(if err.is_waiting() { 5 } else { 10 }))
}

/// Sources (names) that deliver to a Sink.
pub fn users(sink: &Sink, sources: &[Source]) -> Vec<String> {
    let name = sink.name_any();
    sources
        .iter()
        .filter(|s| s.spec.sinks.iter().any(|r| r.name == name))
        .map(|s| s.name_any())
        .collect()
}

/// The `Degraded` reason while some pod's latest delivery to the Sink failed.
pub const DELIVERY_FAILING: &str = "DeliveryFailing";

/// Pods the `DeliveryFailing` message names; the rest are counted. With errors of at most
/// 512 bytes this keeps the message near 2 KB, far under a condition's 32768.
pub const MESSAGE_PODS: usize = 3;

/// `gw/pod-0: redis: not_connected: tls_handshake: ... (5 failures, circuit breaker open)`,
/// the first `MESSAGE_PODS` of `failing` (gateway name, error), then `and N more pods`.
fn delivery_message(failing: &[(String, &SinkDeliveryError)], total: usize) -> String {
    let mut parts: Vec<String> = failing
        .iter()
        .take(MESSAGE_PODS)
        .map(|(gw, e)| {
            let n = e.failures;
            let mut m = format!(
                "{gw}/{}: {} ({n} failure{}",
                e.pod,
                e.error,
                if n == 1 { "" } else { "s" }
            );
            if e.breaker_open {
                m.push_str(", circuit breaker open");
            }
            m.push(')');
            m
        })
        .collect();
    let shown = parts.len();
    if total > shown {
        let more = total - shown;
        parts.push(format!(
            "and {more} more pod{}",
            if more == 1 { "" } else { "s" }
        ));
    }
    parts.join("; ")
}

/// The Sink's status from the Gateways' view of it.
pub fn sink_status(
    sink: &Sink,
    gateways: &[Gateway],
    used_by: &[String],
    old: &SinkStatus,
    now: &str,
) -> SinkStatus {
    let name = sink.name_any();
    let generation = sink.metadata.generation;
    let mut programmed = 0;
    let mut desired = 0;
    let mut errors = Vec::new();
    let mut stale = Vec::new();
    let mut failing: Vec<(String, &SinkDeliveryError)> = Vec::new();
    let mut failing_pods = 0;
    for gw in gateways {
        let Some(st) = gw.status.as_ref() else {
            continue;
        };
        let Some(entry) = st.sinks.iter().find(|s| s.name == name) else {
            continue;
        };
        desired += gw.spec.replicas;
        failing_pods += entry.failing_pods.max(entry.delivery_errors.len() as i32);
        failing.extend(entry.delivery_errors.iter().map(|e| (gw.name_any(), e)));
        if let Some(e) = &entry.error {
            errors.push(format!("{}: {e}", gw.name_any()));
        } else if entry.observed_generation == generation {
            programmed += st.programmed_replicas;
        } else {
            stale.push(gw.name_any());
        }
    }
    let mut conds = if !errors.is_empty() {
        Conds::blocked("RenderFailed", errors.join("; "))
    } else if used_by.is_empty() {
        Conds {
            ready: (
                true,
                "NotReferenced",
                "no Source delivers to this sink".to_string(),
            ),
            progressing: (false, "Idle", String::new()),
            degraded: (false, "AsExpected", String::new()),
        }
    } else if desired == 0 && stale.is_empty() {
        Conds::under_way(
            "Pending",
            "waiting for the Gateway to render it".to_string(),
        )
    } else {
        let m = format!("programmed on {programmed}/{desired} pods");
        if programmed >= desired && stale.is_empty() {
            Conds::done("Programmed", m)
        } else {
            Conds::under_way("Programming", m)
        }
    };
    // Deliveries failing is a state of the destination, not of the Sink's programming: it
    // makes the Sink Degraded and leaves Ready alone. A refused render says more, and a Sink
    // no Source uses has no deliveries.
    let failing_pods = if used_by.is_empty() { 0 } else { failing_pods };
    if failing_pods > 0 && !conds.degraded.0 {
        conds.degraded = (
            true,
            DELIVERY_FAILING,
            delivery_message(&failing, failing_pods as usize),
        );
    }
    SinkStatus {
        observed_generation: generation,
        conditions: conditions(&old.conditions, conds, generation, now),
        programmed: Some(fraction(programmed, desired)),
        programmed_replicas: programmed,
        replicas: desired,
        used_by: (!used_by.is_empty()).then(|| used_by.join(",")),
        failing_pods,
    }
}

/// Whether the Sink's `Degraded` condition says its deliveries fail.
fn delivery_failing(st: &SinkStatus) -> bool {
    find_condition(&st.conditions, DEGRADED)
        .is_some_and(|c| c.is_true() && c.reason.as_deref() == Some(DELIVERY_FAILING))
}

/// Events of the delivery transitions only (a Warning when deliveries start failing, a Normal
/// one when no pod reports a failure any more): the message changes with every failed
/// attempt, and an Event per change would flood the namespace.
async fn delivery_events(ctx: &Ctx, sink: &Sink, old: &SinkStatus, new: &SinkStatus) {
    let (was, is) = (delivery_failing(old), delivery_failing(new));
    if is && !was {
        let msg = find_condition(&new.conditions, DEGRADED)
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        ctx.event(sink, EventType::Warning, DELIVERY_FAILING, msg)
            .await;
    } else if was && !is && new.failing_pods == 0 {
        ctx.event(
            sink,
            EventType::Normal,
            "Delivering",
            "no gateway pod reports a failed delivery to this sink any more",
        )
        .await;
    }
}

async fn apply(sink: &Sink, ctx: &Ctx) -> Result<Action> {
    let ns = sink.namespace().unwrap_or_default();
    let sources = Api::<Source>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let gateways = Api::<Gateway>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let used_by = users(sink, &sources);
    let old = sink.status.clone().unwrap_or_default();
    let new = sink_status(sink, &gateways, &used_by, &old, &now_rfc3339());
    let changed = !same_conditions(&old.conditions, &new.conditions)
        || old.programmed != new.programmed
        || old.used_by != new.used_by
        || old.observed_generation != new.observed_generation
        || old.failing_pods != new.failing_pods;
    if changed {
        delivery_events(ctx, sink, &old, &new).await;
        let ready = new.conditions.iter().find(|c| c.type_ == "Ready");
        let was = old.conditions.iter().find(|c| c.type_ == "Ready");
        if let Some(r) = ready
            && r.reason.as_deref() == Some("RenderFailed")
            && was.map(|w| &w.message) != Some(&r.message)
        {
            ctx.event(
                sink,
                EventType::Warning,
                "RenderFailed",
                r.message.clone().unwrap_or_default(),
            )
            .await;
        }
        let api: Api<Sink> = Api::namespaced(ctx.client.clone(), &ns);
        let body = json!({ "apiVersion": "ankusa.dev/v1alpha1", "kind": "Sink", "status": new });
        api.patch_status(
            &sink.name_any(),
            &status_params(CONTROLLER),
            &Patch::Apply(&body),
        )
        .await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

async fn cleanup(sink: &Sink, ctx: &Ctx) -> Result<Action> {
    let ns = sink.namespace().unwrap_or_default();
    let sources = Api::<Source>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let used_by = users(sink, &sources);
    if used_by.is_empty() {
        return Ok(Action::await_change());
    }
    let msg = format!(
        "still used by Source {}: remove it from their sinks first (their queued deliveries would be dead-lettered as sink_gone)",
        used_by.join(", ")
    );
    let old = sink.status.clone().unwrap_or_default();
    let ready = old.conditions.iter().find(|c| c.type_ == "Ready");
    if ready.and_then(|r| r.reason.as_deref()) != Some("InUse") {
        ctx.event(sink, EventType::Warning, "InUse", msg.clone())
            .await;
        let conds = conditions(
            &old.conditions,
            Conds::blocked("InUse", msg.clone()),
            sink.metadata.generation,
            &now_rfc3339(),
        );
        let api: Api<Sink> = Api::namespaced(ctx.client.clone(), &ns);
        let body = json!({ "apiVersion": "ankusa.dev/v1alpha1", "kind": "Sink", "status": { "conditions": conds } });
        api.patch_status(
            &sink.name_any(),
            &status_params(CONTROLLER),
            &Patch::Apply(&body),
        )
        .await?;
    }
    Err(Error::Waiting(msg))
}
