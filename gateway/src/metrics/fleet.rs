//! `Metrics::fleet`: dedupe keys across the pods of one Gateway (`fleet`) — commits forwarded
//! to a key's owner, commits received from another pod, handover lookups and local fallbacks.

use prometheus::{Histogram, IntCounter, IntCounterVec, Registry};

use super::register::{LATENCY, counter, counter_vec, histogram};

pub struct FleetMetrics {
    pub forwarded: IntCounterVec,
    pub forward_seconds: Histogram,
    pub received: IntCounterVec,
    pub handover_lookups: IntCounterVec,
    pub local_fallback: IntCounter,
}

impl FleetMetrics {
    pub fn new(r: &Registry) -> FleetMetrics {
        FleetMetrics {
            forwarded: counter_vec(
                r,
                "ankusa_fleet_forwarded_total",
                "Keyed hooks forwarded to their key's owner pod, by outcome (accepted, duplicate, refused, unavailable)",
                &["outcome"],
            ),
            forward_seconds: histogram(
                r,
                "ankusa_fleet_forward_duration_seconds",
                "Time from forwarding a keyed hook to its owner's answer",
                LATENCY.to_vec(),
            ),
            received: counter_vec(
                r,
                "ankusa_fleet_received_total",
                "Commits received from another pod of the fleet, by outcome (accepted, duplicate, refused, invalid)",
                &["outcome"],
            ),
            handover_lookups: counter_vec(
                r,
                "ankusa_fleet_handover_lookups_total",
                "Dedupe keys looked up at their previous owner during a handover, by outcome (found, absent, unavailable)",
                &["outcome"],
            ),
            local_fallback: counter(
                r,
                "ankusa_fleet_local_fallback_total",
                "Keyed hooks committed on the receiving pod because their owner was unreachable (fleet.dedupe best_effort)",
            ),
        }
    }
}
