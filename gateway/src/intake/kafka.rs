//! The Kafka intake log: an idempotent `acks=all` producer, every record keyed by the node's
//! name (so one node's records stay in order in one partition), and a reader that replays a
//! node's records from given offsets up to the end the topic had when the read began.

use std::collections::BTreeMap;
use std::time::Duration;

use ankusa_config::{ConfigError, KafkaSinkConfig};
use ankusa_sinks::kafka::{Guarded, KafkaContext};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Where a record landed.
pub type Position = (i32, i64);

pub struct KafkaLog {
    /// Guarded: every connection passes the intake's egress check (sinks' kafka/connect.rs).
    producer: Guarded<FutureProducer<KafkaContext>>,
    client: ClientConfig,
    topic: String,
    timeout: Duration,
}

/// Where the intake's Kafka settings sit in the config.
const AT: &str = "intake.kafka";

/// The producer's settings, checked as far as they can be without a client: every setting is
/// one librdkafka takes (each is set on a native config, which starts no thread and connects
/// nowhere) and the TLS material parses, so the producer `KafkaLog::new` creates from them is
/// not refused later. `ankusa check-config` stops here.
pub fn client_config(
    cfg: &KafkaSinkConfig,
    publish_timeout: Duration,
) -> Result<ClientConfig, ConfigError> {
    let mut client = ankusa_sinks::kafka::intake_client_config(cfg, AT).map_err(keyed)?;
    client.set(
        "message.timeout.ms",
        publish_timeout.as_millis().max(100).to_string(),
    );
    check_pem(&client)?;
    client.create_native_config().map_err(|e| match e {
        // Only the key: librdkafka's own text quotes the value, which may be a credential.
        KafkaError::ClientConfig(_, _, key, _) => {
            ConfigError::field(AT, format!("librdkafka refuses the setting {key}"))
        }
        _ => ConfigError::field(AT, "librdkafka refuses the settings"),
    })?;
    Ok(client)
}

/// `"intake.kafka.tls: ..."` as an error on that key.
fn keyed(text: String) -> ConfigError {
    match text.split_once(": ") {
        Some((field, message)) if field.starts_with(AT) => ConfigError::field(field, message),
        _ => ConfigError::field(AT, text),
    }
}

/// The TLS material librdkafka parses when it creates a client, parsed first (an error names
/// the key, never the content).
fn check_pem(client: &ClientConfig) -> Result<(), ConfigError> {
    let bad = |key: &str, reason: &str| ConfigError::field(format!("{AT}.tls.{key}"), reason);
    for (setting, key) in [
        ("ssl.ca.pem", "ca_file"),
        ("ssl.certificate.pem", "cert_file"),
    ] {
        if let Some(pem) = client.get(setting) {
            let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| bad(key, "is not valid PEM"))?;
            if certs.is_empty() {
                return Err(bad(key, "holds no certificate"));
            }
        }
    }
    if let Some(pem) = client.get("ssl.key.pem") {
        PrivateKeyDer::from_pem_slice(pem.as_bytes())
            .map_err(|_| bad("key_file", "holds no private key"))?;
    }
    Ok(())
}

impl KafkaLog {
    /// The log's producer, created from `client_config`'s checked settings.
    pub fn new(
        client: ClientConfig,
        cfg: &KafkaSinkConfig,
        publish_timeout: Duration,
    ) -> Result<KafkaLog, ConfigError> {
        let producer = ankusa_sinks::kafka::intake_producer(&client)
            .map_err(|e| ConfigError::field(AT, format!("cannot create a producer ({e})")))?;
        Ok(KafkaLog {
            producer,
            client,
            topic: cfg.topic.clone(),
            timeout: publish_timeout,
        })
    }

    /// Publishes `payloads` in order under `key` and waits for every confirmation; the
    /// positions in the same order.
    pub async fn publish(
        &self,
        key: &str,
        payloads: Vec<Vec<u8>>,
    ) -> Result<Vec<Position>, String> {
        let mut pending = Vec::with_capacity(payloads.len());
        for p in &payloads {
            let rec = FutureRecord::to(&self.topic).key(key.as_bytes()).payload(p);
            match self.producer.send_result(rec) {
                Ok(f) => pending.push(f),
                Err((e, _)) => return Err(format!("enqueue: {e}")),
            }
        }
        let all = futures::future::join_all(pending);
        let done = tokio::time::timeout(self.timeout + Duration::from_secs(1), all)
            .await
            .map_err(|_| "publish: no confirmation within publish_timeout_ms".to_string())?;
        let mut out = Vec::with_capacity(done.len());
        for d in done {
            match d {
                Ok(Ok(delivery)) => out.push((delivery.partition, delivery.offset)),
                Ok(Err((e, _))) => return Err(format!("publish: {e}")),
                Err(_) => return Err("publish: the producer went away".into()),
            }
        }
        Ok(out)
    }

