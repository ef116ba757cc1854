//! Sink configuration: `SinkConfig` over one module per sink type, each holding its config
//! struct, its defaults and its validation. What several sinks share is written once
//! (`shared.rs`, `tls.rs`) and placed into each by `sink_config!`: the ordering keys (every
//! sink) and the `batch*` keys (the batching sinks, SQS and Pub/Sub, read together as
//! `BatchOptions`). Credentials are `Secret`s and URLs that may carry them `SecretUrl`s, so a
//! derived `Debug` never shows them; `print-config` redacts by key (redact.rs).
//!
//! This file only gathers: the sink files import `shared.rs`, `tls.rs`, `egress` and the
//! crate's leaves, never this file, and nothing under `sinks/` imports a section or `model`.
//!
//! The queue and broker sinks (Kafka, RabbitMQ, NATS JetStream, Redis pub/sub, SQS, Google
//! Pub/Sub) publish the same message (`v: 1`, see docs/sinks.md) and check a body in to the
//! claim check above `inline_max_bytes`.

/// Declares a sink's config struct: the sink's own fields; for a batching sink (`batched by
/// LIMITS`, its `BatchLimits`) the `batch*` keys with its defaults, then the fields that follow
/// them; and last the fields every sink has (`ordered`, `ordering_key`). The shared fields are
/// written once, here, and sit beside the sink's own in YAML under the struct's
/// `deny_unknown_fields`. (serde's
/// `flatten` would do the same, but reports an unknown key only after a missing required one,
/// and without the keys it expected: a typo of `url` would read "missing field `url`".)
///
/// A batching sink's module gets `default_batch_max_entries` and `default_batch_max_bytes`
/// (its serde defaults) and the struct gets `batch_options()`.
macro_rules! sink_config {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $($own:tt)*
        }
        $(
            batched by $limits:expr, then {
                $($after:tt)*
            }
        )?
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[cfg_attr(feature = "schema", derive(::schemars::JsonSchema))]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($own)*
            $(
                /// `false`: one request per delivery.
                #[serde(default = "super::shared::d_true")]
                pub batch: bool,
                /// How long a batch waits for more entries after its first.
                #[serde(default = "super::shared::d_linger")]
                pub batch_linger_ms: u64,
                /// Entries in one request; default and ceiling are the destination's (SQS 10,
                /// Pub/Sub 1000).
                #[serde(default = "default_batch_max_entries")]
                pub batch_max_entries: u32,
                /// Bytes in one request (Pub/Sub: data bytes, before base64).
                #[serde(default = "default_batch_max_bytes")]
                pub batch_max_bytes: u64,
                /// Entries waiting per destination; past it a delivery is refused with a pause.
                #[serde(default = "super::shared::d_queue_max")]
                pub batch_queue_max: u32,
                /// Bytes waiting per destination (default 134217728); past it a delivery is
                /// refused with a pause.
                #[serde(default = "super::shared::d_queue_max_bytes")]
                pub batch_queue_max_bytes: u64,
                /// Entries of one tenant waiting per destination.
                #[serde(default = "super::shared::d_queue_tenant_max")]
                pub batch_queue_tenant_max: u32,
                /// Requests in flight per destination; default `dispatch.sink_concurrency`
                /// (else 8).
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub batch_max_inflight: Option<u32>,
                $($after)*
            )?
            /// Deliver this sink's hooks of one lane (tenant, source, sink, key) one at a time,
            /// in the order they were accepted.
            #[serde(default)]
            pub ordered: bool,
            /// Where the lane key comes from; absent: one keyless lane per sink.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub ordering_key: Option<$crate::sinks::shared::OrderingKey>,
            /// A CEL expression over the hook (docs/filters.md); false: this sink gets no
            /// delivery row for it. Absent: every hook.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub filter: Option<String>,
            /// What a filter that cannot be evaluated for a hook does: `deliver` (default) or
            /// `skip`.
            #[serde(default, skip_serializing_if = "crate::sinks::routing::OnFilterError::is_default")]
            pub on_filter_error: $crate::sinks::routing::OnFilterError,
            /// CEL expressions for the body and headers this sink sends (docs/filters.md).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub transform: Option<$crate::sinks::routing::Transform>,
        }

        impl $name {
            /// Whether the sink is ordered, and where its lane key comes from.
            pub fn ordering(&self) -> (bool, Option<&$crate::sinks::shared::OrderingKey>) {
                (self.ordered, self.ordering_key.as_ref())
            }

            /// Sets the entry's filter and transform (the operator: a Source gives them per
            /// sink, the Sink object none).
            pub fn set_routing(&mut self, r: $crate::sinks::routing::RoutingKeys) {
                self.filter = r.filter;
                self.on_filter_error = r.on_filter_error;
                self.transform = r.transform;
            }

            /// The entry's filter and transform.
            pub fn routing(&self) -> $crate::sinks::routing::SinkRouting<'_> {
                $crate::sinks::routing::SinkRouting {
                    filter: self.filter.as_deref(),
                    on_filter_error: self.on_filter_error,
                    transform: self.transform.as_ref(),
                }
            }
            $(
                /// Checks the `batch*` keys against the destination's ceilings.
                fn validate_batch(&self, p: &str) -> Result<(), $crate::error::ConfigError> {
                    self.batch_options().validate(p, &$limits)
                }

                /// The `batch*` keys, read together.
                pub fn batch_options(&self) -> $crate::sinks::shared::BatchOptions {
                    $crate::sinks::shared::BatchOptions {
                        enabled: self.batch,
                        linger_ms: self.batch_linger_ms,
                        max_entries: self.batch_max_entries,
                        max_bytes: self.batch_max_bytes,
                        queue_max: self.batch_queue_max,
                        queue_max_bytes: self.batch_queue_max_bytes,
                        queue_tenant_max: self.batch_queue_tenant_max,
                        max_inflight: self.batch_max_inflight,
                    }
                }
            )?
        }

        $(
            fn default_batch_max_entries() -> u32 {
                $limits.default_entries
            }

            fn default_batch_max_bytes() -> u64 {
                $limits.default_bytes
            }
        )?
    };
}

