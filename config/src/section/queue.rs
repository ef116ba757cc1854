//! `queue`: the bounds of the dead-letter queue (`queue.dlq`). Past a bound the oldest dead
//! rows are evicted once the archive (`storage`) holds their hook. Imports only the leaves.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, in_range};

/// The queue's bounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    pub dlq: DlqBounds,
}

/// Bounds of the dead-letter queue. Past a bound, the oldest dead rows are evicted, but only
/// once their hook is archived; until then new hooks get `503 dlq_full`. All off by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct DlqBounds {
    /// Dead rows older than this many days are evicted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u32>,
    /// Most dead rows kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rows: Option<u64>,
    /// Most body bytes of dead rows kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// How often the reaper runs (ms).
    #[serde(skip_serializing_if = "is_default_reap")]
    pub reap_interval_ms: u64,
}

const DEFAULT_REAP_MS: u64 = 5_000;

fn is_default_reap(v: &u64) -> bool {
    *v == DEFAULT_REAP_MS
}

impl Default for DlqBounds {
    fn default() -> Self {
        DlqBounds {
            retention_days: None,
            max_rows: None,
            max_bytes: None,
            reap_interval_ms: DEFAULT_REAP_MS,
        }
    }
}

impl DlqBounds {
    pub fn is_bounded(&self) -> bool {
        self.retention_days.is_some() || self.max_rows.is_some() || self.max_bytes.is_some()
    }
    /// The reaper's period.
    pub fn reap_every_ms(&self) -> u64 {
        self.reap_interval_ms.max(1)
    }

    /// Every bound given is at least one.
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        for (key, zero) in [
            ("retention_days", self.retention_days == Some(0)),
            ("max_rows", self.max_rows == Some(0)),
            ("max_bytes", self.max_bytes == Some(0)),
        ] {
            if zero {
                return Err(err(f(key), "must be >= 1, got 0"));
            }
        }
        in_range(
            &f("reap_interval_ms"),
            self.reap_interval_ms,
            100,
            3_600_000,
        )
    }
}

impl QueueConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        self.dlq.validate(&format!("{path}.dlq"))
    }
}
