//! The RabbitMQ sink over `amqps://` against a RabbitMQ node of the test's own with an SSL
//! listener (certificates from a private CA made here), PLAIN and EXTERNAL
//! (`rabbitmq_auth_mechanism_ssl`, the client certificate's CN is the user) enabled; and, for an
//! expired server certificate, a TLS proxy of the test's own in front of the machine's broker
//! (5672). Right CA and credentials deliver; a wrong CA, a wrong host name, an expired
//! certificate, a wrong password and a certificate without a user each fail transient (the hook
//! stays queued) naming the step, and the same hook lands, once, after the fix (a rebuilt sink
//! through the same builder: a hot reload).

mod common;
#[path = "support/redis_tls.rs"]
mod pki;
#[path = "support/tls_proxy.rs"]
mod tls_proxy;

use std::path::PathBuf;
use std::time::Duration;

use ankusa_config::{AmqpAuthMechanism, RabbitmqSinkConfig, SinkConfig, SinkTls};
use common::*;
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use pki::{Ca, write};
use tls_proxy::TlsProxy;

/// The node's only user (`default_user`): PLAIN with the password, EXTERNAL as the CN.
const USER: &str = "hooks-client";
const PASSWORD: &str = "hooks-pw-4711";
const WRONG_PASSWORD: &str = "wrong-pw-1234";
const SERVER_CN: &str = "rabbit.test";

struct Node {
    _node: Owned,
    dir: tempfile::TempDir,
    ca: Ca,
    ca_file: PathBuf,
    cert_file: PathBuf,
    key_file: PathBuf,
    tls_port: u16,
    plain_url: String,
}

/// A node with TLS on a free port (certificate for `rabbit.test` and 127.0.0.1, not
/// `localhost`) and plaintext on another (the test's own channel).
async fn node() -> Node {
    init();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("ankusa rabbitmq test CA");
    let server = ca.server(&[SERVER_CN, "127.0.0.1"], false);
    let client = ca.client(USER);
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let server_cert = write(dir.path(), "server.pem", &server.cert);
    let server_key = write(dir.path(), "server.key", &server.key);
    let cert_file = write(dir.path(), "client.pem", &client.cert);
    let key_file = write(dir.path(), "client.key", &client.key);
    let (amqp, tls_port, dist) = (free_port(), free_port(), free_port());
    let conf = format!(
        "listeners.ssl.default = 127.0.0.1:{tls_port}\n\
         ssl_options.cacertfile = {}\n\
         ssl_options.certfile = {}\n\
         ssl_options.keyfile = {}\n\
         ssl_options.verify = verify_peer\n\
         ssl_options.fail_if_no_peer_cert = false\n\
         auth_mechanisms.1 = PLAIN\n\
         auth_mechanisms.2 = AMQPLAIN\n\
         auth_mechanisms.3 = EXTERNAL\n\
         ssl_cert_login_from = common_name\n\
         loopback_users = none\n\
         default_user = {USER}\n\
         default_pass = {PASSWORD}\n",
        ca_file.display(),
        server_cert.display(),
        server_key.display()
    );
    let name = format!("ankusa-tls-{}@localhost", suffix());
    let node = rabbit_node_with(
        dir.path(),
        &name,
        amqp,
        dist,
        "[rabbitmq_auth_mechanism_ssl].",
        Some(&conf),
    );
    wait_port(tls_port, Duration::from_secs(90)).await;
    wait_port(amqp, Duration::from_secs(30)).await;
    Node {
        _node: node,
        dir,
        ca,
        ca_file,
        cert_file,
        key_file,
        tls_port,
        plain_url: format!("amqp://{USER}:{PASSWORD}@127.0.0.1:{amqp}/%2f"),
    }
}

