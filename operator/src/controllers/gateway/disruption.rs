//! The Gateway's PodDisruptionBudget, kept as `spec.disruption` says: applied at the `policy`
//! version the API server serves (`v1` from Kubernetes 1.21, `v1beta1` before) when enabled;
//! when not, the one this Gateway owns is deleted, and only that one. A same-named budget
//! someone else made is left alone (and reported in a Warning Event), as is the last applied
//! budget when `maxUnavailable` is invalid.
//!
//! May import: `context`, `resources`, `dynamic`.

use ankusa_crds::Gateway;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch};
use kube::runtime::events::EventType;

use crate::context::{Ctx, Result, apply_params};
use crate::controllers::gateway::dynamic;
use crate::resources;

/// The `policy` versions that serve PodDisruptionBudgets, newest first.
const POLICY_VERSIONS: &[&str] = &["v1", "v1beta1"];

pub async fn sync(ctx: &Ctx, ns: &str, gw: &Gateway) -> Result<()> {
    let Some(ar) = dynamic::served(
        ctx,
        "policy",
        POLICY_VERSIONS,
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    )
    .await?
    else {
        tracing::warn!(gateway = %gw.name_any(), namespace = %ns, "the API server serves no policy/v1 or policy/v1beta1 PodDisruptionBudget; none rendered");
        return Ok(());
    };
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
    let name = resources::disruption_budget_name(gw);
    if !gw.spec.disruption.enabled {
        if dynamic::delete_owned(&api, &name, gw).await? {
            tracing::info!(gateway = %gw.name_any(), namespace = %ns, "PodDisruptionBudget removed (spec.disruption.enabled: false)");
            ctx.event(
                gw,
                EventType::Normal,
                "DisruptionBudgetRemoved",
                format!("PodDisruptionBudget {name} deleted: spec.disruption.enabled is false"),
            )
            .await;
        }
        return Ok(());
    }
    if dynamic::foreign(&api, &name, gw).await? {
        tracing::warn!(gateway = %gw.name_any(), namespace = %ns, pdb = %name, "a PodDisruptionBudget of that name exists and is not this Gateway's; left alone");
        ctx.event(
            gw,
            EventType::Warning,
            "ForeignDisruptionBudget",
            format!("PodDisruptionBudget {name} exists and is not owned by this Gateway; left alone (delete it, or set spec.disruption.enabled: false)"),
        )
        .await;
        return Ok(());
    }
    match resources::disruption_budget(gw, &ar.api_version) {
        Ok(pdb) => {
            api.patch(&name, &apply_params(), &Patch::Apply(&pdb))
                .await?;
        }
        Err(msg) => {
            tracing::warn!(gateway = %gw.name_any(), namespace = %ns, error = %msg, "PodDisruptionBudget not applied");
            ctx.event(gw, EventType::Warning, "InvalidDisruption", msg)
                .await;
        }
    }
    Ok(())
}
