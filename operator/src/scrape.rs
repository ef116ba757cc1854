//! The Secret `<gateway>-scrape` a Prometheus scrapes the pods' admin `/metrics` with: `token`
//! (a random token the operator generates once and keeps, rendered into every pod's config
//! with scope `metrics:read` only) and `ca.crt` (the admin CA bundle that verifies the pods'
//! certificate, kept current as the CA renews). The Gateway controller keeps it after the
//! admin TLS (`crate::admin_tls`). Its token goes into the pods' config, so the Secret is one
//! the operator records (`crate::ownership`): a planted `<gateway>-scrape` is never used.
//!
//! May import: `context`, `ownership`, `resources`.

use ankusa_crds::Gateway;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;

use crate::context::{Ctx, Error, Result};
use crate::ownership::{self, Ledger, Role, Verdict, secret_text};
use crate::resources;

/// The scrape token of the Gateway, its Secret created (a fresh token) when absent and its
/// `ca.crt` brought up to `ca_bundle` when it differs. A token already there is kept.
pub async fn ensure(
    ctx: &Ctx,
    gw: &Gateway,
    ledger: &mut Ledger,
    ca_bundle: &str,
) -> Result<String> {
    let name = Role::Scrape.secret_name(gw);
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &gw.namespace().unwrap_or_default());
    let existing = api.get_opt(&name).await?;
    let kept = match ledger
        .check(ctx, gw, Role::Scrape, existing.as_ref())
        .await?
    {
        Verdict::Foreign(why) => {
            return Err(Error::Invalid(ownership::foreign_message(&name, &why)));
        }
        Verdict::Absent => None,
        Verdict::Mine => existing.as_ref().and_then(|s| secret_text(s, "token")),
    };
    let token = match kept {
        Some(t) if t.len() >= 16 => t,
        _ => resources::random_token()
            .map_err(|e| Error::Waiting(format!("the OS random source failed: {e}")))?,
    };
    let desired = resources::scrape_secret(gw, &token, ca_bundle);
    if existing.as_ref().and_then(|s| s.data.as_ref()) != desired.data.as_ref() {
        ownership::write_secret(ctx, gw, ledger, Role::Scrape, existing.as_ref(), desired).await?;
        tracing::info!(
            gateway = %gw.name_any(),
            namespace = %gw.namespace().unwrap_or_default(),
            created = existing.is_none(),
            "scrape Secret written"
        );
    }
    Ok(token)
}
