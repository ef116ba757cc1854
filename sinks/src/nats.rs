//! The NATS JetStream sink: publishes the queue message to a subject and answers `Ok` only on
//! the stream's publish ack (`{"stream": .., "seq": n}` with `n > 0`).
//!
//! | Outcome | Result |
//! |---|---|
//! | message + headers over `max_message_bytes` | permanent `message_too_large`, no server call |
//! | message + headers over the server's `max_payload` | permanent `max_payload_exceeded`, no server call |
//! | no stream covers the subject (no responders) | transient `no_stream` (the sink never creates streams) |
//! | an error ack (it carries `seq: 0`), a permission violation | transient, with the server's description |
//! | no ack within `publish_timeout_ms` | transient `publish_timeout` |
//! | the connection is not up | transient `not_connected` (the client reconnects, 2 s backoff at most) |
//!
//! Every publish carries `Nats-Msg-Id` = the hook id, or `<id>:replay:<replay_id>` on a replay,
//! so JetStream's duplicate window collapses a re-send while a deliberate replay is stored.

use std::sync::Arc;
use std::time::Duration;

use ankusa_config::{NatsAuth, NatsSinkConfig};
use ankusa_core::{DeliveryCtx, Envelope, SinkError};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::{ConnectOptions, HeaderMap, ServerAddr};
use bytes::Bytes;
use futures::future::BoxFuture;

use crate::BuildCtx;
use crate::conn::{Conn, Registry, Slot, scrub};
use crate::message::{self, Limits};

#[derive(Clone)]
pub struct NatsConn {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
}

impl Conn for NatsConn {
    fn close(self) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = tokio::time::timeout(Duration::from_secs(2), self.client.drain()).await;
        })
    }
}

pub struct NatsSink {
    slot: Arc<Slot<NatsConn>>,
    cfg: NatsSinkConfig,
    limits: Limits,
    reported_inline: u64,
    secrets: Vec<String>,
}

