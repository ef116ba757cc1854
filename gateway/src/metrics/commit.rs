//! `Metrics::commit`: group commit — the synced write every ack waits for, its batches, its queue.

use prometheus::{Histogram, IntCounter, IntGauge, Registry};

use super::register::{LATENCY, counter, gauge, histogram};

pub struct CommitMetrics {
    pub wal_sync_seconds: Histogram,
    pub batch_records: Histogram,
    pub expired: IntCounter,
    pub queued: IntGauge,
}

impl CommitMetrics {
    pub fn new(r: &Registry) -> CommitMetrics {
        CommitMetrics {
            wal_sync_seconds: histogram(
                r,
                "ankusa_wal_sync_duration_seconds",
                "Duration of a synced group commit (the fsync every ack waits for)",
                LATENCY.to_vec(),
            ),
            batch_records: histogram(
                r,
                "ankusa_store_commit_batch_records",
                "Records per group commit",
                vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0],
            ),
            expired: counter(
                r,
                "ankusa_batcher_expired_total",
                "Records refused for waiting past batcher.max_wait_ms",
            ),
            queued: gauge(
                r,
                "ankusa_batcher_queued",
                "Records waiting for or in a group commit",
            ),
        }
    }
}
