//! The RabbitMQ sink: publishes the queue message to an exchange, always mandatory and
//! persistent, on a confirm-mode channel, and answers `Ok` only on the broker's confirm of a
//! message that was not returned (at least one bound queue took it).
//!
//! | Result | Meaning (every error is transient: the retry policy) |
//! |---|---|
//! | `Ok` | confirmed and not returned |
//! | `unroutable: <routing key>` | the exchange routed it to no queue |
//! | `nacked` | the broker refused it (e.g. a queue's reject-publish overflow) |
//! | `confirm_timeout` | no confirm within `confirm_timeout_ms` |
//! | `busy` | `max_inflight` publishes already await confirms on this connection; nothing sent |
//! | `channel_closed: <reason>` | the broker closed the channel (a deleted exchange is a 404) |
//! | `publish_failed: <reason>` | the publish itself failed |
//! | `not_connected: <reason>` | no connection; redialed after `retry_ms` |
//! | `not_connected: tcp_connect: <why>` | the broker's address did not accept the connection |
//! | `not_connected: tls_handshake: <why> [subject ...]` | `amqps://`: the server certificate (named) or the client certificate was refused |
//! | `not_connected: auth: <why>` | the broker refused the credentials (PLAIN) or the client certificate's user (EXTERNAL) |
//! | `not_connected: egress_denied: <class> (url)` | the broker's name resolves to an address `egress` refuses; nothing dialed |
//!
//! One connection and confirm-mode channel per (url, exchange), opened on first use, after the
//! broker's addresses pass the egress policy (lapin's own recovery stays off, so every
//! connection is one of these dials). The
//! exchange is declared (durable, idempotent); queues are never declared: binding them is the
//! consumer's job. After a channel or connection error the pair is dropped and the next
//! delivery reopens both (re-declaring the exchange). A delivery cancelled by its caller (the
//! attempt timeout) is never published afterwards: publishing happens inside the caller's
//! future, so there is no mailbox for it to wait in (the spec's `expired`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ankusa_config::{AmqpAuthMechanism, ExchangeType, RabbitmqSinkConfig, SinkTls};
use ankusa_core::{DeliveryCtx, Envelope, SinkError};
use futures::future::BoxFuture;
use lapin::Confirmation;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::tcp::{AsyncTcpStream, RustlsConnector};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::uri::{AMQPScheme, AMQPUri, SASLMechanism};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use tokio::sync::Semaphore;

use crate::BuildCtx;
use crate::conn::{Conn, Registry, Slot, digest, scrub, url_secrets};
use crate::egress::{EgressTarget, Policy};
use crate::message::{self, Limits};
use crate::tls;

/// How long a dial (TCP, AMQP handshake, channel, declare) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Amqp {
    connection: Connection,
    channel: Channel,
    permits: Arc<Semaphore>,
}

#[derive(Clone)]
pub struct RabbitConn(Arc<Amqp>);

impl Conn for RabbitConn {
    fn close(self) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                self.0
                    .connection
                    .close(200, "ankusa: connection closed".into()),
            )
            .await;
        })
    }
}

pub struct RabbitmqSink {
    slot: Arc<Slot<RabbitConn>>,
    url: String,
    exchange: String,
    kind: ExchangeType,
    routing_key: Option<String>,
    limits: Limits,
    max_inflight: usize,
    confirm_timeout: Duration,
    secrets: Vec<String>,
    policy: Policy,
    targets: Vec<EgressTarget>,
    /// `amqps://`: how the server is verified (the system's roots when `tls:` is absent).
    tls: Option<Arc<SinkTls>>,
    external: bool,
}

/// The step a dial failed at, noted by the transport callback lapin runs (its own error
/// would only say "IO error").
#[derive(Clone, Default)]
struct Step(Arc<Mutex<Option<String>>>);

impl Step {
    fn note(&self, text: String) {
        if let Ok(mut g) = self.0.lock() {
            *g = Some(text);
        }
    }

    fn take(&self) -> Option<String> {
        self.0.lock().ok().and_then(|mut g| g.take())
    }
}

