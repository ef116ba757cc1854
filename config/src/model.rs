//! The configuration schema: every key, its type and its default, in one place.
//!
//! The gateway parses these types from YAML; the operator builds them from custom resources
//! and serialises them. Defaults live in the `Default` impls below and nowhere else.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::secrets::Secrets;
use crate::sinks::SinkConfig;

#[cfg(feature = "schema")]
use schemars::JsonSchema;

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
    pub quarantine: crate::quarantine::QuarantineConfig,
    /// The archive: hooks packed into segments in a blob store. Absent: no archive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<crate::storage::StorageConfig>,
    /// Bounds of the queue (`queue.dlq`).
    pub queue: crate::storage::QueueConfig,
    /// The ack's durability mode: `disk` (default) or `dual` (also the intake log).
    #[serde(skip_serializing_if = "crate::durability::is_default")]
    pub wal: crate::durability::WalConfig,
    /// The intake log of `wal.type: dual`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intake: Option<crate::durability::IntakeConfig>,
    /// Checkpoints of the store in a blob store.
    #[serde(skip_serializing_if = "crate::durability::is_default")]
    pub backup: crate::durability::BackupConfig,
    /// Sources by id (`[A-Za-z0-9_-]{1,64}`); the id is the last path segment of the ingest URL.
    pub sources: BTreeMap<String, SourceConfig>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Accepts webhooks on the ingest port.
    Edge,
    /// Delivers stored hooks to their sinks and runs replay jobs.
    Dispatch,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct NodeConfig {
    /// Name of this instance (a pod name under the operator); shipped in every queue message.
    pub instance: String,
    /// Root of the node's state; the store lives in `<data_dir>/<instance>/store`.
    pub data_dir: PathBuf,
    /// Free-form region label shipped in queue messages.
    pub region: Option<String>,
    pub roles: Vec<Role>,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            instance: "default".into(),
            data_dir: PathBuf::from("./ankusa-data"),
            region: None,
            roles: vec![Role::Edge, Role::Dispatch],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A `tracing` filter: `info`, `debug`, `ankusa_gateway=debug,info`, ...
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// `POST {prefix}/:source`
    Path,
    /// `POST {prefix}/:tenant/:source`
    TenantPath,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    pub ip: IpAddr,
    pub port: u16,
    /// Largest accepted request body; a larger declared `Content-Length` is `413` unread.
    pub max_body_bytes: u64,
    pub routing: Routing,
    pub prefix: String,
    /// Time allowed to receive the whole request body.
    pub body_timeout_ms: u64,
    /// Request bodies being read at once, in bytes, across all connections (a declared
    /// `Content-Length` is reserved before the body is read, `max_body_bytes` for a chunked
    /// one). Past it a request is `503 overload` before its body is read.
    pub max_inflight_body_bytes: u64,
    /// A rate limit per client IP, applied before the body is read (absent: none).
    pub client_rate_limit: Option<RateLimit>,
    /// Proxies (CIDRs) whose `X-Forwarded-For` names the client for `client_rate_limit`; the
    /// header of anyone else is ignored.
    pub trusted_proxies: Vec<String>,
    pub connections: ConnectionLimits,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            ip: IpAddr::from([0, 0, 0, 0]),
            port: 4000,
            max_body_bytes: 8_000_000,
            routing: Routing::Path,
            prefix: "/webhooks".into(),
            body_timeout_ms: 30_000,
            max_inflight_body_bytes: 256 << 20,
            client_rate_limit: None,
            trusted_proxies: Vec::new(),
            connections: ConnectionLimits::default(),
        }
    }
}

/// Limits of one listener's connections (see `serve.rs` in the gateway).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionLimits {
    /// Open connections at most; past it a new one is answered `503 overload` and closed.
    pub max_connections: u32,
    /// Time a request's head (request line and headers) may take to arrive, from its first
    /// byte (from the accept, for a connection's first request).
    pub header_read_timeout_ms: u64,
    /// A keep-alive connection waiting this long for its next request is closed.
    pub idle_timeout_ms: u64,
    /// Headers in one request at most (more is `431`).
    pub max_headers: u32,
    /// Size of a request's head at most, in bytes (more is `431`).
    pub max_header_bytes: u32,
}

