//! The Secrets behind a Gateway's admin TLS: `<gateway>-admin-ca` (the CA, read by the operator
//! only) and `<gateway>-admin-tls` (the serving certificate the pods mount). The Gateway
//! controller keeps them current (`ensure`); the other controllers only read the trust
//! (`trust`). A CA Secret is used only when it holds what the operator recorded writing there
//! (`crate::ownership`): trusting a planted CA would send the admin token to whoever planted it.
//! The serving certificate is never trusted as such (it must verify against the CA, else it is
//! re-issued), so it is checked by owner reference only.

use std::sync::Arc;

use ankusa_crds::Gateway;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch};

use crate::admin::AdminTrust;
use crate::context::{Ctx, Error, Result, apply_params};
use crate::ownership::{self, Ledger, Role, Verdict};
use crate::pki::{self, CaFiles, LeafFiles};
use crate::pods::AdminAccess;
use crate::resources;

fn text(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()?
        .get(key)
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
}

/// The CA Secret, if it is the operator's own (absent: `None`; anything else: refused).
async fn own_ca(ctx: &Ctx, gw: &Gateway, ledger: &mut Ledger) -> Result<Option<Secret>> {
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &gw.namespace().unwrap_or_default());
    let name = resources::admin_ca_secret_name(gw);
    let s = api.get_opt(&name).await?;
    match ledger.check(ctx, gw, Role::AdminCa, s.as_ref()).await? {
        Verdict::Foreign(why) => Err(Error::Invalid(ownership::foreign_message(&name, &why))),
        Verdict::Mine | Verdict::Absent => Ok(s),
    }
}

fn owned(s: Option<Secret>, gw: &Gateway) -> Result<Option<Secret>> {
    match s {
        Some(s) if !resources::owned_by(&s.metadata, gw) => Err(Error::Invalid(format!(
            "Secret {} exists and is not owned by this Gateway",
            s.name_any()
        ))),
        other => Ok(other),
    }
}

fn trust_of(gw: &Gateway, bundle: String) -> Arc<AdminTrust> {
    Arc::new(AdminTrust {
        ca_pem: bundle,
        server_name: resources::admin_tls_names(gw).remove(0),
    })
}

/// Creates, renews or repairs the CA and the serving certificate, and answers the trust the
/// operator uses for this Gateway's pods. The CA Secret is written before the serving one,
/// so a pod never serves a certificate the operator cannot verify.
pub async fn ensure(ctx: &Ctx, gw: &Gateway, ledger: &mut Ledger) -> Result<Arc<AdminTrust>> {
    let ns = gw.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let tls_name = resources::admin_tls_secret_name(gw);
    let ca_secret = own_ca(ctx, gw, ledger).await?;
    let tls_secret = owned(api.get_opt(&tls_name).await?, gw)?;
    let ca = ca_secret.as_ref().map(|s| CaFiles {
        bundle_pem: text(s, "ca.crt").unwrap_or_default(),
        key_pem: text(s, "ca.key").unwrap_or_default(),
    });
    let leaf = tls_secret.as_ref().map(|s| LeafFiles {
        cert_pem: text(s, "tls.crt").unwrap_or_default(),
        key_pem: text(s, "tls.key").unwrap_or_default(),
    });
    let issued = pki::ensure(
        ca.as_ref(),
        leaf.as_ref(),
        &format!("ankusa admin CA {ns}/{}", gw.name_any()),
        &resources::admin_tls_names(gw),
        time::OffsetDateTime::now_utc(),
    )
    .map_err(|e| Error::Waiting(e.to_string()))?;
    if issued.ca_changed {
        tracing::info!(gateway = %gw.name_any(), namespace = %ns, "admin CA written");
        ownership::write_secret(
            ctx,
            gw,
            ledger,
            Role::AdminCa,
            ca_secret.as_ref(),
            resources::admin_ca_secret(gw, &issued.ca),
        )
        .await?;
    }
    if let Some(t) = pki::ca_not_after(&issued.ca.bundle_pem) {
        ctx.metrics.admin_ca_expires(&ns, &gw.name_any(), t);
    }
    let served_bundle = tls_secret.as_ref().and_then(|s| text(s, "ca.crt"));
    if issued.leaf_changed || served_bundle.as_deref() != Some(issued.ca.bundle_pem.as_str()) {
        tracing::info!(gateway = %gw.name_any(), namespace = %ns, "admin serving certificate written");
        api.patch(
            &tls_name,
            &apply_params(),
            &Patch::Apply(resources::admin_tls_secret(gw, &issued)),
        )
        .await?;
    }
    Ok(trust_of(gw, issued.ca.bundle_pem))
}

/// The trust for this Gateway's pods, as the Gateway controller last wrote it (`gw` read fresh
/// from the API server by the caller).
pub async fn trust(ctx: &Ctx, gw: &Gateway) -> Result<Arc<AdminTrust>> {
    let name = resources::admin_ca_secret_name(gw);
    own_ca(ctx, gw, &mut Ledger::load(gw))
        .await?
        .as_ref()
        .and_then(|s| text(s, "ca.crt"))
        .filter(|b| !b.is_empty())
        .map(|b| trust_of(gw, b))
        .ok_or_else(|| Error::Waiting(format!("Secret {name} (the admin CA) not written yet")))
}

/// The admin token and the TLS trust the Gateway controller keeps, for the other controllers
/// (`gw` read fresh from the API server by them); neither is created here.
pub async fn admin_access(ctx: &Ctx, gw: &Gateway) -> Result<AdminAccess> {
    Ok(AdminAccess {
        token: ownership::read_admin_token(ctx, gw).await?,
        tls: trust(ctx, gw).await?,
    })
}
