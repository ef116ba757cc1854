//! Sink: status from the Gateways that render it (`status.sinks` of each Gateway: how it was
//! rendered, and which pods fail to deliver to it), and a finalizer that keeps a Sink while a
//! Source still delivers to it, or a Gateway sends its lifecycle events to it (removing it
//! would dead-letter their queued deliveries as `sink_gone`). The statuses themselves are computed in `status::sink`.
//!
//! May import: `context`, `status`.

use std::sync::Arc;
use std::time::Duration;

use ankusa_crds::condition::DEGRADED;
use ankusa_crds::names::SINK_FINALIZER;
use ankusa_crds::sink::OptionsFrom;
use ankusa_crds::{Gateway, Sink, SinkStatus, Source, find_condition};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event, finalizer};
use serde_json::json;

use crate::context::{Ctx, Error, Result};
use crate::status::now_rfc3339;
use crate::status::sink::{
    DELIVERY_FAILING, changed, delivery_failing, in_use_conditions, in_use_message, sink_status,
    users,
};

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
    let used_by = users(sink, &sources, &gateways);
    let old = sink.status.clone().unwrap_or_default();
    // Once per generation: the deprecated `options` map still works, for one more release.
    if old.observed_generation != sink.metadata.generation
        && let Ok((_, OptionsFrom::Deprecated)) = sink.spec.resolved_options()
    {
        ctx.event(
            sink,
            EventType::Warning,
            "DeprecatedOptions",
            format!(
                "spec.options is deprecated and read for one more release: move its keys to spec.{}",
                sink.spec.type_.field()
            ),
        )
        .await;
    }
    let new = sink_status(sink, &gateways, &used_by, &old, &now_rfc3339());
    if changed(&old, &new) {
        delivery_events(ctx, sink, &old, &new).await;
        let ready = new.conditions.iter().find(|c| c.type_ == "Ready");
        let was = old.conditions.iter().find(|c| c.type_ == "Ready");
        if let Some(r) = ready
            && matches!(r.reason.as_deref(), Some("RenderFailed" | "InvalidSpec"))
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
        ctx.patch_status(sink, CONTROLLER, &new).await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

async fn cleanup(sink: &Sink, ctx: &Ctx) -> Result<Action> {
    let ns = sink.namespace().unwrap_or_default();
    let sources = Api::<Source>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let gateways = Api::<Gateway>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let used_by = users(sink, &sources, &gateways);
    if used_by.is_empty() {
        return Ok(Action::await_change());
    }
    let msg = in_use_message(&used_by);
    let old = sink.status.clone().unwrap_or_default();
    let ready = old.conditions.iter().find(|c| c.type_ == "Ready");
    if ready.and_then(|r| r.reason.as_deref()) != Some("InUse") {
        ctx.event(sink, EventType::Warning, "InUse", msg.clone())
            .await;
        let conds = in_use_conditions(sink, &old, &msg, &now_rfc3339());
        ctx.patch_status(sink, CONTROLLER, &json!({ "conditions": conds }))
            .await?;
    }
    Err(Error::Waiting(msg))
}