impl ConnectionLimits {
    /// The defaults of a listener that serves operators, not the internet.
    pub fn internal() -> Self {
        ConnectionLimits {
            max_connections: 256,
            ..Self::default()
        }
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 10_000,
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            max_headers: 100,
            max_header_bytes: 64 << 10,
        }
    }
}

/// An admin API bearer token and what it may do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AdminToken {
    #[serde(deserialize_with = "crate::scalar::string")]
    pub token: String,
    /// `dlq:read` (dead letters, replay jobs, a source's deliveries), `dlq:write` (delete dead
    /// letters, dead-letter a source's queue), `replays:write`, `config:read` (status, config,
    /// wal), `config:write` (push or reload the config), `hooks:read`, `tenant:<id>` (limits the
    /// token to those tenants), `tenant:*`, or `*` for everything.
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    pub enabled: bool,
    pub ip: IpAddr,
    pub port: u16,
    /// Bearer tokens. Empty means the admin API is open, which is allowed only on loopback.
    pub tokens: Vec<AdminToken>,
    /// Serve the admin API over TLS only (HTTPS); plain HTTP is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<AdminTls>,
    pub connections: ConnectionLimits,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            enabled: true,
            ip: IpAddr::from([127, 0, 0, 1]),
            port: 4002,
            tokens: Vec::new(),
            tls: None,
            connections: ConnectionLimits::internal(),
        }
    }
}

/// The admin listener's certificate: PEM files, re-read when they change (a Kubernetes Secret
/// volume swaps them when the operator rotates the certificate), so no restart is needed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AdminTls {
    /// The certificate chain (leaf first), PEM.
    pub cert_file: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1), PEM.
    pub key_file: PathBuf,
}

/// The group-commit writer in front of the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct CommitConfig {
    /// Independent commit queues; each has one synced write in flight.
    pub partitions: u32,
    /// Most records in one synced write.
    pub max_batch: u32,
    /// Extra time a commit waits for more records (0: commit as soon as the previous one ends).
    pub max_delay_ms: u64,
    /// Records waiting or committing per partition; past it ingest answers `503 overload`.
    pub max_queue: u32,
    /// Bytes waiting or committing across partitions; past it ingest answers `503 overload`.
    pub max_queue_bytes: u64,
    /// A record that has not started committing after this long is answered `503` and dropped.
    pub max_wait_ms: u64,
}

impl Default for CommitConfig {
    fn default() -> Self {
        CommitConfig {
            partitions: 2,
            max_batch: 256,
            max_delay_ms: 0,
            max_queue: 10_000,
            max_queue_bytes: 268_435_456,
            max_wait_ms: 15_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Sustained requests per second (may be fractional).
    pub rate: f64,
    /// Requests allowed back to back.
    pub burst: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitsConfig {
    /// Limit for every tenant without its own entry; absent means unlimited.
    pub default: Option<RateLimit>,
    pub tenants: BTreeMap<String, RateLimit>,
}

/// The exponential retry policy. Every field of a source's `retry:` overrides this one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    pub base_ms: u64,
    /// Ceiling of a delay before jitter.
    pub max_ms: u64,
    /// Attempts before the dead letter; absent means the horizon is the only bound.
    pub max_attempts: Option<u32>,
    /// Multiply each delay by a random factor in [0.5, 1.0].
    pub jitter: bool,
    /// The horizon: a delivery still failing this long after its first attempt is dead-lettered.
    pub max_elapsed_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            base_ms: 100,
            max_ms: 300_000,
            max_attempts: None,
            jitter: true,
            max_elapsed_ms: 86_400_000,
        }
    }
}

/// A source's overrides of `dispatch.retry`; absent fields keep the instance's values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RetryOverride {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_elapsed_ms: Option<u64>,
}

impl RetryConfig {
    /// This policy with a source's overrides laid over it.
    pub fn with_override(&self, o: Option<&RetryOverride>) -> RetryConfig {
        let Some(o) = o else { return self.clone() };
        RetryConfig {
            base_ms: o.base_ms.unwrap_or(self.base_ms),
            max_ms: o.max_ms.unwrap_or(self.max_ms),
            max_attempts: o.max_attempts.or(self.max_attempts),
            jitter: o.jitter.unwrap_or(self.jitter),
            max_elapsed_ms: o.max_elapsed_ms.unwrap_or(self.max_elapsed_ms),
        }
    }
}

