//! Stage 3 of the Gateway reconcile: the objects the Gateway owns, applied in the order that
//! keeps the pods safe: the config Secret first (a pod the StatefulSet adds finds its file),
//! the Services, the NetworkPolicy before the StatefulSet (a new pod's admin port is never open
//! to the cluster) and the PodDisruptionBudget (`disruption`), then the StatefulSet, carrying
//! the digests of the durability settings and of every other restart-pinned key (a change
//! there rolls the pods), then the Prometheus Operator monitors (`monitoring`, whose outcome
//! is a condition, never a failure). Last, pods whose volume claim is gone are replaced. A
//! direct Gateway gets its Deployment and autoscaler (`direct`) in the StatefulSet's place.
//!
//! May import: `context`, `ownership`, `render`, `resources`, and the earlier stages' types
//! (`guard`, `inputs`), `network_policy`, `disruption`, `monitoring`, `volumes`.

use ankusa_crds::Gateway;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::{Api, Patch};

use crate::context::{Ctx, Result, apply_params};
use crate::controllers::gateway::guard::Admitted;
use crate::controllers::gateway::inputs::Loaded;
use crate::controllers::gateway::monitoring::{self, Cond};
use crate::controllers::gateway::{direct, disruption, network_policy, volumes};
use crate::ownership::{self, Role};
use crate::render;
use crate::resources;

/// What applying the children has to say in the status.
pub struct Applied {
    /// The note on a storage change the StatefulSet cannot take.
    pub storage_note: Option<String>,
    /// `MonitoringReady`, while a monitor is asked for.
    pub monitoring: Option<Cond>,
}

/// Applies every child.
pub async fn apply(
    ctx: &Ctx,
    gw: &Gateway,
    admitted: &mut Admitted,
    inputs: &Loaded,
) -> Result<Applied> {
    // The config Secret first, so a pod the StatefulSet adds finds its file.
    if inputs.rendered.base.is_some() {
        config_secret(ctx, gw, admitted, inputs).await?;
    }
    let svc_api: Api<Service> = Api::namespaced(ctx.client.clone(), &admitted.ns);
    for svc in [
        resources::headless_service(gw),
        resources::ingest_service(gw),
    ] {
        svc_api
            .patch(&svc.name_any(), &apply_params(), &Patch::Apply(&svc))
            .await?;
    }
    // Before the StatefulSet, so a new pod's admin port is never open to the cluster.
    network_policy::sync(ctx, &admitted.ns, gw).await?;
    disruption::sync(ctx, &admitted.ns, gw).await?;
    if gw.is_direct() {
        direct::apply(ctx, gw, admitted, inputs).await?;
        let monitoring = monitoring::sync(ctx, &admitted.ns, gw).await;
        return Ok(Applied {
            storage_note: None,
            monitoring,
        });
    }
    let storage_note = statefulset(ctx, gw, admitted, inputs).await?;
    let monitoring = monitoring::sync(ctx, &admitted.ns, gw).await;
    // Best effort: a failure here (an older chart's RBAC without volume claims) must not stop
    // the rest of the reconcile.
    if let Err(e) = volumes::replace_lost(ctx, gw, &inputs.pods).await {
        tracing::warn!(gateway = %gw.name_any(), namespace = %admitted.ns, error = %e, "checking the pods' volume claims failed");
    }
    Ok(Applied {
        storage_note,
        monitoring,
    })
}

/// Writes the config Secret (one `<pod>.yaml` per pod) when its files changed.
async fn config_secret(
    ctx: &Ctx,
    gw: &Gateway,
    admitted: &mut Admitted,
    inputs: &Loaded,
) -> Result<()> {
    let files = &inputs.files;
    if *files == inputs.existing_files {
        return Ok(());
    }
    tracing::info!(gateway = %gw.name_any(), namespace = %admitted.ns, pods = files.len(), "config Secret updated");
    let desired = resources::config_secret(gw, files);
    ownership::write_secret(
        ctx,
        gw,
        &mut admitted.ledger,
        Role::Config,
        admitted.config_secret.as_ref(),
        desired,
    )
    .await?;
    Ok(())
}

/// Applies the StatefulSet, keeping its volume claim templates; answers the note when the
/// spec asked for other ones.
async fn statefulset(
    ctx: &Ctx,
    gw: &Gateway,
    admitted: &Admitted,
    inputs: &Loaded,
) -> Result<Option<String>> {
    let existing = admitted.statefulset.as_ref();
    let mut sts = resources::statefulset(gw, &ctx.settings.gateway_image);
    let storage_note = resources::keep_claim_templates(&mut sts, existing);
    // The pods open their intake log and backup store when they start: a change there (a
    // rotated Secret included) rolls them. A config that does not render keeps the last.
    let fingerprint = match &inputs.rendered.base {
        Some(c) => render::durability_fingerprint(c, &admitted.access.token),
        None => existing.and_then(resources::durability_fingerprint_of),
    };
    resources::set_durability_fingerprint(&mut sts, fingerprint.as_deref());
    // Every other key a pod reads only at start (listeners, `log`, `batcher`, ...): a hot
    // reload would leave it in `restart_required`, so a change rolls the pods.
    let restart = match &inputs.rendered.base {
        Some(c) => resources::statefulset::restart_fingerprint(c, &admitted.access.token),
        None => existing.and_then(resources::statefulset::restart_fingerprint_of),
    };
    resources::statefulset::set_restart_fingerprint(&mut sts, restart.as_deref());
    Api::<StatefulSet>::namespaced(ctx.client.clone(), &admitted.ns)
        .patch(&sts.name_any(), &apply_params(), &Patch::Apply(&sts))
        .await?;
    Ok(storage_note)
}