/// An AMQP error after the transport was up: a refused login is the `auth` step.
fn amqp_step(e: &lapin::Error) -> String {
    let text = e.to_string();
    let upper = text.to_ascii_uppercase();
    if upper.contains("ACCESS_REFUSED")
        || upper.contains("ACCESSREFUSED")
        || upper.contains("AUTHENTICATION")
        || upper.contains("MECHANISM")
    {
        format!("auth: {text}")
    } else {
        format!("connect: {text}")
    }
}

impl RabbitmqSink {
    pub fn new(
        cfg: &RabbitmqSinkConfig,
        ctx: &BuildCtx,
        registry: &Registry<RabbitConn>,
    ) -> RabbitmqSink {
        let key = digest(&[
            "rabbitmq",
            cfg.url.expose(),
            &cfg.exchange,
            cfg.exchange_type.as_str(),
            &cfg.max_inflight.to_string(),
            &crate::policy_key(&ctx.policy),
            // A changed CA, certificate or mechanism is a new connection (hot reload).
            &serde_json::to_string(&cfg.tls).unwrap_or_default(),
            cfg.auth_mechanism.as_str(),
        ]);
        let secrets = url_secrets(cfg.url.expose());
        RabbitmqSink {
            slot: registry.slot("rabbitmq", &key, cfg.idle_timeout_ms, cfg.retry_ms),
            url: cfg.url.expose().to_string(),
            exchange: cfg.exchange.clone(),
            kind: cfg.exchange_type,
            routing_key: cfg.routing_key.clone(),
            limits: Limits {
                inline_max: cfg.inline_max_bytes,
                max_message: u64::MAX,
            },
            max_inflight: cfg.max_inflight.max(1) as usize,
            confirm_timeout: Duration::from_millis(cfg.confirm_timeout_ms),
            secrets,
            policy: ctx.policy.clone(),
            targets: cfg.egress_targets(),
            tls: cfg
                .url
                .expose()
                .starts_with("amqps:")
                .then(|| Arc::new(cfg.tls.clone().unwrap_or_default())),
            external: cfg.auth_mechanism == AmqpAuthMechanism::External,
        }
    }

    fn scrub(&self, text: String) -> String {
        let s: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        scrub(text, &s)
    }

    async fn open(&self) -> Result<RabbitConn, String> {
        let step = Step::default();
        let dial = async {
            // Before lapin is pointed at the broker; it resolves the name again itself.
            self.policy
                .check_targets(&self.targets)
                .await
                .map_err(|e| e.to_string())?;
            let props = ConnectionProperties::default().with_connection_name("ankusa".into());
            let connection = self.connect(props, &step).await?;
            let channel = connection
                .create_channel()
                .await
                .map_err(|e| format!("channel: {e}"))?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(|e| format!("confirm.select: {e}"))?;
            let kind = match self.kind {
                ExchangeType::Topic => ExchangeKind::Topic,
                ExchangeType::Direct => ExchangeKind::Direct,
                ExchangeType::Fanout => ExchangeKind::Fanout,
                ExchangeType::Headers => ExchangeKind::Headers,
            };
            channel
                .exchange_declare(
                    self.exchange.as_str().into(),
                    kind,
                    ExchangeDeclareOptions {
                        durable: true,
                        ..ExchangeDeclareOptions::default()
                    },
                    FieldTable::default(),
                )
                .await
                .map_err(|e| format!("exchange.declare {}: {e}", self.exchange))?;
            Ok::<_, String>(RabbitConn(Arc::new(Amqp {
                connection,
                channel,
                permits: Arc::new(Semaphore::new(self.max_inflight)),
            })))
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, dial).await {
            Ok(r) => r.map_err(|e| self.scrub(e)),
            // lapin may keep redialing a refused transport until the deadline: name the step
            // it last failed at.
            Err(_) => Err(self.scrub(step.take().unwrap_or_else(|| "connect: timed out".into()))),
        }
    }

