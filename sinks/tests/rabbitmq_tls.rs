//! The RabbitMQ sink over `amqps://` against a RabbitMQ node of the test's own with an SSL
//! listener (certificates from a private CA made here), PLAIN and EXTERNAL
//! (`rabbitmq_auth_mechanism_ssl`, the client certificate's CN is the user) enabled; and, for an
//! expired server certificate, a TLS proxy of the test's own in front of the machine's broker
//! (5672). Right CA and credentials deliver; a wrong CA, a wrong host name, an expired
//! certificate, a wrong password and a certificate without a user each fail transient (the hook
//! stays queued) naming the step, and the same hook lands, once, after the fix (a rebuilt sink
//! through the same builder: a hot reload).

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ankusa_config::{AmqpAuthMechanism, RabbitmqSinkConfig, SinkConfig, SinkTls};
use ankusa_core::{Envelope, Sink};
use ankusa_testkit::brokers::rabbit_topology;
use ankusa_testkit::pki::{Ca, write};
use ankusa_testkit::tls_proxy::TlsProxy;
use common::*;
use lapin::options::BasicGetOptions;
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties};

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
    rabbit_topology(&ch, exchange, queue, "#", FieldTable::default())
        .await
        .expect("declare the exchange and the queue");
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

/// The exchange and queue of one test, and the builder every sink of it is built through (a
/// fixed sink is a hot reload).
struct Cases<'a> {
    ch: &'a Channel,
    exchange: &'a str,
    queue: &'a str,
    builder: ankusa_sinks::SinkBuilder,
}

impl Cases<'_> {
    fn sink(&self, url: &str, tls: SinkTls, mech: AmqpAuthMechanism) -> Arc<dyn Sink> {
        build(&self.builder, sink(url, self.exchange, tls, mech))
    }

    /// The queue holds exactly `env`'s message (drained).
    async fn holds(&self, env: &Envelope) {
        assert_eq!(drain(self.ch, self.queue).await, vec![env.id.to_string()]);
    }

    /// `broken` fails transient naming `needles` and no secret; the same hook lands once
    /// through `fixed`.
    async fn fails_then_lands(
        &self,
        env: &Envelope,
        broken: Arc<dyn Sink>,
        needles: &[&str],
        fixed: Arc<dyn Sink>,
    ) {
        no_secret(&fails_with(&broken, env, needles).await);
        retry_lands(&fixed, env).await;
        self.holds(env).await;
    }
}

/// Every case against one node (it takes seconds to start): PLAIN and EXTERNAL deliver; a
/// wrong CA, a wrong host name, a wrong password and a certificate without a user fail at
/// their step and land once fixed.
#[tokio::test]
async fn rabbitmq_over_tls_plain_external_and_each_failure_step() {
    use AmqpAuthMechanism::{External, Plain};
    let n = node().await;
    let exchange = format!("ankusa.tls.{}", suffix());
    let queue = format!("{exchange}.q");
    let (_conn, ch) = topology(&n.plain_url, &exchange, &queue).await;
    let cases = Cases {
        ch: &ch,
        exchange: &exchange,
        queue: &queue,
        builder: ankusa_sinks::SinkBuilder::new(),
    };
    let tls_url = |user: &str, host: &str| format!("amqps://{user}{host}:{}/%2f", n.tls_port);
    let good_plain = tls_url(&format!("{USER}:{PASSWORD}@"), "127.0.0.1");
    let good = || cases.sink(&good_plain, ca_only(&n.ca_file), Plain);

    // PLAIN over TLS with the private CA.
    let env = hook(b"{\"over\":\"amqps\"}");
    good()
        .deliver(&env, &ctx())
        .await
        .expect("PLAIN over amqps");
    cases.holds(&env).await;

    // EXTERNAL: the client certificate is the login; no password in the URL.
    let external = SinkTls {
        ca_file: Some(n.ca_file.clone().into()),
        cert_file: Some(n.cert_file.clone().into()),
        key_file: Some(n.key_file.clone().into()),
        ..SinkTls::default()
    };
    let by_certificate = tls_url("", "127.0.0.1");
    let env = hook(b"{\"auth\":\"external\"}");
    cases
        .sink(&by_certificate, external.clone(), External)
        .deliver(&env, &ctx())
        .await
        .expect("EXTERNAL over amqps");
    cases.holds(&env).await;

    // A CA that did not issue the server's certificate: the handshake, naming the certificate.
    let other = Ca::new("some other CA");
    let wrong_ca = SinkTls {
        ca_pem: Some(other.pem.clone().into()),
        ..SinkTls::default()
    };
    cases
        .fails_then_lands(
            &hook(b"{\"case\":\"wrong ca\"}"),
            cases.sink(&good_plain, wrong_ca, Plain),
            &[
                "not_connected: tls_handshake",
                "not issued by a trusted CA",
                &format!("subject CN={SERVER_CN}"),
            ],
            good(),
        )
        .await;

    // A host the certificate does not name (`localhost`), then `server_name` fixes it.
    let by_alias = tls_url(&format!("{USER}:{PASSWORD}@"), "localhost");
    let named = SinkTls {
        server_name: Some(SERVER_CN.into()),
        ..ca_only(&n.ca_file)
    };
    cases
        .fails_then_lands(
            &hook(b"{\"case\":\"wrong name\"}"),
            cases.sink(&by_alias, ca_only(&n.ca_file), Plain),
            &[
                "not_connected: tls_handshake",
                "not valid for the server name",
            ],
            cases.sink(&by_alias, named, Plain),
        )
        .await;

    // A wrong password: the TLS step passed, the login did not.
    let wrong_password = tls_url(&format!("{USER}:{WRONG_PASSWORD}@"), "127.0.0.1");
    cases
        .fails_then_lands(
            &hook(b"{\"case\":\"wrong password\"}"),
            cases.sink(&wrong_password, ca_only(&n.ca_file), Plain),
            &["not_connected: auth"],
            good(),
        )
        .await;

    // EXTERNAL with a certificate the broker has no user for.
    let stranger = n.ca.client("stranger");
    let unknown = SinkTls {
        cert_file: Some(write(n.dir.path(), "stranger.pem", &stranger.cert).into()),
        key_file: Some(write(n.dir.path(), "stranger.key", &stranger.key).into()),
        ..external.clone()
    };
    cases
        .fails_then_lands(
            &hook(b"{\"case\":\"unknown certificate user\"}"),
            cases.sink(&by_certificate, unknown, External),
            &["not_connected: auth"],
            cases.sink(&by_certificate, external, External),
        )
        .await;
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
