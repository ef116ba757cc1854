//! The Kafka sink: produces the queue message to a topic with `acks=all` and answers `Ok` only
//! once every in-sync replica has the record.
//!
//! | Outcome | Result |
//! |---|---|
//! | key + value + headers over `max_record_bytes` | permanent `message_too_large`, nothing produced |
//! | broker or client `MSG_SIZE_TOO_LARGE`, `INVALID_MSG`, `INVALID_RECORD`, `CORRUPT_MESSAGE`, `INVALID_MSG_SIZE` | permanent |
//! | no ack within `produce_timeout_ms` | transient `produce_timeout` (the record may still land: consumers dedupe) |
//! | unknown topic or partition | transient `unknown_topic` (the sink never creates topics) |
//! | anything else (brokers down, not enough replicas, ...) | transient |
//! | a bootstrap or advertised broker resolves to an address `egress` refuses | transient `not_connected: egress_denied: <class> (<field>)`, no producer |
//!
//! librdkafka owns reconnects, leader changes and metadata; the producer is one per broker list
//! and credentials, opened on first use and closed when idle. Opening it checks the egress
//! policy twice: the bootstrap brokers' addresses before librdkafka is given them, then the
//! brokers the cluster advertises (a metadata request, before anything is produced), since
//! librdkafka connects to those too. What librdkafka resolves or learns later (its own
//! reconnects, a broker advertised afterwards) is checked when the producer is next opened;
//! docs/sinks.md (Egress) states that window.

use std::sync::Arc;
use std::time::Duration;

use ankusa_config::{KafkaSasl, KafkaSinkConfig};
use ankusa_core::{DeliveryCtx, Envelope, SinkError};
use futures::future::BoxFuture;
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use crate::BuildCtx;
use crate::conn::{Conn, Registry, Slot, scrub};
use crate::egress::{EgressTarget, Policy};
use crate::message::{self, Limits};

#[derive(Clone)]
pub struct KafkaConn(Arc<FutureProducer>);

impl Conn for KafkaConn {
    fn close(self) -> BoxFuture<'static, ()> {
        // Dropping the last producer handle joins librdkafka's threads: keep it off the
        // async workers.
        Box::pin(async move {
            let _ = tokio::task::spawn_blocking(move || drop(self)).await;
        })
    }
}

pub struct KafkaSink {
    slot: Arc<Slot<KafkaConn>>,
    client: ClientConfig,
    topic: String,
    key: Option<String>,
    limits: Limits,
    reported_inline: u64,
    produce_timeout: Duration,
    secrets: Vec<String>,
    policy: Policy,
    targets: Vec<EgressTarget>,
}

/// `host:port` from a `host:port`, `tcp://host:port` or `plaintext://host:port` entry.
fn bootstrap(brokers: &[String]) -> String {
    brokers
        .iter()
        .map(|b| b.split_once("://").map(|(_, r)| r).unwrap_or(b))
        .map(|b| b.trim_end_matches('/'))
        .collect::<Vec<_>>()
        .join(",")
}

