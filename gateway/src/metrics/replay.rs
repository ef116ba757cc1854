//! `Metrics::replay`: replay jobs.

use prometheus::{IntCounterVec, Registry};

use super::register::counter_vec;

pub struct ReplayMetrics {
    pub moved: IntCounterVec,
    pub throttled: IntCounterVec,
}

impl ReplayMetrics {
    pub fn new(r: &Registry) -> ReplayMetrics {
        ReplayMetrics {
            moved: counter_vec(
                r,
                "ankusa_replay_moved_total",
                "Rows moved back to due by replay jobs",
                &["kind"],
            ),
            throttled: counter_vec(
                r,
                "ankusa_replay_throttled_total",
                "Replay steps held back",
                &["reason"],
            ),
        }
    }
}
