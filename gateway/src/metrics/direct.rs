//! `Metrics::direct`: `wal.type: none` — each hook published to its source's sinks in the
//! request, acked once all confirmed.

use prometheus::{Histogram, IntCounterVec, Registry};

use super::register::{LATENCY, counter_vec, histogram};

pub struct DirectMetrics {
    pub publishes: IntCounterVec,
    pub duration_seconds: Histogram,
    pub sink_failures: IntCounterVec,
}

impl DirectMetrics {
    pub fn new(r: &Registry) -> DirectMetrics {
        DirectMetrics {
            publishes: counter_vec(
                r,
                "ankusa_direct_publishes_total",
                "Hooks published in the request under wal.type none, by outcome (confirmed, duplicate, refused, timeout, breaker_open)",
                &["outcome"],
            ),
            duration_seconds: histogram(
                r,
                "ankusa_direct_publish_duration_seconds",
                "Time for every sink of a hook to answer under wal.type none",
                LATENCY.to_vec(),
            ),
            sink_failures: counter_vec(
                r,
                "ankusa_direct_sink_failures_total",
                "Sink answers that were not a confirmation under wal.type none, by sink type and class",
                &["sink_type", "class"],
            ),
        }
    }
}
