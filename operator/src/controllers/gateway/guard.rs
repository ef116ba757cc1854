//! Stage 1 of the Gateway reconcile: whether to go on at all, before anything is applied.
//! A Gateway being deleted is left to its owner references; one naming a ServiceAccount the
//! operator's policy does not allow, or whose config Secret or StatefulSet is not the
//! operator's own (`crate::ownership`), is refused (`Degraded`, a Warning Event when the
//! message is new); one whose admin token is missing waits. Past the guard, the admin token,
//! the admin CA and serving certificate (the pods mount the certificate, so this comes before
//! the StatefulSet) and the scrape Secret (its token goes into the pods' config) are current,
//! and the objects read on the way are handed on. A Gateway whose durability mode no longer
//! matches its workload (a StatefulSet for `direct`, a Deployment for `disk`/`dual`) is refused
//! (`DurabilityModeChangeRefused`): the mode cannot change in place without dropping what the
//! pods hold (docs/operator.md, "Direct Gateways").
//!
//! May import: `context`, `ownership`, `admin_tls`, `scrape`, `pods` (`AdminAccess`),
//! `resources`, `status`, and `write` (the status write and its throttle key).

use std::time::Duration;

use ankusa_crds::Gateway;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use crate::admin_tls;
use crate::context::{Ctx, Error, Result};
use crate::controllers::gateway::write::{delivery_write_key, write_gateway_status};
use crate::ownership::{self, Ledger};
use crate::pods::AdminAccess;
use crate::resources;
use crate::scrape;
use crate::status::gateway::{blocked_status, find};
use crate::status::now_rfc3339;

/// What a Gateway past the guard carries into the rest of the reconcile.
pub struct Admitted {
    pub ns: String,
    /// The ownership record, kept current by every write of an owned Secret.
    pub ledger: Ledger,
    /// The admin token and TLS trust of its pods.
    pub access: AdminAccess,
    /// The scrape token (`<gateway>-scrape`), rendered with scope `metrics:read` only.
    pub scrape_token: String,
    /// The config Secret as read (checked to be the operator's own).
    pub config_secret: Option<Secret>,
    /// The StatefulSet as read (checked to be the Gateway's own).
    pub statefulset: Option<StatefulSet>,
    /// A direct Gateway's Deployment as read (checked to be the Gateway's own).
    pub deployment: Option<Deployment>,
}

pub enum Admission {
    Admitted(Box<Admitted>),
    /// Stopped here; requeued as the action says.
    Stopped(Action),
}

