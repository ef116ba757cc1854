//! The Kafka sink with `security_protocol: ssl` and SASL, through librdkafka built with TLS.
//! No Kafka-protocol broker that terminates TLS itself can be had on this machine (the Tansu
//! build from PyPI takes `--cert` but serves plaintext), so the broker is a Tansu of the test's
//! own behind a TLS-terminating proxy of the test's own that demands a client certificate,
//! Tansu advertising the proxy (`localhost:<port>`): every connection librdkafka makes, the
//! bootstrap and the produce, is TLS with a private CA made here. Right CA and client
//! certificate deliver; a wrong CA, a host name the certificate does not carry, an expired
//! certificate and a missing client certificate each fail transient naming `tls_handshake`
//! (with the server certificate's subject) and the same hook lands once after the fix (a
//! rebuilt sink through the same builder: a hot reload). SASL: Tansu with `--authentication`
//! refuses the SCRAM login of a user it does not know, named `auth`; an OAUTHBEARER token
//! file that cannot be read is named too. (This Tansu keeps SCRAM users only in memory and
//! accepts none before authentication is on, so a successful SCRAM login cannot be shown here.)

mod common;

use std::time::Duration;

use ankusa_config::{
    KafkaSasl, KafkaSaslMechanism, KafkaSecurityProtocol, KafkaSinkConfig, SinkConfig, SinkTls,
};
use ankusa_testkit::pki::{Ca, Pair, write};
use ankusa_testkit::tls_proxy::TlsProxy;
use common::*;
use rdkafka::ClientConfig;

/// A Tansu behind a TLS proxy that requires a client certificate from `ca`.
struct TlsKafka {
    _tansu: Owned,
    _proxy: TlsProxy,
    _dir: tempfile::TempDir,
    ca: Ca,
    client: Pair,
    /// `localhost:<proxy port>`: what the certificate names and Tansu advertises.
    broker: String,
    port: u16,
    /// Tansu's own (plaintext) port, behind the proxy.
    upstream: u16,
    ca_file: std::path::PathBuf,
    cert_file: std::path::PathBuf,
    key_file: std::path::PathBuf,
}

async fn tls_kafka() -> TlsKafka {
    init();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("ankusa kafka test CA");
    let server = ca.server(&["localhost"], false);
    let client = ca.client("ankusa-producer");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let upstream = free_port();
    let tansu =
        ankusa_testkit::brokers::memory_tansu(dir.path(), upstream, &format!("localhost:{port}"));
    let proxy = TlsProxy::serve(listener, &server, Some(&ca.pem), upstream);
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let cert_file = write(dir.path(), "client.pem", &client.cert);
    let key_file = write(dir.path(), "client.key", &client.key);
    TlsKafka {
        _tansu: tansu,
        _proxy: proxy,
        _dir: dir,
        ca,
        client,
        broker: format!("localhost:{port}"),
        port,
        upstream,
        ca_file,
        cert_file,
        key_file,
    }
}

impl TlsKafka {
    /// The test's own clients: TLS with the CA and the client certificate.
    fn client_config(&self) -> ClientConfig {
        let mut c = kafka_client(&self.broker);
        c.set("security.protocol", "ssl")
            .set("ssl.ca.pem", &self.ca.pem)
            .set("ssl.certificate.pem", &self.client.cert)
            .set("ssl.key.pem", &self.client.key);
        c
    }

    async fn create_topic(&self, topic: &str) {
        kafka_create_topic(&self.client_config(), topic).await;
    }

    /// The hook ids in partition 0, read for at most `wait` or until `n` are in.
    async fn ids(&self, topic: &str, n: usize, wait: Duration) -> Vec<String> {
        kafka_ids(&self.client_config(), topic, n, wait).await
    }

    /// The right CA and the client certificate, as files.
    fn good_tls(&self) -> SinkTls {
        SinkTls {
            ca_file: Some(self.ca_file.clone().into()),
            cert_file: Some(self.cert_file.clone().into()),
            key_file: Some(self.key_file.clone().into()),
            ..SinkTls::default()
        }
    }
}

fn ssl_sink(broker: &str, topic: &str, tls: SinkTls) -> SinkConfig {
    let mut cfg = KafkaSinkConfig::new(vec![broker.to_string()], topic);
    cfg.security_protocol = Some(KafkaSecurityProtocol::Ssl);
    cfg.tls = Some(tls);
    cfg.produce_timeout_ms = 3_000;
    SinkConfig::Kafka(cfg)
}

