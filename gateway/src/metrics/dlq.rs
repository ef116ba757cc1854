//! `Metrics::dlq`: the DLQ's bounds.

use prometheus::{Gauge, IntCounterVec, IntGauge, Registry};

use super::register::{counter_vec, float_gauge, gauge};

pub struct DlqMetrics {
    pub rows: IntGauge,
    pub bytes: IntGauge,
    pub full: IntGauge,
    pub oldest_age_seconds: Gauge,
    pub evicted: IntCounterVec,
}

impl DlqMetrics {
    pub fn new(r: &Registry) -> DlqMetrics {
        DlqMetrics {
            rows: gauge(r, "ankusa_dlq_rows", "Dead rows (the DLQ)"),
            bytes: gauge(r, "ankusa_dlq_bytes", "Body bytes of dead rows"),
            full: gauge(
                r,
                "ankusa_dlq_full",
                "1 while the DLQ is over a queue.dlq bound with nothing archived to evict: new hooks get 503 dlq_full",
            ),
            oldest_age_seconds: float_gauge(
                r,
                "ankusa_dlq_oldest_age_seconds",
                "Age of the oldest dead row (0 when none)",
            ),
            evicted: counter_vec(
                r,
                "ankusa_dlq_evicted_total",
                "Dead rows evicted by the DLQ's bounds (their hooks archived)",
                &["reason"],
            ),
        }
    }
}
