//! `Metrics::filters`: sink filters decided at commit (`hook::route`) and transforms run at
//! delivery (`dispatch::attempt`). Labels are sink types, results and error classes only.

use prometheus::{IntCounter, IntCounterVec, Registry};

use super::register::{counter, counter_vec};

pub struct FilterMetrics {
    /// By sink type and result: `matched`, `filtered`, `error_delivered`, `error_skipped`.
    pub results: IntCounterVec,
    /// By error class (`ankusa_filter::EvalError::class`).
    pub errors: IntCounterVec,
    /// Hooks stored and answered whose every sink's filter turned them away.
    pub unrouted: IntCounter,
    /// Transforms that failed, by error class: the delivery is dead-lettered.
    pub transform_errors: IntCounterVec,
}

impl FilterMetrics {
    pub fn new(r: &Registry) -> FilterMetrics {
        FilterMetrics {
            results: counter_vec(
                r,
                "ankusa_filter_results_total",
                "Sink filters evaluated at commit, by sink type and result (matched, filtered, error_delivered, error_skipped)",
                &["sink_type", "result"],
            ),
            errors: counter_vec(
                r,
                "ankusa_filter_errors_total",
                "Sink filters that could not be evaluated, by error class",
                &["class"],
            ),
            unrouted: counter(
                r,
                "ankusa_hooks_unrouted_total",
                "Hooks accepted that no sink's filter matched (stored for the archive only)",
            ),
            transform_errors: counter_vec(
                r,
                "ankusa_transform_errors_total",
                "Sink transforms that failed at delivery (the delivery is dead-lettered), by error class",
                &["class"],
            ),
        }
    }
}
