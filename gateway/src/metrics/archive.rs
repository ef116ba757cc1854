//! `Metrics::archive`: the archive.

use prometheus::{Gauge, Histogram, IntCounter, IntGauge, Registry};

use super::register::{counter, float_gauge, gauge, histogram};

pub struct ArchiveMetrics {
    pub pending: IntGauge,
    pub oldest_unarchived_age_seconds: Gauge,
    pub failures: IntCounter,
    pub segments: IntCounter,
    pub hooks: IntCounter,
    pub upload_seconds: Histogram,
}

impl ArchiveMetrics {
    pub fn new(r: &Registry) -> ArchiveMetrics {
        ArchiveMetrics {
            pending: gauge(
                r,
                "ankusa_queue_archive_pending",
                "Hooks accepted while the archive is on and not yet in an uploaded segment",
            ),
            oldest_unarchived_age_seconds: float_gauge(
                r,
                "ankusa_archive_oldest_unarchived_age_seconds",
                "Age of the oldest hook waiting for the archive (0 when none waits)",
            ),
            failures: counter(
                r,
                "ankusa_archive_failures_total",
                "Segment uploads or catalogue commits that failed (retried with backoff)",
            ),
            segments: counter(
                r,
                "ankusa_archive_segments_total",
                "Segments uploaded and catalogued",
            ),
            hooks: counter(
                r,
                "ankusa_archive_hooks_total",
                "Hooks archived (in an uploaded, catalogued segment)",
            ),
            upload_seconds: histogram(
                r,
                "ankusa_archive_upload_seconds",
                "Time to upload one segment and its index",
                vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0],
            ),
        }
    }
}
