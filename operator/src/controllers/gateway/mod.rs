//! The Gateway controller: Gateway → config Secret (one key per pod), Services, NetworkPolicy,
//! StatefulSet; pushes each pod's config to its admin API and reads back, in the same
//! `GET /v1/status`, the loaded hash, the sinks whose deliveries fail there, its quarantine pen,
//! its archive and its DLQ; writes the status of the Gateway (with each Sink's delivery errors,
//! which the Sink controller turns into the Sink's condition, and each pod's archive and DLQ)
//! and of its Sources (with their quarantined hooks per pod).
//!
//! [`reconcile`] reads in five stages, one file each, every stage a function with its inputs
//! passed in (the controller-rs shape):
//! 1. `guard`: a Gateway being deleted, naming a ServiceAccount the policy does not allow, or
//!    colliding with an object it does not own is stopped before anything is applied; else
//!    its admin token and TLS trust are made ready;
//! 2. `inputs`: its Sources, the Sinks they use and the Secrets they read; the render; its pods;
//! 3. `children`: the config Secret, Services, NetworkPolicy (`network_policy`),
//!    PodDisruptionBudget (`disruption`), StatefulSet, ServiceMonitor / PodMonitor
//!    (`monitoring`), and pods whose volume claim is gone (`volumes`); objects of API groups
//!    found by discovery go through `dynamic`;
//! 4. `observe`: each pod polled and, when it runs another config, pushed its own;
//! 5. `publish`: the statuses (computed by `crate::status`), their Events (`events`; the
//!    lifecycle ones, aggregated over the pods, `lifecycle`), written when they changed
//!    (`write`: the field manager and the write throttles).
//!
//! May import: `context`, `pods`, `ownership`, `admin_tls`, `render`, `resources`, `status`,
//! `signals`;
//! a stage imports only the types of the stages before it, and the leaves `events`,
//! `lifecycle`, `write` and `dynamic`.

mod children;
mod direct;
mod disruption;
mod dynamic;
mod events;
mod guard;
mod inputs;
mod lifecycle;
mod monitoring;
mod network_policy;
mod observe;
mod publish;
mod volumes;
mod write;

use std::sync::Arc;
use std::time::Duration;

use ankusa_crds::Gateway;
use kube::runtime::controller::Action;

use crate::context::{Ctx, Error, Result};
use guard::Admission;

pub use write::{CONTROLLER, DELIVERY_WRITE_EVERY};

pub async fn reconcile(gw: Arc<Gateway>, ctx: Arc<Ctx>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    // 1. Stop before anything is applied; else the admin token and TLS trust.
    let mut admitted = match guard::admit(&ctx, &gw).await? {
        Admission::Admitted(a) => a,
        Admission::Stopped(action) => {
            if gw.metadata.deletion_timestamp.is_some() {
                ctx.signals
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .forget(&lifecycle::memory_key(&gw));
            }
            return Ok(action);
        }
    };
    // 2. Sources, Sinks, their Secrets; the render; the pods.
    let inputs = inputs::load(&ctx, &gw, &admitted).await?;
    // 3. Config Secret, Services, NetworkPolicy, PodDisruptionBudget, StatefulSet, monitors;
    // pods that lost their volume.
    let applied = children::apply(&ctx, &gw, &mut admitted, &inputs).await?;
    // 4. Each pod: its config pushed when it runs another, what it reports read back.
    let observed = observe::pods(&ctx, &gw, &inputs.pods, &inputs.desired, &admitted.access).await;
    // 5. The Gateway's and its Sources' statuses and Events.
    let converged = publish::statuses(&ctx, &gw, &inputs, observed, applied).await?;
    Ok(if converged {
        // Re-check now and then: a pod may have reloaded an older file.
        Action::requeue(Duration::from_secs(20))
    } else {
        Action::requeue(Duration::from_secs(3))
    })
}

pub fn error_policy(_gw: Arc<Gateway>, err: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.metrics.error(CONTROLLER, err.label());
    tracing::warn!(error = %err, "gateway reconcile failed");
    Action::requeue(Duration::from_secs(if err.is_waiting() { 3 } else { 10 }))
}
