//! `Metrics::ingest`: the edge's requests and refusals, the tenant rate limit, signature failures.

use prometheus::{Histogram, IntCounter, IntCounterVec, Registry};

use super::register::{LATENCY, counter, counter_vec, histogram};

pub struct IngestMetrics {
    pub requests: IntCounterVec,
    pub refused: IntCounterVec,
    pub duration_seconds: Histogram,
    pub rate_limit_rejected: IntCounter,
    pub verify_failures: IntCounterVec,
}

impl IngestMetrics {
    pub fn new(r: &Registry) -> IngestMetrics {
        IngestMetrics {
            requests: counter_vec(
                r,
                "ankusa_ingest_requests_total",
                "Ingest requests by outcome",
                &["outcome"],
            ),
            refused: counter_vec(
                r,
                "ankusa_ingest_refused_total",
                "Ingest requests refused before the body was read or verified",
                &["reason"],
            ),
            duration_seconds: histogram(
                r,
                "ankusa_ingest_duration_seconds",
                "Time from request to answer",
                LATENCY.to_vec(),
            ),
            rate_limit_rejected: counter(
                r,
                "ankusa_rate_limit_rejected_total",
                "Requests refused by a tenant rate limit",
            ),
            verify_failures: counter_vec(
                r,
                "ankusa_verify_failures_total",
                "Signature verification failures by scheme",
                &["scheme"],
            ),
        }
    }
}