mod http;
mod kafka;
mod log;
mod nats;
mod pubsub;
mod rabbitmq;
mod redis;
mod routing;
mod shared;
mod sqs;
mod tls;

use serde::{Deserialize, Serialize};

use crate::egress::EgressTarget;
use crate::error::ConfigError;
use shared::check_ordering;

#[cfg(feature = "schema")]
use schemars::JsonSchema;

pub use http::{HttpMethod, HttpSinkConfig, HttpVersion};
pub use kafka::{KafkaSasl, KafkaSaslMechanism, KafkaSecurityProtocol, KafkaSinkConfig};
pub use log::LogSinkConfig;
pub use nats::{NatsAuth, NatsSinkConfig, NatsTls};
pub use pubsub::{DEFAULT_PUBSUB_ENDPOINT, GooglePubsubSinkConfig, PUBSUB_BATCH, PubsubAuth};
pub use rabbitmq::{AmqpAuthMechanism, ExchangeType, RabbitmqSinkConfig};
pub use redis::RedisSinkConfig;
pub use routing::{CompiledRouting, OnFilterError, RoutingKeys, SinkRouting, Transform};
pub use shared::{
    BatchLimits, BatchOptions, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_INLINE_MAX_BYTES, OrderingKey,
};
pub use sqs::{SQS_BATCH, SqsSinkConfig};
pub use tls::SinkTls;

#[cfg(test)]
mod url_tests;

/// A destination of a source's hooks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SinkConfig {
    /// Logs each delivery; nothing leaves the process (`durable: false`).
    Log(LogSinkConfig),
    /// POSTs the raw body to a URL, signed per Standard Webhooks.
    Http(HttpSinkConfig),
    /// Produces the queue message to a Kafka topic (`acks=all`).
    Kafka(KafkaSinkConfig),
    /// Publishes the queue message to a RabbitMQ exchange (mandatory, confirmed, persistent).
    Rabbitmq(RabbitmqSinkConfig),
    /// Publishes the queue message to a NATS JetStream subject (acked by the stream).
    Nats(NatsSinkConfig),
    /// PUBLISHes the queue message to a Redis pub/sub channel (not durable).
    Redis(RedisSinkConfig),
    /// Sends the queue message to an SQS queue (standard or FIFO).
    Sqs(SqsSinkConfig),
    /// Publishes the queue message to a Google Cloud Pub/Sub topic.
    GooglePubsub(GooglePubsubSinkConfig),
}

/// Every sink type name (`SinkConfig::type_name`).
pub const SINK_TYPES: [&str; 8] = [
    "log",
    "http",
    "kafka",
    "rabbitmq",
    "nats",
    "redis",
    "sqs",
    "google_pubsub",
];

