//! The Kafka sink: produces each hook to a topic, `acks=all`.

use crate::file_paths::FilePath;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use super::shared::{d_5000, d_idle, d_inline, entries, inline, min, non_empty, server_entry};
use super::tls::SinkTls;
use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::rules::err;
use crate::secrets::Secret;

/// The SASL mechanism the Kafka sink authenticates with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum KafkaSaslMechanism {
    /// SASL/PLAIN: the password crosses the wire as is; use it with `sasl_ssl`.
    Plain,
    /// SCRAM-SHA-256 (the password never crosses the wire).
    #[serde(rename = "scram_sha_256")]
    ScramSha256,
    /// SCRAM-SHA-512.
    #[serde(rename = "scram_sha_512")]
    ScramSha512,
    /// OAUTHBEARER with a bearer token from `token` or `token_file` (re-read at each refresh).
    Oauthbearer,
}

impl KafkaSaslMechanism {
    /// librdkafka's `sasl.mechanisms` value.
    pub fn librdkafka_name(self) -> &'static str {
        match self {
            KafkaSaslMechanism::Plain => "PLAIN",
            KafkaSaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            KafkaSaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            KafkaSaslMechanism::Oauthbearer => "OAUTHBEARER",
        }
    }
}

/// How the sink talks to the brokers: Kafka's own `security.protocol` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum KafkaSecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl KafkaSecurityProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            KafkaSecurityProtocol::Plaintext => "plaintext",
            KafkaSecurityProtocol::Ssl => "ssl",
            KafkaSecurityProtocol::SaslPlaintext => "sasl_plaintext",
            KafkaSecurityProtocol::SaslSsl => "sasl_ssl",
        }
    }

    pub fn tls(self) -> bool {
        matches!(
            self,
            KafkaSecurityProtocol::Ssl | KafkaSecurityProtocol::SaslSsl
        )
    }

    pub fn sasl(self) -> bool {
        matches!(
            self,
            KafkaSecurityProtocol::SaslPlaintext | KafkaSecurityProtocol::SaslSsl
        )
    }
}

