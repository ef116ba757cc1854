//! Pods that lost their volume claim (see `resources::volume_lost`) are deleted, so that the
//! StatefulSet controller recreates each with a new, empty claim from the template; the
//! gateway then restores its backup and rebuilds from the intake log. One Event per pod.
//!
//! May import: `context`, `pods`, `resources`.

use ankusa_crds::Gateway;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use kube::runtime::events::EventType;

use crate::context::{Ctx, Result};
use crate::pods::pod_ready;
use crate::resources;

/// Deletes the pods that lost their volume claim (see [`resources::volume_lost`]), so that
/// the StatefulSet controller recreates each with a new, empty claim from the template; the
/// gateway then restores its backup and rebuilds from the intake log. One Event per pod.
pub async fn replace_lost(ctx: &Ctx, gw: &Gateway, pods: &[Pod]) -> Result<()> {
    let ns = gw.namespace().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let listed = api
        .list_metadata(&ListParams::default().labels(&resources::selector_string(gw)))
        .await?;
    let protected = gw.spec.durability.as_ref().is_some_and(|d| {
        d.mode == ankusa_crds::DurabilityMode::Dual || d.backup.as_ref().is_some_and(|b| b.enabled)
    });
    for pod in pods {
        let name = pod.name_any();
        if resources::ordinal(gw, &name).is_none() {
            continue;
        }
        let claim_name = resources::claim_name(&name);
        let claim = match listed.items.iter().find(|c| c.name_any() == claim_name) {
            Some(m) => Some(PersistentVolumeClaim {
                metadata: m.metadata.clone(),
                ..Default::default()
            }),
            // Not labelled as ours (made by hand before the pod?): ask for it by name.
            None => api.get_opt(&claim_name).await?,
        };
        let Some(why) = resources::volume_lost(pod, claim.as_ref(), pod_ready(pod), protected)
        else {
            continue;
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.uid(),
                resource_version: None,
            }),
            ..Default::default()
        };
        let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        match pods_api.delete(&name, &params).await {
            Ok(_) => {
                let then = if protected {
                    "it comes back on a new, empty volume and restores itself"
                } else {
                    "it comes back on a new, empty volume (no spec.durability backup or dual mode: it starts empty)"
                };
                tracing::warn!(gateway = %gw.name_any(), pod = %name, reason = %why, "pod deleted to replace its volume");
                ctx.event(
                    gw,
                    EventType::Warning,
                    "VolumeReplaced",
                    format!("{name}: {why}; pod deleted so the StatefulSet recreates it with a new claim: {then}"),
                )
                .await;
            }
            // Gone already, or replaced since the read.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
