//! Options of the queue and broker sinks (Kafka, RabbitMQ, NATS JetStream, Redis pub/sub, SQS,
//! Google Pub/Sub), their defaults, and their validation.
//!
//! Every sink here publishes the same message (`v: 1`, see docs/sinks.md) and checks a body in
//! to the claim store above `inline_max_bytes`. Credentials live in fields that
//! `print-config` redacts (they are not on the allowlist in redact.rs); URLs that may carry
//! userinfo are redacted by key (`url`, `servers`, `brokers`, `queue_url`, `endpoint`).

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::model::OrderingKey;

#[cfg(feature = "schema")]
use schemars::JsonSchema;

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

// ---------------------------------------------------------------------------------------
// Kafka

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum KafkaSaslMechanism {
    /// SASL/PLAIN (send it over a network you trust: this build has no Kafka TLS).
    Plain,
}

/// SASL credentials for the Kafka brokers.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct KafkaSasl {
    pub mechanism: KafkaSaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for KafkaSasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSasl")
            .field("mechanism", &self.mechanism)
            .field("username", &"[redacted]")
            .field("password", &"[redacted]")
            .finish()
    }
}

/// Produces each hook to a Kafka topic, `acks=all`, keyed by `tenant/source`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
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
    #[serde(default)]
    pub ordered: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<OrderingKey>,
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
}

// ---------------------------------------------------------------------------------------
// RabbitMQ

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

/// Publishes each hook to an exchange (declared durable; queues are the consumer's), mandatory
/// and persistent, answered on the broker's publisher confirm.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RabbitmqSinkConfig {
    /// `amqp://user:password@host:5672/vhost` (`amqps://` for TLS); redacted in `print-config`.
    pub url: String,
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
    #[serde(default)]
    pub ordered: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<OrderingKey>,
}

fn d_max_inflight() -> u32 {
    256
}

impl std::fmt::Debug for RabbitmqSinkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitmqSinkConfig")
            .field("url", &crate::redact_url(&self.url))
            .field("exchange", &self.exchange)
            .field("exchange_type", &self.exchange_type)
            .field("routing_key", &self.routing_key)
            .field("inline_max_bytes", &self.inline_max_bytes)
            .field("max_inflight", &self.max_inflight)
            .field("confirm_timeout_ms", &self.confirm_timeout_ms)
            .field("ordered", &self.ordered)
            .finish_non_exhaustive()
    }
}

impl RabbitmqSinkConfig {
    pub fn new(url: impl Into<String>, exchange: impl Into<String>) -> Self {
        RabbitmqSinkConfig {
            url: url.into(),
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
}

// ---------------------------------------------------------------------------------------
// NATS JetStream

/// NATS credentials: `username` + `password`, or `token`, or `nkey_seed` (+ `jwt` for a
/// user JWT). Every field is a secret.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NatsAuth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nkey_seed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<String>,
}

impl std::fmt::Debug for NatsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NatsAuth([redacted])")
    }
}

/// Publishes each hook to a JetStream subject, answered on the stream's publish ack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NatsSinkConfig {
    /// `nats://host:4222` entries (no credentials here; use `auth`).
    pub servers: Vec<String>,
    /// A subject some stream covers; the sink never creates streams.
    pub subject: String,
    #[serde(default = "d_inline")]
    pub inline_max_bytes: u64,
    #[serde(default = "d_5000")]
    pub publish_timeout_ms: u64,
    /// Message plus headers above this is refused before publishing (`message_too_large`).
    #[serde(default = "d_nats_max")]
    pub max_message_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<NatsAuth>,
    /// Require TLS to the server.
    #[serde(default)]
    pub tls: bool,
    #[serde(default = "d_idle")]
    pub idle_timeout_ms: u64,
    #[serde(default)]
    pub ordered: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<OrderingKey>,
}

fn d_nats_max() -> u64 {
    1_048_576
}

impl NatsSinkConfig {
    pub fn new(servers: Vec<String>, subject: impl Into<String>) -> Self {
        NatsSinkConfig {
            servers,
            subject: subject.into(),
            inline_max_bytes: d_inline(),
            publish_timeout_ms: d_5000(),
            max_message_bytes: d_nats_max(),
            auth: None,
            tls: false,
            idle_timeout_ms: d_idle(),
            ordered: false,
            ordering_key: None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Redis pub/sub

/// PUBLISHes each hook to a Redis channel; zero subscribers is an error (`no_subscribers`).
/// Not durable: pub/sub keeps no copy.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RedisSinkConfig {
    /// `redis://[:password@]host:6379/0` (`rediss://` for TLS); redacted in `print-config`.
    pub url: String,
    pub channel: String,
    #[serde(default = "d_inline")]
    pub inline_max_bytes: u64,
    #[serde(default = "d_5000")]
    pub publish_timeout_ms: u64,
    #[serde(default = "d_idle")]
    pub idle_timeout_ms: u64,
    #[serde(default)]
    pub ordered: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<OrderingKey>,
}

impl std::fmt::Debug for RedisSinkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSinkConfig")
            .field("url", &crate::redact_url(&self.url))
            .field("channel", &self.channel)
            .field("inline_max_bytes", &self.inline_max_bytes)
            .field("publish_timeout_ms", &self.publish_timeout_ms)
            .field("ordered", &self.ordered)
            .finish_non_exhaustive()
    }
}

