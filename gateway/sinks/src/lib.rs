//! Ankusa's queue and broker sinks: Kafka, RabbitMQ, NATS JetStream, Redis pub/sub, SQS and
//! Google Pub/Sub. Every one publishes the same message (`message.rs`, v1) and answers `Ok`
//! only once the broker has it (each module's header has its confirm rule and error table).
//!
//! `SinkBuilder` turns a sink's config into an `Arc<dyn Sink>` and owns what outlives one
//! config: broker connections (keyed by a digest of address and credentials, opened on first
//! use, closed when idle by `reap_idle`) and the SQS / Pub/Sub batchers. A config reload
//! rebuilds sinks through the same builder and so keeps the connections.

pub mod aws;
pub mod batcher;
pub mod conn;
pub mod kafka;
pub mod message;
pub mod nats;
pub mod pubsub;
pub mod rabbitmq;
pub mod redis;
pub mod sqs;
pub mod util;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ankusa_config::{Config, ConfigError, SinkConfig, SourceConfig};
use ankusa_core::Sink;

use batcher::{BatchStats, Batcher};
use conn::{Registry, digest};

/// Makes aws-lc-rs the process's rustls provider. Both aws-lc-rs (reqwest, lapin) and ring
/// (some dependency trees) can be compiled in, and rustls then refuses to pick one on its own;
/// call this first thing in `main` and in each test binary. Installing twice is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// Builds queue sinks; shared state lives here.
pub struct SinkBuilder {
    http: reqwest::Client,
    kafka: Registry<kafka::KafkaConn>,
    rabbitmq: Registry<rabbitmq::RabbitConn>,
    nats: Registry<nats::NatsConn>,
    redis: Registry<redis::RedisConn>,
    sqs: Mutex<HashMap<String, Weak<Batcher<sqs::SqsEntry>>>>,
    pubsub: Mutex<HashMap<String, Weak<Batcher<pubsub::PubsubMessage>>>>,
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
    pub fn new() -> Self {
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(64)
            .user_agent(concat!("ankusa/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        SinkBuilder {
            http,
            kafka: Registry::default(),
            rabbitmq: Registry::default(),
            nats: Registry::default(),
            redis: Registry::default(),
            sqs: Mutex::new(HashMap::new()),
            pubsub: Mutex::new(HashMap::new()),
            sqs_stats: Arc::default(),
            pubsub_stats: Arc::default(),
        }
    }

    /// Builds the sink for a queue sink config (`kafka`, `rabbitmq`, `nats`, `redis`, `sqs`,
    /// `google_pubsub`). Connects to nothing: connections open on the first delivery. SQS and
    /// Pub/Sub batchers start here, so call it inside the Tokio runtime. `field` names the sink
    /// in errors (`sources.x.sinks[1]`).
    pub fn build(
        &self,
        cfg: &Config,
        source: &SourceConfig,
        field: &str,
        sink: &SinkConfig,
    ) -> Result<Arc<dyn Sink>, ConfigError> {
        let fwd = source.forward_headers_max_bytes as u64;
        let inflight = cfg.dispatch.sink_concurrency.unwrap_or(8).max(1);
        match sink {
            SinkConfig::Kafka(k) => Ok(Arc::new(kafka::KafkaSink::new(k, &self.kafka, fwd))),
            SinkConfig::Rabbitmq(r) => Ok(Arc::new(rabbitmq::RabbitmqSink::new(r, &self.rabbitmq))),
            SinkConfig::Nats(n) => Ok(Arc::new(nats::NatsSink::new(n, &self.nats, fwd))),
            SinkConfig::Redis(r) => Ok(Arc::new(redis::RedisSink::new(r, &self.redis))),
            SinkConfig::Sqs(s) => {
                let client = sqs::client(s, self.http.clone());
                let batcher = if s.batch {
                    runtime(field)?;
                    let key = digest(&[
                        "sqs",
                        s.queue_url.expose(),
                        s.endpoint.as_ref().map_or("", |e| e.expose()),
                        s.region.as_deref().unwrap_or(""),
                        s.access_key_id.as_ref().map_or("", |k| k.expose()),
                        s.secret_access_key.as_ref().map_or("", |k| k.expose()),
                        s.session_token.as_ref().map_or("", |k| k.expose()),
                        &format!(
                            "{} {} {} {} {} {} {:?} {}",
                            s.batch_linger_ms,
                            s.batch_max_entries,
                            s.batch_max_bytes,
                            s.batch_queue_max,
                            s.batch_queue_max_bytes,
                            s.batch_queue_tenant_max,
                            s.batch_max_inflight.unwrap_or(inflight),
                            s.timeout_ms
                        ),
                    ]);
                    Some(shared(&self.sqs, key, || {
                        sqs::batcher(s, client.clone(), inflight, self.sqs_stats.clone())
                    }))
                } else {
                    None
                };
                Ok(Arc::new(sqs::SqsSink::new(s, client, batcher, fwd)))
            }
            SinkConfig::GooglePubsub(g) => {
                let client = pubsub::client(g, self.http.clone(), self.pubsub_stats.clone());
                let batcher = if g.batch {
                    runtime(field)?;
                    let key = digest(&[
                        "pubsub",
                        g.endpoint
                            .as_ref()
                            .map_or(pubsub::DEFAULT_ENDPOINT, |e| e.expose()),
                        &g.project,
                        &g.topic,
                        &format!("{:?}", g.auth),
                        g.token.as_ref().map_or("", |t| t.expose()),
                        &format!(
                            "{} {} {} {} {} {} {:?} {}",
                            g.batch_linger_ms,
                            g.batch_max_entries,
                            g.batch_max_bytes,
                            g.batch_queue_max,
                            g.batch_queue_max_bytes,
                            g.batch_queue_tenant_max,
                            g.batch_max_inflight.unwrap_or(inflight),
                            g.timeout_ms
                        ),
                    ]);
                    Some(shared(&self.pubsub, key, || {
                        pubsub::batcher(g, client.clone(), inflight)
                    }))
                } else {
                    None
                };
                Ok(Arc::new(pubsub::PubsubSink::new(g, client, batcher, fwd)))
            }
            SinkConfig::Log(_) | SinkConfig::Http(_) => Err(ConfigError::field(
                format!("{field}.type"),
                format!("{} is not a queue sink", sink.type_name()),
            )),
        }
    }

    /// Closes broker connections idle past their sink's `idle_timeout_ms` (nothing in flight),
    /// and forgets connections and batchers no sink uses any more.
    pub fn reap_idle(&self) {
        let now = Instant::now();
        self.kafka.reap(now);
        self.rabbitmq.reap(now);
        self.nats.reap(now);
        self.redis.reap(now);
        lock(&self.sqs).retain(|_, w| w.strong_count() > 0);
        lock(&self.pubsub).retain(|_, w| w.strong_count() > 0);
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
        lock(&self.sqs)
            .values()
            .filter(|w| w.strong_count() > 0)
            .count()
            + lock(&self.pubsub)
                .values()
                .filter(|w| w.strong_count() > 0)
                .count()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn runtime(field: &str) -> Result<(), ConfigError> {
    tokio::runtime::Handle::try_current()
        .map(|_| ())
        .map_err(|_| {
            ConfigError::field(
                field.to_string(),
                "queue sinks with batching must be built inside the Tokio runtime",
            )
        })
}

/// The live batcher for `key`, or a new one.
fn shared<P: Send + 'static>(
    map: &Mutex<HashMap<String, Weak<Batcher<P>>>>,
    key: String,
    make: impl FnOnce() -> Batcher<P>,
) -> Arc<Batcher<P>> {
    let mut m = lock(map);
    if let Some(b) = m.get(&key).and_then(Weak::upgrade) {
        return b;
    }
    let b = Arc::new(make());
    m.insert(key, Arc::downgrade(&b));
    b
}
