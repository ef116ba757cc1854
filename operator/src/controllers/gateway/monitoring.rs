//! The Gateway's Prometheus Operator monitors, kept as `spec.monitoring` says: each enabled one
//! applied (`resources::monitor`), each disabled one this Gateway owns deleted. Never fails the
//! reconcile: what happened is the `MonitoringReady` condition (`PrometheusOperatorMissing`
//! when `monitoring.coreos.com/v1` does not serve the kind asked for), present only while a
//! monitor is asked for.
//!
//! May import: `context`, `resources`, `dynamic`.

use ankusa_crds::Gateway;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch};

use crate::context::{Ctx, Result, apply_params};
use crate::controllers::gateway::dynamic;
use crate::resources::{self, MONITORING_GROUP, MONITORING_VERSION, MonitorKind};

/// The condition type.
pub const MONITORING_READY: &str = "MonitoringReady";

/// A condition as (status, reason, message).
pub type Cond = (bool, &'static str, String);

/// Applies and deletes the monitors; the `MonitoringReady` condition while one is asked for.
pub async fn sync(ctx: &Ctx, ns: &str, gw: &Gateway) -> Option<Cond> {
    match sync_kinds(ctx, ns, gw).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(gateway = %gw.name_any(), namespace = %ns, error = %e, "applying the monitors failed");
            gw.spec
                .monitoring
                .any_enabled()
                .then(|| (false, "ApplyFailed", condition_message(&e)))
        }
    }
}

/// The condition's text for a failed apply. The API server's own message can quote the
/// rendered object's values (labels, interval) back, so only its reason and code are kept; the
/// operator's own refusals already name the field.
fn condition_message(e: &crate::context::Error) -> String {
    match e {
        crate::context::Error::Kube(kube::Error::Api(s)) => format!(
            "the API server refused the monitor: {} ({})",
            s.reason, s.code
        ),
        crate::context::Error::Kube(_) => {
            "the API server could not be reached to apply the monitor".to_string()
        }
        crate::context::Error::Invalid(msg) => msg.clone(),
        other => format!("applying the monitor failed ({})", other.label()),
    }
}

async fn sync_kinds(ctx: &Ctx, ns: &str, gw: &Gateway) -> Result<Option<Cond>> {
    let name = resources::monitor_name(gw);
    let mut applied = Vec::new();
    let mut missing = Vec::new();
    let mut foreign = Vec::new();
    for kind in MonitorKind::ALL {
        let enabled = kind.spec(gw).enabled;
        let served = dynamic::served(
            ctx,
            MONITORING_GROUP,
            &[MONITORING_VERSION],
            kind.kind(),
            kind.plural(),
        )
        .await?;
        let Some(ar) = served else {
            if enabled {
                missing.push(kind.kind());
            }
            continue;
        };
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
        if !enabled {
            if dynamic::delete_owned(&api, &name, gw).await? {
                tracing::info!(gateway = %gw.name_any(), namespace = %ns, kind = kind.kind(), "monitor removed (disabled in spec.monitoring)");
            }
            continue;
        }
        if dynamic::foreign(&api, &name, gw).await? {
            foreign.push(kind.kind());
            continue;
        }
        let obj = resources::monitor(gw, kind).map_err(crate::context::Error::Invalid)?;
        api.patch(&name, &apply_params(), &Patch::Apply(&obj))
            .await?;
        applied.push(kind.kind());
    }
    if !missing.is_empty() {
        return Ok(Some((
            false,
            "PrometheusOperatorMissing",
            format!(
                "spec.monitoring asks for {} but the API server does not serve {MONITORING_GROUP}/{MONITORING_VERSION} {} (install the Prometheus Operator's CRDs, or disable it)",
                missing.join(" and "),
                missing.join(", "),
            ),
        )));
    }
    if !foreign.is_empty() {
        return Ok(Some((
            false,
            "ForeignObject",
            format!(
                "{} {name} exists and is not owned by this Gateway; left alone",
                foreign.join(" and ")
            ),
        )));
    }
    Ok((!applied.is_empty()).then(|| {
        (
            true,
            "Applied",
            format!("{} {name} applied", applied.join(" and ")),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::condition_message;
    use crate::context::Error;

    #[test]
    fn a_refused_apply_keeps_the_reason_not_the_servers_text() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 422, "reason": "Invalid",
            "message": "ServiceMonitor \"gw\" is invalid: metadata.labels: Invalid value: \"s3cr3t-label\""
        }))
        .expect("status");
        let msg = condition_message(&Error::Kube(kube::Error::Api(Box::new(status))));
        assert_eq!(msg, "the API server refused the monitor: Invalid (422)");
        assert!(!msg.contains("s3cr3t"));
        let own = Error::Invalid("spec.monitoring.serviceMonitor.interval: not a duration".into());
        assert_eq!(
            condition_message(&own),
            "spec.monitoring.serviceMonitor.interval: not a duration"
        );
    }
}
