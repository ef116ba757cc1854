//! How far an acked hook survives: `wal` (the ack's durability mode), `intake` (the replicated
//! intake log of `wal.type: dual`) and `backup` (checkpoints of the store in a blob store).
//!
//! `disk` acks after a synced commit to this node's store: durable to power loss on this host.
//! `dual` also waits for a confirmed publish of the hook to a replicated intake log (Kafka or
//! NATS JetStream), so losing the host, its volume included, loses nothing acked: a node that
//! starts empty rebuilds every hook it acked from its own records in the log. Backups bound
//! how much of the log a rebuild replays (and are the only copy of the DLQ and settled state).

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::ConfigError;
use crate::sinks::{KafkaSinkConfig, NatsSinkConfig};
use crate::storage::{BlobStoreType, LocalStoreConfig, S3StoreConfig};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WalType {
    /// Ack after a synced commit to this node's store.
    #[default]
    Disk,
    /// Ack after the synced commit AND a confirmed publish to the intake log (`intake`).
    Dual,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct WalConfig {
    #[serde(rename = "type")]
    pub wal_type: WalType,
}

/// The intake log of `wal.type: dual`: exactly one of `kafka` or `jetstream`, with the keys of
/// the sink of that type (brokers or servers, TLS, credentials). Records go to the Kafka
/// `topic` keyed by the node (so one node's records keep their order in one partition), or to
/// the JetStream subject `<subject>.<node>` of a stream that must exist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct IntakeConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<KafkaSinkConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<NatsSinkConfig>,
    /// This node's name in the log; default `node.instance`. A replacement node takes the
    /// name of the node it replaces, so it finds that node's records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// How long an ack waits for the broker's confirmation.
    #[serde(default = "d_publish_timeout_ms")]
    pub publish_timeout_ms: u64,
    /// Failed publishes in a row that open the intake breaker (new hooks: `503
    /// intake_unavailable`).
    #[serde(default = "d_breaker_failures")]
    pub breaker_failures: u32,
    /// `Retry-After` of `intake_unavailable` and `intake_pending` (seconds).
    #[serde(default = "d_retry_after_s")]
    pub retry_after_s: u32,
    /// How often the reconciler republishes hooks committed here but not confirmed by the log.
    #[serde(default = "d_reconcile_interval_ms")]
    pub reconcile_interval_ms: u64,
}

fn d_publish_timeout_ms() -> u64 {
    5_000
}
fn d_breaker_failures() -> u32 {
    3
}
fn d_retry_after_s() -> u32 {
    2
}
fn d_reconcile_interval_ms() -> u64 {
    1_000
}

/// Where backups go: the same shape as the archive's store. Absent: the archive's
/// (`storage`) store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BackupStoreConfig {
    #[serde(rename = "type")]
    pub store_type: BlobStoreType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalStoreConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3StoreConfig>,
}

/// Checkpoints of the store, uploaded to a blob store under `<key_prefix>/backup/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct BackupConfig {
    pub enabled: bool,
    /// Time between two backups; a clean stop writes one more.
    pub interval_ms: u64,
    /// Backups kept (older manifests and the files only they use are deleted).
    pub keep: u32,
    /// Default: the archive's store (`storage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<BackupStoreConfig>,
    /// Default: `storage.key_prefix`, else none (keys start at `backup/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
}

impl Default for BackupConfig {
    fn default() -> Self {
        BackupConfig {
            enabled: false,
            interval_ms: 60_000,
            keep: 3,
            store: None,
            key_prefix: None,
        }
    }
}

/// Leaves a section at its defaults out of the rendered config, so configs without it keep
/// their hash.
pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn err(field: &str, msg: impl Into<String>) -> ConfigError {
    ConfigError::field(field, msg)
}

