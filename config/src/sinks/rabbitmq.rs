//! The RabbitMQ sink: publishes each hook to an exchange, answered on the publisher confirm.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use super::shared::{d_5000, d_idle, d_inline, inline, min, non_empty};
use super::tls::SinkTls;
use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::rules::{err, url_with_scheme};
use crate::secrets::SecretUrl;

/// The AMQP exchange type the RabbitMQ sink declares its exchange with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ExchangeType {
    #[default]
    Topic,
    Direct,
    Fanout,
    Headers,
}

impl ExchangeType {
    pub fn as_str(self) -> &'static str {
        match self {
            ExchangeType::Topic => "topic",
            ExchangeType::Direct => "direct",
            ExchangeType::Fanout => "fanout",
            ExchangeType::Headers => "headers",
        }
    }
}

/// How the sink authenticates to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum AmqpAuthMechanism {
    /// The URL's user and password (SASL PLAIN).
    #[default]
    Plain,
    /// The TLS client certificate (SASL EXTERNAL; RabbitMQ's `rabbitmq_auth_mechanism_ssl`
    /// maps the certificate to a user). Needs `amqps://` and `tls.cert_*`/`tls.key_*`.
    External,
}

impl AmqpAuthMechanism {
    pub fn as_str(self) -> &'static str {
        match self {
            AmqpAuthMechanism::Plain => "plain",
            AmqpAuthMechanism::External => "external",
        }
    }
}

sink_config! {
    /// Publishes each hook to an exchange (declared durable; queues are the consumer's), mandatory
    /// and persistent, answered on the broker's publisher confirm.
    pub struct RabbitmqSinkConfig {
        /// `amqp://user:password@host:5672/vhost` (`amqps://` for TLS); redacted in `print-config`.
        pub url: SecretUrl,
        /// The exchange published to, declared durable by the sink (not `amq.*`, at most 255
        /// bytes).
        pub exchange: String,
        /// The type the exchange is declared with: `topic` (default), `direct`, `fanout` or
        /// `headers`.
        #[serde(default)]
        pub exchange_type: ExchangeType,
        /// A static routing key; default `ankusa.<source_id>`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub routing_key: Option<String>,
        /// Largest body carried inline (base64), in bytes (default 65536); a larger one
        /// travels as a claim check.
        #[serde(default = "d_inline")]
        pub inline_max_bytes: u64,
        /// Publishes awaiting a confirm on the connection; past it a delivery fails `busy`.
        #[serde(default = "d_max_inflight")]
        pub max_inflight: u32,
        /// How long a publish waits for the broker's publisher confirm, in ms (default 5000).
        #[serde(default = "d_5000")]
        pub confirm_timeout_ms: u64,
        /// After a failed connect, deliveries fail `not_connected` for this long before redialing.
        #[serde(default = "d_5000")]
        pub retry_ms: u64,
        /// A broker connection with no delivery through it for this long (ms) is closed;
        /// default 600000, 0 keeps it open.
        #[serde(default = "d_idle")]
        pub idle_timeout_ms: u64,
        /// How an `amqps://` connection is verified (CA bundle, client certificate, server
        /// name); absent: the system's roots and the URL's host.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tls: Option<SinkTls>,
        /// `plain` (the URL's credentials) or `external` (the client certificate).
        #[serde(default)]
        pub auth_mechanism: AmqpAuthMechanism,
    }
}

fn d_max_inflight() -> u32 {
    256
}

impl RabbitmqSinkConfig {
    pub fn new(url: impl Into<String>, exchange: impl Into<String>) -> Self {
        RabbitmqSinkConfig {
            url: SecretUrl::new(url),
            exchange: exchange.into(),
            exchange_type: ExchangeType::Topic,
            routing_key: None,
            inline_max_bytes: d_inline(),
            max_inflight: d_max_inflight(),
            confirm_timeout_ms: d_5000(),
            retry_ms: d_5000(),
            idle_timeout_ms: d_idle(),
            tls: None,
            auth_mechanism: AmqpAuthMechanism::Plain,
            ordered: false,
            ordering_key: None,
            filter: None,
            on_filter_error: Default::default(),
            transform: None,
        }
    }

