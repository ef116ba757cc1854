//! What a Gateway asks of the cluster around its pods: the PodDisruptionBudget the operator
//! renders for them (`spec.disruption`) and the Prometheus Operator objects that scrape their
//! admin `/metrics` (`spec.monitoring`), and where the pods send their traces
//! (`spec.settings.telemetry`).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::StringMap;

/// `spec.disruption`: the PodDisruptionBudget `<gateway>` the operator renders over the pods,
/// so a node drain (or any other eviction) takes at most `maxUnavailable` of them at a time.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionSpec {
    /// Render the PodDisruptionBudget (default true). Switched off, the operator deletes the
    /// one it created (only that one).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Pods that may be evicted at once: a count (default 1) or a percentage of the replicas
    /// (`"34%"`, rounded up by Kubernetes).
    #[serde(default = "default_max_unavailable")]
    pub max_unavailable: IntOrString,
}

fn default_true() -> bool {
    true
}

fn default_max_unavailable() -> IntOrString {
    IntOrString::Int(1)
}

impl Default for DisruptionSpec {
    fn default() -> Self {
        DisruptionSpec {
            enabled: true,
            max_unavailable: default_max_unavailable(),
        }
    }
}

impl DisruptionSpec {
    /// `maxUnavailable` as the PodDisruptionBudget takes it, or why not (naming the field): a
    /// count of at least 0, or `<n>%` with `n` from 0 to 100.
    pub fn checked_max_unavailable(&self) -> Result<IntOrString, String> {
        const FIELD: &str = "spec.disruption.maxUnavailable";
        match &self.max_unavailable {
            IntOrString::Int(n) if *n >= 0 => Ok(IntOrString::Int(*n)),
            IntOrString::Int(n) => Err(format!("{FIELD}: must be at least 0, got {n}")),
            IntOrString::String(s) => {
                let pct = s
                    .strip_suffix('%')
                    .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|d| d.parse::<u32>().ok())
                    .filter(|p| *p <= 100);
                match pct {
                    Some(_) => Ok(IntOrString::String(s.clone())),
                    None => Err(format!(
                        "{FIELD}: must be a count or a percentage from 0% to 100%, got {s:?}"
                    )),
                }
            }
        }
    }
}

/// `spec.monitoring`: Prometheus Operator objects (`monitoring.coreos.com/v1`) that scrape
/// each pod's admin port `/metrics` over HTTPS, trusting the Gateway's admin CA and presenting
/// the scrape token (scope `metrics:read` only), both from the Secret `<gateway>-scrape`. Both
/// off by default; without the Prometheus Operator's CRDs the Gateway's `MonitoringReady`
/// condition says `PrometheusOperatorMissing`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MonitoringSpec {
    /// A ServiceMonitor `<gateway>` over the headless Service `<gateway>-pods`.
    #[serde(default)]
    pub service_monitor: MonitorSpec,
    /// A PodMonitor `<gateway>` over the pods themselves (for a Prometheus that selects
    /// PodMonitors only).
    #[serde(default)]
    pub pod_monitor: MonitorSpec,
}

impl MonitoringSpec {
    /// Whether any monitor is asked for.
    pub fn any_enabled(&self) -> bool {
        self.service_monitor.enabled || self.pod_monitor.enabled
    }
}

/// One Prometheus Operator monitor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MonitorSpec {
    /// Render it (default false). Switched off, the operator deletes the one it created.
    #[serde(default)]
    pub enabled: bool,
    /// Scrape interval (a Prometheus duration such as `30s`; absent: Prometheus' own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
    ))]
    pub interval: Option<String>,
    /// Labels added to the monitor object, for a Prometheus that selects monitors by label
    /// (`release: prometheus`, say); the operator's own labels win.
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub labels: StringMap,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_unavailable_is_a_count_or_a_percentage_and_errors_name_the_field() {
        let d = |v: IntOrString| DisruptionSpec {
            enabled: true,
            max_unavailable: v,
        };
        assert_eq!(
            DisruptionSpec::default().checked_max_unavailable(),
            Ok(IntOrString::Int(1))
        );
        assert!(d(IntOrString::Int(0)).checked_max_unavailable().is_ok());
        assert!(
            d(IntOrString::String("34%".into()))
                .checked_max_unavailable()
                .is_ok()
        );
        for bad in [
            IntOrString::Int(-1),
            IntOrString::String("101%".into()),
            IntOrString::String("two".into()),
            IntOrString::String("%".into()),
            IntOrString::String("1".into()),
        ] {
            let e = d(bad.clone()).checked_max_unavailable().unwrap_err();
            assert!(
                e.starts_with("spec.disruption.maxUnavailable: "),
                "{bad:?}: {e}"
            );
        }
    }
}

/// `settings.telemetry`: the pods' OpenTelemetry trace export (the gateway's `telemetry`
/// section, docs/tracing.md). Export headers are not settable here: they are credentials, and a
/// collector inside the cluster is reached without them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TelemetrySettings {
    /// OTLP trace export over HTTP/protobuf (absent: no export, the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp: Option<OtlpSettings>,
}

/// `settings.telemetry.otlp`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OtlpSettings {
    /// The collector's OTLP/HTTP base URL, e.g. `http://otel-collector.observability:4318`;
    /// spans go to `<endpoint>/v1/traces`.
    #[schemars(regex(pattern = r"^https?://[^\s@?#]+$"))]
    pub endpoint: String,
    /// Share of the traces that start at a pod which are sampled, 0.0–1.0 (default 1.0); a
    /// provider's `traceparent` decides for its own traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub sampling_ratio: Option<f64>,
    /// `service.name` of the spans (default `ankusa-gateway`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_name: Option<String>,
}