/// Per-tenant dispatch windows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct TenantWindow {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_inflight: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_inflight_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct TenantWindows {
    /// Every tenant's window; absent fields default to a quarter of the global window and
    /// half of the global concurrency.
    pub default: TenantWindow,
    /// Per-tenant overrides of `default`.
    pub overrides: BTreeMap<String, TenantWindow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct DispatchConfig {
    /// Attempts running at once.
    pub concurrency: u32,
    /// Claimed, unfinished delivery rows.
    pub max_inflight: u32,
    /// Sum of the stored sizes of claimed, unfinished rows.
    pub max_inflight_bytes: u64,
    /// Rows claimed per store scan.
    pub batch: u32,
    /// A hung attempt is cut after this long and counts as a failure.
    pub attempt_timeout_ms: u64,
    /// Ceiling for a destination's `Retry-After`.
    pub max_retry_after_ms: u64,
    pub retry: RetryConfig,
    pub tenants: TenantWindows,
    /// Attempts one sink key (tenant, source, sink) runs at once; absent means no cap.
    pub sink_concurrency: Option<u32>,
    /// Consecutive non-permanent failures that open a sink key's breaker (0 disables).
    pub breaker_failures: u32,
    pub breaker_open_ms: u64,
    pub breaker_max_open_ms: u64,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        DispatchConfig {
            concurrency: 32,
            max_inflight: 4096,
            max_inflight_bytes: 134_217_728,
            batch: 128,
            attempt_timeout_ms: 30_000,
            max_retry_after_ms: 3_600_000,
            retry: RetryConfig::default(),
            tenants: TenantWindows::default(),
            sink_concurrency: Some(8),
            breaker_failures: 5,
            breaker_open_ms: 30_000,
            breaker_max_open_ms: 300_000,
        }
    }
}

/// Where sinks may connect: HTTP receivers, brokers and queue endpoints. Checked on the
/// resolved addresses of every attempt (HTTP) or every connect (queue sinks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
#[derive(Default)]
pub struct EgressConfig {
    /// Allow `http://` destinations (default: https only).
    pub allow_http: bool,
    /// Allow loopback addresses (127.0.0.0/8, ::1).
    pub allow_loopback: bool,
    /// Allow private ranges (10/8, 172.16/12, 192.168/16, fc00::/7, 100.64/10).
    pub allow_private: bool,
    /// Allow link-local ranges, the cloud metadata address included (169.254/16, fe80::/10).
    pub allow_link_local: bool,
    /// CIDRs allowed whatever their range (e.g. one private receiver).
    pub allow_cidrs: Vec<String>,
    /// Let a queue sink's `tls.insecure_skip_verify` turn certificate checks off (default:
    /// refused at load).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_insecure_tls: bool,
    /// Hosts other than Google's (`googleapis.com` and its subdomains) that a Pub/Sub sink with
    /// `auth: metadata` may send the node's service-account token to (a Private Service Connect
    /// name, a proxy you run). A sink's `endpoint` alone cannot send it anywhere else.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub metadata_token_hosts: Vec<String>,
    pub pools: PoolConfig,
}

/// HTTP connection pools, one per receiver address and TLS profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct PoolConfig {
    /// Connections per pool.
    pub pool_size: u32,
    /// Live pools per instance.
    pub max_pools: u32,
    /// Live pools per tenant.
    pub max_pools_per_tenant: u32,
    /// A pool with nothing in flight for this long is closed.
    pub pool_max_idle_ms: u64,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            pool_size: 32,
            max_pools: 1024,
            max_pools_per_tenant: 256,
            pool_max_idle_ms: 60_000,
        }
    }
}

