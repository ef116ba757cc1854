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
//! | `channel_closed: <class>` | the broker closed the channel (a deleted exchange is `NOT-FOUND (404)`) |
//! | `publish_failed: <class>` | the publish itself failed |
//! | `not_connected: <class>` | no connection; redialed after `retry_ms` |
//! | `not_connected: tcp_connect: <kind>` | the broker's address did not accept the connection |
//! | `not_connected: tls_handshake: <why> [subject ...]` | `amqps://`: the server certificate (named) or the client certificate was refused |
//! | `not_connected: auth: <class>` | the broker refused the credentials (PLAIN) or the client certificate's user (EXTERNAL) |
//! | `not_connected: egress_denied: <class> (url)` | the broker's name resolves to an address `egress` refuses; nothing dialed |
//!
//! A `<class>` is the AMQP reply code and its name (`ACCESS-REFUSED (403)`) or the kind of a
//! client-side failure: the broker's reply text is never passed on.
//!
//! One connection and confirm-mode channel per (url, exchange), opened on first use. Every TCP
//! connect, lapin's own redials of a dial included, goes to an address the sink has just checked
//! against the egress policy (the transport callback resolves the name through the policy and
//! connects to those addresses: lapin never resolves the name); lapin's recovery stays off. The
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
use lapin::protocol::AMQPErrorKind;
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

/// An AMQP error after the transport was up: a refused login is the `auth` step. The text
/// only classifies; it is not passed on.
fn amqp_step(e: &lapin::Error) -> String {
    let upper = e.to_string().to_ascii_uppercase();
    let refused_login = matches!(e.kind(), lapin::ErrorKind::ProtocolError(a) if a.get_id() == 403)
        || upper.contains("ACCESS_REFUSED")
        || upper.contains("ACCESSREFUSED")
        || upper.contains("AUTHENTICATION")
        || upper.contains("MECHANISM");
    if refused_login {
        format!("auth: {}", amqp_class(e))
    } else {
        format!("connect: {}", amqp_class(e))
    }
}

/// An AMQP error in class words: the reply code and its name for what the broker refused
/// (`ACCESS-REFUSED (403)`, `NOT-FOUND (404)`), the kind of anything else. The broker's reply
/// text (which may quote names from the request) is not kept.
pub fn amqp_class(e: &lapin::Error) -> String {
    use lapin::ErrorKind as K;
    match e.kind() {
        K::ProtocolError(a) => {
            let name = match a.kind() {
                AMQPErrorKind::Soft(s) => s.to_string(),
                AMQPErrorKind::Hard(h) => h.to_string(),
            };
            format!("{name} ({})", a.get_id())
        }
        K::IOError(io) | K::RuntimeShutdownError(io) => format!("io: {}", io.kind()),
        K::InvalidConnectionState(s) => format!("the connection is {s:?}"),
        K::InvalidChannelState(s, _) => format!("the channel is {s:?}"),
        K::ParsingError(_) => "a frame from the broker did not parse".into(),
        K::MissingHeartbeatError => "the broker missed its heartbeats".into(),
        K::AuthProviderError(_) => "the credentials could not be prepared".into(),
        K::ChannelsLimitReached => "the connection's channel limit is reached".into(),
        K::InvalidProtocolVersion(_) => "the broker speaks another AMQP version".into(),
        _ => "client error".into(),
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
                .map_err(|e| format!("channel: {}", amqp_class(&e)))?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(|e| format!("confirm.select: {}", amqp_class(&e)))?;
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
                .map_err(|e| format!("exchange.declare {}: {}", self.exchange, amqp_class(&e)))?;
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

    /// TCP to an address the policy has just checked, then (for `amqps://`) TLS with the sink's
    /// own rustls config for the URL's host, then the AMQP handshake; a failure names its step.
    async fn connect(
        &self,
        props: ConnectionProperties,
        step: &Step,
    ) -> Result<Connection, String> {
        let mut uri: AMQPUri = self
            .url
            .parse()
            .map_err(|_: String| "url: does not parse as an AMQP URL".to_string())?;
        if self.external {
            uri.query.auth_mechanism = Some(SASLMechanism::External);
        }
        let target = self.targets.first().cloned().ok_or("url: names no host")?;
        let runtime = lapin::runtime::default_runtime()
            .map_err(|e| format!("connect: {}", amqp_class(&e)))?;
        let tls = self.tls.clone();
        let noted = step.clone();
        let policy = self.policy.clone();
        Connection::connector(
            uri,
            runtime,
            // lapin calls this for each TCP dial it makes: each resolves through the policy.
            async move |uri: AMQPUri, runtime| {
                let host = uri.authority.host.clone();
                let addrs = policy.check_target(&target).await.map_err(|e| {
                    noted.note(e.to_string());
                    std::io::Error::other("egress")
                })?;
                let stream = AsyncTcpStream::connect(&runtime, addrs)
                    .await
                    .inspect_err(|e| noted.note(format!("tcp_connect: {}", e.kind())))?;
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
        let props = properties(env, ctx);
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
                return Err(SinkError::Transient(format!("{kind}: {}", amqp_class(&e))));
            }
        };
        match tokio::time::timeout(self.confirm_timeout, confirm).await {
            Err(_) => Err(SinkError::Transient(format!(
                "confirm_timeout: no confirm within {} ms",
                self.confirm_timeout.as_millis()
            ))),
            Ok(Err(e)) => {
                lease.invalidate();
                Err(SinkError::Transient(format!(
                    "channel_closed: {}",
                    amqp_class(&e)
                )))
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

/// The AMQP properties of a hook's message: persistent, JSON, the hook id as `message-id`, and
/// the `ankusa_*` metadata as headers (`message::attributes`). Public so that a benchmark
/// driving the broker alone publishes exactly what the sink does.
pub fn properties(env: &Envelope, ctx: &DeliveryCtx) -> BasicProperties {
    let mut headers = FieldTable::default();
    for (k, v) in message::attributes(env, ctx) {
        headers.insert(k.into(), AMQPValue::LongString(LongString::from(v)));
    }
    BasicProperties::default()
        .with_content_type("application/json".into())
        .with_delivery_mode(2)
        .with_message_id(env.id.to_string().into())
        .with_timestamp(env.received_at / 1000)
        .with_app_id("ankusa".into())
        .with_headers(headers)
}

impl_sink!(RabbitmqSink {
    type_name: "rabbitmq",
    inline_max_bytes(self) -> Option<u64> {
        Some(self.limits.inline_max)
    },
});

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::protocol::{AMQPError, AMQPSoftError};

    /// The broker's reply text (which may quote what the client sent) does not reach the
    /// error: the reply code and its name do.
    #[test]
    fn a_planted_secret_in_a_broker_reply_never_reaches_the_text() {
        let refused: lapin::Error = lapin::ErrorKind::ProtocolError(AMQPError::new(
            AMQPSoftError::ACCESSREFUSED.into(),
            "ACCESS_REFUSED - Login was refused for planted-secret-pw".into(),
        ))
        .into();
        assert_eq!(amqp_step(&refused), "auth: ACCESS-REFUSED (403)");
        let gone: lapin::Error = lapin::ErrorKind::ProtocolError(AMQPError::new(
            AMQPSoftError::NOTFOUND.into(),
            "NOT_FOUND - no exchange 'planted-secret' in vhost '/'".into(),
        ))
        .into();
        assert_eq!(amqp_class(&gone), "NOT-FOUND (404)");
        let io: lapin::Error =
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "planted-secret").into();
        assert_eq!(amqp_step(&io), "connect: io: broken pipe");
    }
}