    /// The end offset (high watermark) of every partition of the topic. Blocking.
    pub fn end_offsets(&self) -> Result<BTreeMap<i32, i64>, String> {
        let client = self.producer.client();
        let md = client
            .fetch_metadata(Some(&self.topic), Duration::from_secs(2))
            .map_err(|e| format!("metadata: {e}"))?;
        let parts: Vec<i32> = md
            .topics()
            .iter()
            .filter(|t| t.name() == self.topic)
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        if parts.is_empty() {
            return Err(format!("metadata: topic {} has no partitions", self.topic));
        }
        let mut out = BTreeMap::new();
        for p in parts {
            let (_, high) = client
                .fetch_watermarks(&self.topic, p, Duration::from_secs(2))
                .map_err(|e| format!("watermarks of partition {p}: {e}"))?;
            out.insert(p, high);
        }
        Ok(out)
    }

    /// Calls `f(partition, offset, payload)` for every record keyed `node` at or after
    /// `from[p]` (partitions absent from `from`: from their start) up to the end each
    /// partition had when the read began. Blocking.
    pub fn read_node(
        &self,
        node: &str,
        from: &BTreeMap<i32, i64>,
        mut f: impl FnMut(i32, i64, &[u8]) -> Result<(), String>,
    ) -> Result<u64, String> {
        let ends = self.end_offsets()?;
        let mut cfg = self.client.clone();
        // The producer's own settings mean nothing to a consumer (librdkafka warns of each).
        for k in [
            "acks",
            "enable.idempotence",
            "max.in.flight.requests.per.connection",
            "message.timeout.ms",
            "linger.ms",
        ] {
            cfg.remove(k);
        }
        cfg.set("group.id", format!("ankusa-intake-rebuild-{node}"))
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .set("auto.offset.reset", "earliest");
        let consumer: Guarded<BaseConsumer<KafkaContext>> =
            ankusa_sinks::kafka::intake_consumer(&cfg)
                .map_err(|e| format!("cannot create a consumer ({e})"))?;
        let mut tpl = TopicPartitionList::new();
        let mut left: BTreeMap<i32, i64> = BTreeMap::new();
        // Every partition is read, also one whose reported end is at the start: the end is
        // only where the read may stop waiting, not where records stop (a broker may report
        // it behind its last record), so the read also drains what comes after it.
        for (&p, &end) in &ends {
            let start = from.get(&p).copied().unwrap_or(0).max(0);
            tpl.add_partition_offset(&self.topic, p, Offset::Offset(start))
                .map_err(|e| format!("assign: {e}"))?;
            if start < end {
                left.insert(p, end);
            }
        }
        consumer.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
        let mut seen = 0u64;
        let mut idle = 0u32;
        let mut last: BTreeMap<i32, i64> = BTreeMap::new();
        // Past every end, the read stops after a quiet second, or once every partition has
        // shown a record newer than the read (other nodes' records keep coming; this node
        // publishes nothing while it rebuilds).
        let started_ms = ankusa_core::now_ms() as i64;
        let mut newer: std::collections::BTreeSet<i32> = std::collections::BTreeSet::new();
        let mut quiet = 0u32;
        let mut past_end = 0u64;
        loop {
            match consumer.poll(Duration::from_millis(500)) {
                None if left.is_empty() => {
                    quiet += 1;
                    if quiet >= 2 {
                        break;
                    }
                }
                None => {
                    idle += 1;
                    // 60 s without a record while records are still due: the log is away.
                    if idle > 120 {
                        return Err("read: no records for 60 s before the end of the log".into());
                    }
                }
                Some(Err(e)) => return Err(format!("read: {e}")),
                Some(Ok(m)) => {
                    idle = 0;
                    quiet = 0;
                    let (p, off) = (m.partition(), m.offset());
                    if left.is_empty() && m.timestamp().to_millis().is_some_and(|t| t > started_ms)
                    {
                        newer.insert(p);
                        if newer.len() >= ends.len() {
                            break;
                        }
                        continue;
                    }
                    if let Some(prev) = last.insert(p, off)
                        && off != prev + 1
                    {
                        tracing::warn!(
                            partition = p,
                            after = prev,
                            offset = off,
                            "intake: the log skipped offsets while reading"
                        );
                    }
                    if ends.get(&p).is_some_and(|&end| off >= end) {
                        past_end += 1;
                    }
                    if m.key() == Some(node.as_bytes())
                        && let Some(payload) = m.payload()
                    {
                        f(p, off, payload)?;
                        seen += 1;
                    }
                    if left.get(&p).is_some_and(|&end| off + 1 >= end) {
                        left.remove(&p);
                    }
                }
            }
        }
        if past_end > 0 {
            tracing::warn!(
                records = past_end,
                "intake: the log held records past the end it reported; read them too"
            );
        }
        Ok(seen)
    }
}