impl RedisSinkConfig {
    pub fn new(url: impl Into<String>, channel: impl Into<String>) -> Self {
        RedisSinkConfig {
            url: url.into(),
            channel: channel.into(),
            inline_max_bytes: d_inline(),
            publish_timeout_ms: d_5000(),
            idle_timeout_ms: d_idle(),
            ordered: false,
            ordering_key: None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// SQS

/// Sends each hook to an SQS queue (standard, or FIFO when the URL ends `.fifo`), SigV4-signed,
/// batched with `SendMessageBatch` and settled per entry.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SqsSinkConfig {
    /// `https://sqs.<region>.amazonaws.com/<account>/<name>`; the sink never creates queues.
    pub queue_url: String,
    /// Signing region; default: read from an `sqs.<region>.amazonaws.com` URL, else
    /// `AWS_REGION`, else `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Where requests go; default: the queue URL's origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// FIFO MessageGroupId; default `<tenant>/<source_id>`. On a standard queue it is sent only
    /// when set (fair queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_group_id: Option<String>,
    #[serde(default = "d_inline")]
    pub inline_max_bytes: u64,
    /// Body plus attributes above this is dead-lettered at once (`message_too_large`).
    #[serde(default = "d_sqs_max")]
    pub max_message_bytes: u64,
    #[serde(default = "d_5000")]
    pub timeout_ms: u64,
    /// `false`: one SendMessage per delivery.
    #[serde(default = "d_true")]
    pub batch: bool,
    #[serde(default = "d_linger")]
    pub batch_linger_ms: u64,
    #[serde(default = "d_sqs_batch_entries")]
    pub batch_max_entries: u32,
    #[serde(default = "d_sqs_batch_bytes")]
    pub batch_max_bytes: u64,
    #[serde(default = "d_queue_max")]
    pub batch_queue_max: u32,
    #[serde(default = "d_queue_max_bytes")]
    pub batch_queue_max_bytes: u64,
    #[serde(default = "d_queue_tenant_max")]
    pub batch_queue_tenant_max: u32,
    /// Requests in flight per queue; default `dispatch.sink_concurrency` (else 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_max_inflight: Option<u32>,
    /// Static credentials; absent: `AWS_*` env, web identity (IRSA), profile, IMDSv2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token: Option<String>,
    #[serde(default)]
    pub ordered: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<OrderingKey>,
}

fn d_sqs_max() -> u64 {
    1_048_576
}
fn d_sqs_batch_entries() -> u32 {
    10
}
fn d_sqs_batch_bytes() -> u64 {
    262_144
}

impl std::fmt::Debug for SqsSinkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsSinkConfig")
            .field("queue_url", &crate::redact_url(&self.queue_url))
            .field("region", &self.region)
            .field("endpoint", &self.endpoint.as_deref().map(crate::redact_url))
            .field("message_group_id", &self.message_group_id)
            .field("inline_max_bytes", &self.inline_max_bytes)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("timeout_ms", &self.timeout_ms)
            .field("batch", &self.batch)
            .field("batch_max_entries", &self.batch_max_entries)
            .field(
                "credentials",
                &self.access_key_id.as_ref().map(|_| "[redacted]"),
            )
            .finish_non_exhaustive()
    }
}

impl SqsSinkConfig {
    pub fn new(queue_url: impl Into<String>) -> Self {
        SqsSinkConfig {
            queue_url: queue_url.into(),
            region: None,
            endpoint: None,
            message_group_id: None,
            inline_max_bytes: d_inline(),
            max_message_bytes: d_sqs_max(),
            timeout_ms: d_5000(),
            batch: true,
            batch_linger_ms: d_linger(),
            batch_max_entries: d_sqs_batch_entries(),
            batch_max_bytes: d_sqs_batch_bytes(),
            batch_queue_max: d_queue_max(),
            batch_queue_max_bytes: d_queue_max_bytes(),
            batch_queue_tenant_max: d_queue_tenant_max(),
            batch_max_inflight: None,
            access_key_id: None,
            secret_access_key: None,
            session_token: None,
            ordered: false,
            ordering_key: None,
        }
    }

