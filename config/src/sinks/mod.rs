//! Sink configuration: `SinkConfig` over one module per sink type, each holding its config
//! struct, its defaults and its validation. What several sinks share is written once and
//! placed into each by `sink_config!`: the ordering keys (every sink) and the `batch*` keys
//! (the batching sinks, SQS and Pub/Sub, read together as `BatchOptions`). Credentials are
//! `Secret`s and URLs that may carry them `SecretUrl`s, so a derived `Debug` never shows them;
//! `print-config` redacts by key (redact.rs).
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
                #[serde(default = "super::d_true")]
                pub batch: bool,
                /// How long a batch waits for more entries after its first.
                #[serde(default = "super::d_linger")]
                pub batch_linger_ms: u64,
                #[serde(default = "default_batch_max_entries")]
                pub batch_max_entries: u32,
                /// Bytes in one request (Pub/Sub: data bytes, before base64).
                #[serde(default = "default_batch_max_bytes")]
                pub batch_max_bytes: u64,
                /// Entries waiting per destination; past it a delivery is refused with a pause.
                #[serde(default = "super::d_queue_max")]
                pub batch_queue_max: u32,
                #[serde(default = "super::d_queue_max_bytes")]
                pub batch_queue_max_bytes: u64,
                /// Entries of one tenant waiting per destination.
                #[serde(default = "super::d_queue_tenant_max")]
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
            pub ordering_key: Option<$crate::sinks::OrderingKey>,
        }

        impl $name {
            /// Whether the sink is ordered, and where its lane key comes from.
            pub fn ordering(&self) -> (bool, Option<&$crate::sinks::OrderingKey>) {
                (self.ordered, self.ordering_key.as_ref())
            }
            $(
                /// Checks the `batch*` keys against the destination's ceilings.
                fn validate_batch(&self, p: &str) -> Result<(), $crate::ConfigError> {
                    self.batch_options().validate(p, &$limits)
                }

                /// The `batch*` keys, read together.
                pub fn batch_options(&self) -> $crate::sinks::BatchOptions {
                    $crate::sinks::BatchOptions {
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
mod sqs;
mod tls;

use serde::{Deserialize, Serialize};

use crate::egress::EgressTarget;
use crate::error::ConfigError;

#[cfg(feature = "schema")]
use schemars::JsonSchema;

pub use http::{HttpMethod, HttpSinkConfig};
pub use kafka::{KafkaSasl, KafkaSaslMechanism, KafkaSecurityProtocol, KafkaSinkConfig};
pub use log::LogSinkConfig;
pub use nats::{NatsAuth, NatsSinkConfig, NatsTls};
pub use pubsub::{DEFAULT_PUBSUB_ENDPOINT, GooglePubsubSinkConfig, PUBSUB_BATCH, PubsubAuth};
pub use rabbitmq::{AmqpAuthMechanism, ExchangeType, RabbitmqSinkConfig};
pub use redis::RedisSinkConfig;
pub use sqs::{SQS_BATCH, SqsSinkConfig};
pub use tls::SinkTls;

/// Largest body a queue message carries inline (base64); larger bodies travel as a claim.
pub const DEFAULT_INLINE_MAX_BYTES: u64 = 65_536;
/// A broker connection with no delivery through it for this long is closed (0 keeps it).
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 600_000;

fn d_inline() -> u64 {
    DEFAULT_INLINE_MAX_BYTES
}
fn d_idle() -> u64 {
    DEFAULT_IDLE_TIMEOUT_MS
}
fn d_5000() -> u64 {
    5_000
}

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

    /// Checks the sink's `tls:` settings (the shared `SinkTls` shape) at path `p`;
    /// `allow_insecure` is `egress.allow_insecure_tls`, the one switch that lets
    /// `insecure_skip_verify` through. A separate step from `validate` because it reads the
    /// egress section, which a sink's own validation does not see.
    pub(crate) fn validate_tls(&self, p: &str, allow_insecure: bool) -> Result<(), ConfigError> {
        match self {
            SinkConfig::Nats(n) => n.validate_tls(p, allow_insecure),
            SinkConfig::Redis(r) => r.validate_tls(p, allow_insecure),
            SinkConfig::Rabbitmq(r) => r.validate_tls(p, allow_insecure),
            SinkConfig::Kafka(k) => k.validate_tls(p, allow_insecure),
            SinkConfig::Sqs(s) => s.validate_tls(p, allow_insecure),
            SinkConfig::GooglePubsub(g) => g.validate_tls(p, allow_insecure),
            _ => Ok(()),
        }
    }
}

/// Checks a Kafka sink's keys used elsewhere (the intake log of `wal.type: dual`) at `p`.
pub(crate) fn validate_kafka_at(
    k: &KafkaSinkConfig,
    p: &str,
    allow_insecure: bool,
) -> Result<(), ConfigError> {
    let s = SinkConfig::Kafka(k.clone());
    s.validate(p)?;
    s.validate_tls(p, allow_insecure)
}

/// Checks a NATS JetStream sink's keys used elsewhere (the intake log) at `p`.
pub(crate) fn validate_nats_at(
    n: &NatsSinkConfig,
    p: &str,
    allow_insecure: bool,
) -> Result<(), ConfigError> {
    let s = SinkConfig::Nats(n.clone());
    s.validate(p)?;
    s.validate_tls(p, allow_insecure)
}

/// Where the key of an ordering lane comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OrderingKey {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
}

/// The lane rules every sink's config follows (`ordered`, `ordering_key`).
fn check_ordering(p: &str, ordered: bool, key: Option<&OrderingKey>) -> Result<(), ConfigError> {
    let Some(k) = key else {
        return Ok(());
    };
    if !ordered {
        return Err(err(
            format!("{p}.ordering_key"),
            "is only read with ordered: true",
        ));
    }
    match (&k.header, &k.json) {
        (Some(h), None) if crate::valid_header_name(h) => Ok(()),
        (Some(_), None) => Err(err(
            format!("{p}.ordering_key.header"),
            "is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)",
        )),
        (None, Some(j)) if !j.is_empty() && !j.split('.').any(str::is_empty) => Ok(()),
        (None, Some(_)) => Err(err(
            format!("{p}.ordering_key.json"),
            "must be a dot path like data.id",
        )),
        _ => Err(err(
            format!("{p}.ordering_key"),
            "must name exactly one of header, json",
        )),
    }
}

/// What differs between the batching sinks: the destination's ceilings on one request, and
/// the defaults that fill one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most entries one request takes.
    pub max_entries: u32,
    pub default_entries: u32,
    /// Most bytes one request takes.
    pub max_bytes: u64,
    pub default_bytes: u64,
}

fn d_true() -> bool {
    true
}
fn d_linger() -> u64 {
    20
}
fn d_queue_max() -> u32 {
    4_096
}
fn d_queue_max_bytes() -> u64 {
    134_217_728
}
fn d_queue_tenant_max() -> u32 {
    1_024
}

/// A batching sink's `batch*` keys (SQS `SendMessageBatch`, Pub/Sub `topics.publish`),
/// read together: what the sinks build their batcher from, and what two sinks must share to
/// share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BatchOptions {
    pub enabled: bool,
    pub linger_ms: u64,
    pub max_entries: u32,
    pub max_bytes: u64,
    pub queue_max: u32,
    pub queue_max_bytes: u64,
    pub queue_tenant_max: u32,
    pub max_inflight: Option<u32>,
}