impl SinkConfig {
    /// The type name as written in YAML, stored with each delivery row.
    pub fn type_name(&self) -> &'static str {
        match self {
            SinkConfig::Log(_) => "log",
            SinkConfig::Http(_) => "http",
            SinkConfig::Kafka(_) => "kafka",
            SinkConfig::Rabbitmq(_) => "rabbitmq",
            SinkConfig::Nats(_) => "nats",
            SinkConfig::Redis(_) => "redis",
            SinkConfig::Sqs(_) => "sqs",
            SinkConfig::GooglePubsub(_) => "google_pubsub",
        }
    }

    /// Whether the sink's confirmation means the hook is kept by something that outlives the
    /// gateway: false for the log (nothing is kept) and Redis pub/sub (a publish no subscriber
    /// holds is gone). Under `wal.type: none` a source needs at least one durable sink.
    pub fn durable(&self) -> bool {
        !matches!(self, SinkConfig::Log(_) | SinkConfig::Redis(_))
    }

    /// Whether the sink entry is ordered, and where its lane key comes from.
    pub fn ordering(&self) -> (bool, Option<&OrderingKey>) {
        match self {
            SinkConfig::Log(s) => s.ordering(),
            SinkConfig::Http(s) => s.ordering(),
            SinkConfig::Kafka(s) => s.ordering(),
            SinkConfig::Rabbitmq(s) => s.ordering(),
            SinkConfig::Nats(s) => s.ordering(),
            SinkConfig::Redis(s) => s.ordering(),
            SinkConfig::Sqs(s) => s.ordering(),
            SinkConfig::GooglePubsub(s) => s.ordering(),
        }
    }

    /// The entry's `filter`, `on_filter_error` and `transform`.
    pub fn routing(&self) -> SinkRouting<'_> {
        match self {
            SinkConfig::Log(s) => s.routing(),
            SinkConfig::Http(s) => s.routing(),
            SinkConfig::Kafka(s) => s.routing(),
            SinkConfig::Rabbitmq(s) => s.routing(),
            SinkConfig::Nats(s) => s.routing(),
            SinkConfig::Redis(s) => s.routing(),
            SinkConfig::Sqs(s) => s.routing(),
            SinkConfig::GooglePubsub(s) => s.routing(),
        }
    }

    /// Sets the entry's `filter`, `on_filter_error` and `transform`.
    pub fn set_routing(&mut self, r: RoutingKeys) {
        match self {
            SinkConfig::Log(s) => s.set_routing(r),
            SinkConfig::Http(s) => s.set_routing(r),
            SinkConfig::Kafka(s) => s.set_routing(r),
            SinkConfig::Rabbitmq(s) => s.set_routing(r),
            SinkConfig::Nats(s) => s.set_routing(r),
            SinkConfig::Redis(s) => s.set_routing(r),
            SinkConfig::Sqs(s) => s.set_routing(r),
            SinkConfig::GooglePubsub(s) => s.set_routing(r),
        }
    }

    /// Where the sink connects, each with its field (`brokers[0]`, `url`, `endpoint`), for the
    /// egress policy: checked at load when written as an IP literal, and resolved and checked
    /// on every connect by the sink. Empty for the log sink, and for the HTTP sink, which
    /// checks (and pins) the address of every attempt itself.
    pub fn egress_targets(&self) -> Vec<EgressTarget> {
        match self {
            SinkConfig::Log(_) | SinkConfig::Http(_) => Vec::new(),
            SinkConfig::Kafka(k) => k.egress_targets(),
            SinkConfig::Rabbitmq(r) => r.egress_targets(),
            SinkConfig::Nats(n) => n.egress_targets(),
            SinkConfig::Redis(r) => r.egress_targets(),
            SinkConfig::Sqs(s) => s.egress_targets(),
            SinkConfig::GooglePubsub(g) => g.egress_targets(),
        }
    }

    /// Checks the sink at path `p` (`sources.x.sinks[2]`); errors name the field.
    pub(crate) fn validate(&self, p: &str) -> Result<(), ConfigError> {
        let (ordered, key) = self.ordering();
        check_ordering(p, ordered, key)?;
        self.routing().compile(p)?;
        match self {
            SinkConfig::Log(_) => Ok(()),
            SinkConfig::Http(h) => h.validate(p),
            SinkConfig::Kafka(k) => k.validate(p),
            SinkConfig::Rabbitmq(r) => r.validate(p),
            SinkConfig::Nats(n) => n.validate(p),
            SinkConfig::Redis(r) => r.validate(p),
            SinkConfig::Sqs(s) => s.validate(p),
            SinkConfig::GooglePubsub(g) => g.validate(p),
        }
    }

    /// The sink's `tls:` settings, when it has them (a NATS sink's bare `tls: true` has none
    /// to check: it asks for TLS with the system's roots). A NATS sink honours `server_name`
    /// too: the client sends the server's own host as SNI, and the sink checks the
    /// certificate against `server_name` instead (sinks/src/tls.rs).
    fn tls(&self) -> Option<&SinkTls> {
        match self {
            SinkConfig::Log(_) | SinkConfig::Http(_) => None,
            SinkConfig::Kafka(k) => k.tls.as_ref(),
            SinkConfig::Rabbitmq(r) => r.tls.as_ref(),
            SinkConfig::Nats(n) => match &n.tls {
                NatsTls::Settings(t) => Some(t),
                NatsTls::Enabled(_) => None,
            },
            SinkConfig::Redis(r) => r.tls.as_ref(),
            SinkConfig::Sqs(s) => s.tls.as_ref(),
            SinkConfig::GooglePubsub(g) => g.tls.as_ref(),
        }
    }

    /// Checks the sink's `tls:` settings (the shared `SinkTls` shape) at path `p`;
    /// `allow_insecure` is `egress.allow_insecure_tls`, the one switch that lets
    /// `insecure_skip_verify` through. A separate step from `validate` because it reads the
    /// egress section, which a sink's own validation does not see.
    pub(crate) fn validate_tls(&self, p: &str, allow_insecure: bool) -> Result<(), ConfigError> {
        match self.tls() {
            Some(t) => t.validate(p, allow_insecure),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