    /// AWS requires the `.fifo` suffix on FIFO queues, so the URL says which kind it is.
    pub fn is_fifo(&self) -> bool {
        self.queue_url.trim_end_matches('/').ends_with(".fifo")
    }
}

// ---------------------------------------------------------------------------------------
// Google Pub/Sub

/// Where the Pub/Sub sink gets its bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PubsubAuth {
    /// The GCE/GKE metadata server's default service account (`GCE_METADATA_HOST` overrides
    /// the address).
    #[default]
    Metadata,
    /// The static `token` of this sink.
    Token,
    /// No `Authorization` header (the emulator).
    None,
}

/// Publishes each hook to a Pub/Sub topic with REST `topics.publish`, batched; a batch refused
/// with `INVALID_ARGUMENT` is bisected to find the bad message.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GooglePubsubSinkConfig {
    pub project: String,
    /// The topic id (not `projects/.../topics/...`); the sink never creates topics.
    pub topic: String,
    #[serde(default)]
    pub auth: PubsubAuth,
    /// The bearer token for `auth: token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Default `https://pubsub.googleapis.com`; a regional endpoint or an emulator
    /// (`http://127.0.0.1:8085`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// A static `orderingKey` on every message (Ankusa's own deliveries stay unordered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_ordering_key: Option<String>,
    #[serde(default = "d_inline")]
    pub inline_max_bytes: u64,
    /// Data plus attributes plus ordering key above this is dead-lettered at once.
    #[serde(default = "d_pubsub_max")]
    pub max_message_bytes: u64,
    #[serde(default = "d_5000")]
    pub timeout_ms: u64,
    #[serde(default = "d_true")]
    pub batch: bool,
    #[serde(default = "d_linger")]
    pub batch_linger_ms: u64,
    #[serde(default = "d_pubsub_batch_entries")]
    pub batch_max_entries: u32,
    /// Data bytes (before base64) in one publish.
    #[serde(default = "d_pubsub_batch_bytes")]
    pub batch_max_bytes: u64,
    #[serde(default = "d_queue_max")]
    pub batch_queue_max: u32,
    #[serde(default = "d_queue_max_bytes")]
    pub batch_queue_max_bytes: u64,
    #[serde(default = "d_queue_tenant_max")]
    pub batch_queue_tenant_max: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_max_inflight: Option<u32>,
    #[serde(default)]
    pub ordered: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<OrderingKey>,
}

fn d_pubsub_max() -> u64 {
    10_000_000
}
fn d_pubsub_batch_entries() -> u32 {
    1_000
}
fn d_pubsub_batch_bytes() -> u64 {
    7_500_000
}

impl std::fmt::Debug for GooglePubsubSinkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GooglePubsubSinkConfig")
            .field("project", &self.project)
            .field("topic", &self.topic)
            .field("auth", &self.auth)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .field("endpoint", &self.endpoint.as_deref().map(crate::redact_url))
            .field("inline_max_bytes", &self.inline_max_bytes)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl GooglePubsubSinkConfig {
    pub fn new(project: impl Into<String>, topic: impl Into<String>) -> Self {
        GooglePubsubSinkConfig {
            project: project.into(),
            topic: topic.into(),
            auth: PubsubAuth::Metadata,
            token: None,
            endpoint: None,
            message_ordering_key: None,
            inline_max_bytes: d_inline(),
            max_message_bytes: d_pubsub_max(),
            timeout_ms: d_5000(),
            batch: true,
            batch_linger_ms: d_linger(),
            batch_max_entries: d_pubsub_batch_entries(),
            batch_max_bytes: d_pubsub_batch_bytes(),
            batch_queue_max: d_queue_max(),
            batch_queue_max_bytes: d_queue_max_bytes(),
            batch_queue_tenant_max: d_queue_tenant_max(),
            batch_max_inflight: None,
            ordered: false,
            ordering_key: None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Validation. Each function gets the sink's path (`sources.x.sinks[2]`) and names the field
// and the constraint in its errors.

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
    if let Some(sc) = scheme
        && !schemes.contains(&sc)
    {
        return Err(err(
            f,
            format!("scheme must be one of {}, got {sc}", schemes.join(", ")),
        ));
    }
    let rest = rest.trim_end_matches('/');
    let ok = match rest.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|n| n > 0),
        None => !rest.is_empty() && scheme.is_some(),
    };
    if !ok {
        return Err(err(f, format!("must be host:port, got {s:?}")));
    }
    Ok(())
}

