//! `ankusa_intake_*`: registered on the gateway's registry by the intake itself, so a node
//! without `wal.type: dual` exports none of them.

use prometheus::{Gauge, Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry};

pub struct IntakeMetrics {
    pub ready: IntGauge,
    pub failures: IntCounterVec,
    pub publish_seconds: Histogram,
    pub pending: IntGauge,
    pub reconcile_oldest_age: Gauge,
    pub reconcile_stuck: IntGauge,
    pub offset_lag: Gauge,
}

fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: T) -> T {
    // A second registration (a second intake in one process, as in tests) keeps the first.
    let _ = r.register(Box::new(m.clone()));
    m
}

impl IntakeMetrics {
    pub fn new(r: &Registry) -> IntakeMetrics {
        IntakeMetrics {
            ready: reg(
                r,
                IntGauge::new(
                    "ankusa_intake_ready",
                    "1 when the intake log takes records (0: recovering or breaker open)",
                )
                .expect("valid metric"),
            ),
            failures: reg(
                r,
                IntCounterVec::new(
                    Opts::new(
                        "ankusa_intake_failures_total",
                        "Failed intake publishes and rebuild reads, by class",
                    ),
                    &["class"],
                )
                .expect("valid metric"),
            ),
            publish_seconds: reg(
                r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "ankusa_intake_publish_duration_seconds",
                        "From a batch's publish start to the log's confirmation",
                    )
                    .buckets(vec![
                        0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                        5.0,
                    ]),
                )
                .expect("valid metric"),
            ),
            pending: reg(
                r,
                IntGauge::new(
                    "ankusa_intake_pending_records",
                    "Hooks committed here whose intake record is not confirmed",
                )
                .expect("valid metric"),
            ),
            reconcile_oldest_age: reg(
                r,
                Gauge::new(
                    "ankusa_intake_reconcile_oldest_age_seconds",
                    "Age of the oldest unconfirmed hook",
                )
                .expect("valid metric"),
            ),
            reconcile_stuck: reg(
                r,
                IntGauge::new(
                    "ankusa_intake_reconcile_stuck",
                    "Unconfirmed hooks older than 60 s",
                )
                .expect("valid metric"),
            ),
            offset_lag: reg(
                r,
                Gauge::new(
                    "ankusa_intake_offset_lag_seconds",
                    "Seconds since the last confirmation while hooks wait for one (0: none waits)",
                )
                .expect("valid metric"),
            ),
        }
    }
}
