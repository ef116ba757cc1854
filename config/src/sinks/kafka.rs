//! The Kafka sink: produces each hook to a topic, `acks=all`.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use super::{d_5000, d_idle, d_inline, entries, err, inline, min, non_empty, server_entry};
use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::secrets::Secret;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum KafkaSaslMechanism {
    /// SASL/PLAIN (send it over a network you trust: this build has no Kafka TLS).
    Plain,
}

/// SASL credentials for the Kafka brokers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct KafkaSasl {
    pub mechanism: KafkaSaslMechanism,
    pub username: Secret,
    pub password: Secret,
}

sink_config! {
    /// Produces each hook to a Kafka topic, `acks=all`, keyed by `tenant/source`.
    pub struct KafkaSinkConfig {
        /// Bootstrap brokers, `host:port` (no credentials here; use `sasl`).
        pub brokers: Vec<String>,
        /// An existing topic; the sink never creates one.
        pub topic: String,
        /// A static record key; default `<tenant>/<source_id>`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub key: Option<String>,
        #[serde(default = "d_inline")]
        pub inline_max_bytes: u64,
        /// Key plus value above this is refused before producing (`message_too_large`).
        #[serde(default = "d_max_record")]
        pub max_record_bytes: u64,
        /// How long a produce waits for every in-sync replica.
        #[serde(default = "d_5000")]
        pub produce_timeout_ms: u64,
        #[serde(default = "d_idle")]
        pub idle_timeout_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub sasl: Option<KafkaSasl>,
    }
}

fn d_max_record() -> u64 {
    1_000_000
}

impl KafkaSinkConfig {
    pub fn new(brokers: Vec<String>, topic: impl Into<String>) -> Self {
        KafkaSinkConfig {
            brokers,
            topic: topic.into(),
            key: None,
            inline_max_bytes: d_inline(),
            max_record_bytes: d_max_record(),
            produce_timeout_ms: d_5000(),
            idle_timeout_ms: d_idle(),
            sasl: None,
            ordered: false,
            ordering_key: None,
        }
    }

    /// The bootstrap brokers, `brokers[i]`.
    pub fn egress_targets(&self) -> Vec<EgressTarget> {
        entries("brokers", &self.brokers, 9092)
    }

    pub(super) fn validate(&self, p: &str) -> Result<(), ConfigError> {
        if self.brokers.is_empty() {
            return Err(err(format!("{p}.brokers"), "must list at least one broker"));
        }
        for (i, b) in self.brokers.iter().enumerate() {
            server_entry(p, "brokers", i, b, &["tcp", "plaintext"])?;
        }
        non_empty(p, "topic", &self.topic)?;
        // Kafka's own rule for topic names (kafka.common.Topic): 1-249 of [a-zA-Z0-9._-].
        if self.topic.len() > 249
            || !self
                .topic
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(err(format!("{p}.topic"), "must be 1-249 of [a-zA-Z0-9._-]"));
        }
        if let Some(key) = &self.key {
            non_empty(p, "key", key)?;
        }
        inline(p, self.inline_max_bytes)?;
        min(p, "max_record_bytes", self.max_record_bytes, 1024)?;
        min(p, "produce_timeout_ms", self.produce_timeout_ms, 1)?;
        if let Some(s) = &self.sasl {
            non_empty(p, "sasl.username", s.username.expose())?;
        }
        Ok(())
    }
}