impl BatchOptions {
    /// The ranges, within the destination's ceilings.
    fn validate(&self, p: &str, limits: &BatchLimits) -> Result<(), ConfigError> {
        max(p, "batch_linger_ms", self.linger_ms, 10_000)?;
        min(p, "batch_max_entries", self.max_entries as u64, 1)?;
        max(
            p,
            "batch_max_entries",
            self.max_entries as u64,
            limits.max_entries as u64,
        )?;
        min(p, "batch_max_bytes", self.max_bytes, 1)?;
        max(p, "batch_max_bytes", self.max_bytes, limits.max_bytes)?;
        min(p, "batch_queue_max", self.queue_max as u64, 1)?;
        min(p, "batch_queue_max_bytes", self.queue_max_bytes, 1)?;
        min(p, "batch_queue_tenant_max", self.queue_tenant_max as u64, 1)?;
        if let Some(n) = self.max_inflight {
            min(p, "batch_max_inflight", n as u64, 1)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Validation helpers. Each gets the sink's path (`sources.x.sinks[2]`) and names the field and
// the constraint in its errors.

fn err(field: impl Into<String>, msg: impl Into<String>) -> ConfigError {
    ConfigError::field(field, msg)
}

/// `<field> must be >= <lo>, got <v>`, the form validate.rs uses for ranges.
fn min(p: &str, name: &str, v: u64, lo: u64) -> Result<(), ConfigError> {
    if v < lo {
        return Err(ConfigError::general(format!(
            "{p}.{name} must be >= {lo}, got {v}"
        )));
    }
    Ok(())
}

fn max(p: &str, name: &str, v: u64, hi: u64) -> Result<(), ConfigError> {
    if v > hi {
        return Err(ConfigError::general(format!(
            "{p}.{name} must be <= {hi}, got {v}"
        )));
    }
    Ok(())
}

fn non_empty(p: &str, name: &str, v: &str) -> Result<(), ConfigError> {
    if v.trim().is_empty() {
        return Err(err(format!("{p}.{name}"), "must not be empty"));
    }
    Ok(())
}

/// A `host:port` or `scheme://host:port` entry without userinfo.
fn server_entry(
    p: &str,
    name: &str,
    i: usize,
    s: &str,
    schemes: &[&str],
) -> Result<(), ConfigError> {
    let f = format!("{p}.{name}[{i}]");
    if s.contains('@') {
        return Err(err(
            f,
            "must not carry credentials; use the sink's credential keys",
        ));
    }
    let (scheme, rest) = match s.split_once("://") {
        Some((sc, rest)) => (Some(sc), rest),
        None => (None, s),
    };
    // The message never quotes the value: a Secret may fill it, and even its scheme part
    // would be a piece of that Secret.
    if let Some(sc) = scheme
        && !schemes.contains(&sc)
    {
        return Err(err(
            f,
            format!("must use one of the schemes {}", schemes.join(", ")),
        ));
    }
    let rest = rest.trim_end_matches('/');
    let ok = match rest.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|n| n > 0),
        None => !rest.is_empty() && scheme.is_some(),
    };
    if !ok {
        return Err(err(f, "must be host:port"));
    }
    Ok(())
}

/// The targets of a list of `host:port` entries, `<name>[i]`.
fn entries(name: &str, list: &[String], default_port: u16) -> Vec<EgressTarget> {
    list.iter()
        .enumerate()
        .filter_map(|(i, e)| EgressTarget::from_entry(format!("{name}[{i}]"), e, default_port))
        .collect()
}

fn url_with_scheme(
    p: &str,
    name: &str,
    raw: &str,
    schemes: &[&str],
) -> Result<url::Url, ConfigError> {
    // Value-free messages (a Secret may fill the URL): the parse error's text is the url
    // crate's fixed wording, never the input.
    let u = url::Url::parse(raw)
        .map_err(|e| err(format!("{p}.{name}"), format!("is not a URL ({e})")))?;
    if !schemes.contains(&u.scheme()) {
        return Err(err(
            format!("{p}.{name}"),
            format!("must use one of the schemes {}", schemes.join(", ")),
        ));
    }
    if u.host().is_none() {
        return Err(err(format!("{p}.{name}"), "must name a host"));
    }
    Ok(u)
}

fn inline(p: &str, v: u64) -> Result<(), ConfigError> {
    min(p, "inline_max_bytes", v, 1)
}

#[cfg(test)]
mod tests;