/// Where large bodies are checked in for queue sinks, and the port that serves them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct ClaimCheckConfig {
    pub enabled: bool,
    pub ip: IpAddr,
    pub port: u16,
    /// Days a checked-in body is kept (absent: kept until deleted by hand).
    pub retention_days: Option<u32>,
    /// Bearer tokens readers must present, each for every tenant or for some
    /// (`crate::claim_token`); empty means the claim port is open (it binds loopback by
    /// default).
    pub tokens: Vec<crate::ClaimToken>,
    pub connections: ConnectionLimits,
}

impl Default for ClaimCheckConfig {
    fn default() -> Self {
        ClaimCheckConfig {
            enabled: true,
            ip: IpAddr::from([127, 0, 0, 1]),
            port: 4001,
            retention_days: None,
            tokens: Vec::new(),
            connections: ConnectionLimits {
                max_connections: 1024,
                ..ConnectionLimits::default()
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnVerifyFailure {
    /// `401`, nothing stored.
    #[default]
    Reject,
    /// Stored and delivered with `flagged: true`.
    AcceptFlag,
    /// `202`, held in the node's quarantine pen until a `quarantine` replay job releases it
    /// (once the source verifies it) or an operator purges it.
    Quarantine,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// The tenant of this source's hooks. A source pinned to a tenant other than `default`
    /// answers only routes naming that tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Accept the URL's tenant on a shared source without verification (`tenant_path` only).
    #[serde(default)]
    pub trust_url_tenant: bool,
    #[serde(default)]
    pub verify: VerifyConfig,
    #[serde(default)]
    pub on_verify_failure: OnVerifyFailure,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe: Option<DedupeConfig>,
    /// Request headers forwarded to sinks; absent forwards all but auth, framing, hop-by-hop
    /// and `x-ankusa-*` headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_headers: Option<Vec<String>>,
    #[serde(default = "default_max_headers")]
    pub max_headers: u32,
    #[serde(default = "default_forward_headers_max_bytes")]
    pub forward_headers_max_bytes: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryOverride>,
    pub sinks: Vec<SinkConfig>,
    /// A name for each entry of `sinks`, by position (empty: none). Only reported, in
    /// `GET /v1/status` next to a sink's delivery failures: the operator fills it with the
    /// `Sink` objects' names so it can tell which Sink a failure belongs to. A list beside
    /// `sinks` rather than a key of each entry, so the sink types' own structs stay as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sink_names: Vec<String>,
}

fn default_max_headers() -> u32 {
    64
}

fn default_forward_headers_max_bytes() -> u32 {
    16_384
}

impl SourceConfig {
    /// A source with the given sinks and every other key at its default.
    pub fn with_sinks(sinks: Vec<SinkConfig>) -> Self {
        SourceConfig {
            tenant: None,
            trust_url_tenant: false,
            verify: VerifyConfig::None,
            on_verify_failure: OnVerifyFailure::Reject,
            dedupe: None,
            forward_headers: None,
            max_headers: default_max_headers(),
            forward_headers_max_bytes: default_forward_headers_max_bytes(),
            retry: None,
            sinks,
            sink_names: Vec::new(),
        }
    }
}

/// How a source verifies the provider's signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum VerifyConfig {
    /// Nothing verified; deliveries say `skipped`.
    #[default]
    None,
    /// `Stripe-Signature: t=..,v1=..` over `{t}.{body}`.
    Stripe(TimedPreset),
    /// `X-Hub-Signature-256: sha256=<hex>` over the body.
    Github(Preset),
    /// `X-Shopify-Hmac-SHA256: <base64>` over the body.
    Shopify(Preset),
    /// `X-Slack-Signature: v0=<hex>` over `v0:{ts}:{body}`.
    Slack(TimedPreset),
    /// `webhook-id` / `webhook-timestamp` / `webhook-signature` (or the `svix-*` names).
    StandardWebhooks(TimedPreset),
    /// A custom body HMAC.
    Hmac(HmacVerify),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// One secret, or up to 8 newest first while rotating; each is tried.
    pub secret: Secrets,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TimedPreset {
    pub secret: Secrets,
    /// Largest accepted distance between the signed timestamp and now.
    #[serde(default = "default_tolerance")]
    pub tolerance_seconds: u64,
}

fn default_tolerance() -> u64 {
    300
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum HmacHash {
    Sha256,
    Sha512,
    Sha1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SigEncoding {
    Hex,
    Base64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SigParse {
    /// The whole header value (after `sig_prefix`) is the signature.
    #[default]
    Whole,
    /// `k=v,k=v` pairs; `sig_key` names the signature, `t` may carry the timestamp.
    CsvPairs,
    /// Space-separated `version,signature` entries; `version` selects them.
    SpaceVersions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SecretDecode {
    /// The secret's bytes are the key.
    #[default]
    Raw,
    /// `whsec_` followed by base64 of the key.
    WhsecBase64,
}

/// A custom body-HMAC scheme.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct HmacVerify {
    pub secret: Secrets,
    pub signature_header: String,
    /// The signed string: `{body}`, `{ts}` and `{header:<name>}` tokens and literal text.
    #[serde(default = "default_signed")]
    pub signed: String,
    #[serde(default = "default_hash")]
    pub hash: HmacHash,
    #[serde(default = "default_encoding")]
    pub encoding: SigEncoding,
    /// Text in front of the signature (`sha256=`), stripped before comparing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig_prefix: Option<String>,
    #[serde(default)]
    pub parse: SigParse,
    /// The pair holding the signature for `csv_pairs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig_key: Option<String>,
    /// The entry version for `space_versions` (e.g. `v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Header carrying the timestamp; with `csv_pairs` the `t` pair is used when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance_seconds: Option<u64>,
    #[serde(default)]
    pub secret_decode: SecretDecode,
}

fn default_signed() -> String {
    "{body}".into()
}

fn default_hash() -> HmacHash {
    HmacHash::Sha256
}

fn default_encoding() -> SigEncoding {
    SigEncoding::Hex
}

/// A preset dedupe key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DedupePreset {
    /// Header `x-github-delivery`.
    Github,
    /// Header `webhook-id`.
    StandardWebhooks,
    /// Header `svix-id`.
    Svix,
    /// Header `x-shopify-webhook-id`.
    Shopify,
    /// JSON field `id` of the body.
    Stripe,
}

/// Where a source finds the provider's event id. Written as a preset name (`dedupe: github`)
/// or a map with exactly one of `preset`, `header`, `json`, plus an optional `ttl_seconds`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DedupeConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<DedupePreset>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// A dot path into the JSON body (`data.object.id`); integers are stringified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
    /// How long a key collapses repeats (default 259200 = 72 h).
    #[serde(default = "default_dedupe_ttl")]
    pub ttl_seconds: u64,
}

pub fn default_dedupe_ttl() -> u64 {
    259_200
}

impl<'de> Deserialize<'de> for DedupeConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            #[serde(default)]
            preset: Option<DedupePreset>,
            #[serde(default)]
            header: Option<String>,
            #[serde(default)]
            json: Option<String>,
            #[serde(default = "default_dedupe_ttl")]
            ttl_seconds: u64,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Preset(DedupePreset),
            Full(Full),
        }
        match Either::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected a preset (github, standard_webhooks, svix, shopify, stripe) or a map \
                 with one of preset, header, json and an optional ttl_seconds",
            )
        })? {
            Either::Preset(p) => Ok(DedupeConfig {
                preset: Some(p),
                header: None,
                json: None,
                ttl_seconds: default_dedupe_ttl(),
            }),
            Either::Full(f) => Ok(DedupeConfig {
                preset: f.preset,
                header: f.header,
                json: f.json,
                ttl_seconds: f.ttl_seconds,
            }),
        }
    }
}

// One definition for the gateway's DLQ and the operator's `ReplayJob` filter.
/// Why a dead delivery died: `permanent` (the sink said it will never work, or the source, the
/// sink or the hook is gone), `throttled` (the destination asked for a pause and the retry
/// horizon ended it), `transient` (anything else that kept failing until the retry policy gave
/// up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    Permanent,
    Throttled,
    Transient,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Permanent => "permanent",
            ErrorClass::Throttled => "throttled",
            ErrorClass::Transient => "transient",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorClass> {
        match s {
            "permanent" => Some(ErrorClass::Permanent),
            "throttled" => Some(ErrorClass::Throttled),
            "transient" => Some(ErrorClass::Transient),
            _ => None,
        }
    }
}
