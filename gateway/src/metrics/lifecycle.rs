//! `Metrics::lifecycle`: lifecycle events (`crate::lifecycle`): built, dropped, delivered, and
//! what the audit trail holds. The `type` label is one of the fixed event types, `reason` one
//! of the drop reasons (`rate`, `queue_full`, `trail_failed`, `commit_failed`).

use prometheus::{IntCounterVec, IntGauge, Registry};

use super::register::{counter_vec, gauge};

pub struct LifecycleMetrics {
    pub events: IntCounterVec,
    pub dropped: IntCounterVec,
    pub delivered: IntCounterVec,
    pub trail_events: IntGauge,
}

impl LifecycleMetrics {
    pub fn new(r: &Registry) -> LifecycleMetrics {
        LifecycleMetrics {
            events: counter_vec(
                r,
                "ankusa_lifecycle_events_total",
                "Lifecycle events written to the audit trail and queued for delivery",
                &["type"],
            ),
            dropped: counter_vec(
                r,
                "ankusa_lifecycle_dropped_total",
                "Lifecycle events not emitted",
                &["reason"],
            ),
            delivered: counter_vec(
                r,
                "ankusa_lifecycle_delivered_total",
                "Lifecycle event deliveries confirmed by a lifecycle sink",
                &["sink_type"],
            ),
            trail_events: gauge(
                r,
                "ankusa_lifecycle_trail_events",
                "Events held in the audit trail",
            ),
        }
    }
}
