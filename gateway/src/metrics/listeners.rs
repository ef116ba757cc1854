//! `Metrics::listeners`: the listeners' connections (ingest, admin, claim check).

use prometheus::{IntCounterVec, IntGaugeVec, Registry};

use super::register::{counter_vec, gauge_vec};

pub struct ListenerMetrics {
    pub connections: IntGaugeVec,
    pub connections_refused: IntCounterVec,
    pub timeouts: IntCounterVec,
}

impl ListenerMetrics {
    pub fn new(r: &Registry) -> ListenerMetrics {
        ListenerMetrics {
            connections: gauge_vec(
                r,
                "ankusa_http_connections",
                "Open connections by listener (ingest, admin, claim_check)",
                &["listener"],
            ),
            connections_refused: counter_vec(
                r,
                "ankusa_http_connections_refused_total",
                "Connections answered 503 and closed because the listener was full",
                &["listener"],
            ),
            timeouts: counter_vec(
                r,
                "ankusa_http_timeouts_total",
                "Connections closed by a timeout: header_read (a request head too slow) or idle",
                &["listener", "kind"],
            ),
        }
    }
}
