//! Every destination a hook can be delivered to, behind the `Sink` contract of `ankusa-core`:
//! HTTP (`http/`: the signed POST, its egress policy and connection pools), the log, and the
//! queue and broker sinks (Kafka, RabbitMQ, NATS JetStream, Redis pub/sub, SQS, Google
//! Pub/Sub), which all publish the same message (`message.rs`, v1) and answer `Ok` only once
//! the broker has it (each module's header has its confirm rule and error table).
//!
//! Every sink obeys the `egress` policy (`egress.rs`): HTTP on each attempt, the broker and
//! queue sinks on each connect.
//!
//! `SinkBuilder` is the one place a sink's config becomes an `Arc<dyn Sink>`. It owns what
//! outlives one config: HTTP pools, broker connections (keyed by a digest of address and
//! credentials, opened on first use, closed when idle by `reap_idle`) and the SQS / Pub/Sub
//! batchers. A config reload rebuilds sinks through the same builder and so keeps them.

/// The `Sink` impl of a sink whose delivery is its `async fn attempt(&self, env, ctx)`: its
/// `type_name`, and whichever other answers of the contract it gives (`inline_max_bytes`,
/// `durable`, `batching`), written like the methods they are.
macro_rules! impl_sink {
    // A REST sink that may batch (SQS, Pub/Sub): the inline limit it reports, and batching
    // while it has a batcher.
    ($ty:ty { type_name: $name:literal, batching_rest $(,)? }) => {
        impl_sink!($ty {
            type_name: $name,
            inline_max_bytes(self) -> Option<u64> {
                Some(self.reported_inline)
            },
            batching(self) -> bool {
                self.batcher.is_some()
            },
        });
    };
    ($ty:ty {
        type_name: $name:literal
        $(, $method:ident($s:ident) -> $ret:ty $body:block)* $(,)?
    }) => {
        impl ::ankusa_core::Sink for $ty {
            fn deliver<'a>(
                &'a self,
                env: &'a ::ankusa_core::Envelope,
                ctx: &'a ::ankusa_core::DeliveryCtx,
            ) -> ::futures::future::BoxFuture<'a, Result<(), ::ankusa_core::SinkError>> {
                Box::pin(self.attempt(env, ctx))
            }

            fn type_name(&self) -> &'static str {
                $name
            }

            $(fn $method(&$s) -> $ret $body)*
        }
    };
}

pub mod aws;
pub mod batcher;
pub mod conn;
pub mod egress;
pub mod files;
pub mod http;
pub mod kafka;
pub mod log;
pub mod message;
pub mod nats;
pub mod pubsub;
pub mod rabbitmq;
pub mod redis;
pub mod reply;
pub mod sqs;
pub mod tls;
pub mod util;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_config::{
    AddressPolicy, Config, ConfigError, EgressConfig, PoolConfig, SinkConfig, SinkTls, SourceConfig,
};
use ankusa_core::Sink;

use batcher::{BatchStats, Shared};
use conn::Registry;
use http::HttpPools;

/// Makes aws-lc-rs the process's rustls provider. Both aws-lc-rs (reqwest, lapin) and ring
/// (some dependency trees) can be compiled in, and rustls then refuses to pick one on its own;
/// call this first thing in `main` and in each test binary. Installing twice is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// What building one sink needs besides its own config.
pub struct BuildCtx<'a> {
    /// The sink's path in errors (`sources.x.sinks[1]`).
    pub field: &'a str,
    pub egress: &'a EgressConfig,
    /// `egress` with the builder's resolver: what every sink checks its connections with.
    pub policy: egress::Policy,
    /// The source's cap on forwarded header bytes (what a queue message may carry besides
    /// the body).
    pub forward_headers_max_bytes: u64,
    /// Requests in flight per batcher when the sink does not say: `dispatch.sink_concurrency`,
    /// else 8.
    pub default_inflight: u32,
}

/// Builds sinks; shared state lives here.
pub struct SinkBuilder {
    pools: Arc<HttpPools>,
    /// A client with the system resolver and no egress policy: the Pub/Sub metadata server
    /// (the node's own, named by `GCE_METADATA_HOST`, never by a sink) is reached through it.
    http: reqwest::Client,
    /// The clients of the SQS and Pub/Sub REST calls under the latest egress policy, one per
    /// `tls:` setting (the default one for sinks without), keyed by `Rest::key`; a config that
    /// brings another policy starts afresh (sinks built before keep theirs).
    rest: Mutex<HashMap<String, (AddressPolicy, Rest)>>,
    kafka: Registry<kafka::KafkaConn>,
    rabbitmq: Registry<rabbitmq::RabbitConn>,
    nats: Registry<nats::NatsConn>,
    redis: Registry<redis::RedisConn>,
    sqs: Shared<sqs::SqsEntry>,
    pubsub: Shared<pubsub::PubsubMessage>,
    /// `ankusa_sink_batch_*` counters of every SQS batcher.
    pub sqs_stats: Arc<BatchStats>,
    /// `ankusa_sink_batch_*` counters of every Pub/Sub batcher (bisections included).
    pub pubsub_stats: Arc<BatchStats>,
}

