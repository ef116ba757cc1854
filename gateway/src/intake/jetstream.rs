//! The JetStream intake log: records published to `<subject>.<node>` of an existing stream
//! (awaiting each publish ack: the stream stored it), and a reader that replays a node's
//! subject from a stream sequence up to the end it had when the read began. Positions use
//! partition 0 and the stream sequence as the offset.

use std::collections::BTreeMap;
use std::time::Duration;

use ankusa_config::NatsSinkConfig;
use async_nats::jetstream::consumer::DeliverPolicy;
use async_nats::jetstream::consumer::pull::OrderedConfig;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use futures::StreamExt;

use super::kafka::Position;

pub struct JetStreamLog {
    cfg: NatsSinkConfig,
    /// Connected on first use and kept: a server away at start is retried by each use (the
    /// node starts, reports `recovering`, and takes hooks once the log answers), and the
    /// client reconnects by itself afterwards.
    js: tokio::sync::Mutex<Option<async_nats::jetstream::Context>>,
    subject: String,
    timeout: Duration,
}

impl JetStreamLog {
    pub fn new(cfg: &NatsSinkConfig, publish_timeout: Duration) -> JetStreamLog {
        JetStreamLog {
            cfg: cfg.clone(),
            js: tokio::sync::Mutex::new(None),
            subject: cfg.subject.clone(),
            timeout: publish_timeout,
        }
    }

    async fn js(&self) -> Result<async_nats::jetstream::Context, String> {
        let mut slot = self.js.lock().await;
        if let Some(js) = slot.as_ref() {
            return Ok(js.clone());
        }
        let (_client, js) = tokio::time::timeout(
            self.timeout + Duration::from_secs(5),
            ankusa_sinks::nats::intake_connect(&self.cfg),
        )
        .await
        .map_err(|_| "connect: timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
        *slot = Some(js.clone());
        Ok(js)
    }

    fn node_subject(&self, node: &str) -> String {
        format!("{}.{node}", self.subject)
    }

    pub async fn publish(
        &self,
        node: &str,
        payloads: Vec<Vec<u8>>,
    ) -> Result<Vec<Position>, String> {
        let subject = self.node_subject(node);
        let js = self.js().await?;
        let work = async {
            let mut acks = Vec::with_capacity(payloads.len());
            for p in payloads {
                let ack = js
                    .publish(subject.clone(), bytes::Bytes::from(p))
                    .await
                    .map_err(|e| format!("publish: {e}"))?;
                acks.push(ack);
            }
            let mut out = Vec::with_capacity(acks.len());
            let acks = acks.into_iter().map(std::future::IntoFuture::into_future);
            for a in futures::future::join_all(acks).await {
                let a = a.map_err(|e| format!("publish: {e}"))?;
                out.push((0, a.sequence as i64));
            }
            Ok(out)
        };
        tokio::time::timeout(self.timeout + Duration::from_secs(1), work)
            .await
            .map_err(|_| "publish: no ack within publish_timeout_ms".to_string())?
    }

    async fn stream(&self, node: &str) -> Result<async_nats::jetstream::stream::Stream, String> {
        let js = self.js().await?;
        let name = js
            .stream_by_subject(self.node_subject(node))
            .await
            .map_err(|e| format!("no stream holds the intake subject ({e})"))?;
        js.get_stream(name)
            .await
            .map_err(|e| format!("stream: {e}"))
    }

    /// `{0: last sequence + 1}` of the stream holding the node's subject.
    pub async fn end_offsets(&self, node: &str) -> Result<BTreeMap<i32, i64>, String> {
        let info = self
            .stream(node)
            .await?
            .get_info()
            .await
            .map_err(|e| format!("stream info: {e}"))?;
        Ok(BTreeMap::from([(0, info.state.last_sequence as i64 + 1)]))
    }

    pub async fn read_node(
        &self,
        node: &str,
        from: &BTreeMap<i32, i64>,
        mut f: impl FnMut(i32, i64, &[u8]) -> Result<(), String>,
    ) -> Result<u64, String> {
        let stream = self.stream(node).await?;
        // The node's last record now: the read stops there (later ones are this run's).
        let end = match stream
            .get_last_raw_message_by_subject(&self.node_subject(node))
            .await
        {
            Ok(m) => m.sequence,
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => return Ok(0),
            Err(e) => return Err(format!("last record: {e}")),
        };
        let start = from.get(&0).copied().unwrap_or(1).max(1) as u64;
        if start > end {
            return Ok(0);
        }
        let consumer = stream
            .create_consumer(OrderedConfig {
                filter_subject: self.node_subject(node),
                deliver_policy: DeliverPolicy::ByStartSequence {
                    start_sequence: start,
                },
                ..Default::default()
            })
            .await
            .map_err(|e| format!("consumer: {e}"))?;
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| format!("consumer: {e}"))?;
        let mut seen = 0u64;
        loop {
            let next = tokio::time::timeout(Duration::from_secs(60), messages.next())
                .await
                .map_err(|_| "read: no records for 60 s before the end of the log".to_string())?;
            let Some(m) = next else {
                return Err("read: the consumer ended early".into());
            };
            let m = m.map_err(|e| format!("read: {e}"))?;
            let info = m.info().map_err(|e| format!("read: {e}"))?;
            let sseq = info.stream_sequence;
            f(0, sseq as i64, &m.payload)?;
            seen += 1;
            // Caught up with what the node's subject held when the read began.
            if sseq >= end {
                return Ok(seen);
            }
        }
    }
}
