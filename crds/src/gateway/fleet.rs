//! `spec.fleet`: the pods of a disk or dual Gateway as one dedupe domain. The operator renders
//! the gateway's `fleet` section into each pod's config: every pod as a member at
//! `https://<pod>.<gateway>-pods.<namespace>.svc:<ports.fleet>`, mutual TLS with the
//! Gateway's admin CA, and on a change of `replicas` the members before it with a handover
//! window.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a pod does with a keyed hook whose owner pod does not answer.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FleetDedupeMode {
    /// `503` + `Retry-After`: never a second hook for one event.
    #[default]
    Strict,
    /// Commit on the pod that received it, counted: available, may duplicate.
    BestEffort,
    /// No fleet: each pod dedupes alone (one hook per event per pod).
    Off,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetSpec {
    /// `strict` (default), `bestEffort` or `off`. A one-pod Gateway has no fleet whatever
    /// this says, and neither has a `direct` one (it stores no hook).
    #[serde(default)]
    pub dedupe: FleetDedupeMode,
    /// Minutes, after a change of `replicas`, during which a key whose owner moved is still
    /// looked up at its previous owner (1 to 43200, default 1440: a day of provider retries).
    #[serde(default = "default_handover_minutes")]
    #[schemars(range(min = 1, max = 43200))]
    pub handover_minutes: u32,
}

fn default_handover_minutes() -> u32 {
    1440
}

impl Default for FleetSpec {
    fn default() -> Self {
        FleetSpec {
            dedupe: FleetDedupeMode::Strict,
            handover_minutes: default_handover_minutes(),
        }
    }
}

impl super::Gateway {
    /// Whether the pods form a fleet: disk or dual, two pods or more, `fleet.dedupe` not
    /// `off`.
    pub fn has_fleet(&self) -> bool {
        self.spec.fleet.dedupe != FleetDedupeMode::Off
            && !self.is_direct()
            && self.spec.replicas >= 2
    }
}
