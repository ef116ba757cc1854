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
//! | no broker answered the first metadata request | transient `not_connected: <step>: <why>`, the step from what librdkafka last reported: `tcp_connect`, `tls_handshake` (with the server certificate's subject, from a handshake of our own against the broker), `auth` (SASL) |
//!
//! Security: `security_protocol` (plaintext, ssl, sasl_plaintext, sasl_ssl), SASL PLAIN,
//! SCRAM-SHA-256/512 and OAUTHBEARER (the token from the config or a file, handed to librdkafka
//! at each refresh it asks for), and the shared `tls:` settings as librdkafka's PEM properties
//! (read at every producer open, so a rotated file is picked up); broker host names are always
//! checked unless `insecure_skip_verify`.
//!
//! librdkafka owns reconnects, leader changes and metadata; the producer is one per broker list
//! and credentials, opened on first use and closed when idle. Opening it checks the egress
//! policy twice: the bootstrap brokers' addresses before librdkafka is given them, then the
//! brokers the cluster advertises (a metadata request, before anything is produced), since
//! librdkafka connects to those too. What librdkafka resolves or learns later (its own
//! reconnects, a broker advertised afterwards) is checked when the producer is next opened;
//! docs/sinks.md (Egress) states that window.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ankusa_config::{
    KafkaSasl, KafkaSaslMechanism, KafkaSecurityProtocol, KafkaSinkConfig, SinkTls,
};
use ankusa_core::{DeliveryCtx, Envelope, SinkError};
use futures::future::BoxFuture;
use rdkafka::ClientConfig;
use rdkafka::client::{ClientContext, OAuthToken};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use crate::BuildCtx;
use crate::conn::{Conn, Registry, Slot, scrub};
use crate::egress::{EgressTarget, Policy};
use crate::message::{self, Limits};
use crate::tls;

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

/// The last error librdkafka reported, shared by the context (which librdkafka's threads
/// write) and the sink (which reads it when a produce or the first metadata request fails).
#[derive(Clone, Default)]
pub struct LastError(Arc<Mutex<Option<String>>>);

impl LastError {
    fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|g| g.clone())
    }

    fn set(&self, reason: &str) {
        if let Ok(mut g) = self.0.lock() {
            *g = Some(reason.to_string());
        }
    }

    fn clear(&self) {
        if let Ok(mut g) = self.0.lock() {
            *g = None;
        }
    }
}

impl ClientContext for KafkaContext {
    // librdkafka asks only when the mechanism is OAUTHBEARER.
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!(error = %error, reason, "kafka client error");
        self.last_error.set(reason);
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
            OauthSource::File(p) => std::fs::read_to_string(p)
                .map_err(|e| format!("sasl.token_file: cannot read the file ({})", e.kind()))?
                .trim()
                .to_string(),
        };
        if token.is_empty() {
            return Err("sasl.token_file: the file is empty".into());
        }
        Ok(oauth_token(token, principal.as_deref(), unix_ms()))
    }
}

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

/// The step a librdkafka connection error names: `tls_handshake`, `auth` (SASL), `tcp_connect`,
/// or `connect` when its text says nothing more precise.
pub fn connect_step(reason: &str) -> &'static str {
    let r = reason.to_ascii_lowercase();
    // A refused client certificate arrives as a TLS alert after TLS 1.3's handshake has
    // completed on the client's side: OpenSSL's "SSL routines" text still names it.
    if r.contains("ssl handshake")
        || r.contains("certificate verify")
        || r.contains("ssl_handshake")
        || r.contains("ssl routines")
    {
        "tls_handshake"
    } else if r.contains("sasl") || r.contains("authenticat") {
        "auth"
    } else if r.contains("connect to ")
        || r.contains("connection refused")
        || r.contains("failed to resolve")
        || r.contains("in state connect)")
    {
        "tcp_connect"
    } else {
        "connect"
    }
}

#[derive(Clone)]
pub struct KafkaConn(Arc<FutureProducer<KafkaContext>>, LastError);

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
                    (None, Some(f)) => OauthSource::File(f.clone()),
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

    /// A producer whose bootstrap and advertised brokers all pass the egress policy.
    async fn open(&self) -> Result<KafkaConn, String> {
        // Before librdkafka is given the names; it resolves them again itself.
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
        let producer = client
            .create_with_context::<_, FutureProducer<KafkaContext>>(context)
            .map(|p| KafkaConn(Arc::new(p), last_error))
            .map_err(|e| self.scrub(format!("kafka client: {e}")))?;
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

    /// A producer that could not fetch metadata: the step librdkafka last failed at, and for a
    /// refused TLS handshake the server certificate, named by a handshake of our own (OpenSSL's
    /// text does not carry it).
    async fn connect_error(&self, producer: &KafkaConn, fallback: String) -> String {
        let Some(reason) = producer.1.get() else {
            return fallback;
        };
        let step = connect_step(&reason);
        if step == "tls_handshake"
            && let (Some(t), Some((host, port))) = (&self.tls, &self.first_broker)
            && let Err(line) = tls::probe(host, *port, t, Duration::from_secs(3)).await
            && line.starts_with("tls_handshake")
        {
            return self.scrub(format!("{line} (librdkafka: {reason})"));
        }
        self.scrub(format!("{step}: {reason}"))
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

    fn classify(&self, e: KafkaError, producer: &KafkaConn) -> SinkError {
        let Some(code) = e.rdkafka_error_code() else {
            return SinkError::Transient(self.scrub(format!("kafka: {e}")));
        };
        match classify_code(code, &self.topic, self.produce_timeout) {
            // A broker lost after the producer opened: say what librdkafka last hit.
            SinkError::Transient(m) => match producer.1.get() {
                Some(reason) => SinkError::Transient(self.scrub(format!(
                    "{m} (last client error: {}: {reason})",
                    connect_step(&reason)
                ))),
                None => SinkError::Transient(m),
            },
            other => other,
        }
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
    fn connect_steps_from_librdkafka_text() {
        for (text, step) in [
            (
                "ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified (after 3ms in state SSL_HANDSHAKE)",
                "tls_handshake",
            ),
            (
                "sasl_plaintext://127.0.0.1:9092/bootstrap: SASL authentication error: SASL SCRAM authentication failed: broker responded with unknown-user (after 83ms in state AUTH_REQ)",
                "auth",
            ),
            (
                "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)",
                "tcp_connect",
            ),
            (
                "ssl://localhost:9093/bootstrap: Receive failed: error:0A00045C:SSL routines::tlsv13 alert certificate required: SSL alert number 116 (after 0ms in state APIVERSION_QUERY)",
                "tls_handshake",
            ),
            ("1/1 brokers are down", "connect"),
        ] {
            assert_eq!(connect_step(text), step, "{text}");
        }
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
