//! The Redis sink over `rediss://` against a real redis-server that requires TLS and a password
//! (one per test, with certificates from a private CA the test makes): delivery with the right
//! CA and credentials (ACL user, `requirepass`, a client certificate, a `server_name`
//! override), and each wrong setting failing with an error that names the step (`tcp_connect`,
//! `tls_handshake` with the server certificate's subject, `auth`), transient (dispatch retries
//! it, the hook stays queued), never showing the password, and delivered once fixed.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_config::{RedisSinkConfig, Secret, SinkConfig, SinkTls};
use ankusa_core::{Envelope, Sink};
use ankusa_sinks::SinkBuilder;
use ankusa_testkit::pki::{Ca, write};
use ankusa_testkit::redis_server::{ACL_PASSWORD, ACL_USER, DEFAULT_PASSWORD, TlsRedis};
use common::*;
use futures::StreamExt;

/// Payloads the test's subscriber received.
type Received = Arc<Mutex<Vec<Vec<u8>>>>;

/// Subscribes to `channel` over the server's plaintext port; returns once subscribed.
async fn subscribe(r: &TlsRedis, channel: &str) -> (Received, tokio::task::JoinHandle<()>) {
    let client = redis::Client::open(r.plain_url()).expect("url");
    let mut ps = client
        .get_async_pubsub()
        .await
        .expect("subscriber connects");
    ps.subscribe(channel).await.expect("subscribed");
    let got: Received = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    let task = tokio::spawn(async move {
        let mut stream = ps.on_message();
        while let Some(m) = stream.next().await {
            sink.lock().unwrap().push(m.get_payload_bytes().to_vec());
        }
    });
    (got, task)
}

