//! `Metrics::backup`: store backups.

use prometheus::{Gauge, IntCounterVec, Registry};

use super::register::{counter_vec, float_gauge};

pub struct BackupMetrics {
    pub runs: IntCounterVec,
    pub age_seconds: Gauge,
    pub refused: IntCounterVec,
}

impl BackupMetrics {
    pub fn new(r: &Registry) -> BackupMetrics {
        BackupMetrics {
            runs: counter_vec(
                r,
                "ankusa_backup_runs_total",
                "Store backups by outcome (ok: LATEST written; failed: LATEST left on the previous one)",
                &["outcome"],
            ),
            age_seconds: float_gauge(
                r,
                "ankusa_backup_age_seconds",
                "Seconds since the last complete backup (since start when none yet)",
            ),
            refused: counter_vec(
                r,
                "ankusa_backup_refused_total",
                "Backups refused to protect another writer's backups (foreign_backup, prefix_shared)",
                &["reason"],
            ),
        }
    }
}
