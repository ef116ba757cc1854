//! Stage 4 of the Gateway reconcile: every pod polled at once (`GET /v1/status`) and, when it
//! runs another config than the one rendered for it, pushed its own (`PUT /v1/config`). A pod
//! that does not answer is reported in its own record, never fails the reconcile (the
//! CloudNativePG pattern). What one poll says beyond the pod's own record goes to the Sinks
//! (failing deliveries) and the Sources (their quarantined hooks).
//!
//! May import: `context`, `pods`, `render` (`PodConfig`), `status::gateway` (the record of a
//! report).

use std::collections::BTreeMap;

use ankusa_api::{PenStatus, SinkFailure};
use ankusa_crds::{Gateway, GatewayPodStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::context::Ctx;
use crate::pods::{AdminAccess, pod_ready, pod_target};
use crate::render::PodConfig;
use crate::status::gateway::{pod_from_report, short_hash};

/// What the pods said, by pod.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Each pod's record, in the order of the pods.
    pub pods: Vec<GatewayPodStatus>,
    /// The sinks whose latest delivery failed, by pod name.
    pub failing: Vec<(String, Vec<SinkFailure>)>,
    /// The quarantine pen of each pod that reported one, by pod name.
    pub pens: Vec<(String, PenStatus)>,
    /// The pods whose `GET /v1/status` answered (what the others did not say is unknown, not
    /// nothing).
    pub answered: Vec<String>,
}

/// Polls (and pushes) every pod; `desired` is each pod's config by pod name.
pub async fn pods(
    ctx: &Ctx,
    gw: &Gateway,
    pods: &[Pod],
    desired: &BTreeMap<String, PodConfig>,
    access: &AdminAccess,
) -> Observed {
    let polled = futures::future::join_all(
        pods.iter()
            .map(|p| observe_pod(ctx, gw, p, desired.get(&p.name_any()), access)),
    )
    .await;
    let mut out = Observed {
        pods: Vec::with_capacity(polled.len()),
        failing: Vec::with_capacity(polled.len()),
        pens: Vec::new(),
        answered: Vec::with_capacity(polled.len()),
    };
    for (pod, report) in polled {
        if report.answered {
            out.answered.push(pod.name.clone());
        }
        out.failing.push((pod.name.clone(), report.failing));
        if let Some(pen) = report.pen {
            out.pens.push((pod.name.clone(), pen));
        }
        out.pods.push(pod);
    }
    out
}

/// What one `GET /v1/status` of a pod says beyond its own record.
#[derive(Debug, Clone, Default)]
struct PodReport {
    /// Sinks whose latest delivery attempt failed there.
    failing: Vec<SinkFailure>,
    /// Its quarantine pen (a pod of a version without one reports none).
    pen: Option<PenStatus>,
    /// It answered.
    answered: bool,
}

/// Polls one pod (pushing its config when it runs another): what it runs, its archive and
/// DLQ, and the report for the Sinks and Sources.
async fn observe_pod(
    ctx: &Ctx,
    gw: &Gateway,
    pod: &Pod,
    desired: Option<&PodConfig>,
    access: &AdminAccess,
) -> (GatewayPodStatus, PodReport) {
    let mut report = PodReport::default();
    let mut st = GatewayPodStatus {
        name: pod.name_any(),
        uid: pod.uid(),
        pod_ip: pod.status.as_ref().and_then(|s| s.pod_ip.clone()),
        ready: pod_ready(pod),
        programmed: false,
        desired_hash: desired.map(|d| d.hash.clone()),
        ..Default::default()
    };
    let Some(target) = pod_target(pod, gw.spec.ports.admin, access) else {
        st.last_error = Some("not running".into());
        return (st, report);
    };
    let status = ctx.admin.status(&target).await;
    ctx.metrics.pod_call("status", &status);
    match status {
        Err(e) => st.last_error = Some(e.to_string()),
        Ok(s) => {
            report.answered = true;
            report.failing = s.failing_sinks.clone();
            report.pen = s.quarantine.clone();
            pod_from_report(&mut st, &s);
            if let Some(d) = desired.filter(|d| d.hash != s.config_hash) {
                let r = ctx.admin.put_config(&target, &d.yaml).await;
                ctx.metrics.pod_call("put_config", &r);
                match r {
                    Ok(r) => {
                        tracing::info!(pod = %target.name, hash = %short_hash(Some(&r.config_hash)), changed = r.changed, "config pushed");
                        st.config_hash = Some(r.config_hash);
                        st.restart_required = r.restart_required;
                        st.last_error = None;
                    }
                    Err(e) => {
                        tracing::warn!(pod = %target.name, error = %e, "config push failed");
                        st.last_error = Some(e.to_string());
                    }
                }
            }
        }
    }
    st.programmed = desired.is_some_and(|d| st.config_hash.as_deref() == Some(d.hash.as_str()));
    (st, report)
}
