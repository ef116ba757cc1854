//! `batcher`: the group-commit writer in front of the store (`commit.rs` in the gateway; the
//! key keeps its first name). Its byte cap must hold one body of `http.max_body_bytes`, a rule
//! between two sections that `validate.rs` keeps. Imports only the leaves.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{at_least, at_most};

/// The group-commit writer in front of the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct CommitConfig {
    /// Independent commit queues; each has one synced write in flight.
    pub partitions: u32,
    /// Most records in one synced write.
    pub max_batch: u32,
    /// Extra time a commit waits for more records (0: commit as soon as the previous one ends).
    pub max_delay_ms: u64,
    /// Records waiting or committing per partition; past it ingest answers `503 overload`.
    pub max_queue: u32,
    /// Bytes waiting or committing across partitions; past it ingest answers `503 overload`.
    pub max_queue_bytes: u64,
    /// A record that has not started committing after this long is answered `503` and dropped.
    pub max_wait_ms: u64,
}

impl Default for CommitConfig {
    fn default() -> Self {
        CommitConfig {
            partitions: 2,
            max_batch: 256,
            max_delay_ms: 0,
            max_queue: 10_000,
            max_queue_bytes: 268_435_456,
            max_wait_ms: 15_000,
        }
    }
}

impl CommitConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        at_least(&f("partitions"), self.partitions, 1)?;
        at_most(&f("partitions"), self.partitions, 64)?;
        at_least(&f("max_batch"), self.max_batch, 1)?;
        at_most(&f("max_batch"), self.max_batch, 100_000)?;
        at_most(&f("max_delay_ms"), self.max_delay_ms, 1_000)?;
        at_least(&f("max_queue"), self.max_queue, 1)?;
        at_least(&f("max_wait_ms"), self.max_wait_ms, 1)
    }
}