fn url_with_scheme(
    p: &str,
    name: &str,
    raw: &str,
    schemes: &[&str],
) -> Result<url::Url, ConfigError> {
    let u = url::Url::parse(raw).map_err(|e| {
        err(
            format!("{p}.{name}"),
            format!("is not a URL ({e}): {:?}", crate::redact_url(raw)),
        )
    })?;
    if !schemes.contains(&u.scheme()) {
        return Err(err(
            format!("{p}.{name}"),
            format!(
                "scheme must be one of {}, got {}",
                schemes.join(", "),
                u.scheme()
            ),
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

/// Batching limits shared by SQS and Pub/Sub.
#[allow(clippy::too_many_arguments)]
fn batching(
    p: &str,
    linger: u64,
    entries: u32,
    entries_max: u32,
    bytes: u64,
    bytes_max: u64,
    queue: u32,
    queue_bytes: u64,
    tenant: u32,
    inflight: Option<u32>,
) -> Result<(), ConfigError> {
    max(p, "batch_linger_ms", linger, 10_000)?;
    min(p, "batch_max_entries", entries as u64, 1)?;
    max(p, "batch_max_entries", entries as u64, entries_max as u64)?;
    min(p, "batch_max_bytes", bytes, 1)?;
    max(p, "batch_max_bytes", bytes, bytes_max)?;
    min(p, "batch_queue_max", queue as u64, 1)?;
    min(p, "batch_queue_max_bytes", queue_bytes, 1)?;
    min(p, "batch_queue_tenant_max", tenant as u64, 1)?;
    if let Some(n) = inflight {
        min(p, "batch_max_inflight", n as u64, 1)?;
    }
    Ok(())
}

pub(crate) fn kafka_sink(p: &str, k: &KafkaSinkConfig) -> Result<(), ConfigError> {
    if k.brokers.is_empty() {
        return Err(err(format!("{p}.brokers"), "must list at least one broker"));
    }
    for (i, b) in k.brokers.iter().enumerate() {
        server_entry(p, "brokers", i, b, &["tcp", "plaintext"])?;
    }
    non_empty(p, "topic", &k.topic)?;
    // Kafka's own rule for topic names (kafka.common.Topic): 1-249 of [a-zA-Z0-9._-].
    if k.topic.len() > 249
        || !k
            .topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(err(
            format!("{p}.topic"),
            format!("must be 1-249 of [a-zA-Z0-9._-], got {:?}", k.topic),
        ));
    }
    if let Some(key) = &k.key {
        non_empty(p, "key", key)?;
    }
    inline(p, k.inline_max_bytes)?;
    min(p, "max_record_bytes", k.max_record_bytes, 1024)?;
    min(p, "produce_timeout_ms", k.produce_timeout_ms, 1)?;
    if let Some(s) = &k.sasl {
        non_empty(p, "sasl.username", &s.username)?;
    }
    Ok(())
}

pub(crate) fn rabbitmq_sink(p: &str, r: &RabbitmqSinkConfig) -> Result<(), ConfigError> {
    url_with_scheme(p, "url", &r.url, &["amqp", "amqps"])?;
    non_empty(p, "exchange", &r.exchange)?;
    if r.exchange.starts_with("amq.") {
        return Err(err(
            format!("{p}.exchange"),
            "must not be a broker-reserved amq.* exchange (the sink declares its exchange)",
        ));
    }
    if r.exchange.len() > 255 {
        return Err(err(format!("{p}.exchange"), "must be at most 255 bytes"));
    }
    if let Some(k) = &r.routing_key
        && k.len() > 255
    {
        return Err(err(format!("{p}.routing_key"), "must be at most 255 bytes"));
    }
    inline(p, r.inline_max_bytes)?;
    min(p, "max_inflight", r.max_inflight as u64, 1)?;
    min(p, "confirm_timeout_ms", r.confirm_timeout_ms, 1)?;
    min(p, "retry_ms", r.retry_ms, 1)?;
    Ok(())
}

pub(crate) fn nats_sink(p: &str, n: &NatsSinkConfig) -> Result<(), ConfigError> {
    if n.servers.is_empty() {
        return Err(err(format!("{p}.servers"), "must list at least one server"));
    }
    for (i, s) in n.servers.iter().enumerate() {
        server_entry(p, "servers", i, s, &["nats", "tls"])?;
    }
    non_empty(p, "subject", &n.subject)?;
    if n.subject.contains(['*', '>', ' ', '\t', '\r', '\n'])
        || n.subject.split('.').any(str::is_empty)
    {
        return Err(err(
            format!("{p}.subject"),
            format!(
                "must be a literal subject (dot-separated tokens, no wildcards or spaces), got {:?}",
                n.subject
            ),
        ));
    }
    inline(p, n.inline_max_bytes)?;
    min(p, "publish_timeout_ms", n.publish_timeout_ms, 1)?;
    min(p, "max_message_bytes", n.max_message_bytes, 1024)?;
    if let Some(a) = &n.auth {
        let user = a.username.is_some() || a.password.is_some();
        let kinds = user as u8 + a.token.is_some() as u8 + a.nkey_seed.is_some() as u8;
        if kinds != 1 {
            return Err(err(
                format!("{p}.auth"),
                "must set exactly one of username+password, token, nkey_seed (+ jwt)",
            ));
        }
        if user && (a.username.is_none() || a.password.is_none()) {
            return Err(err(
                format!("{p}.auth"),
                "username and password go together",
            ));
        }
        if a.jwt.is_some() && a.nkey_seed.is_none() {
            return Err(err(format!("{p}.auth.jwt"), "needs nkey_seed"));
        }
    }
    Ok(())
}

pub(crate) fn redis_sink(p: &str, r: &RedisSinkConfig) -> Result<(), ConfigError> {
    url_with_scheme(p, "url", &r.url, &["redis", "rediss"])?;
    non_empty(p, "channel", &r.channel)?;
    inline(p, r.inline_max_bytes)?;
    min(p, "publish_timeout_ms", r.publish_timeout_ms, 1)?;
    Ok(())
}

/// SQS's charset for MessageGroupId and MessageDeduplicationId: 1-128 of
/// alphanumerics and punctuation.
fn sqs_id_chars(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_graphic())
}

pub(crate) fn sqs_sink(p: &str, s: &SqsSinkConfig) -> Result<(), ConfigError> {
    let u = url_with_scheme(p, "queue_url", &s.queue_url, &["https", "http"])?;
    let segs: Vec<&str> = u
        .path_segments()
        .map(|it| it.filter(|x| !x.is_empty()).collect())
        .unwrap_or_default();
    if segs.len() != 2 {
        return Err(err(
            format!("{p}.queue_url"),
            "must be <endpoint>/<account-id>/<queue-name>",
        ));
    }
    let name = segs[1];
    if name.len() > 80
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        return Err(err(
            format!("{p}.queue_url"),
            format!("queue name must be 1-80 of [A-Za-z0-9_-] (plus .fifo), got {name:?}"),
        ));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(err(
            format!("{p}.queue_url"),
            "must not carry credentials; use access_key_id/secret_access_key",
        ));
    }
    if let Some(e) = &s.endpoint {
        url_with_scheme(p, "endpoint", e, &["https", "http"])?;
    }
    if let Some(r) = &s.region {
        non_empty(p, "region", r)?;
    }
    if let Some(g) = &s.message_group_id
        && !sqs_id_chars(g)
    {
        return Err(err(
            format!("{p}.message_group_id"),
            "must be 1-128 printable ASCII characters",
        ));
    }
    match (&s.access_key_id, &s.secret_access_key) {
        (Some(_), None) | (None, Some(_)) => {
            return Err(err(
                format!("{p}.access_key_id"),
                "access_key_id and secret_access_key go together",
            ));
        }
        (None, None) if s.session_token.is_some() => {
            return Err(err(
                format!("{p}.session_token"),
                "needs access_key_id and secret_access_key",
            ));
        }
        _ => {}
    }
    inline(p, s.inline_max_bytes)?;
    min(p, "max_message_bytes", s.max_message_bytes, 1024)?;
    max(p, "max_message_bytes", s.max_message_bytes, 1_048_576)?;
    min(p, "timeout_ms", s.timeout_ms, 1)?;
    batching(
        p,
        s.batch_linger_ms,
        s.batch_max_entries,
        10,
        s.batch_max_bytes,
        1_048_576,
        s.batch_queue_max,
        s.batch_queue_max_bytes,
        s.batch_queue_tenant_max,
        s.batch_max_inflight,
    )?;
    if s.batch_max_bytes < s.max_message_bytes.min(262_144) && s.batch {
        // A message that passes max_message_bytes must also fit a batch on its own.
        return Err(err(
            format!("{p}.batch_max_bytes"),
            format!(
                "must be >= min(max_message_bytes, 262144) = {}, got {}",
                s.max_message_bytes.min(262_144),
                s.batch_max_bytes
            ),
        ));
    }
    Ok(())
}

/// Pub/Sub resource ids: 3-255 characters, start with a letter, then `[A-Za-z0-9-_.~+%]`,
/// not starting with `goog`.
fn pubsub_id(s: &str) -> bool {
    s.len() >= 3
        && s.len() <= 255
        && s.as_bytes()[0].is_ascii_alphabetic()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.~+%".contains(&b))
        && !s.starts_with("goog")
}

pub(crate) fn pubsub_sink(p: &str, g: &GooglePubsubSinkConfig) -> Result<(), ConfigError> {
    // Project ids are 6-30 of [a-z0-9-]; the emulator takes any, so only the charset is checked.
    if g.project.is_empty()
        || !g
            .project
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b))
    {
        return Err(err(
            format!("{p}.project"),
            format!("must be a project id, got {:?}", g.project),
        ));
    }
    if !pubsub_id(&g.topic) {
        return Err(err(
            format!("{p}.topic"),
            format!(
                "must be a topic id (3-255 of [A-Za-z0-9-_.~+%], starting with a letter), got {:?}",
                g.topic
            ),
        ));
    }
    match (g.auth, &g.token) {
        (PubsubAuth::Token, None) => {
            return Err(err(format!("{p}.token"), "is required with auth: token"));
        }
        (PubsubAuth::Token, Some(t)) if t.trim().is_empty() => {
            return Err(err(format!("{p}.token"), "must not be empty"));
        }
        (PubsubAuth::Metadata | PubsubAuth::None, Some(_)) => {
            return Err(err(format!("{p}.token"), "is only used with auth: token"));
        }
        _ => {}
    }
    if let Some(e) = &g.endpoint {
        let u = url_with_scheme(p, "endpoint", e, &["https", "http"])?;
        if !u.username().is_empty() || u.password().is_some() {
            return Err(err(format!("{p}.endpoint"), "must not carry credentials"));
        }
    }
    if let Some(k) = &g.message_ordering_key {
        non_empty(p, "message_ordering_key", k)?;
        max(p, "message_ordering_key", k.len() as u64, 1024)?;
    }
    inline(p, g.inline_max_bytes)?;
    min(p, "max_message_bytes", g.max_message_bytes, 1024)?;
    max(p, "max_message_bytes", g.max_message_bytes, 10_000_000)?;
    min(p, "timeout_ms", g.timeout_ms, 1)?;
    batching(
        p,
        g.batch_linger_ms,
        g.batch_max_entries,
        1_000,
        g.batch_max_bytes,
        7_500_000,
        g.batch_queue_max,
        g.batch_queue_max_bytes,
        g.batch_queue_tenant_max,
        g.batch_max_inflight,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Config, SinkConfig, SourceConfig};

    fn check(s: SinkConfig) -> Result<(), ConfigError> {
        let mut c = Config::default();
        c.sources
            .insert("src".into(), SourceConfig::with_sinks(vec![s]));
        crate::validate(&c)
    }

    fn msg(r: Result<(), ConfigError>) -> String {
        r.expect_err("should be refused").to_string()
    }

    #[test]
    fn yaml_defaults() {
        let y = r#"
sources:
  s:
    sinks:
      - type: kafka
        brokers: ["127.0.0.1:9092"]
        topic: hooks
      - type: rabbitmq
        url: amqp://guest:guest@127.0.0.1:5672/%2f
        exchange: ankusa.events
      - type: nats
        servers: ["nats://127.0.0.1:4222"]
        subject: ankusa.events
      - type: redis
        url: redis://127.0.0.1:6379/0
        channel: ankusa.events
      - type: sqs
        queue_url: http://127.0.0.1:5000/123456789012/hooks.fifo
      - type: google_pubsub
        project: p1
        topic: hooks
        auth: none
"#;
        let c = crate::from_yaml_str(y, &crate::interpolate::SystemLookup).expect("parses");
        crate::validate(&c).expect("valid");
        let sinks = &c.sources["s"].sinks;
        let types: Vec<_> = sinks.iter().map(|s| s.type_name()).collect();
        assert_eq!(
            types,
            ["kafka", "rabbitmq", "nats", "redis", "sqs", "google_pubsub"]
        );
        match &sinks[0] {
            SinkConfig::Kafka(k) => {
                assert_eq!(k.max_record_bytes, 1_000_000);
                assert_eq!(k.produce_timeout_ms, 5_000);
                assert_eq!(k.inline_max_bytes, 65_536);
                assert_eq!(k.idle_timeout_ms, 600_000);
            }
            o => panic!("{o:?}"),
        }
        match &sinks[1] {
            SinkConfig::Rabbitmq(r) => {
                assert_eq!(r.max_inflight, 256);
                assert_eq!(r.confirm_timeout_ms, 5_000);
                assert_eq!(r.exchange_type, ExchangeType::Topic);
                assert_eq!(r.routing_key, None);
            }
            o => panic!("{o:?}"),
        }
        match &sinks[2] {
            SinkConfig::Nats(n) => {
                assert_eq!(n.max_message_bytes, 1_048_576);
                assert_eq!(n.publish_timeout_ms, 5_000);
            }
            o => panic!("{o:?}"),
        }
        match &sinks[4] {
            SinkConfig::Sqs(s) => {
                assert!(s.is_fifo());
                assert!(s.batch);
                assert_eq!(s.batch_linger_ms, 20);
                assert_eq!(s.batch_max_entries, 10);
                assert_eq!(s.batch_max_bytes, 262_144);
                assert_eq!(s.batch_queue_max, 4_096);
                assert_eq!(s.batch_queue_max_bytes, 134_217_728);
                assert_eq!(s.batch_queue_tenant_max, 1_024);
                assert_eq!(s.max_message_bytes, 1_048_576);
            }
            o => panic!("{o:?}"),
        }
        match &sinks[5] {
            SinkConfig::GooglePubsub(g) => {
                assert_eq!(g.max_message_bytes, 10_000_000);
                assert_eq!(g.batch_max_entries, 1_000);
                assert_eq!(g.batch_max_bytes, 7_500_000);
                assert_eq!(g.auth, PubsubAuth::None);
            }
            o => panic!("{o:?}"),
        }
        // Round trip: the operator serialises these types and the gateway parses them back.
        let back = crate::from_yaml_str(&c.to_yaml(), &crate::interpolate::SystemLookup)
            .expect("round trip");
        assert_eq!(back, c);
    }

    #[test]
    fn unknown_keys_are_refused() {
        let y = "sources:\n  s:\n    sinks:\n      - type: redis\n        url: redis://127.0.0.1\n        channel: c\n        chanel: typo\n";
        assert!(crate::from_yaml_str(y, &crate::interpolate::SystemLookup).is_err());
    }

    #[test]
    fn kafka_rules() {
        let ok = KafkaSinkConfig::new(vec!["127.0.0.1:9092".into()], "hooks");
        check(SinkConfig::Kafka(ok.clone())).unwrap();
        let mut k = ok.clone();
        k.brokers = vec![];
        assert!(msg(check(SinkConfig::Kafka(k))).contains("sources.src.sinks[0].brokers"));
        let mut k = ok.clone();
        k.brokers = vec!["user:pw@host:9092".into()];
        let m = msg(check(SinkConfig::Kafka(k)));
        assert!(m.contains("brokers[0]") && !m.contains("pw"), "{m}");
        let mut k = ok.clone();
        k.topic = "bad topic".into();
        assert!(msg(check(SinkConfig::Kafka(k))).contains(".topic"));
        let mut k = ok.clone();
        k.max_record_bytes = 10;
        assert!(msg(check(SinkConfig::Kafka(k))).contains("max_record_bytes must be >= 1024"));
        // Ordering lanes: an ordered Kafka sink is fine; a key needs exactly one source.
        let mut k = ok;
        k.ordered = true;
        check(SinkConfig::Kafka(k.clone())).unwrap();
        k.ordering_key = Some(crate::model::OrderingKey {
            header: None,
            json: None,
        });
        assert!(msg(check(SinkConfig::Kafka(k))).contains("ordering_key"));
    }

    #[test]
    fn rabbitmq_rules() {
        let ok = RabbitmqSinkConfig::new("amqp://guest:guest@127.0.0.1:5672/%2f", "ankusa.events");
        check(SinkConfig::Rabbitmq(ok.clone())).unwrap();
        let mut r = ok.clone();
        r.url = "http://u:secretpw@host/".into();
        let m = msg(check(SinkConfig::Rabbitmq(r)));
        assert!(m.contains(".url") && !m.contains("secretpw"), "{m}");
        let mut r = ok.clone();
        r.url = "amqp//nope:secretpw@".into();
        let m = msg(check(SinkConfig::Rabbitmq(r)));
        assert!(!m.contains("secretpw"), "{m}");
        let mut r = ok.clone();
        r.exchange = "amq.topic".into();
        assert!(msg(check(SinkConfig::Rabbitmq(r))).contains(".exchange"));
        let mut r = ok;
        r.max_inflight = 0;
        assert!(msg(check(SinkConfig::Rabbitmq(r))).contains("max_inflight must be >= 1"));
    }

    #[test]
    fn nats_rules() {
        let ok = NatsSinkConfig::new(vec!["nats://127.0.0.1:4222".into()], "ankusa.events");
        check(SinkConfig::Nats(ok.clone())).unwrap();
        let mut n = ok.clone();
        n.subject = "ankusa.>".into();
        assert!(msg(check(SinkConfig::Nats(n))).contains(".subject"));
        let mut n = ok.clone();
        n.auth = Some(NatsAuth {
            token: Some("t".into()),
            username: Some("u".into()),
            password: Some("p".into()),
            ..Default::default()
        });
        assert!(msg(check(SinkConfig::Nats(n))).contains(".auth"));
        let mut n = ok;
        n.servers = vec!["nats://u:p@127.0.0.1:4222".into()];
        assert!(msg(check(SinkConfig::Nats(n))).contains("servers[0]"));
    }

    #[test]
    fn sqs_rules() {
        let ok = SqsSinkConfig::new("https://sqs.us-east-1.amazonaws.com/123456789012/hooks.fifo");
        check(SinkConfig::Sqs(ok.clone())).unwrap();
        let mut s = ok.clone();
        s.batch_max_entries = 11;
        assert!(msg(check(SinkConfig::Sqs(s))).contains("batch_max_entries must be <= 10"));
        let mut s = ok.clone();
        s.batch_max_bytes = 2_000_000;
        assert!(msg(check(SinkConfig::Sqs(s))).contains("batch_max_bytes must be <= 1048576"));
        let mut s = ok.clone();
        s.max_message_bytes = 2_000_000;
        assert!(msg(check(SinkConfig::Sqs(s))).contains("max_message_bytes"));
        let mut s = ok.clone();
        s.message_group_id = Some("has space".into());
        assert!(msg(check(SinkConfig::Sqs(s))).contains("message_group_id"));
        let mut s = ok.clone();
        s.access_key_id = Some("AKIA".into());
        assert!(msg(check(SinkConfig::Sqs(s))).contains("secret_access_key"));
        let mut s = ok.clone();
        s.queue_url = "https://sqs.us-east-1.amazonaws.com/hooks".into();
        assert!(msg(check(SinkConfig::Sqs(s))).contains("queue_url"));
        // Ordering lanes need a FIFO queue.
        let mut s = ok;
        s.ordered = true;
        let fifo = s.queue_url.ends_with(".fifo");
        if fifo {
            check(SinkConfig::Sqs(s.clone())).unwrap();
            s.queue_url = s.queue_url.trim_end_matches(".fifo").to_string();
        }
        assert!(msg(check(SinkConfig::Sqs(s))).contains("FIFO"));
        assert!(!SqsSinkConfig::new("https://x/1/q").is_fifo());
    }

    #[test]
    fn pubsub_rules() {
        let mut ok = GooglePubsubSinkConfig::new("my-project", "hooks");
        ok.auth = PubsubAuth::None;
        check(SinkConfig::GooglePubsub(ok.clone())).unwrap();
        let mut g = ok.clone();
        g.topic = "t1".into();
        assert!(msg(check(SinkConfig::GooglePubsub(g))).contains(".topic"));
        let mut g = ok.clone();
        g.auth = PubsubAuth::Token;
        assert!(msg(check(SinkConfig::GooglePubsub(g))).contains(".token: is required"));
        let mut g = ok.clone();
        g.batch_max_entries = 1001;
        assert!(
            msg(check(SinkConfig::GooglePubsub(g))).contains("batch_max_entries must be <= 1000")
        );
        let mut g = ok;
        g.max_message_bytes = 10_000_001;
        assert!(msg(check(SinkConfig::GooglePubsub(g))).contains("max_message_bytes"));
    }

    #[test]
    fn redis_rules() {
        let ok = RedisSinkConfig::new("redis://:pw@127.0.0.1:6379/0", "c");
        check(SinkConfig::Redis(ok.clone())).unwrap();
        let mut r = ok;
        r.url = "http://127.0.0.1".into();
        assert!(msg(check(SinkConfig::Redis(r))).contains(".url"));
    }

    #[test]
    fn debug_never_shows_credentials() {
        let mut s = SqsSinkConfig::new("https://sqs.us-east-1.amazonaws.com/1/q");
        s.access_key_id = Some("AKIAEXAMPLEKEY".into());
        s.secret_access_key = Some("s3cr3t-access".into());
        let mut g = GooglePubsubSinkConfig::new("p", "topic");
        g.auth = PubsubAuth::Token;
        g.token = Some("ya29.bearer".into());
        let mut n = NatsSinkConfig::new(vec!["nats://h:4222".into()], "a.b");
        n.auth = Some(NatsAuth {
            token: Some("nats-tok".into()),
            ..Default::default()
        });
        let mut k = KafkaSinkConfig::new(vec!["h:9092".into()], "t");
        k.sasl = Some(KafkaSasl {
            mechanism: KafkaSaslMechanism::Plain,
            username: "kuser".into(),
            password: "kpass".into(),
        });
        let text = format!("{s:?}{g:?}{n:?}{k:?}");
        for needle in [
            "AKIAEXAMPLEKEY",
            "s3cr3t-access",
            "ya29.bearer",
            "nats-tok",
            "kpass",
        ] {
            assert!(!text.contains(needle), "{needle} in {text}");
        }
    }
}
