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
//! | librdkafka was refused a connection by the connect guard (below) | transient, `... (last client error: egress_denied: <class> (a broker librdkafka connects to))` |
//! | no broker answered the first metadata request | transient `not_connected: <step>: <what> (librdkafka <Code>)`, the step from what librdkafka last reported: `tcp_connect`, `tls_handshake` (with the server certificate's subject, from a handshake of our own against the broker), `auth` (SASL) |
//!
//! Error texts are class words (kafka/errors.rs): librdkafka's own texts, which carry what the
//! broker sent and may quote a refused OAUTHBEARER token, are never passed on or logged.
//!
//! Security: `security_protocol` (plaintext, ssl, sasl_plaintext, sasl_ssl), SASL PLAIN,
//! SCRAM-SHA-256/512 and OAUTHBEARER (the token from the config or a file, handed to librdkafka
//! at each refresh it asks for), and the shared `tls:` settings as librdkafka's PEM properties
//! (read at every producer open, so a rotated file is picked up); broker host names are always
//! checked unless `insecure_skip_verify`.
//!
//! librdkafka owns reconnects, leader changes and metadata; the producer is one per broker list
//! and credentials, opened on first use and closed when idle. Every connection librdkafka opens
//! passes the connect guard (kafka/connect.rs): the address librdkafka resolved is checked
//! against the egress policy and connected to by the guard itself, so neither librdkafka's own
//! lookups nor a broker the cluster advertises later can take it elsewhere. Opening a producer
//! also checks the names, for errors that name the field: the bootstrap brokers before the
//! producer is made, then the brokers the cluster advertises (a metadata request, before
//! anything is produced).

mod connect;
mod errors;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ankusa_config::{
    KafkaSasl, KafkaSaslMechanism, KafkaSecurityProtocol, KafkaSinkConfig, SinkTls,
};
use ankusa_core::{DeliveryCtx, Envelope, SinkError};
use futures::future::BoxFuture;
use rdkafka::ClientConfig;
use rdkafka::client::{ClientContext, OAuthToken};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use crate::BuildCtx;
use crate::conn::{Conn, Registry, Slot, scrub};
use crate::egress::{EgressTarget, Policy};
use crate::message::{self, Limits};
use crate::tls;
pub use connect::{Guard, Guarded, refused_connects};
pub use errors::{ClientFailure, check_token, classify_code, connect_step};
use errors::{LastError, request_error};

/// Where an OAUTHBEARER token comes from.
#[derive(Clone)]
enum OauthSource {
    Token(String),
    File(PathBuf),
}

/// What the sink hands librdkafka and learns back from it: the last error it reported (a
/// refused connection, handshake or login, which a produce only sees as a timeout) and the
/// OAUTHBEARER token on each refresh.
pub struct KafkaContext {
    last_error: LastError,
    oauth: Option<(OauthSource, Option<String>)>,
}

impl KafkaContext {
    /// The context of a client that is not a sink (the intake log): no OAUTHBEARER.
    pub fn plain() -> KafkaContext {
        KafkaContext {
            last_error: LastError::default(),
            oauth: None,
        }
    }
}

impl ClientContext for KafkaContext {
    // librdkafka asks only when the mechanism is OAUTHBEARER.
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    /// librdkafka's log lines carry broker-sent text: only their facility and class are logged.
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        let class = connect_step(log_message);
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error
            | RDKafkaLogLevel::Warning => {
                tracing::debug!(facility = fac, class, "librdkafka warning")
            }
            _ => tracing::trace!(facility = fac, class, "librdkafka"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.last_error.note(&error, reason);
        tracing::debug!(failure = %ClientFailure::of(&error, reason), "kafka client error");
    }

    fn generate_oauth_token(
        &self,
        _oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
        let Some((source, principal)) = &self.oauth else {
            return Err("no oauthbearer token is configured (sasl.token, sasl.token_file)".into());
        };
        let token = match source {
            OauthSource::Token(t) => t.clone(),
            // Through `files`: never one of the gateway's own files, at most 1 MiB.
            OauthSource::File(p) => crate::files::read_to_string("sasl.token_file", p)
                .map_err(|e| e.to_string())?
                .trim()
                .to_string(),
        };
        if token.is_empty() {
            return Err("sasl.token_file: the file is empty".into());
        }
        // librdkafka's own refusal of such a token would quote it into its error.
        check_token(&token)?;
        Ok(oauth_token(token, principal.as_deref(), unix_ms()))
    }
}

