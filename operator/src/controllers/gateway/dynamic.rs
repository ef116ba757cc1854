//! Objects of API groups the operator cannot assume are served, or served at one version:
//! which version of a group the API server serves (discovery, asked on every pass, so CRDs
//! installed later are picked up), and the delete of such an object that removes only the one
//! this Gateway owns (the uid precondition keeps one created between the read and the delete
//! safe). A leaf of the controller, like `write`.
//!
//! May import: `context`, `resources` (ownership of an object).

use ankusa_crds::Gateway;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Preconditions};
use kube::core::gvk::GroupVersionKind;

use crate::context::{Ctx, Result};
use crate::resources;

/// The resource `plural` (of kind `kind`) at the first of `versions` the API server serves in
/// `group`, or `None` when it serves none of them.
pub async fn served(
    ctx: &Ctx,
    group: &str,
    versions: &[&str],
    kind: &str,
    plural: &str,
) -> Result<Option<ApiResource>> {
    let groups = match ctx.client.list_api_groups().await {
        Ok(g) => g,
        // An API server without the discovery document serves nothing we could ask for.
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let Some(g) = groups.groups.iter().find(|g| g.name == group) else {
        return Ok(None);
    };
    for v in versions {
        if !g.versions.iter().any(|gv| gv.version == *v) {
            continue;
        }
        let list = match ctx
            .client
            .list_api_group_resources(&format!("{group}/{v}"))
            .await
        {
            Ok(l) => l,
            // Removed between the two reads (a CRD deleted).
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => return Err(e.into()),
        };
        if list.resources.iter().any(|r| r.name == plural) {
            return Ok(Some(ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, v, kind),
                plural,
            )));
        }
    }
    Ok(None)
}

/// Whether an object under `name` exists and is not this Gateway's own (one the operator must
/// neither overwrite nor delete).
pub async fn foreign(api: &Api<DynamicObject>, name: &str, gw: &Gateway) -> Result<bool> {
    Ok(api
        .get_metadata_opt(name)
        .await?
        .is_some_and(|o| !resources::owned_by(&o.metadata, gw)))
}

/// Deletes the object `name` when this Gateway owns it; answers whether it did.
pub async fn delete_owned(api: &Api<DynamicObject>, name: &str, gw: &Gateway) -> Result<bool> {
    let Some(existing) = api.get_metadata_opt(name).await? else {
        return Ok(false);
    };
    if !resources::owned_by(&existing.metadata, gw) {
        return Ok(false);
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: existing.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        // Gone already, or replaced by another object since the read.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(e.into()),
    }
}
