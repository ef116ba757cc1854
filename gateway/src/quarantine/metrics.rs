//! `ankusa_quarantine_*` counters of the pen's own: registered by the pen on the gateway's
//! registry (the pen's gauges stay in `crate::metrics`, which the scrape refreshes).

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};

pub struct QuarantineMetrics {
    /// Entries removed by the expiry (`quarantine.retention_hours`).
    pub expired: IntCounter,
    /// Hooks refused `503 quarantine_full`, by the cap that refused them.
    pub full: IntCounterVec,
}

fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: T) -> T {
    // A second registration (a second pen in one process, as in tests) keeps the first.
    let _ = r.register(Box::new(m.clone()));
    m
}

impl QuarantineMetrics {
    pub fn new(r: &Registry) -> QuarantineMetrics {
        QuarantineMetrics {
            expired: reg(
                r,
                IntCounter::new(
                    "ankusa_quarantine_expired_total",
                    "Quarantine entries removed for being older than quarantine.retention_hours",
                )
                .expect("valid metric"),
            ),
            full: reg(
                r,
                IntCounterVec::new(
                    Opts::new(
                        "ankusa_quarantine_full_total",
                        "Hooks refused 503 quarantine_full, by the cap that refused them",
                    ),
                    &["scope"],
                )
                .expect("valid metric"),
            ),
        }
    }
}
