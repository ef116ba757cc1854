//! `Metrics::store`: the store (writes, reopens, corrupt rows, sizes) and the delivery queue in it.

use prometheus::{Gauge, IntCounter, IntCounterVec, IntGauge, Registry};

use super::register::{counter, counter_vec, gauge};

pub struct StoreMetrics {
    pub write_failures: IntCounterVec,
    pub reopen: IntCounterVec,
    pub corrupt_rows: IntCounter,
    pub hooks: IntGauge,
    pub hook_bytes: IntGauge,
    pub disk_bytes: IntGauge,
    pub queue_pending: IntGauge,
    pub queue_dead: IntGauge,
    pub queue_oldest_due_age_seconds: Gauge,
}

impl StoreMetrics {
    pub fn new(r: &Registry) -> StoreMetrics {
        let oldest = Gauge::new(
            "ankusa_queue_oldest_due_age_seconds",
            "How late the oldest due delivery row is",
        )
        .expect("valid metric");
        r.register(Box::new(oldest.clone())).expect("unique metric");
        StoreMetrics {
            write_failures: counter_vec(
                r,
                "ankusa_store_write_failures_total",
                "Failed store writes by class",
                &["class"],
            ),
            reopen: counter_vec(
                r,
                "ankusa_store_reopen_total",
                "Store reopens by result",
                &["result"],
            ),
            corrupt_rows: counter(
                r,
                "ankusa_store_corrupt_rows_total",
                "Stored rows that did not decode and were moved to the corrupt index",
            ),
            hooks: gauge(
                r,
                "ankusa_store_hooks",
                "Hooks stored (awaiting delivery or dead-lettered)",
            ),
            hook_bytes: gauge(r, "ankusa_store_hook_bytes", "Body bytes of stored hooks"),
            disk_bytes: gauge(
                r,
                "ankusa_store_disk_bytes",
                "Store size on disk (SST files and memtables)",
            ),
            queue_pending: gauge(
                r,
                "ankusa_queue_pending",
                "Delivery rows pending or in flight",
            ),
            queue_dead: gauge(r, "ankusa_queue_dead", "Dead-lettered delivery rows"),
            queue_oldest_due_age_seconds: oldest,
        }
    }
}