async fn wait_received(got: &Received, n: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.lock().unwrap().len() < n {
        assert!(Instant::now() < deadline, "{n} message(s) not received");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    got.lock().unwrap().clone()
}

fn ca_tls(path: &std::path::Path) -> SinkTls {
    SinkTls {
        ca_file: Some(path.to_path_buf().into()),
        ..SinkTls::default()
    }
}

/// A redis-server of the test's own with a certificate from `ca` and the test's subscriber on
/// a channel of its own.
struct Fixture {
    dir: tempfile::TempDir,
    ca: Ca,
    r: TlsRedis,
    /// The right CA, as a file.
    ca_file: std::path::PathBuf,
    channel: String,
    got: Received,
    task: tokio::task::JoinHandle<()>,
}

/// A server whose certificate names `names` (expired or not), requiring a client certificate
/// when `auth_clients`.
async fn fixture(names: &[&str], expired: bool, auth_clients: bool) -> Fixture {
    init();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("ankusa test CA");
    let r = TlsRedis::start(
        dir.path(),
        &ca.server(names, expired),
        &ca.pem,
        auth_clients,
    );
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let channel = format!("ankusa.tls.{}", suffix());
    let (got, task) = subscribe(&r, &channel).await;
    Fixture {
        dir,
        ca,
        r,
        ca_file,
        channel,
        got,
        task,
    }
}

impl Fixture {
    /// `rediss://` as the ACL user with its password, to `host`.
    fn acl_url(&self, host: &str) -> String {
        self.r.tls_url(&format!("{ACL_USER}:{ACL_PASSWORD}"), host)
    }

    /// A sink (a builder of its own) publishing to the fixture's channel through `url`.
    fn sink(&self, url: &str, tls: SinkTls) -> Arc<dyn Sink> {
        let mut cfg = RedisSinkConfig::new(url, &self.channel);
        cfg.tls = Some(tls);
        build(&SinkBuilder::new(), SinkConfig::Redis(cfg))
    }

    /// The subscriber received exactly these hooks' messages, in this order.
    async fn received(&self, envs: &[&Envelope]) {
        let msgs = wait_received(&self.got, envs.len()).await;
        for (m, env) in msgs.iter().zip(envs) {
            check_message(m, env, &ctx());
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One attempt that must fail transient (retried, not dead-lettered) naming every `needle`,
/// without any password in the text.
async fn fails_with<N: AsRef<str> + std::fmt::Debug>(
    sink: &Arc<dyn Sink>,
    env: &Envelope,
    needles: &[N],
) -> String {
    let m = common::fails_with(sink, env, needles).await;
    for secret in [DEFAULT_PASSWORD, ACL_PASSWORD, "wrong-pw-1234"] {
        assert!(!m.contains(secret), "{m:?} shows {secret:?}");
    }
    m
}

/// Retries like dispatch (a failed dial is remembered for a second) until delivered.
async fn delivers(sink: &Arc<dyn Sink>, env: &Envelope) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match sink.deliver(env, &ctx()).await {
            Ok(()) => return,
            Err(e) => assert!(
                Instant::now() < deadline,
                "still not delivered after the fix: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn rediss_delivers_with_the_private_ca_as_acl_user_and_default_user() {
    let f = fixture(&["localhost"], false, false).await;

    // The ACL user and password.
    let acl = f.sink(&f.acl_url("localhost"), ca_tls(&f.ca_file));
    let env = hook(br#"{"id":"evt_tls_acl"}"#);
    acl.deliver(&env, &ctx())
        .await
        .expect("delivered as the ACL user");

    // `requirepass` (the default user), the CA given inline.
    let default_user = f.sink(
        &f.r.tls_url(&format!(":{DEFAULT_PASSWORD}"), "localhost"),
        SinkTls {
            ca_pem: Some(Secret::new(f.ca.pem.clone())),
            ..SinkTls::default()
        },
    );
    let env2 = hook(br#"{"id":"evt_tls_default"}"#);
    default_user
        .deliver(&env2, &ctx())
        .await
        .expect("delivered as the default user");

    // An IP address in the URL, the certificate's name through `server_name`.
    let by_ip = f.sink(
        &f.r.tls_url(&format!(":{DEFAULT_PASSWORD}"), "127.0.0.1"),
        SinkTls {
            server_name: Some("localhost".into()),
            ..ca_tls(&f.ca_file)
        },
    );
    let env3 = hook(br#"{"id":"evt_tls_sni"}"#);
    by_ip
        .deliver(&env3, &ctx())
        .await
        .expect("delivered with server_name");

    f.received(&[&env, &env2, &env3]).await;
}

#[tokio::test]
async fn rediss_with_a_client_certificate_when_the_server_requires_one() {
    let f = fixture(&["localhost"], false, true).await;
    let client = f.ca.client("ankusa-gateway");
    let url = f.acl_url("localhost");
    let env = hook(br#"{"id":"evt_mtls"}"#);

    // Without a client certificate the server refuses the handshake.
    let without = f.sink(&url, ca_tls(&f.ca_file));
    fails_with(&without, &env, &["not_connected: tls_handshake"]).await;

    let with = f.sink(
        &url,
        SinkTls {
            cert_file: Some(write(f.dir.path(), "client.crt", &client.cert).into()),
            key_pem: Some(Secret::new(client.key.clone())),
            ..ca_tls(&f.ca_file)
        },
    );
    with.deliver(&env, &ctx())
        .await
        .expect("delivered with the client certificate");
    f.received(&[&env]).await;
}

/// A CA that did not issue the server's certificate: the handshake fails naming the
/// certificate's subject; the same hook lands once the sink trusts the right CA.
#[tokio::test]
async fn rediss_wrong_ca_fails_at_the_handshake_then_delivers_once_fixed() {
    let f = fixture(&["localhost"], false, false).await;
    let other = Ca::new("some other CA");
    let url = f.acl_url("localhost");
    let env = hook(br#"{"id":"evt_wrong_ca"}"#);

    let wrong = f.sink(&url, ca_tls(&write(f.dir.path(), "other.pem", &other.pem)));
    let m = fails_with(&wrong, &env, &untrusted("localhost")).await;
    eprintln!("wrong CA: {m}");

    delivers(&f.sink(&url, ca_tls(&f.ca_file)), &env).await;
    f.received(&[&env]).await;
}

/// A certificate for another name: refused for the name, the subject and names shown; the
/// name the certificate carries, set as `server_name`, fixes it.
#[tokio::test]
async fn rediss_wrong_hostname_fails_at_the_handshake_then_delivers_once_fixed() {
    let f = fixture(&["cache.other.test"], false, false).await;
    let url = f.acl_url("localhost");
    let env = hook(br#"{"id":"evt_wrong_name"}"#);

    let wrong = f.sink(&url, ca_tls(&f.ca_file));
    let mut needles = misnamed("cache.other.test");
    needles.push("names cache.other.test".into());
    let m = fails_with(&wrong, &env, &needles).await;
    eprintln!("wrong name: {m}");

    let fixed = f.sink(
        &url,
        SinkTls {
            server_name: Some("cache.other.test".into()),
            ..ca_tls(&f.ca_file)
        },
    );
    delivers(&fixed, &env).await;
    f.received(&[&env]).await;
}

/// An expired server certificate: refused as expired; once the server has a valid one the
/// same sink (no config change) delivers on its next dial.
#[tokio::test]
async fn rediss_expired_certificate_fails_at_the_handshake_then_delivers_once_renewed() {
    let f = fixture(&["localhost"], true, false).await;
    let env = hook(br#"{"id":"evt_expired"}"#);

    let sink = f.sink(&f.acl_url("localhost"), ca_tls(&f.ca_file));
    let m = fails_with(
        &sink,
        &env,
        &[
            "not_connected: tls_handshake:",
            "expired",
            "subject CN=localhost",
        ],
    )
    .await;
    eprintln!("expired: {m}");

    f.r.replace_certificate(&f.ca.server(&["localhost"], false))
        .await;
    delivers(&sink, &env).await;
    f.received(&[&env]).await;
}

/// A wrong password (ACL user and default user): the `auth` step, the server's WRONGPASS, no
/// password in the text; the right password delivers the same hook.
#[tokio::test]
async fn rediss_wrong_password_fails_at_auth_then_delivers_once_fixed() {
    let f = fixture(&["localhost"], false, false).await;
    let env = hook(br#"{"id":"evt_wrong_pass"}"#);

    for userinfo in [format!("{ACL_USER}:wrong-pw-1234"), ":wrong-pw-1234".into()] {
        let wrong = f.sink(&f.r.tls_url(&userinfo, "localhost"), ca_tls(&f.ca_file));
        let m = fails_with(&wrong, &env, &["not_connected: auth:", "WRONGPASS"]).await;
        eprintln!("wrong password: {m}");
    }
    // No password where the server requires one.
    let none = f.sink(
        &format!("rediss://localhost:{}/0", f.r.tls_port),
        ca_tls(&f.ca_file),
    );
    fails_with(&none, &env, &["NOAUTH"]).await;

    delivers(&f.sink(&f.acl_url("localhost"), ca_tls(&f.ca_file)), &env).await;
    f.received(&[&env]).await;
}

/// Nothing listening: the `tcp_connect` step.
#[tokio::test]
async fn rediss_nothing_listening_fails_at_tcp_connect() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("ankusa test CA");
    let port = free_port();
    let mut cfg = RedisSinkConfig::new(
        format!("rediss://:{DEFAULT_PASSWORD}@localhost:{port}/0"),
        "ch",
    );
    cfg.tls = Some(ca_tls(&write(dir.path(), "ca.pem", &ca.pem)));
    let sink = build(&SinkBuilder::new(), SinkConfig::Redis(cfg));
    fails_with(
        &sink,
        &hook(b"{}"),
        &["not_connected: tcp_connect:", "refused"],
    )
    .await;
}
