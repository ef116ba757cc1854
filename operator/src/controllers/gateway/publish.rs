//! Stage 5 of the Gateway reconcile: the statuses. The Gateway's (from the render and the
//! pods' records, with each Sink's delivery errors) and each of its Sources' (how it rendered,
//! on how many pods, its quarantine), computed by `crate::status`, their Events sent, and each
//! written when it changed. Counts that move with every hook or failed attempt (delivery
//! errors, archive and DLQ counts, quarantine counts) are written at most every
//! `write::DELIVERY_WRITE_EVERY`: each write wakes this controller and the Sink controller
//! again. The Gateway's lifecycle side (`lifecycle`): its `LifecycleEvents` condition, its
//! pods' lifecycle delivery errors named after their Sinks, and the aggregated Events of
//! dead-letter bursts and breaker transitions.
//!
//! May import: `context`, `render`, `status`, and the earlier stages' types (`inputs`,
//! `children`, `monitoring`, `observe`), `events`, `lifecycle`, `write`.

use ankusa_crds::{Gateway, Source};
use kube::ResourceExt;

use crate::context::{Ctx, Result};
use crate::controllers::gateway::children::Applied;
use crate::controllers::gateway::events::{gateway_events, source_events};
use crate::controllers::gateway::inputs::Loaded;
use crate::controllers::gateway::lifecycle::{self, name_lifecycle_failures};
use crate::controllers::gateway::monitoring::MONITORING_READY;
use crate::controllers::gateway::observe::Observed;
use crate::controllers::gateway::write::{
    CONTROLLER, source_write_due, status_write_due, write_gateway_status,
};
use crate::render::source_of;
use crate::status::conditions::condition;
use crate::status::gateway::{delivery_errors, gateway_status, is_ready, same_status};
use crate::status::lifecycle::{LIFECYCLE_EVENTS, lifecycle_condition};
use crate::status::now_rfc3339;
use crate::status::source::{self as source_st, GatewayView, source_status};

/// Computes, announces and writes the statuses; answers whether the Gateway is Ready.
pub async fn statuses(
    ctx: &Ctx,
    gw: &Gateway,
    inputs: &Loaded,
    observed: Observed,
    applied: Applied,
) -> Result<bool> {
    let rendered = &inputs.rendered;
    let now = now_rfc3339();
    let old = gw.status.clone().unwrap_or_default();
    let gw_name = gw.name_any();
    let own_sources: Vec<&Source> = inputs
        .sources
        .iter()
        .filter(|s| source_of(s, &gw_name))
        .collect();
    let mut status = gateway_status(
        gw,
        rendered,
        observed.pods,
        applied.storage_note,
        &old,
        &now,
    );
    if let Some(c) = applied.monitoring {
        status.conditions.push(condition(
            &old.conditions,
            MONITORING_READY,
            c,
            gw.metadata.generation,
            &now,
        ));
    }
    if let Some(c) = lifecycle_condition(gw, rendered) {
        status.conditions.push(condition(
            &old.conditions,
            LIFECYCLE_EVENTS,
            c,
            gw.metadata.generation,
            &now,
        ));
    }
    let mut failing = observed.failing;
    name_lifecycle_failures(gw, rendered, &mut failing);
    delivery_errors(&mut status.sinks, &failing, &own_sources);
    gateway_events(ctx, gw, &old, &status, rendered).await;
    lifecycle::events(
        ctx,
        gw,
        &old,
        &status,
        &failing,
        &observed.answered,
        &own_sources,
    )
    .await;
    let converged = is_ready(&status);
    let programmed = status.programmed_replicas;
    if !same_status(&old, &status) && status_write_due(ctx, gw, &old, &status) {
        write_gateway_status(ctx, gw, status).await?;
    }
    let prefix = rendered
        .base
        .as_ref()
        .map(|c| c.http.prefix.clone())
        .unwrap_or_else(|| "/webhooks".into());
    let view = GatewayView {
        error: rendered.error.as_deref(),
        programmed,
        desired: gw.spec.replicas,
        prefix: &prefix,
        gateway: &gw_name,
        pens: &observed.pens,
    };
    for src in own_sources {
        let old = src.status.clone().unwrap_or_default();
        let new = source_status(src, rendered.sources.get(&src.name_any()), view, &old, &now);
        source_events(ctx, src, &old, &new).await;
        if !source_st::same(&old, &new) && source_write_due(ctx, src, &old, &new) {
            ctx.patch_status(src, CONTROLLER, &new).await?;
        }
    }
    Ok(converged)
}