impl Default for SinkBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SinkBuilder {
    /// A builder with HTTP pools of the default `egress.pools` settings.
    pub fn new() -> Self {
        Self::with_pools(HttpPools::new(&PoolConfig::default()))
    }

    pub fn with_pools(pools: Arc<HttpPools>) -> Self {
        install_crypto_provider();
        let http = rest_client_builder()
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        SinkBuilder {
            pools,
            http,
            rest: Mutex::new(HashMap::new()),
            kafka: Registry::default(),
            rabbitmq: Registry::default(),
            nats: Registry::default(),
            redis: Registry::default(),
            sqs: Shared::default(),
            pubsub: Shared::default(),
            sqs_stats: Arc::default(),
            pubsub_stats: Arc::default(),
        }
    }

    /// The HTTP sinks' connection pools (resized on reload, swept by the gateway).
    pub fn pools(&self) -> &Arc<HttpPools> {
        &self.pools
    }

    /// Builds the sink of `sink`, an entry of `source` in `cfg`. Connects to nothing:
    /// connections open on the first delivery. SQS and Pub/Sub batchers start here, so call
    /// it inside the Tokio runtime. `field` names the sink in errors (`sources.x.sinks[1]`).
    pub fn build(
        &self,
        cfg: &Config,
        source: &SourceConfig,
        field: &str,
        sink: &SinkConfig,
    ) -> Result<Arc<dyn Sink>, ConfigError> {
        let ctx = BuildCtx {
            field,
            egress: &cfg.egress,
            policy: egress::Policy::new(&cfg.egress, self.pools.resolver.clone()),
            forward_headers_max_bytes: source.forward_headers_max_bytes as u64,
            default_inflight: cfg.dispatch.sink_concurrency.unwrap_or(8).max(1),
        };
        Ok(match sink {
            SinkConfig::Log(_) => Arc::new(log::LogSink),
            SinkConfig::Http(h) => Arc::new(http::HttpSink::new(h, &ctx, self.pools.clone())?),
            SinkConfig::Kafka(k) => Arc::new(kafka::KafkaSink::new(k, &ctx, &self.kafka)),
            SinkConfig::Rabbitmq(r) => {
                Arc::new(rabbitmq::RabbitmqSink::new(r, &ctx, &self.rabbitmq))
            }
            SinkConfig::Nats(n) => Arc::new(nats::NatsSink::new(n, &ctx, &self.nats)),
            SinkConfig::Redis(r) => Arc::new(redis::RedisSink::new(r, &ctx, &self.redis)),
            SinkConfig::Sqs(s) => Arc::new(sqs::SqsSink::build(s, &ctx, self)?),
            SinkConfig::GooglePubsub(g) => Arc::new(pubsub::PubsubSink::build(g, &ctx, self)?),
        })
    }