impl NatsSink {
    pub fn new(cfg: &NatsSinkConfig, ctx: &BuildCtx, registry: &Registry<NatsConn>) -> NatsSink {
        let auth = cfg.auth.clone().unwrap_or_default();
        let secrets: Vec<String> = [&auth.password, &auth.token, &auth.nkey_seed, &auth.jwt]
            .into_iter()
            .flatten()
            .map(|s| s.expose().to_string())
            .collect();
        #[derive(serde::Serialize)]
        struct Key<'a> {
            servers: &'a [String],
            auth: &'a NatsAuth,
            tls: bool,
            publish_timeout_ms: u64,
        }
        let key = crate::shared_key(
            "nats",
            &Key {
                servers: &cfg.servers,
                auth: &auth,
                tls: cfg.tls,
                publish_timeout_ms: cfg.publish_timeout_ms,
            },
        );
        let limits = Limits {
            inline_max: cfg.inline_max_bytes,
            max_message: cfg.max_message_bytes,
        };
        NatsSink {
            slot: registry.slot("nats", &key, cfg.idle_timeout_ms, 2_000),
            cfg: cfg.clone(),
            limits,
            reported_inline: limits.reported_inline_max(ctx.forward_headers_max_bytes),
            secrets,
        }
    }

    fn scrub(&self, text: String) -> String {
        let s: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        scrub(text, &s)
    }

    async fn open(&self) -> Result<NatsConn, String> {
        let mut addrs = Vec::new();
        for s in &self.cfg.servers {
            let a: ServerAddr = s
                .parse()
                .map_err(|e| format!("server address {s:?}: {e}"))?;
            addrs.push(a);
        }
        let mut opts = ConnectOptions::new()
            .name("ankusa")
            .connection_timeout(Duration::from_secs(5))
            .require_tls(self.cfg.tls)
            // Reconnect quickly at first, then every 2 s while the server is away.
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((attempts as u64 * 250).min(2_000))
            });
        if let Some(a) = &self.cfg.auth {
            if let (Some(u), Some(p)) = (&a.username, &a.password) {
                opts = opts.user_and_password(u.expose().to_string(), p.expose().to_string());
            } else if let Some(t) = &a.token {
                opts = opts.token(t.expose().to_string());
            } else if let Some(seed) = &a.nkey_seed {
                let seed = seed.expose();
                match &a.jwt {
                    Some(jwt) => {
                        let kp = Arc::new(
                            nkeys::KeyPair::from_seed(seed)
                                .map_err(|_| "auth.nkey_seed is not an nkey seed".to_string())?,
                        );
                        opts = opts.jwt(jwt.expose().to_string(), move |nonce| {
                            let kp = kp.clone();
                            async move { kp.sign(&nonce).map_err(async_nats::AuthError::new) }
                        });
                    }
                    None => opts = opts.nkey(seed.to_string()),
                }
            }
        }
        let client = opts
            .connect(addrs)
            .await
            .map_err(|e| self.scrub(format!("connect: {e}")))?;
        let js = async_nats::jetstream::context::ContextBuilder::new()
            .timeout(Duration::from_millis(self.cfg.publish_timeout_ms))
            .build(client.clone());
        Ok(NatsConn { client, js })
    }

    async fn attempt(&self, env: &Envelope, ctx: &DeliveryCtx) -> Result<(), SinkError> {
        let attrs = message::attributes(env, ctx);
        let mut headers = HeaderMap::new();
        for (k, v) in &attrs {
            headers.insert(*k, v.as_str());
        }
        let msg_id = message::dedupe_id(env, ctx);
        headers.insert("Nats-Msg-Id", msg_id.as_str());
        // NATS counts the header block (NATS/1.0 line, `name: value\r\n` lines) in max_payload.
        let overhead = 12
            + attrs
                .iter()
                .map(|(k, v)| (k.len() + v.len() + 4) as u64)
                .sum::<u64>()
            + (13 + msg_id.len() + 4) as u64;
        let prepared = message::prepare(env, ctx, self.limits, overhead)?;
        let lease = self.slot.get(|| self.open()).await?;
        let conn = &lease.conn;
        if conn.client.connection_state() != async_nats::connection::State::Connected {
            return Err(SinkError::Transient(
                "not_connected: the NATS connection is down (reconnecting)".into(),
            ));
        }
        let payload = Bytes::from(prepared.json);
        let max_payload = conn.client.server_info().max_payload as u64;
        let total = payload.len() as u64 + overhead;
        if max_payload > 0 && total > max_payload {
            return Err(SinkError::Permanent(format!(
                "max_payload_exceeded: {total} bytes, server max_payload {max_payload}"
            )));
        }
        let publish = PublishMessage::build().payload(payload).headers(headers);
        let ack = match conn
            .js
            .send_publish(self.cfg.subject.clone(), publish)
            .await
        {
            Ok(f) => f.await,
            Err(e) => Err(e),
        };
        match ack {
            Ok(a) if a.sequence > 0 => Ok(()),
            Ok(a) => Err(SinkError::Transient(format!(
                "publish refused: ack from stream {:?} with seq 0",
                a.stream
            ))),
            Err(e) => Err(self.classify(e)),
        }
    }

    fn classify(&self, e: async_nats::jetstream::context::PublishError) -> SinkError {
        match e.kind() {
            PublishErrorKind::MaxPayloadExceeded => {
                SinkError::Permanent(format!("max_payload_exceeded: {e}"))
            }
            PublishErrorKind::StreamNotFound => SinkError::Transient(format!(
                "no_stream: no stream covers subject {}",
                self.cfg.subject
            )),
            PublishErrorKind::TimedOut => SinkError::Transient(format!(
                "publish_timeout: no ack within {} ms",
                self.cfg.publish_timeout_ms
            )),
            PublishErrorKind::BrokenPipe => {
                SinkError::Transient("not_connected: connection lost before the ack".into())
            }
            _ => SinkError::Transient(self.scrub(format!("publish refused: {e}"))),
        }
    }
}

impl_sink!(NatsSink {
    type_name: "nats",
    inline_max_bytes(self) -> Option<u64> {
        Some(self.reported_inline)
    },
});