    /// The broker, `url` (port 5672, or 5671 for `amqps://`, when the URL has none).
    pub fn egress_targets(&self) -> Vec<EgressTarget> {
        let raw = self.url.expose();
        let port = if raw.starts_with("amqps:") {
            5671
        } else {
            5672
        };
        EgressTarget::from_url("url".into(), raw, port)
            .into_iter()
            .collect()
    }

    pub(super) fn validate(&self, p: &str) -> Result<(), ConfigError> {
        let url = url_with_scheme(&format!("{p}.url"), self.url.expose(), &["amqp", "amqps"])?;
        // Settings a plaintext connection would silently ignore are a mistake worth naming.
        if self.tls.is_some() && url.scheme() != "amqps" {
            return Err(err(
                format!("{p}.tls"),
                "is read only with an amqps:// url (TLS)",
            ));
        }
        if self.auth_mechanism == AmqpAuthMechanism::External {
            let has_cert = self
                .tls
                .as_ref()
                .is_some_and(|t| t.cert_file.is_some() || t.cert_pem.is_some());
            if url.scheme() != "amqps" || !has_cert {
                return Err(err(
                    format!("{p}.auth_mechanism"),
                    "external authenticates with the TLS client certificate: it needs an amqps:// url and tls.cert_file or tls.cert_pem (with its key)",
                ));
            }
        }
        non_empty(p, "exchange", &self.exchange)?;
        if self.exchange.starts_with("amq.") {
            return Err(err(
                format!("{p}.exchange"),
                "must not be a broker-reserved amq.* exchange (the sink declares its exchange)",
            ));
        }
        if self.exchange.len() > 255 {
            return Err(err(format!("{p}.exchange"), "must be at most 255 bytes"));
        }
        if let Some(k) = &self.routing_key
            && k.len() > 255
        {
            return Err(err(format!("{p}.routing_key"), "must be at most 255 bytes"));
        }
        inline(p, self.inline_max_bytes)?;
        min(p, "max_inflight", self.max_inflight as u64, 1)?;
        min(p, "confirm_timeout_ms", self.confirm_timeout_ms, 1)?;
        min(p, "retry_ms", self.retry_ms, 1)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::SinkConfig;

    fn check(r: RabbitmqSinkConfig) -> Result<(), ConfigError> {
        crate::testing::check_sink(SinkConfig::Rabbitmq(r), false)
    }

    fn parse(y: &str) -> RabbitmqSinkConfig {
        match serde_yaml_ng::from_str::<SinkConfig>(y).expect("parses") {
            SinkConfig::Rabbitmq(r) => r,
            _ => panic!("a rabbitmq sink"),
        }
    }

    #[test]
    fn amqps_with_tls_and_external() {
        let r = parse(
            "type: rabbitmq\nurl: amqps://mq.example:5671/%2f\nexchange: e\n\
             auth_mechanism: external\n\
             tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /c.key}\n",
        );
        assert_eq!(r.auth_mechanism, AmqpAuthMechanism::External);
        assert_eq!(r.egress_targets()[0].port, 5671);
        check(r).expect("valid");
    }

    #[test]
    fn tls_needs_amqps_and_external_needs_a_certificate() {
        let mut r = RabbitmqSinkConfig::new("amqp://u:p@mq:5672/%2f", "e");
        r.tls = Some(SinkTls::default());
        let e = check(r.clone()).expect_err("tls over amqp").to_string();
        assert!(
            e.contains("sources.src.sinks[0].tls") && e.contains("amqps://"),
            "{e}"
        );
        r.url = crate::secrets::SecretUrl::new("amqps://mq:5671/%2f");
        r.auth_mechanism = AmqpAuthMechanism::External;
        let e = check(r.clone())
            .expect_err("external without a certificate")
            .to_string();
        assert!(e.contains("sources.src.sinks[0].auth_mechanism"), "{e}");
        r.tls = Some(SinkTls {
            cert_file: Some("/c.pem".into()),
            key_file: Some("/c.key".into()),
            ..SinkTls::default()
        });
        check(r).expect("external with a client certificate");
    }
}