// The intake log's reader (`intake_consumer`) is a consumer: librdkafka's defaults.
impl ConsumerContext for KafkaContext {}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A token and when librdkafka should consider it expired: a JWT's `exp` (and its `sub` as the
/// principal unless `sasl.username` names one); an opaque token is given 15 minutes, so a
/// token file is re-read about every 12 (librdkafka refreshes at 80% of the lifetime).
pub fn oauth_token(token: String, principal: Option<&str>, now_ms: i64) -> OAuthToken {
    #[derive(serde::Deserialize)]
    struct Claims {
        exp: Option<i64>,
        sub: Option<String>,
    }
    use base64::Engine;
    let claims = token
        .split('.')
        .nth(1)
        .and_then(|p| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p.trim_end_matches('='))
                .ok()
        })
        .and_then(|b| serde_json::from_slice::<Claims>(&b).ok());
    let (exp, sub) = match claims {
        Some(c) => (c.exp, c.sub),
        None => (None, None),
    };
    let lifetime_ms = exp
        .map(|e| e.saturating_mul(1000))
        .filter(|&e| e > now_ms)
        .unwrap_or(now_ms + 15 * 60 * 1000);
    let principal_name = principal
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .or(sub)
        .unwrap_or_else(|| "ankusa".to_string());
    OAuthToken {
        token,
        principal_name,
        lifetime_ms,
    }
}

/// A guarded producer (kafka/connect.rs) and what its context learned of librdkafka's errors.
#[derive(Clone)]
pub struct KafkaConn(Arc<Guarded<FutureProducer<KafkaContext>>>, LastError);

impl Conn for KafkaConn {
    fn close(self) -> BoxFuture<'static, ()> {
        // Dropping the last producer handle joins librdkafka's threads: keep it off the
        // async workers.
        Box::pin(async move {
            let _ = tokio::task::spawn_blocking(move || drop(self)).await;
        })
    }
}

/// What every producer of ours sets: the brokers, `acks=all`, the produce timeout and record
/// size, keepalive. A topic is an operator's contract (partitions, retention): never
/// auto-created.
fn producer_base(cfg: &KafkaSinkConfig, client_id: &str) -> ClientConfig {
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", bootstrap(&cfg.brokers))
        .set("client.id", client_id)
        .set("acks", "all")
        .set("allow.auto.create.topics", "false")
        .set("message.timeout.ms", cfg.produce_timeout_ms.to_string())
        .set(
            "message.max.bytes",
            cfg.max_record_bytes
                .saturating_add(65_536)
                .clamp(1_000_000, 1_000_000_000)
                .to_string(),
        )
        .set("socket.keepalive.enable", "true");
    client
}

/// The librdkafka settings of a producer described by a Kafka sink's keys that is not a sink:
/// the intake log of `wal.type: dual`. Idempotent with `acks=all`, so a retried produce lands
/// once and one key's records keep their order. OAUTHBEARER is refused here (its token
/// refresh lives in the sink's client context).
pub fn intake_client_config(cfg: &KafkaSinkConfig, p: &str) -> Result<ClientConfig, String> {
    let mut client = producer_base(cfg, "ankusa-intake");
    client
        .set("enable.idempotence", "true")
        .set("max.in.flight.requests.per.connection", "5")
        .set("linger.ms", "1");
    let protocol = cfg.protocol();
    client.set("security.protocol", protocol.as_str());
    if let Some(s) = &cfg.sasl {
        if s.mechanism == KafkaSaslMechanism::Oauthbearer {
            return Err(format!(
                "{p}.sasl.mechanism: oauthbearer is not supported for the intake log"
            ));
        }
        client
            .set("sasl.mechanisms", s.mechanism.librdkafka_name())
            .set("sasl.username", s.username.expose())
            .set("sasl.password", s.password.expose());
    }
    if protocol.tls() {
        let t = cfg.tls.clone().unwrap_or_default();
        apply_tls(&mut client, &t).map_err(|e| format!("{p}.tls: {e}"))?;
    }
    Ok(client)
}

/// The intake log's producer, from `intake_client_config`'s settings: its connections pass the
/// connect guard under the intake policy (`egress::intake_policy`).
pub fn intake_producer(
    client: &ClientConfig,
) -> Result<Guarded<FutureProducer<KafkaContext>>, String> {
    connect::create(
        client,
        Guard::new(crate::egress::intake_policy(), "intake"),
        |c| c.create_with_context(KafkaContext::plain()),
        |p: &FutureProducer<KafkaContext>| p.client().native_ptr(),
    )
    .map_err(|e| e.to_string())
}