    /// TCP, then (for `amqps://`) TLS with the sink's own rustls config, then the AMQP
    /// handshake; a failure names its step.
    async fn connect(
        &self,
        props: ConnectionProperties,
        step: &Step,
    ) -> Result<Connection, String> {
        let mut uri: AMQPUri = self
            .url
            .parse()
            .map_err(|e: String| format!("url: {}", self.scrub(e)))?;
        if self.external {
            uri.query.auth_mechanism = Some(SASLMechanism::External);
        }
        let runtime = lapin::runtime::default_runtime().map_err(|e| format!("connect: {e}"))?;
        let tls = self.tls.clone();
        let noted = step.clone();
        Connection::connector(
            uri,
            runtime,
            async move |uri: AMQPUri, runtime| {
                let host = uri.authority.host.clone();
                let addrs = runtime.to_socket_addrs((host.clone(), uri.authority.port));
                let stream = AsyncTcpStream::connect(&runtime, addrs)
                    .await
                    .inspect_err(|e| noted.note(format!("tcp_connect: {e}")))?;
                let Some(t) = tls.as_ref().filter(|_| uri.scheme == AMQPScheme::AMQPS) else {
                    return Ok(stream);
                };
                let (config, peer) = tls::client_config_with_peer(t).map_err(|e| {
                    noted.note(format!("tls_setup: {e}"));
                    std::io::Error::other("tls_setup")
                })?;
                let connector = RustlsConnector::from(Arc::new(config));
                stream
                    .into_rustls(&connector, &host)
                    .await
                    .inspect_err(|e| noted.note(tls::handshake_error(e, &peer)))
                    .map_err(lapin::Error::from)
            },
            props,
        )
        .await
        .map_err(|e| step.take().unwrap_or_else(|| amqp_step(&e)))
    }

    async fn attempt(&self, env: &Envelope, ctx: &DeliveryCtx) -> Result<(), SinkError> {
        let prepared = message::prepare(env, ctx, self.limits, 0)?;
        let routing_key = self
            .routing_key
            .clone()
            .unwrap_or_else(|| format!("ankusa.{}", env.source_id));
        let rk = ShortString::try_new(routing_key.clone())
            .map_err(|_| SinkError::Permanent("routing key longer than 255 bytes".into()))?;
        let lease = self.slot.get(|| self.open()).await?;
        let amqp = &lease.conn.0;
        if !amqp.channel.status().connected() {
            lease.invalidate();
            return Err(SinkError::Transient(
                "not_connected: channel is not open".into(),
            ));
        }
        let Ok(_permit) = amqp.permits.clone().try_acquire_owned() else {
            return Err(SinkError::Transient(format!(
                "busy: {} publishes already await confirms",
                self.max_inflight
            )));
        };
        let mut headers = FieldTable::default();
        for (k, v) in message::attributes(env, ctx) {
            headers.insert(k.into(), AMQPValue::LongString(LongString::from(v)));
        }
        let props = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_delivery_mode(2)
            .with_message_id(env.id.to_string().into())
            .with_timestamp(env.received_at / 1000)
            .with_app_id("ankusa".into())
            .with_headers(headers);
        let confirm = amqp
            .channel
            .basic_publish(
                self.exchange.as_str().into(),
                rk,
                BasicPublishOptions {
                    mandatory: true,
                    immediate: false,
                },
                &prepared.json,
                props,
            )
            .await;
        let confirm = match confirm {
            Ok(c) => c,
            Err(e) => {
                let closed = !amqp.channel.status().connected();
                lease.invalidate();
                let kind = if closed {
                    "channel_closed"
                } else {
                    "publish_failed"
                };
                return Err(SinkError::Transient(self.scrub(format!("{kind}: {e}"))));
            }
        };
        match tokio::time::timeout(self.confirm_timeout, confirm).await {
            Err(_) => Err(SinkError::Transient(format!(
                "confirm_timeout: no confirm within {} ms",
                self.confirm_timeout.as_millis()
            ))),
            Ok(Err(e)) => {
                lease.invalidate();
                Err(SinkError::Transient(
                    self.scrub(format!("channel_closed: {e}")),
                ))
            }
            Ok(Ok(Confirmation::Ack(None))) => Ok(()),
            Ok(Ok(Confirmation::Ack(Some(_returned)))) => {
                Err(SinkError::Transient(format!("unroutable: {routing_key}")))
            }
            Ok(Ok(Confirmation::Nack(_))) => Err(SinkError::Transient("nacked".into())),
            Ok(Ok(Confirmation::NotRequested)) => {
                lease.invalidate();
                Err(SinkError::Transient(
                    "publish_failed: the channel is not in confirm mode".into(),
                ))
            }
        }
    }
}

impl_sink!(RabbitmqSink {
    type_name: "rabbitmq",
    inline_max_bytes(self) -> Option<u64> {
        Some(self.limits.inline_max)
    },
});
