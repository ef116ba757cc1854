//! The Gateway's NetworkPolicy, kept as `spec.networkPolicy` says: applied when enabled; when
//! not, the one this Gateway owns is deleted, and only that one (a same-named policy someone
//! else made is left alone; the uid precondition keeps one created between the read and the
//! delete safe).
//!
//! May import: `context`, `resources`.

use ankusa_crds::Gateway;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, Preconditions};
use kube::runtime::events::EventType;

use crate::context::{Ctx, Result, apply_params};
use crate::resources;

/// Applies the Gateway's NetworkPolicy, or, when `spec.networkPolicy.enabled` is false,
/// deletes the one this Gateway owns. Only that one: a same-named policy someone else made is
/// left alone, and the uid precondition keeps a policy created between the read and the delete
/// safe.
pub async fn sync(ctx: &Ctx, ns: &str, gw: &Gateway) -> Result<()> {
    let api: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), ns);
    let name = resources::network_policy_name(gw);
    if gw.spec.network_policy.enabled {
        let np = resources::network_policy(gw, &ctx.settings.policy);
        api.patch(&name, &apply_params(), &Patch::Apply(&np))
            .await?;
        return Ok(());
    }
    let Some(existing) = api.get_metadata_opt(&name).await? else {
        return Ok(());
    };
    if !resources::owned_by(&existing.metadata, gw) {
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: existing.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => {
            tracing::info!(
                gateway = %gw.name_any(),
                namespace = %ns,
                "NetworkPolicy removed (spec.networkPolicy.enabled: false)"
            );
            ctx.event(
                gw,
                EventType::Normal,
                "NetworkPolicyRemoved",
                format!("NetworkPolicy {name} deleted: spec.networkPolicy.enabled is false"),
            )
            .await;
            Ok(())
        }
        // Gone already, or replaced by another object since the read.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
