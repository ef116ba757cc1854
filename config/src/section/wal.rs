//! `wal` and `intake`: how far an acked hook survives.
//!
//! `disk` acks after a synced commit to this node's store: durable to power loss on this host.
//! `none` (direct mode) keeps no hook at all: each hook is published to every sink of its
//! source under one deadline (`publish_timeout_ms`) and acked once every sink confirmed, so the
//! sinks' own durability is the ack's; a direct source needs a durable sink (`validate.rs`).
//! `dual` also waits for a confirmed publish of the hook to a replicated intake log (Kafka or
//! NATS JetStream, `intake`), so losing the host, its volume included, loses nothing acked: a
//! node that starts empty rebuilds every hook it acked from its own records in the log. Backups
//! (`backup.rs`) bound how much of the log a rebuild replays.
//!
//! The intake log is written with the keys of the sink of its type, so this file imports
//! `sinks` (and the leaves). That `dual` needs `intake` and `intake` needs `dual`, and the
//! log's `tls:` against `egress.allow_insecure_tls`, are `validate.rs`'s rules.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, in_range, valid_id};
use crate::sinks::{KafkaSinkConfig, NatsSinkConfig, SinkConfig};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WalType {
    /// Ack after a synced commit to this node's store.
    #[default]
    Disk,
    /// Ack after the synced commit AND a confirmed publish to the intake log (`intake`).
    Dual,
    /// Direct mode: no store of hooks; ack after every sink of the source confirmed the hook.
    None,
}

impl WalType {
    pub fn as_str(self) -> &'static str {
        match self {
            WalType::Disk => "disk",
            WalType::Dual => "dual",
            WalType::None => "none",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct WalConfig {
    #[serde(rename = "type")]
    pub wal_type: WalType,
    /// `wal.type: none`: the one deadline for every sink of a hook to confirm it; past it the
    /// request is answered `503`. Keep it below the provider's own timeout. 100-60000.
    pub publish_timeout_ms: u64,
    /// `wal.type: none`: the `Retry-After` (seconds) of a `503 sink_unavailable`. 1-3600.
    pub retry_after_s: u32,
}

impl Default for WalConfig {
    fn default() -> Self {
        WalConfig {
            wal_type: WalType::Disk,
            publish_timeout_ms: 8_000,
            retry_after_s: 2,
        }
    }
}

impl WalConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        in_range(
            &f("publish_timeout_ms"),
            self.publish_timeout_ms,
            100,
            60_000,
        )?;
        in_range(&f("retry_after_s"), self.retry_after_s.into(), 1, 3600)
    }
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

impl IntakeConfig {
    /// The log as the sink of its type, with that sink's path (`intake.kafka`,
    /// `intake.jetstream`); refused unless exactly one is given.
    pub(crate) fn log_sink(&self, path: &str) -> Result<(SinkConfig, String), ConfigError> {
        match (&self.kafka, &self.jetstream) {
            (Some(_), Some(_)) => Err(err(
                path,
                format!("give one of {path}.kafka and {path}.jetstream, not both"),
            )),
            (None, None) => Err(err(path, format!("needs {path}.kafka or {path}.jetstream"))),
            (Some(k), None) => Ok((SinkConfig::Kafka(k.clone()), format!("{path}.kafka"))),
            (None, Some(n)) => Ok((SinkConfig::Nats(n.clone()), format!("{path}.jetstream"))),
        }
    }

    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let (log, at) = self.log_sink(path)?;
        log.validate(&at)?;
        if let Some(n) = &self.node
            && !valid_id(n)
        {
            return Err(err(
                format!("{path}.node"),
                "must be 1-64 characters of [A-Za-z0-9_-]",
            ));
        }
        let f = |key: &str| format!("{path}.{key}");
        in_range(
            &f("publish_timeout_ms"),
            self.publish_timeout_ms,
            100,
            60_000,
        )?;
        in_range(&f("breaker_failures"), self.breaker_failures.into(), 1, 100)?;
        in_range(&f("retry_after_s"), self.retry_after_s.into(), 1, 3600)?;
        in_range(
            &f("reconcile_interval_ms"),
            self.reconcile_interval_ms,
            10,
            600_000,
        )
    }
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

    const RABBIT: &str = "      - type: rabbitmq\n        url: amqp://guest:guest@127.0.0.1:5672/%2f\n        exchange: ankusa.events\n";
    const REDIS: &str =
        "      - type: redis\n        url: redis://127.0.0.1:6379/0\n        channel: c\n";

    fn direct(sinks: &str) -> String {
        format!(
            "wal: {{type: none}}\negress: {{allow_loopback: true}}\nsources:\n  s:\n    sinks:\n{sinks}"
        )
    }

    #[test]
    fn direct_mode_needs_a_durable_sink_per_source() {
        let c = check(&direct(RABBIT)).expect("a durable sink loads");
        assert_eq!(c.wal.wal_type, super::WalType::None);
        assert_eq!((c.wal.publish_timeout_ms, c.wal.retry_after_s), (8000, 2));
        // A non-durable sink beside a durable one is allowed (it is still a confirmer).
        check(&direct(&format!("{REDIS}{RABBIT}      - type: log\n"))).expect("mixed loads");
        assert_eq!(field(&direct(REDIS)), "sources.s.sinks");
        assert_eq!(field(&direct("      - type: log\n")), "sources.s.sinks");
        assert_eq!(
            field(&direct(&format!("{REDIS}      - type: log\n"))),
            "sources.s.sinks"
        );
        // The same sources under disk load: the rule is direct mode's.
        check(&direct(REDIS).replace("type: none", "type: disk")).expect("disk loads");
    }

    #[test]
    fn direct_mode_refuses_what_needs_a_store() {
        let base = direct(RABBIT);
        assert_eq!(field(&format!("{base}{KAFKA}")), "intake");
        assert_eq!(
            field(&format!(
                "{base}storage:\n  type: local\n  local:\n    dir: /tmp/a\n"
            )),
            "storage"
        );
        assert_eq!(
            field(&format!(
                "{base}backup:\n  enabled: true\n  store:\n    type: local\n    local:\n      dir: /tmp/b\n"
            )),
            "backup.enabled"
        );
        assert_eq!(
            field(&base.replace("{type: none}", "{type: none, publish_timeout_ms: 50}")),
            "wal.publish_timeout_ms"
        );
        assert_eq!(
            field(&base.replace("{type: none}", "{type: none, retry_after_s: 0}")),
            "wal.retry_after_s"
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
