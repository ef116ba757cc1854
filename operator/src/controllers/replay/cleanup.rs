//! `cleanup` of the ReplayJob controller: a job deleted while it runs is cancelled on every
//! pod first (the finalizer waits while a pod that will come back has not answered).
//!
//! May import: `context`, crate `pods`, `admin_tls`, and the sibling
//! `controllers::replay::pods`.

use ankusa_crds::{Gateway, ReplayJob, ReplayPhase};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use crate::admin_tls::admin_access;
use crate::context::{Ctx, Error, Result};
use crate::controllers::replay::pods::{Fleet, cancel_all};
use crate::pods::gateway_pods;

pub async fn cleanup(rj: &ReplayJob, ctx: &Ctx) -> Result<Action> {
    let old = rj.status.clone().unwrap_or_default();
    // A dry run started nothing on the pods: there is nothing to cancel.
    if old.phase.is_some_and(ReplayPhase::is_terminal) || old.pods.is_empty() || rj.spec.dry_run {
        return Ok(Action::await_change());
    }
    let ns = rj.namespace().unwrap_or_default();
    let gws: Api<Gateway> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(gw) = gws.get_opt(&rj.spec.gateway_ref.name).await? else {
        return Ok(Action::await_change());
    };
    let fleet = Fleet {
        access: admin_access(ctx, &gw).await?,
        pods: gateway_pods(&ctx.client, &gw).await?,
        gw: &gw,
    };
    let job_id = rj.uid().unwrap_or_default();
    let cancelled = cancel_all(ctx, &fleet, &old, &job_id)
        .await
        .map_err(|failures| {
            Error::Waiting(format!("cancelling job {job_id}: {}", failures.join("; ")))
        })?;
    ctx.event(
        rj,
        EventType::Normal,
        "Cancelled",
        format!("job {job_id} cancelled on {}", cancelled.join(", ")),
    )
    .await;
    Ok(Action::await_change())
}
