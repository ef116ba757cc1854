//! `Metrics::config`: config reloads.

use prometheus::{IntCounterVec, IntGauge, Registry};

use super::register::{counter_vec, gauge};

pub struct ConfigMetrics {
    pub reloads: IntCounterVec,
    pub generation: IntGauge,
    /// 1 while a reload changed keys that only a restart applies (`restart_required`).
    pub restart_required: IntGauge,
}

impl ConfigMetrics {
    pub fn new(r: &Registry) -> ConfigMetrics {
        ConfigMetrics {
            reloads: counter_vec(
                r,
                "ankusa_config_reloads_total",
                "Config reloads by result",
                &["result"],
            ),
            generation: gauge(
                r,
                "ankusa_config_generation",
                "Generation of the loaded config",
            ),
            restart_required: gauge(
                r,
                "ankusa_config_restart_required",
                "1 while config keys changed since start that only a restart applies (restart_required of GET /v1/status)",
            ),
        }
    }
}