impl KafkaSink {
    pub fn new(cfg: &KafkaSinkConfig, ctx: &BuildCtx, registry: &Registry<KafkaConn>) -> KafkaSink {
        let servers = bootstrap(&cfg.brokers);
        let mut client = ClientConfig::new();
        client
            .set("bootstrap.servers", &servers)
            .set("client.id", "ankusa")
            .set("acks", "all")
            .set("enable.idempotence", "false")
            // A topic is an operator's contract (partitions, retention): never auto-create.
            .set("allow.auto.create.topics", "false")
            .set("message.timeout.ms", cfg.produce_timeout_ms.to_string())
            .set(
                "message.max.bytes",
                cfg.max_record_bytes
                    .saturating_add(65_536)
                    .clamp(1_000_000, 1_000_000_000)
                    .to_string(),
            )
            .set("linger.ms", "2")
            .set("socket.keepalive.enable", "true")
            // An unknown topic fails its records after this long instead of 30 s, well inside
            // the produce timeout, so it is reported as unknown_topic rather than a timeout.
            .set(
                "topic.metadata.propagation.max.ms",
                (cfg.produce_timeout_ms / 2).max(1).to_string(),
            );
        let mut secrets = Vec::new();
        if let Some(s) = &cfg.sasl {
            client
                .set("security.protocol", "sasl_plaintext")
                .set("sasl.mechanisms", "PLAIN")
                .set("sasl.username", s.username.expose())
                .set("sasl.password", s.password.expose());
            secrets.push(s.password.expose().to_string());
        }
        #[derive(serde::Serialize)]
        struct Key<'a> {
            servers: &'a str,
            sasl: &'a Option<KafkaSasl>,
            produce_timeout_ms: u64,
            max_record_bytes: u64,
            egress: &'a ankusa_config::AddressPolicy,
        }
        let key = crate::shared_key(
            "kafka",
            &Key {
                servers: &servers,
                sasl: &cfg.sasl,
                produce_timeout_ms: cfg.produce_timeout_ms,
                max_record_bytes: cfg.max_record_bytes,
                egress: ctx.policy.addresses(),
            },
        );
        let limits = Limits {
            inline_max: cfg.inline_max_bytes,
            max_message: cfg.max_record_bytes,
        };
        KafkaSink {
            slot: registry.slot("kafka", &key, cfg.idle_timeout_ms, 1_000),
            client,
            topic: cfg.topic.clone(),
            key: cfg.key.clone(),
            limits,
            reported_inline: limits.reported_inline_max(ctx.forward_headers_max_bytes),
            produce_timeout: Duration::from_millis(cfg.produce_timeout_ms),
            secrets,
            policy: ctx.policy.clone(),
            targets: cfg.egress_targets(),
        }
    }

    fn scrub(&self, text: String) -> String {
        let s: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        scrub(text, &s)
    }

    async fn attempt(&self, env: &Envelope, ctx: &DeliveryCtx) -> Result<(), SinkError> {
        // An ordered sink's lane key picks the partition, so a lane stays on one.
        let key = match message::lane_key(ctx) {
            Some(k) => k.to_string(),
            None => self
                .key
                .clone()
                .unwrap_or_else(|| message::tenant_source_key(env)),
        };
        let attrs = message::attributes(env, ctx);
        let overhead = key.len() as u64 + message::attributes_len(&attrs);
        let prepared = message::prepare(env, ctx, self.limits, overhead)?;
        let lease = self.slot.get(|| self.open()).await?;
        let mut headers = OwnedHeaders::new_with_capacity(attrs.len());
        for (k, v) in &attrs {
            headers = headers.insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            });
        }
        let record = FutureRecord::to(&self.topic)
            .key(key.as_bytes())
            .payload(&prepared.json)
            .headers(headers)
            .timestamp(env.received_at as i64);
        // librdkafka bounds the wait by message.timeout.ms; the outer timeout only guards
        // against a client that never answers.
        let sent = tokio::time::timeout(
            self.produce_timeout + Duration::from_secs(2),
            lease.conn.0.send(record, Duration::from_millis(0)),
        )
        .await;
        match sent {
            Err(_) => Err(self.timed_out()),
            Ok(Ok(_delivery)) => Ok(()),
            Ok(Err((e, _msg))) => Err(self.classify(e)),
        }
    }

    /// A producer whose bootstrap and advertised brokers all pass the egress policy.
    async fn open(&self) -> Result<KafkaConn, String> {
        // Before librdkafka is given the names; it resolves them again itself.
        self.policy
            .check_targets(&self.targets)
            .await
            .map_err(|e| e.to_string())?;
        let producer = self
            .client
            .create::<FutureProducer>()
            .map(|p| KafkaConn(Arc::new(p)))
            .map_err(|e| self.scrub(format!("kafka client: {e}")))?;
        match self.check_advertised(&producer).await {
            Ok(()) => Ok(producer),
            Err(e) => {
                producer.close().await;
                Err(e)
            }
        }
    }

    /// Asks the bootstrap brokers which brokers the cluster advertises (librdkafka connects to
    /// those to produce) and checks each. With sparse connections (librdkafka's default) it
    /// has connected to none of them yet: nothing is produced before this passes.
    async fn check_advertised(&self, producer: &KafkaConn) -> Result<(), String> {
        let p = producer.0.clone();
        let topic = self.topic.clone();
        let timeout = self.produce_timeout;
        // A blocking call into librdkafka: off the async workers.
        let advertised = tokio::task::spawn_blocking(move || {
            p.client().fetch_metadata(Some(&topic), timeout).map(|m| {
                m.brokers()
                    .iter()
                    .map(|b| (b.host().to_string(), b.port()))
                    .collect::<Vec<_>>()
            })
        })
        .await
        .map_err(|_| "kafka metadata: the request was cancelled".to_string())?
        .map_err(|e| self.scrub(format!("kafka metadata: {e}")))?;
        for (host, port) in advertised {
            let target = EgressTarget {
                field: "a broker the cluster advertises".into(),
                host,
                port: u16::try_from(port).unwrap_or(0),
            };
            // A name that does not resolve now is refused too: librdkafka would resolve it
            // later, unchecked, and a name can be made to fail once and answer afterwards.
            self.policy
                .check_target(&target)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn timed_out(&self) -> SinkError {
        SinkError::Transient(format!(
            "produce_timeout: no ack from every in-sync replica within {} ms (the record may still land)",
            self.produce_timeout.as_millis()
        ))
    }

    fn classify(&self, e: KafkaError) -> SinkError {
        let Some(code) = e.rdkafka_error_code() else {
            return SinkError::Transient(self.scrub(format!("kafka: {e}")));
        };
        classify_code(code, &self.topic, self.produce_timeout)
    }
}

/// The spec's table for one error code.
pub fn classify_code(code: RDKafkaErrorCode, topic: &str, timeout: Duration) -> SinkError {
    use RDKafkaErrorCode as C;
    match code {
        C::MessageSizeTooLarge => SinkError::Permanent("message_too_large (broker)".into()),
        C::InvalidMessage | C::InvalidRecord | C::InvalidMessageSize | C::BadMessage => {
            SinkError::Permanent(format!("kafka refused the record: {code}"))
        }
        C::MessageTimedOut => SinkError::Transient(format!(
            "produce_timeout: no ack from every in-sync replica within {} ms (the record may still land)",
            timeout.as_millis()
        )),
        C::UnknownTopicOrPartition | C::UnknownTopic | C::UnknownPartition => {
            SinkError::Transient(format!("unknown_topic: {topic}"))
        }
        other => SinkError::Transient(format!("kafka: {other}")),
    }
}

impl_sink!(KafkaSink {
    type_name: "kafka",
    inline_max_bytes(self) -> Option<u64> {
        Some(self.reported_inline)
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_strips_schemes() {
        assert_eq!(
            bootstrap(&["tcp://a:9092".into(), "b:9093".into()]),
            "a:9092,b:9093"
        );
    }

    #[test]
    fn code_table() {
        let t = Duration::from_secs(5);
        assert!(matches!(
            classify_code(RDKafkaErrorCode::MessageSizeTooLarge, "t", t),
            SinkError::Permanent(_)
        ));
        assert!(matches!(
            classify_code(RDKafkaErrorCode::InvalidRecord, "t", t),
            SinkError::Permanent(_)
        ));
        assert!(
            matches!(classify_code(RDKafkaErrorCode::MessageTimedOut, "t", t), SinkError::Transient(ref m) if m.starts_with("produce_timeout"))
        );
        assert!(
            matches!(classify_code(RDKafkaErrorCode::UnknownTopicOrPartition, "t", t), SinkError::Transient(ref m) if m.starts_with("unknown_topic"))
        );
        assert!(matches!(
            classify_code(RDKafkaErrorCode::AllBrokersDown, "t", t),
            SinkError::Transient(_)
        ));
    }
}
