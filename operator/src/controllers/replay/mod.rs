//! The ReplayJob controller: `POST /v1/replays` on every pod of the Gateway with `job_id` =
//! the object's UID and the body of its kind (`dlq`, `archive` with its window and sinks,
//! `quarantine`; built by `render::replay`), polls each pod, aggregates (`status::replay`); a
//! pod whose UID changed (recreated) is asked again with the same job id (the gateway finds
//! the existing job, nothing is duplicated); deletion while running cancels the job on every
//! pod first (finalizer); terminal phases stop requeueing.
//!
//! `apply` runs: guard (terminal, polled too recently) → its Gateway (`Pending` without one)
//! → the request (refused: `Failed`) → each pod synced (`pods`) → paused pods resumed when
//! asked → the status published. A `dryRun` job leaves after its Gateway for `dry_run`: each
//! pod's archive is asked what the filters would do, nothing is replayed. `cleanup` cancels
//! the job on the pods.
//!
//! May import: `context`, `pods` (crate level), `admin_tls`, `render`, `resources`, `status`.

mod apply;
mod cleanup;
mod dry_run;
mod pods;
mod ttl;

use std::sync::Arc;
use std::time::Duration;

use ankusa_crds::ReplayJob;
use ankusa_crds::names::REPLAY_FINALIZER;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event, finalizer};

use crate::context::{Ctx, Error, Result};

pub use apply::CONTROLLER;

pub async fn reconcile(rj: Arc<ReplayJob>, ctx: Arc<Ctx>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    let ns = rj
        .namespace()
        .ok_or_else(|| Error::Invalid("ReplayJob without namespace".into()))?;
    let api: Api<ReplayJob> = Api::namespaced(ctx.client.clone(), &ns);
    let key = format!("replayjob/{ns}/{}", rj.name_any());
    let r = finalizer(&api, REPLAY_FINALIZER, rj, |ev| async {
        match ev {
            Event::Apply(rj) => apply::apply(&rj, &ctx, &key).await,
            Event::Cleanup(rj) => cleanup::cleanup(&rj, &ctx).await,
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
