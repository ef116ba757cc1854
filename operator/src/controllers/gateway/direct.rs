//! The workload of a direct Gateway: its Deployment, carrying the digests of the durability
//! settings and of every other restart-pinned key (a change there rolls the pods, as for a
//! StatefulSet), and its HorizontalPodAutoscaler while `spec.autoscaling` asks for one (the
//! operator's own deleted when it no longer does).
//!
//! May import: `context`, `render`, `resources`, and the earlier stages' types (`guard`,
//! `inputs`).

use ankusa_crds::Gateway;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, Preconditions};

use crate::context::{Ctx, Result, apply_params};
use crate::controllers::gateway::guard::Admitted;
use crate::controllers::gateway::inputs::Loaded;
use crate::render;
use crate::resources::statefulset::RESTART_ANNOTATION;
use crate::resources::{self, DURABILITY_ANNOTATION, deployment as workload};

/// Applies the Deployment, then the autoscaler (or removes the operator's own).
pub async fn apply(ctx: &Ctx, gw: &Gateway, admitted: &Admitted, inputs: &Loaded) -> Result<()> {
    let existing = admitted.deployment.as_ref();
    let mut d = resources::deployment(gw, &ctx.settings.gateway_image);
    let kept = |key: &str| existing.and_then(|e| workload::template_annotation(e, key));
    let (durability, restart) = match &inputs.rendered.base {
        Some(c) => (
            render::durability_fingerprint(c, &admitted.access.token),
            resources::statefulset::restart_fingerprint(c, &admitted.access.token),
        ),
        // A config that does not render keeps the digests the pods run with.
        None => (kept(DURABILITY_ANNOTATION), kept(RESTART_ANNOTATION)),
    };
    workload::set_template_annotation(&mut d, DURABILITY_ANNOTATION, durability.as_deref());
    workload::set_template_annotation(&mut d, RESTART_ANNOTATION, restart.as_deref());
    Api::<Deployment>::namespaced(ctx.client.clone(), &admitted.ns)
        .patch(&d.name_any(), &apply_params(), &Patch::Apply(&d))
        .await?;
    autoscaler(ctx, gw, &admitted.ns).await
}

async fn autoscaler(ctx: &Ctx, gw: &Gateway, ns: &str) -> Result<()> {
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), ns);
    let name = resources::deployment_name(gw);
    match &gw.spec.autoscaling {
        Some(a) => {
            let hpa = resources::autoscaler(gw, a);
            api.patch(&name, &apply_params(), &Patch::Apply(&hpa))
                .await?;
        }
        None => {
            // Only the operator's own: a user's autoscaler of that name is left alone.
            let Some(old) = api.get_opt(&name).await? else {
                return Ok(());
            };
            if !resources::owned_by(&old.metadata, gw) {
                return Ok(());
            }
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: old.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match api.delete(&name, &dp).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}