/// The exchange as the sink declares it and a queue bound to everything.
async fn topology(url: &str, exchange: &str, queue: &str) -> (Connection, Channel) {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("connect (plaintext) to the test node");
    let ch = conn.create_channel().await.expect("channel");
    ch.exchange_declare(
        exchange.into(),
        ExchangeKind::Topic,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .expect("exchange.declare");
    ch.queue_declare(
        queue.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .expect("queue.declare");
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        "#".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .expect("queue.bind");
    (conn, ch)
}

/// The message ids in the queue now (drained).
async fn drain(ch: &Channel, queue: &str) -> Vec<String> {
    let mut ids = Vec::new();
    while let Some(m) = ch
        .basic_get(queue.into(), BasicGetOptions { no_ack: true })
        .await
        .expect("basic.get")
    {
        ids.push(
            m.properties
                .message_id()
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default(),
        );
    }
    ids
}

fn sink(url: &str, exchange: &str, tls: SinkTls, mech: AmqpAuthMechanism) -> SinkConfig {
    let mut cfg = RabbitmqSinkConfig::new(url, exchange);
    cfg.tls = Some(tls);
    cfg.auth_mechanism = mech;
    cfg.retry_ms = 200;
    SinkConfig::Rabbitmq(cfg)
}

fn ca_only(path: &std::path::Path) -> SinkTls {
    SinkTls {
        ca_file: Some(path.to_path_buf().into()),
        ..SinkTls::default()
    }
}

fn no_secret(m: &str) {
    for s in [PASSWORD, WRONG_PASSWORD, "BEGIN"] {
        assert!(!m.contains(s), "{m:?} shows {s:?}");
    }
}

/// Every case against one node (it takes seconds to start): PLAIN and EXTERNAL deliver; a
/// wrong CA, a wrong host name, a wrong password and a certificate without a user fail at
/// their step and land once fixed.
#[tokio::test]
async fn rabbitmq_over_tls_plain_external_and_each_failure_step() {
    let n = node().await;
    let exchange = format!("ankusa.tls.{}", suffix());
    let queue = format!("{exchange}.q");
    let (_conn, ch) = topology(&n.plain_url, &exchange, &queue).await;
    let builder = ankusa_sinks::SinkBuilder::new();
    let tls_url = |user: &str, host: &str| format!("amqps://{user}{host}:{}/%2f", n.tls_port);
    let good_plain = tls_url(&format!("{USER}:{PASSWORD}@"), "127.0.0.1");

    // PLAIN over TLS with the private CA.
    let env = hook(b"{\"over\":\"amqps\"}");
    let s = build(
        &builder,
        sink(
            &good_plain,
            &exchange,
            ca_only(&n.ca_file),
            AmqpAuthMechanism::Plain,
        ),
    );
    s.deliver(&env, &ctx()).await.expect("PLAIN over amqps");
    assert_eq!(drain(&ch, &queue).await, vec![env.id.to_string()]);

    // EXTERNAL: the client certificate is the login; no password in the URL.
    let external = SinkTls {
        ca_file: Some(n.ca_file.clone().into()),
        cert_file: Some(n.cert_file.clone().into()),
        key_file: Some(n.key_file.clone().into()),
        ..SinkTls::default()
    };
    let env = hook(b"{\"auth\":\"external\"}");
    let s = build(
        &builder,
        sink(
            &tls_url("", "127.0.0.1"),
            &exchange,
            external.clone(),
            AmqpAuthMechanism::External,
        ),
    );
    s.deliver(&env, &ctx()).await.expect("EXTERNAL over amqps");
    assert_eq!(drain(&ch, &queue).await, vec![env.id.to_string()]);

    // A CA that did not issue the server's certificate: the handshake, naming the certificate.
    let other = Ca::new("some other CA");
    let env = hook(b"{\"case\":\"wrong ca\"}");
    let wrong_ca = SinkTls {
        ca_pem: Some(other.pem.clone().into()),
        ..SinkTls::default()
    };
    let s = build(
        &builder,
        sink(&good_plain, &exchange, wrong_ca, AmqpAuthMechanism::Plain),
    );
    let m = fails_with(
        &s,
        &env,
        &[
            "not_connected: tls_handshake",
            "not issued by a trusted CA",
            &format!("subject CN={SERVER_CN}"),
        ],
    )
    .await;
    no_secret(&m);
    let fixed = build(
        &builder,
        sink(
            &good_plain,
            &exchange,
            ca_only(&n.ca_file),
            AmqpAuthMechanism::Plain,
        ),
    );
    retry_lands(&fixed, &env).await;
    assert_eq!(drain(&ch, &queue).await, vec![env.id.to_string()]);

    // A host the certificate does not name (`localhost`), then `server_name` fixes it.
    let env = hook(b"{\"case\":\"wrong name\"}");
    let by_alias = tls_url(&format!("{USER}:{PASSWORD}@"), "localhost");
    let s = build(
        &builder,
        sink(
            &by_alias,
            &exchange,
            ca_only(&n.ca_file),
            AmqpAuthMechanism::Plain,
        ),
    );
    let m = fails_with(
        &s,
        &env,
        &[
            "not_connected: tls_handshake",
            "not valid for the server name",
        ],
    )
    .await;
    no_secret(&m);
    let named = SinkTls {
        server_name: Some(SERVER_CN.into()),
        ..ca_only(&n.ca_file)
    };
    let fixed = build(
        &builder,
        sink(&by_alias, &exchange, named, AmqpAuthMechanism::Plain),
    );
    retry_lands(&fixed, &env).await;
    assert_eq!(drain(&ch, &queue).await, vec![env.id.to_string()]);

    // A wrong password: the TLS step passed, the login did not.
    let env = hook(b"{\"case\":\"wrong password\"}");
    let s = build(
        &builder,
        sink(
            &tls_url(&format!("{USER}:{WRONG_PASSWORD}@"), "127.0.0.1"),
            &exchange,
            ca_only(&n.ca_file),
            AmqpAuthMechanism::Plain,
        ),
    );
    let m = fails_with(&s, &env, &["not_connected: auth"]).await;
    no_secret(&m);
    let fixed = build(
        &builder,
        sink(
            &good_plain,
            &exchange,
            ca_only(&n.ca_file),
            AmqpAuthMechanism::Plain,
        ),
    );
    retry_lands(&fixed, &env).await;
    assert_eq!(drain(&ch, &queue).await, vec![env.id.to_string()]);

    // EXTERNAL with a certificate the broker has no user for.
    let stranger = n.ca.client("stranger");
    let env = hook(b"{\"case\":\"unknown certificate user\"}");
    let unknown = SinkTls {
        cert_file: Some(write(n.dir.path(), "stranger.pem", &stranger.cert).into()),
        key_file: Some(write(n.dir.path(), "stranger.key", &stranger.key).into()),
        ..external.clone()
    };
    let s = build(
        &builder,
        sink(
            &tls_url("", "127.0.0.1"),
            &exchange,
            unknown,
            AmqpAuthMechanism::External,
        ),
    );
    fails_with(&s, &env, &["not_connected: auth"]).await;
    let fixed = build(
        &builder,
        sink(
            &tls_url("", "127.0.0.1"),
            &exchange,
            external,
            AmqpAuthMechanism::External,
        ),
    );
    retry_lands(&fixed, &env).await;
    assert_eq!(drain(&ch, &queue).await, vec![env.id.to_string()]);
}

/// An expired server certificate (a TLS proxy of the test's own in front of the machine's
/// broker): the handshake names it; the same hook lands through a proxy with a valid one.
#[tokio::test]
async fn rabbitmq_expired_certificate_fails_at_the_handshake_then_lands() {
    init();
    require("RabbitMQ", 5672);
    let ca = Ca::new("ankusa rabbitmq proxy CA");
    let expired = TlsProxy::start(&ca.server(&["127.0.0.1"], true), None, 5672).await;
    let valid = TlsProxy::start(&ca.server(&["127.0.0.1"], false), None, 5672).await;
    let exchange = format!("ankusa.tlsx.{}", suffix());
    let queue = format!("{exchange}.q");
    let (_conn, ch) = topology("amqp://guest:guest@127.0.0.1:5672/%2f", &exchange, &queue).await;
    let builder = ankusa_sinks::SinkBuilder::new();
    let tls = SinkTls {
        ca_pem: Some(ca.pem.clone().into()),
        ..SinkTls::default()
    };
    let url = |port: u16| format!("amqps://guest:guest@127.0.0.1:{port}/%2f");
    let env = hook(b"{\"case\":\"expired\"}");
    let s = build(
        &builder,
        sink(
            &url(expired.port),
            &exchange,
            tls.clone(),
            AmqpAuthMechanism::Plain,
        ),
    );
    fails_with(
        &s,
        &env,
        &[
            "not_connected: tls_handshake",
            "expired",
            "subject CN=127.0.0.1",
        ],
    )
    .await;
    let fixed = build(
        &builder,
        sink(&url(valid.port), &exchange, tls, AmqpAuthMechanism::Plain),
    );
    retry_lands(&fixed, &env).await;
    assert_eq!(drain(&ch, &queue).await, vec![env.id.to_string()]);
}
