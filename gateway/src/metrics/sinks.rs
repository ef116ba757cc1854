//! `Metrics::sinks`: the sinks: forwarded headers, batching sinks, HTTP pools.

use prometheus::{IntCounterVec, IntGauge, Registry};

use super::register::{counter_vec, gauge};

pub struct SinkMetrics {
    pub headers_dropped: IntCounterVec,
    pub batch_requests: IntCounterVec,
    pub batch_entries: IntCounterVec,
    pub batch_bisections: IntCounterVec,
    pub batch_refused: IntCounterVec,
    pub pools: IntGauge,
    pub pool_closed: IntCounterVec,
    pub pool_refused: IntCounterVec,
}

impl SinkMetrics {
    pub fn new(r: &Registry) -> SinkMetrics {
        SinkMetrics {
            headers_dropped: counter_vec(
                r,
                "ankusa_sink_headers_dropped_total",
                "Forwarded headers dropped at the caps",
                &["reason"],
            ),
            batch_requests: counter_vec(
                r,
                "ankusa_sink_batch_requests_total",
                "Batch requests sent by batching sinks",
                &["sink"],
            ),
            batch_entries: counter_vec(
                r,
                "ankusa_sink_batch_entries_total",
                "Entries sent in batches",
                &["sink"],
            ),
            batch_bisections: counter_vec(
                r,
                "ankusa_sink_batch_bisections_total",
                "Batch splits to find a refused message (Pub/Sub)",
                &["sink"],
            ),
            batch_refused: counter_vec(
                r,
                "ankusa_sink_batch_refused_total",
                "Deliveries refused at a batcher's queue ceiling",
                &["sink", "reason"],
            ),
            pools: gauge(r, "ankusa_http_pools", "Live HTTP connection pools"),
            pool_closed: counter_vec(
                r,
                "ankusa_http_pool_closed_total",
                "HTTP pools closed",
                &["reason"],
            ),
            pool_refused: counter_vec(
                r,
                "ankusa_http_pool_refused_total",
                "Deliveries refused at a pool ceiling",
                &["scope"],
            ),
        }
    }
}