/// The intake log's reader, from consumer settings derived from `intake_client_config`'s:
/// guarded like `intake_producer`.
pub fn intake_consumer(
    client: &ClientConfig,
) -> Result<Guarded<BaseConsumer<KafkaContext>>, String> {
    connect::create(
        client,
        Guard::new(crate::egress::intake_policy(), "intake"),
        |c| c.create_with_context(KafkaContext::plain()),
        |c: &BaseConsumer<KafkaContext>| c.client().native_ptr(),
    )
    .map_err(|e| e.to_string())
}

/// The TLS material (read now, so a rotated file is picked up at the next open) and the
/// certificate checks of `t`.
fn apply_tls(client: &mut ClientConfig, t: &SinkTls) -> Result<(), String> {
    let m = tls::material(t).map_err(|e| e.to_string())?;
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    if let Some(ca) = m.ca_pem {
        client.set("ssl.ca.pem", text(ca));
    }
    if let Some(cert) = m.cert_pem {
        client.set("ssl.certificate.pem", text(cert));
    }
    if let Some(key) = m.key_pem {
        client.set("ssl.key.pem", text(key));
    }
    if t.insecure_skip_verify {
        client
            .set("enable.ssl.certificate.verification", "false")
            .set("ssl.endpoint.identification.algorithm", "none");
    } else {
        client.set("ssl.endpoint.identification.algorithm", "https");
    }
    Ok(())
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
    /// `ssl`/`sasl_ssl`: the CA, client certificate and checks (an empty one: system roots).
    tls: Option<SinkTls>,
    oauth: Option<(OauthSource, Option<String>)>,
    /// The first bootstrap broker, where a refused handshake is probed for the certificate.
    first_broker: Option<(String, u16)>,
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
        let mut client = producer_base(cfg, "ankusa");
        client
            .set("enable.idempotence", "false")
            .set("linger.ms", "2")
            // An unknown topic fails its records after this long instead of 30 s, well inside
            // the produce timeout, so it is reported as unknown_topic rather than a timeout.
            .set(
                "topic.metadata.propagation.max.ms",
                (cfg.produce_timeout_ms / 2).max(1).to_string(),
            );
        let protocol = cfg.protocol();
        client.set("security.protocol", protocol.as_str());
        let mut secrets = Vec::new();
        let mut oauth = None;
        if let Some(s) = &cfg.sasl {
            client.set("sasl.mechanisms", s.mechanism.librdkafka_name());
            if s.mechanism == KafkaSaslMechanism::Oauthbearer {
                let source = match (&s.token, &s.token_file) {
                    (Some(t), _) => {
                        secrets.push(t.expose().to_string());
                        OauthSource::Token(t.expose().to_string())
                    }
                    (None, Some(f)) => OauthSource::File(f.to_path_buf()),
                    (None, None) => OauthSource::Token(String::new()),
                };
                let principal = Some(s.username.expose().to_string()).filter(|u| !u.is_empty());
                oauth = Some((source, principal));
            } else {
                client
                    .set("sasl.username", s.username.expose())
                    .set("sasl.password", s.password.expose());
                secrets.push(s.password.expose().to_string());
            }
        }
        #[derive(serde::Serialize)]
        struct Key<'a> {
            servers: &'a str,
            sasl: &'a Option<KafkaSasl>,
            protocol: KafkaSecurityProtocol,
            tls: &'a Option<SinkTls>,
            produce_timeout_ms: u64,
            max_record_bytes: u64,
            egress: &'a ankusa_config::AddressPolicy,
        }
        let key = crate::shared_key(
            "kafka",
            &Key {
                servers: &servers,
                sasl: &cfg.sasl,
                protocol,
                tls: &cfg.tls,
                produce_timeout_ms: cfg.produce_timeout_ms,
                max_record_bytes: cfg.max_record_bytes,
                egress: ctx.policy.addresses(),
            },
        );
        let targets = cfg.egress_targets();
        let first_broker = targets.first().map(|t| (t.host.clone(), t.port));
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
            targets,
            tls: protocol.tls().then(|| cfg.tls.clone().unwrap_or_default()),
            oauth,
            first_broker,
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
            Ok(Err((e, _msg))) => Err(self.classify(e, &lease.conn)),
        }
    }

    /// A guarded producer whose bootstrap and advertised brokers all pass the egress policy.
    async fn open(&self) -> Result<KafkaConn, String> {
        // The names first, for an error that names the field; the connect guard checks every
        // address librdkafka connects to.
        self.policy
            .check_targets(&self.targets)
            .await
            .map_err(|e| e.to_string())?;
        let client = self.client_config()?;
        let last_error = LastError::default();
        let context = KafkaContext {
            last_error: last_error.clone(),
            oauth: self.oauth.clone(),
        };
        let guard = Guard::new(self.policy.addresses().clone(), "sink");
        let producer = connect::create(
            &client,
            guard,
            |c| c.create_with_context(context),
            |p: &FutureProducer<KafkaContext>| p.client().native_ptr(),
        )
        .map(|p| KafkaConn(Arc::new(p), last_error))
        .map_err(|e| e.to_string())?;
        match self.check_advertised(&producer).await {
            Ok(()) => {
                producer.1.clear();
                Ok(producer)
            }
            Err(e) => {
                let e = self.connect_error(&producer, e).await;
                producer.close().await;
                Err(e)
            }
        }
    }

    /// The client settings with the TLS material read now (a rotated file is picked up at the
    /// next open).
    fn client_config(&self) -> Result<ClientConfig, String> {
        let mut client = self.client.clone();
        let Some(t) = &self.tls else {
            return Ok(client);
        };
        apply_tls(&mut client, t).map_err(|e| format!("tls_setup: {e}"))?;
        Ok(client)
    }

    /// A producer that could not fetch metadata: a connection the guard refused, else the step
    /// librdkafka last failed at, and for a refused TLS handshake the server certificate, named
    /// by a handshake of our own (OpenSSL's text does not carry it) to an address the policy
    /// checked.
    async fn connect_error(&self, producer: &KafkaConn, fallback: String) -> String {
        if let Some(denied) = producer.0.guard().last_refusal() {
            return format!("egress_denied: {denied} (a broker librdkafka connects to)");
        }
        let Some(failure) = producer.1.get() else {
            return fallback;
        };
        if failure.step == "tls_handshake"
            && let (Some(t), Some((host, _))) = (&self.tls, &self.first_broker)
            && let Some(target) = self.targets.first()
            && let Ok(addrs) = self.policy.check_target(target).await
            && let Err(line) = tls::probe(&addrs, host, t, Duration::from_secs(3)).await
            && line.starts_with("tls_handshake")
        {
            return self.scrub(line);
        }
        failure.to_string()
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
        .map_err(|e| format!("kafka metadata: {}", request_error(&e)))?;
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

    fn classify(&self, e: KafkaError, producer: &KafkaConn) -> SinkError {
        let Some(code) = e.rdkafka_error_code() else {
            return SinkError::Transient(format!("kafka: {}", request_error(&e)));
        };
        match classify_code(code, &self.topic, self.produce_timeout) {
            // A broker lost (or refused) after the producer opened: say what librdkafka last
            // hit.
            SinkError::Transient(m) => {
                if let Some(denied) = producer.0.guard().last_refusal() {
                    return SinkError::Transient(format!(
                        "{m} (last client error: egress_denied: {denied} (a broker librdkafka \
                         connects to))"
                    ));
                }
                match producer.1.get() {
                    Some(failure) => {
                        SinkError::Transient(format!("{m} (last client error: {failure})"))
                    }
                    None => SinkError::Transient(m),
                }
            }
            other => other,
        }
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
    fn oauth_token_lifetime_and_principal() {
        use base64::Engine;
        let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let now = 1_800_000_000_000;
        let jwt = format!(
            "{}.{}.sig",
            b64(r#"{"alg":"none"}"#),
            b64(r#"{"sub":"svc-hooks","exp":1800000600}"#)
        );
        let t = oauth_token(jwt.clone(), None, now);
        assert_eq!(t.lifetime_ms, 1_800_000_600_000);
        assert_eq!(t.principal_name, "svc-hooks");
        let t = oauth_token(jwt, Some("named"), now);
        assert_eq!(t.principal_name, "named");
        // Opaque (or expired) tokens get 15 minutes; the principal falls back to ankusa.
        let t = oauth_token("opaque-token".into(), None, now);
        assert_eq!(t.lifetime_ms, now + 900_000);
        assert_eq!(t.principal_name, "ankusa");
    }
}
