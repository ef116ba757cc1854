//! The RabbitMQ sink: publishes each hook to an exchange, answered on the publisher confirm.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use super::{d_5000, d_idle, d_inline, err, inline, min, non_empty, url_with_scheme};
use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::secrets::SecretUrl;

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

sink_config! {
    /// Publishes each hook to an exchange (declared durable; queues are the consumer's), mandatory
    /// and persistent, answered on the broker's publisher confirm.
    pub struct RabbitmqSinkConfig {
        /// `amqp://user:password@host:5672/vhost` (`amqps://` for TLS); redacted in `print-config`.
        pub url: SecretUrl,
        pub exchange: String,
        #[serde(default)]
        pub exchange_type: ExchangeType,
        /// A static routing key; default `ankusa.<source_id>`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub routing_key: Option<String>,
        #[serde(default = "d_inline")]
        pub inline_max_bytes: u64,
        /// Publishes awaiting a confirm on the connection; past it a delivery fails `busy`.
        #[serde(default = "d_max_inflight")]
        pub max_inflight: u32,
        #[serde(default = "d_5000")]
        pub confirm_timeout_ms: u64,
        /// After a failed connect, deliveries fail `not_connected` for this long before redialing.
        #[serde(default = "d_5000")]
        pub retry_ms: u64,
        #[serde(default = "d_idle")]
        pub idle_timeout_ms: u64,
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
            ordered: false,
            ordering_key: None,
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
        url_with_scheme(p, "url", self.url.expose(), &["amqp", "amqps"])?;
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
