//! The root of the configuration: `Config`, one field per section (`section/*.rs` holds each
//! section's types, defaults and own rules), and what is computed over the whole (the hash,
//! the YAML the gateway reads back, the pen's shares).
//!
//! The gateway parses these types from YAML; the operator builds them from custom resources
//! and serialises them. The field order is the serialised order, which `Config::hash` covers.
//! Imports the sections and nothing that imports it back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::section::admin::AdminConfig;
use crate::section::backup::BackupConfig;
use crate::section::batcher::CommitConfig;
use crate::section::claim_check::ClaimCheckConfig;
use crate::section::dispatch::DispatchConfig;
use crate::section::egress::EgressConfig;
use crate::section::fleet::FleetConfig;
use crate::section::http::HttpConfig;
use crate::section::lifecycle::LifecycleConfig;
use crate::section::log::LogConfig;
use crate::section::node::{NodeConfig, Role};
use crate::section::quarantine::{PenShares, QuarantineConfig};
use crate::section::queue::QueueConfig;
use crate::section::rate_limits::RateLimitsConfig;
use crate::section::source::{OnVerifyFailure, SourceConfig};
use crate::section::storage::StorageConfig;
use crate::section::telemetry::TelemetryConfig;
use crate::section::wal::{IntakeConfig, WalConfig};

/// The whole gateway configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
#[derive(Default)]
pub struct Config {
    pub node: NodeConfig,
    pub log: LogConfig,
    pub http: HttpConfig,
    pub admin: AdminConfig,
    /// Group commit (`commit.rs` in the gateway); the key keeps its first name.
    pub batcher: CommitConfig,
    pub rate_limits: RateLimitsConfig,
    pub dispatch: DispatchConfig,
    pub egress: EgressConfig,
    pub claim_check: ClaimCheckConfig,
    /// The pen of sources with `on_verify_failure: quarantine`.
    pub quarantine: QuarantineConfig,
    /// The archive: hooks packed into segments in a blob store. Absent: no archive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageConfig>,
    /// Bounds of the queue (`queue.dlq`).
    pub queue: QueueConfig,
    /// The ack's durability mode: `disk` (default) or `dual` (also the intake log).
    #[serde(skip_serializing_if = "is_default")]
    pub wal: WalConfig,
    /// The intake log of `wal.type: dual`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intake: Option<IntakeConfig>,
    /// Checkpoints of the store in a blob store.
    #[serde(skip_serializing_if = "is_default")]
    pub backup: BackupConfig,
    /// OpenTelemetry trace export (`telemetry.otlp`); off by default, read at start.
    #[serde(skip_serializing_if = "is_default")]
    pub telemetry: TelemetryConfig,
    /// Lifecycle and operational events (CloudEvents) and their audit trail. Absent: off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<LifecycleConfig>,
    /// The pods of one Gateway as one dedupe domain (`fleet`). Absent: this node alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetConfig>,
    /// Sources by id (`[A-Za-z0-9_-]{1,64}`); the id is the last path segment of the ingest URL.
    pub sources: BTreeMap<String, SourceConfig>,
}

/// Leaves a section at its defaults out of the rendered config, so configs without it keep
/// their hash.
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl Config {
    /// SHA-256 (lowercase hex) of the canonical JSON form. The gateway reports the hash of the
    /// file it loaded (after interpolation, before environment overrides); the operator
    /// computes the same function over the config it rendered, so equal hashes mean a pod runs
    /// exactly the rendered config.
    pub fn hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let bytes = serde_json::to_vec(self).expect("config serialises to JSON");
        hex::encode(Sha256::digest(bytes))
    }

    /// The YAML text the gateway parses back into an equal `Config`. Literal `${` in values
    /// (a secret may contain one) is escaped as `$${` so that loading does not interpolate it.
    pub fn to_yaml(&self) -> String {
        let mut tree = serde_yaml_ng::to_value(self).expect("config serialises to YAML");
        escape_references(&mut tree);
        serde_yaml_ng::to_string(&tree).expect("config serialises to YAML")
    }

    pub fn has_role(&self, role: Role) -> bool {
        self.node.roles.contains(&role)
    }

    /// The quarantine pen's byte shares in force: `QuarantineConfig::shares` over the sources
    /// with `on_verify_failure: quarantine`.
    pub fn pen_shares(&self) -> PenShares {
        self.quarantine.shares(
            self.sources
                .values()
                .filter(|s| s.on_verify_failure == OnVerifyFailure::Quarantine)
                .map(|s| s.tenant.as_deref().unwrap_or("default")),
        )
    }
}

/// `$${` for every `${` (the inverse is `load.rs`'s `unescape_tree`).
fn escape_references(v: &mut serde_yaml_ng::Value) {
    use serde_yaml_ng::Value;
    match v {
        Value::String(s) if s.contains("${") => *s = s.replace("${", "$${"),
        Value::Sequence(items) => items.iter_mut().for_each(escape_references),
        Value::Mapping(m) => m.iter_mut().for_each(|(_, v)| escape_references(v)),
        Value::Tagged(t) => escape_references(&mut t.value),
        _ => {}
    }
}