    /// The REST client (SQS, Pub/Sub) whose resolver enforces `ctx.policy` and whose TLS is
    /// the sink's `tls:` (the system's roots without): one per policy and TLS setting, the
    /// latest policy's kept, so batchers of one config share its connections. A client that
    /// cannot be built refuses the sink rather than fall back to one without the policy; `tls:`
    /// files that cannot be read give a client whose every request fails (`Rest::setup_error`),
    /// as a broker sink's connect would.
    fn rest_client(&self, ctx: &BuildCtx, settings: Option<&SinkTls>) -> Result<Rest, ConfigError> {
        let policy = ctx.policy.addresses();
        // The material read now is part of the key: a reload after a certificate file was
        // rotated builds a client that trusts the new one.
        let material = match settings.map(tls::material) {
            None => String::new(),
            Some(Ok(m)) => conn::digest(&[
                &String::from_utf8_lossy(m.ca_pem.as_deref().unwrap_or_default()),
                &String::from_utf8_lossy(m.cert_pem.as_deref().unwrap_or_default()),
                &String::from_utf8_lossy(m.key_pem.as_deref().unwrap_or_default()),
            ]),
            Some(Err(e)) => format!("unreadable: {e}"),
        };
        let key = shared_key("rest", &(policy, settings, material));
        let mut rest = self.rest.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, r)) = rest.get(&key) {
            return Ok(r.clone());
        }
        let mut builder = rest_client_builder()
            // A proxy from HTTP(S)_PROXY would resolve and connect by name on our behalf,
            // past the resolver that checks the addresses.
            .no_proxy()
            .dns_resolver(Arc::new(egress::PolicyDns(ctx.policy.clone())));
        let mut peer = tls::PeerCert::default();
        if let Some(t) = settings {
            match tls::client_config_with_peer(t) {
                Ok((config, p)) => {
                    // The shared rustls config rather than reqwest's own TLS options, so the
                    // CA, client certificate, `server_name` and the handshake's errors (with
                    // the refused certificate's subject) behave as for Redis and NATS.
                    builder = builder.tls_backend_preconfigured(config);
                    peer = p;
                }
                Err(e) => {
                    return Ok(Rest {
                        http: self.http.clone(),
                        peer,
                        key,
                        setup_error: Some(e),
                    });
                }
            }
        }
        let http = builder.build().map_err(|e| {
            ConfigError::field(
                ctx.field.to_string(),
                format!("cannot build the HTTP client: {}", e.without_url()),
            )
        })?;
        let made = Rest {
            http,
            peer,
            key: key.clone(),
            setup_error: None,
        };
        // Bounded: clients of an older policy go, and past the cap the cache starts afresh
        // (sinks hold their own clones, so nothing in use is closed).
        rest.retain(|_, (p, _)| p == policy);
        if rest.len() >= REST_CLIENTS_MAX {
            rest.clear();
        }
        rest.insert(key, (policy.clone(), made.clone()));
        Ok(made)
    }

    /// Closes broker connections idle past their sink's `idle_timeout_ms` (nothing in flight),
    /// and forgets connections and batchers no sink uses any more.
    pub fn reap_idle(&self) {
        let now = Instant::now();
        self.kafka.reap(now);
        self.rabbitmq.reap(now);
        self.nats.reap(now);
        self.redis.reap(now);
        self.sqs.reap();
        self.pubsub.reap();
    }

    /// Runs `reap_idle` every `every` (30 s is plenty: idle timeouts are minutes). Spawn it
    /// once per process: `tokio::spawn(builder.clone().run_reaper(Duration::from_secs(30)))`.
    pub async fn run_reaper(self: Arc<Self>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.reap_idle();
        }
    }

    /// Live broker connections (Kafka, RabbitMQ, NATS, Redis).
    pub fn open_connections(&self) -> usize {
        self.kafka.open_count()
            + self.rabbitmq.open_count()
            + self.nats.open_count()
            + self.redis.open_count()
    }

    /// Live SQS and Pub/Sub batchers.
    pub fn batchers(&self) -> usize {
        self.sqs.live() + self.pubsub.live()
    }
}

/// REST clients kept per policy (one per distinct `tls:` setting of the sinks).
const REST_CLIENTS_MAX: usize = 64;

/// A REST client (SQS, Pub/Sub) under one egress policy and one `tls:` setting.
#[derive(Clone)]
pub(crate) struct Rest {
    pub http: reqwest::Client,
    /// The certificate the endpoint last presented, named when a handshake is refused. The
    /// client's connections share it: the certificates they see are the same endpoint's.
    pub peer: tls::PeerCert,
    /// What tells this client from another (policy, `tls:` settings, the material read): part
    /// of a batcher's key, so a reload that changes `tls` gets a batcher sending through the
    /// new client instead of the old batcher's.
    pub key: String,
    /// The `tls:` files could not be read or parsed: every request fails with this (transient,
    /// step `tls_setup`) until a reload brings usable ones.
    pub setup_error: Option<tls::TlsSetupError>,
}

/// The settings of the REST clients (SQS, Pub/Sub and the metadata server).
fn rest_client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .pool_idle_timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(64)
        .user_agent(concat!("ankusa/", env!("CARGO_PKG_VERSION")))
}

/// Batching sinks start their batcher's task when built: refuse clearly outside a runtime.
fn require_runtime(field: &str) -> Result<(), ConfigError> {
    tokio::runtime::Handle::try_current()
        .map(|_| ())
        .map_err(|_| {
            ConfigError::field(
                field.to_string(),
                "queue sinks with batching must be built inside the Tokio runtime",
            )
        })
}

/// The key of a shared connection or batcher: a digest over everything that makes two sinks'
/// use of it interchangeable (address, credentials, options), taken over the serialised parts
/// so that a field added to any of them is part of the key without naming it here. Secrets
/// serialise to their values, so a credential change means a new connection; the digest keeps
/// them out of every name and log.
fn shared_key(kind: &str, parts: &impl serde::Serialize) -> String {
    let text = serde_json::to_string(parts).unwrap_or_default();
    conn::digest(&[kind, &text])
}

/// The part of a shared connection's key that is the egress policy which admitted it: a
/// reload that narrows the policy opens (and checks) new connections instead of reusing
/// ones it would refuse.
fn policy_key(policy: &egress::Policy) -> String {
    serde_json::to_string(policy.addresses()).unwrap_or_default()
}