/// SASL credentials for the Kafka brokers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct KafkaSasl {
    /// `plain`, `scram_sha_256`, `scram_sha_512` or `oauthbearer` (with `token` or
    /// `token_file`).
    pub mechanism: KafkaSaslMechanism,
    /// The user (PLAIN, SCRAM); for OAUTHBEARER the principal name (default: the token's
    /// `sub` claim).
    #[serde(default)]
    pub username: Secret,
    /// The password (PLAIN, SCRAM).
    #[serde(default)]
    pub password: Secret,
    /// OAUTHBEARER: the bearer token (on Kubernetes, from a Secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// OAUTHBEARER: a file holding the bearer token, re-read whenever librdkafka refreshes
    /// it (a projected service-account token, a sidecar that renews it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<FilePath>,
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
        /// Largest body carried inline (base64), in bytes (default 65536); a larger one
        /// travels as a claim check.
        #[serde(default = "d_inline")]
        pub inline_max_bytes: u64,
        /// Key plus value above this is refused before producing (`message_too_large`).
        #[serde(default = "d_max_record")]
        pub max_record_bytes: u64,
        /// How long a produce waits for every in-sync replica.
        #[serde(default = "d_5000")]
        pub produce_timeout_ms: u64,
        /// A broker connection with no delivery through it for this long (ms) is closed;
        /// default 600000, 0 keeps it open.
        #[serde(default = "d_idle")]
        pub idle_timeout_ms: u64,
        /// SASL credentials (`mechanism`, `username`, `password`, or an OAUTHBEARER token).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub sasl: Option<KafkaSasl>,
        /// `plaintext`, `ssl`, `sasl_plaintext` or `sasl_ssl`; default from the other keys:
        /// `sasl` adds SASL, `tls` adds TLS.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub security_protocol: Option<KafkaSecurityProtocol>,
        /// How the brokers' certificates are verified (CA bundle, client certificate);
        /// absent with `ssl`/`sasl_ssl`: the system's roots. Host names are always checked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tls: Option<SinkTls>,
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
            security_protocol: None,
            tls: None,
            ordered: false,
            ordering_key: None,
            filter: None,
            on_filter_error: Default::default(),
            transform: None,
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
        let protocol = self.protocol();
        if protocol.sasl() != self.sasl.is_some() {
            return Err(err(
                format!("{p}.security_protocol"),
                format!(
                    "{} {}",
                    protocol.as_str(),
                    if protocol.sasl() {
                        "needs sasl credentials"
                    } else {
                        "has no SASL: drop sasl or use sasl_plaintext/sasl_ssl"
                    }
                ),
            ));
        }
        if self.tls.is_some() && !protocol.tls() {
            return Err(err(
                format!("{p}.tls"),
                "is read only with security_protocol ssl or sasl_ssl",
            ));
        }
        if let Some(t) = &self.tls
            && t.server_name.is_some()
        {
            return Err(err(
                format!("{p}.tls.server_name"),
                "is not supported for Kafka: librdkafka checks each broker's certificate against the host name that broker advertises",
            ));
        }
        if let Some(s) = &self.sasl {
            match s.mechanism {
                KafkaSaslMechanism::Oauthbearer => {
                    if s.token.is_some() == s.token_file.is_some() {
                        return Err(err(
                            format!("{p}.sasl.token"),
                            "oauthbearer needs exactly one of token or token_file",
                        ));
                    }
                    if let Some(t) = &s.token {
                        non_empty(p, "sasl.token", t.expose())?;
                    }
                    if s.token_file
                        .as_ref()
                        .is_some_and(|f| f.as_os_str().is_empty())
                    {
                        return Err(err(format!("{p}.sasl.token_file"), "must name a file"));
                    }
                    if !s.password.expose().is_empty() {
                        return Err(err(
                            format!("{p}.sasl.password"),
                            "is not used by oauthbearer (the token is the credential)",
                        ));
                    }
                }
                _ => {
                    non_empty(p, "sasl.username", s.username.expose())?;
                    non_empty(p, "sasl.password", s.password.expose())?;
                    if s.token.is_some() || s.token_file.is_some() {
                        return Err(err(
                            format!("{p}.sasl.token"),
                            "is read only with mechanism oauthbearer",
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The protocol in effect: `security_protocol`, else `sasl`/`tls` decide.
    pub fn protocol(&self) -> KafkaSecurityProtocol {
        self.security_protocol
            .unwrap_or(match (self.sasl.is_some(), self.tls.is_some()) {
                (false, false) => KafkaSecurityProtocol::Plaintext,
                (false, true) => KafkaSecurityProtocol::Ssl,
                (true, false) => KafkaSecurityProtocol::SaslPlaintext,
                (true, true) => KafkaSecurityProtocol::SaslSsl,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::SinkConfig;

    fn check(k: KafkaSinkConfig, allow_insecure_tls: bool) -> Result<(), ConfigError> {
        crate::testing::check_sink(SinkConfig::Kafka(k), allow_insecure_tls)
    }

    fn parse(y: &str) -> KafkaSinkConfig {
        match serde_yaml_ng::from_str::<SinkConfig>(y).expect("parses") {
            SinkConfig::Kafka(k) => k,
            _ => panic!("a kafka sink"),
        }
    }

    fn refused(k: KafkaSinkConfig, field: &str) -> String {
        let e = check(k, false).expect_err("refused").to_string();
        assert!(e.contains(field), "{e} does not name {field}");
        e
    }

    #[test]
    fn protocol_follows_sasl_and_tls_unless_given() {
        let k = parse("type: kafka\nbrokers: [b:9093]\ntopic: t\n");
        assert_eq!(k.protocol(), KafkaSecurityProtocol::Plaintext);
        let k = parse("type: kafka\nbrokers: [b:9093]\ntopic: t\ntls: {ca_file: /ca.pem}\n");
        assert_eq!(k.protocol(), KafkaSecurityProtocol::Ssl);
        check(k, false).expect("valid");
        let k = parse(
            "type: kafka\nbrokers: [b:9096]\ntopic: t\nsecurity_protocol: sasl_ssl\n\
             sasl: {mechanism: scram_sha_512, username: u, password: p}\n",
        );
        assert_eq!(k.protocol(), KafkaSecurityProtocol::SaslSsl);
        assert_eq!(
            k.sasl.as_ref().map(|s| s.mechanism.librdkafka_name()),
            Some("SCRAM-SHA-512")
        );
        check(k, false).expect("valid");
        let k = parse(
            "type: kafka\nbrokers: [b:9092]\ntopic: t\n\
             sasl: {mechanism: scram_sha_256, username: u, password: p}\n",
        );
        assert_eq!(k.protocol(), KafkaSecurityProtocol::SaslPlaintext);
    }

    #[test]
    fn mismatched_protocol_sasl_and_tls_are_named() {
        let mut k = KafkaSinkConfig::new(vec!["b:9092".into()], "t");
        k.security_protocol = Some(KafkaSecurityProtocol::SaslSsl);
        refused(k.clone(), "sources.src.sinks[0].security_protocol");
        k.security_protocol = Some(KafkaSecurityProtocol::Plaintext);
        k.tls = Some(SinkTls::default());
        refused(k.clone(), "sources.src.sinks[0].tls");
        k.security_protocol = Some(KafkaSecurityProtocol::Ssl);
        k.tls = Some(SinkTls {
            server_name: Some("kafka.internal".into()),
            ..SinkTls::default()
        });
        refused(k.clone(), "sources.src.sinks[0].tls.server_name");
        k.tls = Some(SinkTls {
            insecure_skip_verify: true,
            ..SinkTls::default()
        });
        refused(k.clone(), "tls.insecure_skip_verify");
        check(k, true).expect("allowed by egress.allow_insecure_tls");
    }

    #[test]
    fn sasl_keys_per_mechanism() {
        let base = |sasl: &str| {
            parse(&format!(
                "type: kafka\nbrokers: [b:9092]\ntopic: t\nsasl: {sasl}\n"
            ))
        };
        refused(
            base("{mechanism: scram_sha_256, username: u}"),
            "sasl.password",
        );
        refused(
            base("{mechanism: plain, username: u, password: p, token: t}"),
            "sasl.token",
        );
        check(base("{mechanism: oauthbearer, token: eyJ.x.y}"), false).expect("a token");
        check(
            base("{mechanism: oauthbearer, token_file: /var/run/secrets/token}"),
            false,
        )
        .expect("a token file");
        refused(base("{mechanism: oauthbearer}"), "sasl.token");
        refused(
            base("{mechanism: oauthbearer, token: a, token_file: /t}"),
            "sasl.token",
        );
        refused(
            base("{mechanism: oauthbearer, token: a, password: p}"),
            "sasl.password",
        );
        // The errors name keys, never the values.
        let e = refused(
            base("{mechanism: oauthbearer, token: tok-value-123, password: pw-value-456}"),
            "sasl.password",
        );
        assert!(
            !e.contains("tok-value-123") && !e.contains("pw-value-456"),
            "{e}"
        );
    }
}
