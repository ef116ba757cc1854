//! `Metrics::quarantine`: the quarantine pen.

use prometheus::{IntGauge, Registry};

use super::register::gauge;

pub struct QuarantineMetrics {
    pub pending: IntGauge,
    pub bytes: IntGauge,
    pub entries: IntGauge,
}

impl QuarantineMetrics {
    pub fn new(r: &Registry) -> QuarantineMetrics {
        QuarantineMetrics {
            pending: gauge(
                r,
                "ankusa_quarantine_pending",
                "Quarantine writes waiting for or in the pen's group commit",
            ),
            bytes: gauge(
                r,
                "ankusa_quarantine_bytes",
                "Bytes the quarantine pen holds (with writes admitted and not yet answered)",
            ),
            entries: gauge(
                r,
                "ankusa_quarantine_entries",
                "Entries the quarantine pen holds",
            ),
        }
    }
}