pub async fn admit(ctx: &Ctx, gw: &Gateway) -> Result<Admission> {
    if gw.meta().deletion_timestamp.is_some() {
        ctx.forget_poll(&delivery_write_key(gw));
        ctx.metrics
            .forget_gateway(&gw.namespace().unwrap_or_default(), &gw.name_any());
        // Owned objects go with it (ownerReferences); Sources wait for their own finalizer.
        return Ok(Admission::Stopped(Action::await_change()));
    }
    let ns = gw
        .namespace()
        .ok_or_else(|| Error::Invalid("Gateway without namespace".into()))?;
    let mut ledger = Ledger::start(ctx, gw).await?;
    if let Some(msg) = resources::service_account_refusal(gw, &ctx.settings.policy) {
        refuse(ctx, gw, "ServiceAccountNotAllowed", msg).await?;
        // Only an edit of the Gateway (or the operator's own flags, read at start) can
        // change the verdict.
        return Ok(Admission::Stopped(Action::await_change()));
    }
    let config_secret = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&resources::config_secret_name(gw))
        .await?;
    let statefulset = Api::<StatefulSet>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&resources::statefulset_name(gw))
        .await?;
    if let Some(msg) = ownership::foreign_object(
        ctx,
        gw,
        &mut ledger,
        config_secret.as_ref(),
        statefulset.as_ref(),
    )
    .await?
    {
        refuse(ctx, gw, "ForeignObject", msg).await?;
        return Ok(Admission::Stopped(Action::requeue(Duration::from_secs(10))));
    }
    let deployment = Api::<Deployment>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&resources::deployment_name(gw))
        .await?;
    if let Some(msg) = workload_refusal(gw, statefulset.as_ref(), deployment.as_ref()) {
        refuse(ctx, gw, msg.0, msg.1).await?;
        return Ok(Admission::Stopped(Action::requeue(Duration::from_secs(30))));
    }
    let token = match ownership::admin_token(ctx, gw, &mut ledger).await {
        Ok(t) => t,
        Err(Error::Invalid(msg)) => {
            let status = blocked_status(gw, "AdminTokenMissing", &msg, &now_rfc3339());
            write_gateway_status(ctx, gw, status).await?;
            return Ok(Admission::Stopped(Action::requeue(Duration::from_secs(30))));
        }
        Err(e) => return Err(e),
    };
    // Before the StatefulSet: the pods mount the serving certificate.
    let tls = admin_tls::ensure(ctx, gw, &mut ledger).await?;
    // After the CA: the scrape Secret carries its bundle.
    let scrape_token = scrape::ensure(ctx, gw, &mut ledger, &tls.ca_pem).await?;
    Ok(Admission::Admitted(Box::new(Admitted {
        ns,
        ledger,
        access: AdminAccess { token, tls },
        scrape_token,
        config_secret,
        statefulset,
        deployment,
    })))
}

/// Why the Gateway's workload cannot be applied: a Deployment of that name it does not own,
/// or a workload of the other kind it does own (its durability mode changed).
fn workload_refusal(
    gw: &Gateway,
    sts: Option<&StatefulSet>,
    deployment: Option<&Deployment>,
) -> Option<(&'static str, String)> {
    let name = resources::deployment_name(gw);
    if deployment.is_some_and(|d| !resources::owned_by(&d.metadata, gw)) {
        return Some((
            "ForeignObject",
            format!(
                "Deployment {name} already exists and is not owned by this Gateway; refusing to take it over (delete or rename it, or give the Gateway another name)"
            ),
        ));
    }
    let owned_sts = sts.is_some_and(|s| resources::owned_by(&s.metadata, gw));
    let owned_deployment = deployment.is_some_and(|d| resources::owned_by(&d.metadata, gw));
    let refusal = if gw.is_direct() && owned_sts {
        "spec.durability.mode: is direct, but this Gateway runs as a StatefulSet whose pods each \
         keep a store (mode disk or dual); the mode cannot change in place without dropping the \
         hooks those stores hold. Set the mode back, or create a new Gateway in direct mode, move \
         the Sources to it and delete this one once its pods drained (docs/operator.md)"
    } else if !gw.is_direct() && owned_deployment {
        "spec.durability.mode: is disk or dual, but this Gateway runs as a direct Deployment \
         without volumes; the mode cannot change in place. Set the mode back to direct, or create \
         a new Gateway with the mode you want, move the Sources to it and delete this one \
         (docs/operator.md)"
    } else {
        return None;
    };
    Some(("DurabilityModeChangeRefused", refusal.to_string()))
}

/// Stops a Gateway before anything is applied: `Degraded` with `reason`, and a Warning Event
/// when the message is new (a requeue must not repeat it every few seconds).
async fn refuse(ctx: &Ctx, gw: &Gateway, reason: &'static str, msg: String) -> Result<()> {
    let old = gw.status.clone().unwrap_or_default();
    let reported = find(&old.conditions, "Degraded").and_then(|c| c.message.clone());
    if reported.as_deref() != Some(msg.as_str()) {
        ctx.event(gw, EventType::Warning, reason, msg.clone()).await;
    }
    write_gateway_status(ctx, gw, blocked_status(gw, reason, &msg, &now_rfc3339())).await
}
