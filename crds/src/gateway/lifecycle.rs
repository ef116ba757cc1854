//! `spec.lifecycle`: where a Gateway's pods send their lifecycle and operational events
//! (CloudEvents, docs/lifecycle.md): references to `Sink` objects of the Gateway's namespace,
//! the same shape a Source uses for its sinks, plus the audit trail's bounds and the per-type
//! rate ceiling. The operator renders it into each pod's `lifecycle` section; a Sink that does
//! not render never refuses the Gateway (docs/operator.md, "Lifecycle events").

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::common::LocalRef;

/// Most lifecycle sinks: the gateway's own bound on `lifecycle.sinks` (every event is one
/// hook with a delivery row per sink, so a handful is plenty).
pub const MAX_LIFECYCLE_SINKS: usize = 16;

/// Lifecycle events of the Gateway's pods: where they are delivered and how much of them the
/// pods keep. Absent: no event is built, kept or sent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("size(self.sinks) >= 1 && size(self.sinks) <= 16")
        .message("lifecycle.sinks must name 1 to 16 Sinks")
)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleSpec {
    /// The Sink objects (in the Gateway's namespace) each event is delivered to, 1 to 16. The
    /// same Sink may also serve Sources; its options, `secretRefs` and rules are the same.
    #[schemars(length(min = 1, max = 16))]
    pub sinks: Vec<LocalRef>,
    /// Days an event stays in each pod's audit trail (1 to 3650; the gateway's default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3650))]
    pub retention_days: Option<u32>,
    /// Most events each pod's audit trail keeps, the oldest going first (1000 to 10000000;
    /// the gateway's default 100000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1000, max = 10_000_000))]
    pub max_events: Option<u64>,
    /// Most events of one type a pod builds per minute (1 to 100000; the gateway's default
    /// 60); the rest are dropped and counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub max_per_minute: Option<u32>,
}

impl LifecycleSpec {
    /// The rule the CRD declares in CEL, re-checked for servers without it (< 1.25; the
    /// schema's `minItems`/`maxItems` hold on every server, this names the field).
    pub fn check(&self) -> Result<(), String> {
        let n = self.sinks.len();
        if n == 0 || n > MAX_LIFECYCLE_SINKS {
            return Err(format!(
                "spec.lifecycle.sinks must name 1 to {MAX_LIFECYCLE_SINKS} Sinks, got {n}"
            ));
        }
        Ok(())
    }

    /// The names of the Sinks it refers to, in order.
    pub fn sink_names(&self) -> impl Iterator<Item = &str> {
        self.sinks.iter().map(|r| r.name.as_str())
    }
}