/// `wal`, `intake` and `backup` together: dual needs an intake log, an intake log needs dual,
/// a backup needs a store.
pub(crate) fn validate_durability(c: &crate::Config) -> Result<(), ConfigError> {
    match (c.wal.wal_type, &c.intake) {
        (WalType::Dual, None) => {
            return Err(err("intake", "is required when wal.type is dual"));
        }
        (WalType::Disk, Some(_)) => {
            return Err(err("intake", "is set but wal.type is disk"));
        }
        _ => {}
    }
    if let Some(i) = &c.intake {
        match (&i.kafka, &i.jetstream) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "intake",
                    "give one of intake.kafka and intake.jetstream, not both",
                ));
            }
            (None, None) => {
                return Err(err("intake", "needs intake.kafka or intake.jetstream"));
            }
            (Some(k), None) => {
                crate::sinks::validate_kafka_at(k, "intake.kafka", c.egress.allow_insecure_tls)?;
            }
            (None, Some(n)) => {
                crate::sinks::validate_nats_at(n, "intake.jetstream", c.egress.allow_insecure_tls)?;
            }
        }
        if let Some(n) = &i.node
            && !crate::validate::valid_id(n)
        {
            return Err(err(
                "intake.node",
                "must be 1-64 characters of [A-Za-z0-9_-]",
            ));
        }
        if !(100..=60_000).contains(&i.publish_timeout_ms) {
            return Err(err(
                "intake.publish_timeout_ms",
                format!("must be 100..=60000, got {}", i.publish_timeout_ms),
            ));
        }
        if !(1..=100).contains(&i.breaker_failures) {
            return Err(err(
                "intake.breaker_failures",
                format!("must be 1..=100, got {}", i.breaker_failures),
            ));
        }
        if !(1..=3600).contains(&i.retry_after_s) {
            return Err(err(
                "intake.retry_after_s",
                format!("must be 1..=3600, got {}", i.retry_after_s),
            ));
        }
        if !(10..=600_000).contains(&i.reconcile_interval_ms) {
            return Err(err(
                "intake.reconcile_interval_ms",
                format!("must be 10..=600000, got {}", i.reconcile_interval_ms),
            ));
        }
    }
    let b = &c.backup;
    if b.enabled {
        if !(1_000..=86_400_000).contains(&b.interval_ms) {
            return Err(err(
                "backup.interval_ms",
                format!("must be 1000..=86400000, got {}", b.interval_ms),
            ));
        }
        if !(1..=1000).contains(&b.keep) {
            return Err(err(
                "backup.keep",
                format!("must be 1..=1000, got {}", b.keep),
            ));
        }
        if b.store.is_none() && c.storage.is_none() {
            return Err(err(
                "backup.store",
                "is required when backup is enabled and storage is not configured",
            ));
        }
        if let Some(s) = &b.store {
            crate::storage::validate_store_at(s.store_type, &s.local, &s.s3, "backup.store")?;
        }
        if let Some(p) = &b.key_prefix {
            crate::storage::validate_prefix_at(p, "backup.key_prefix")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{Config, ConfigError};

    fn check(y: &str) -> Result<Config, ConfigError> {
        let c: Config = serde_yaml_ng::from_str(y).expect("parses");
        crate::validate(&c).map(|_| c)
    }

    fn field(y: &str) -> String {
        check(y)
            .expect_err("should be refused")
            .field
            .unwrap_or_default()
    }

    const KAFKA: &str = "intake:\n  kafka: {brokers: [\"127.0.0.1:9092\"], topic: ankusa-intake}\n";

    #[test]
    fn dual_with_kafka_loads_with_defaults() {
        let c = check(&format!("wal: {{type: dual}}\n{KAFKA}")).expect("valid");
        let i = c.intake.expect("intake");
        assert_eq!(
            (
                i.publish_timeout_ms,
                i.breaker_failures,
                i.retry_after_s,
                i.reconcile_interval_ms
            ),
            (5000, 3, 2, 1000)
        );
        assert_eq!(c.wal.wal_type, super::WalType::Dual);
        // A config without the sections renders without them: existing hashes hold.
        let plain = Config::default();
        let text = serde_json::to_string(&plain).unwrap();
        assert!(
            !text.contains("\"wal\"") && !text.contains("\"backup\""),
            "{text}"
        );
    }

    #[test]
    fn mismatches_name_the_field() {
        assert_eq!(field("wal: {type: dual}\n"), "intake");
        assert_eq!(field(KAFKA), "intake");
        assert_eq!(
            field(
                "wal: {type: dual}\nintake:\n  kafka: {brokers: [\"b:9092\"], topic: t}\n  jetstream: {servers: [\"nats://n:4222\"], subject: s}\n"
            ),
            "intake"
        );
        assert_eq!(field("wal: {type: dual}\nintake: {}\n"), "intake");
        assert_eq!(
            field(&format!(
                "wal: {{type: dual}}\n{KAFKA}  publish_timeout_ms: 5\n"
            )),
            "intake.publish_timeout_ms"
        );
        assert_eq!(
            field(&format!(
                "wal: {{type: dual}}\n{KAFKA}  breaker_failures: 0\n"
            )),
            "intake.breaker_failures"
        );
        assert_eq!(
            field(&format!("wal: {{type: dual}}\n{KAFKA}  node: \"a/b\"\n")),
            "intake.node"
        );
        assert_eq!(
            field("wal: {type: dual}\nintake:\n  kafka: {brokers: [], topic: t}\n"),
            "intake.kafka.brokers"
        );
        assert_eq!(
            field(
                "wal: {type: dual}\nintake:\n  jetstream: {servers: [\"nats://n:4222\"], subject: \"\"}\n"
            ),
            "intake.jetstream.subject"
        );
    }

    #[test]
    fn wal_type_from_the_environment() {
        struct Env;
        impl crate::interpolate::Lookup for Env {
            fn env(&self, k: &str) -> Option<String> {
                (k == "ANKUSA_WAL_TYPE").then(|| "sideways".to_string())
            }
            fn file(&self, _: &str) -> std::io::Result<String> {
                Err(std::io::ErrorKind::NotFound.into())
            }
        }
        let mut c = Config::default();
        let e = crate::apply_env_overrides(&mut c, &Env).expect_err("refused");
        assert_eq!(e.field.as_deref(), Some("ANKUSA_WAL_TYPE"));
        assert!(!e.to_string().contains("sideways"));
    }
}
