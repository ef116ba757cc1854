//! `Metrics::config`: config reloads.

use prometheus::{IntCounterVec, IntGauge, Registry};

use super::register::{counter_vec, gauge};

pub struct ConfigMetrics {
    pub reloads: IntCounterVec,
    pub generation: IntGauge,
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
        }
    }
}