/// Delivery with the private CA and a client certificate, then each TLS failure at the
/// handshake (named, transient) and the same hook landing once after the fix.
#[tokio::test]
async fn kafka_over_tls_delivers_and_each_handshake_failure_is_named_then_fixed() {
    let k = tls_kafka().await;
    let topic = format!("tls-{}", suffix());
    k.create_topic(&topic).await;
    let builder = ankusa_sinks::SinkBuilder::new();
    let mut landed = Vec::new();

    let env = hook(b"{\"over\":\"ssl\"}");
    let s = build(&builder, ssl_sink(&k.broker, &topic, k.good_tls()));
    s.deliver(&env, &ctx()).await.expect("delivered over TLS");
    landed.push(env.id.to_string());

    // A CA that did not issue the broker's certificate.
    let other = Ca::new("some other CA");
    let env = hook(b"{\"case\":\"wrong ca\"}");
    let wrong = SinkTls {
        ca_file: None,
        ca_pem: Some(other.pem.clone().into()),
        ..k.good_tls()
    };
    let s = build(&builder, ssl_sink(&k.broker, &topic, wrong));
    fails_with(
        &s,
        &env,
        &[
            "not_connected: tls_handshake",
            "not issued by a trusted CA",
            "subject CN=localhost",
        ],
    )
    .await;
    let fixed = build(&builder, ssl_sink(&k.broker, &topic, k.good_tls()));
    retry_lands(&fixed, &env).await;
    landed.push(env.id.to_string());

    // The broker reached by an address its certificate does not name: librdkafka's host name
    // check refuses it; bootstrapping by the name it carries fixes it.
    let env = hook(b"{\"case\":\"wrong name\"}");
    let by_ip = format!("127.0.0.1:{}", k.port);
    let s = build(&builder, ssl_sink(&by_ip, &topic, k.good_tls()));
    fails_with(
        &s,
        &env,
        &[
            "not_connected: tls_handshake",
            "not valid for the server name",
        ],
    )
    .await;
    let fixed = build(
        &builder,
        ssl_sink(&format!("localhost:{}", k.port), &topic, k.good_tls()),
    );
    // The same config as the first sink: the same producer, which is already connected.
    retry_lands(&fixed, &env).await;
    landed.push(env.id.to_string());

    // No client certificate: the proxy (the broker's side) refuses the handshake.
    let env = hook(b"{\"case\":\"no client certificate\"}");
    let ca_only = SinkTls {
        ca_file: Some(k.ca_file.clone().into()),
        ..SinkTls::default()
    };
    let s = build(&builder, ssl_sink(&k.broker, &topic, ca_only));
    fails_with(&s, &env, &["not_connected: tls_handshake"]).await;
    retry_lands(&fixed, &env).await;
    landed.push(env.id.to_string());

    // An expired certificate on a second listener in front of the same broker.
    let expired = TlsProxy::start(
        &k.ca.server(&["localhost"], true),
        Some(&k.ca.pem),
        k.upstream,
    )
    .await;
    let env = hook(b"{\"case\":\"expired\"}");
    let s = build(
        &builder,
        ssl_sink(&format!("localhost:{}", expired.port), &topic, k.good_tls()),
    );
    fails_with(
        &s,
        &env,
        &[
            "not_connected: tls_handshake",
            "expired",
            "subject CN=localhost",
        ],
    )
    .await;
    retry_lands(&fixed, &env).await;
    landed.push(env.id.to_string());

    let ids = k.ids(&topic, usize::MAX, Duration::from_secs(6)).await;
    for id in &landed {
        let n = ids.iter().filter(|i| *i == id).count();
        assert_eq!(n, 1, "hook {id} is in the topic {n} times ({ids:?})");
    }
    assert_eq!(ids.len(), landed.len(), "{ids:?}");
}

/// SASL against a Tansu that requires authentication: a SCRAM login it refuses is the `auth`
/// step; an OAUTHBEARER token file that cannot be read is named, never its path's content.
#[tokio::test]
async fn kafka_sasl_refusals_name_the_auth_step() {
    init();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let _tansu = Owned::spawn(
        "tansu-auth",
        dir.path(),
        tansu(port, &format!("127.0.0.1:{port}"), "memory://tansu/").arg("--authentication"),
    );
    wait_port(port, Duration::from_secs(10)).await;
    let builder = ankusa_sinks::SinkBuilder::new();
    let broker = format!("127.0.0.1:{port}");
    for mechanism in [
        KafkaSaslMechanism::ScramSha256,
        KafkaSaslMechanism::ScramSha512,
    ] {
        let mut cfg = KafkaSinkConfig::new(vec![broker.clone()], "hooks");
        cfg.produce_timeout_ms = 3_000;
        cfg.sasl = Some(KafkaSasl {
            mechanism,
            username: "ankusa".into(),
            password: "scram-pw-2718".into(),
            token: None,
            token_file: None,
        });
        let s = build(&builder, SinkConfig::Kafka(cfg));
        let m = fails_with(&s, &hook(b"{}"), &["not_connected: auth", "SASL"]).await;
        assert!(!m.contains("scram-pw-2718"), "{m}");
    }
    let mut cfg = KafkaSinkConfig::new(vec![broker], "hooks");
    cfg.produce_timeout_ms = 3_000;
    cfg.sasl = Some(KafkaSasl {
        mechanism: KafkaSaslMechanism::Oauthbearer,
        username: Default::default(),
        password: Default::default(),
        token: None,
        token_file: Some(dir.path().join("no-such-token").into()),
    });
    let s = build(&builder, SinkConfig::Kafka(cfg));
    fails_with(
        &s,
        &hook(b"{}"),
        &["not_connected: auth", "sasl.token_file"],
    )
    .await;
}
