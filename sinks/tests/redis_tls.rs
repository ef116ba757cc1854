//! The Redis sink over `rediss://` against a real redis-server that requires TLS and a password
//! (one per test, with certificates from a private CA the test makes): delivery with the right
//! CA and credentials (ACL user, `requirepass`, a client certificate, a `server_name`
//! override), and each wrong setting failing with an error that names the step (`tcp_connect`,
//! `tls_handshake` with the server certificate's subject, `auth`), transient (dispatch retries
//! it, the hook stays queued), never showing the password, and delivered once fixed.

mod common;
#[path = "support/redis_tls.rs"]
mod server;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_config::{RedisSinkConfig, Secret, SinkConfig, SinkTls};
use ankusa_core::{Envelope, Sink, SinkError};
use ankusa_sinks::SinkBuilder;
use common::*;
use futures::StreamExt;
use server::{ACL_PASSWORD, ACL_USER, Ca, DEFAULT_PASSWORD, TlsRedis};

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

fn sink_cfg(url: &str, channel: &str, tls: SinkTls) -> SinkConfig {
    let mut cfg = RedisSinkConfig::new(url, channel);
    cfg.tls = Some(tls);
    SinkConfig::Redis(cfg)
}

fn ca_tls(path: &std::path::Path) -> SinkTls {
    SinkTls {
        ca_file: Some(path.to_path_buf().into()),
        ..SinkTls::default()
    }
}

/// One attempt that must fail transient (retried, not dead-lettered) naming every `needle`,
/// without any password in the text.
async fn fails_with(sink: &Arc<dyn Sink>, env: &Envelope, needles: &[&str]) -> String {
    let m = match sink.deliver(env, &ctx()).await {
        Err(SinkError::Transient(m)) => m,
        other => panic!("expected a transient failure naming {needles:?}, got {other:?}"),
    };
    for n in needles {
        assert!(m.contains(n), "{m:?} lacks {n:?}");
    }
    for secret in [DEFAULT_PASSWORD, ACL_PASSWORD, "wrong-pw-1234", "BEGIN"] {
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
    init();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("ankusa test CA");
    let r = TlsRedis::start(
        dir.path(),
        &ca.server(&["localhost"], false),
        &ca.pem,
        false,
    );
    let ca_file = server::write(dir.path(), "ca.pem", &ca.pem);
    let channel = format!("ankusa.tls.{}", suffix());
    let (got, task) = subscribe(&r, &channel).await;
    let builder = SinkBuilder::new();

    // The ACL user and password.
    let acl = build(
        &builder,
        sink_cfg(
            &r.tls_url(&format!("{ACL_USER}:{ACL_PASSWORD}"), "localhost"),
            &channel,
            ca_tls(&ca_file),
        ),
    );
    let env = hook(br#"{"id":"evt_tls_acl"}"#);
    acl.deliver(&env, &ctx())
        .await
        .expect("delivered as the ACL user");

    // `requirepass` (the default user), the CA given inline.
    let default_user = build(
        &builder,
        sink_cfg(
            &r.tls_url(&format!(":{DEFAULT_PASSWORD}"), "localhost"),
            &channel,
            SinkTls {
                ca_pem: Some(Secret::new(ca.pem.clone())),
                ..SinkTls::default()
            },
        ),
    );
    let env2 = hook(br#"{"id":"evt_tls_default"}"#);
    default_user
        .deliver(&env2, &ctx())
        .await
        .expect("delivered as the default user");

    // An IP address in the URL, the certificate's name through `server_name`.
    let by_ip = build(
        &builder,
        sink_cfg(
            &r.tls_url(&format!(":{DEFAULT_PASSWORD}"), "127.0.0.1"),
            &channel,
            SinkTls {
                server_name: Some("localhost".into()),
                ..ca_tls(&ca_file)
            },
        ),
    );
    let env3 = hook(br#"{"id":"evt_tls_sni"}"#);
    by_ip
        .deliver(&env3, &ctx())
        .await
        .expect("delivered with server_name");

    let msgs = wait_received(&got, 3).await;
    check_message(&msgs[0], &env, &ctx());
    check_message(&msgs[1], &env2, &ctx());
    check_message(&msgs[2], &env3, &ctx());
    task.abort();
}

#[tokio::test]
async fn rediss_with_a_client_certificate_when_the_server_requires_one() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("ankusa test CA");
    let r = TlsRedis::start(dir.path(), &ca.server(&["localhost"], false), &ca.pem, true);
    let ca_file = server::write(dir.path(), "ca.pem", &ca.pem);
    let client = ca.client("ankusa-gateway");
    let channel = format!("ankusa.mtls.{}", suffix());
    let (got, task) = subscribe(&r, &channel).await;
    let url = r.tls_url(&format!("{ACL_USER}:{ACL_PASSWORD}"), "localhost");
    let env = hook(br#"{"id":"evt_mtls"}"#);

    // Without a client certificate the server refuses the handshake.
    let without = build(
        &SinkBuilder::new(),
        sink_cfg(&url, &channel, ca_tls(&ca_file)),
    );
    fails_with(&without, &env, &["not_connected: tls_handshake"]).await;

    let with = build(
        &SinkBuilder::new(),
        sink_cfg(
            &url,
            &channel,
            SinkTls {
                cert_file: Some(server::write(dir.path(), "client.crt", &client.cert).into()),
                key_pem: Some(Secret::new(client.key.clone())),
                ..ca_tls(&ca_file)
            },
        ),
    );
    with.deliver(&env, &ctx())
        .await
        .expect("delivered with the client certificate");
    let msgs = wait_received(&got, 1).await;
    check_message(&msgs[0], &env, &ctx());
    task.abort();
}

/// A CA that did not issue the server's certificate: the handshake fails naming the
/// certificate's subject; the same hook lands once the sink trusts the right CA.
#[tokio::test]
async fn rediss_wrong_ca_fails_at_the_handshake_then_delivers_once_fixed() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("ankusa test CA");
    let other = Ca::new("some other CA");
    let r = TlsRedis::start(
        dir.path(),
        &ca.server(&["localhost"], false),
        &ca.pem,
        false,
    );
    let channel = format!("ankusa.wrongca.{}", suffix());
    let (got, task) = subscribe(&r, &channel).await;
    let url = r.tls_url(&format!("{ACL_USER}:{ACL_PASSWORD}"), "localhost");
    let env = hook(br#"{"id":"evt_wrong_ca"}"#);

    let wrong = build(
        &SinkBuilder::new(),
        sink_cfg(
            &url,
            &channel,
            ca_tls(&server::write(dir.path(), "other.pem", &other.pem)),
        ),
    );
    let m = fails_with(
        &wrong,
        &env,
        &[
            "not_connected: tls_handshake:",
            "not issued by a trusted CA",
            "subject CN=localhost",
        ],
    )
    .await;
    eprintln!("wrong CA: {m}");

    let fixed = build(
        &SinkBuilder::new(),
        sink_cfg(
            &url,
            &channel,
            ca_tls(&server::write(dir.path(), "ca.pem", &ca.pem)),
        ),
    );
    delivers(&fixed, &env).await;
    check_message(&wait_received(&got, 1).await[0], &env, &ctx());
    task.abort();
}

/// A certificate for another name: refused for the name, the subject and names shown; the
/// name the certificate carries, set as `server_name`, fixes it.
#[tokio::test]
async fn rediss_wrong_hostname_fails_at_the_handshake_then_delivers_once_fixed() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("ankusa test CA");
    let r = TlsRedis::start(
        dir.path(),
        &ca.server(&["cache.other.test"], false),
        &ca.pem,
        false,
    );
    let ca_file = server::write(dir.path(), "ca.pem", &ca.pem);
    let channel = format!("ankusa.wrongname.{}", suffix());
    let (got, task) = subscribe(&r, &channel).await;
    let url = r.tls_url(&format!("{ACL_USER}:{ACL_PASSWORD}"), "localhost");
    let env = hook(br#"{"id":"evt_wrong_name"}"#);

    let wrong = build(
        &SinkBuilder::new(),
        sink_cfg(&url, &channel, ca_tls(&ca_file)),
    );
    let m = fails_with(
        &wrong,
        &env,
        &[
            "not_connected: tls_handshake:",
            "not valid for the server name",
            "subject CN=cache.other.test",
            "names cache.other.test",
        ],
    )
    .await;
    eprintln!("wrong name: {m}");

    let fixed = build(
        &SinkBuilder::new(),
        sink_cfg(
            &url,
            &channel,
            SinkTls {
                server_name: Some("cache.other.test".into()),
                ..ca_tls(&ca_file)
            },
        ),
    );
    delivers(&fixed, &env).await;
    check_message(&wait_received(&got, 1).await[0], &env, &ctx());
    task.abort();
}

/// An expired server certificate: refused as expired; once the server has a valid one the
/// same sink (no config change) delivers on its next dial.
#[tokio::test]
async fn rediss_expired_certificate_fails_at_the_handshake_then_delivers_once_renewed() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("ankusa test CA");
    let r = TlsRedis::start(dir.path(), &ca.server(&["localhost"], true), &ca.pem, false);
    let ca_file = server::write(dir.path(), "ca.pem", &ca.pem);
    let channel = format!("ankusa.expired.{}", suffix());
    let (got, task) = subscribe(&r, &channel).await;
    let url = r.tls_url(&format!("{ACL_USER}:{ACL_PASSWORD}"), "localhost");
    let env = hook(br#"{"id":"evt_expired"}"#);

    let sink = build(
        &SinkBuilder::new(),
        sink_cfg(&url, &channel, ca_tls(&ca_file)),
    );
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

    r.replace_certificate(&ca.server(&["localhost"], false))
        .await;
    delivers(&sink, &env).await;
    check_message(&wait_received(&got, 1).await[0], &env, &ctx());
    task.abort();
}

/// A wrong password (ACL user and default user): the `auth` step, the server's WRONGPASS, no
/// password in the text; the right password delivers the same hook.
#[tokio::test]
async fn rediss_wrong_password_fails_at_auth_then_delivers_once_fixed() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("ankusa test CA");
    let r = TlsRedis::start(
        dir.path(),
        &ca.server(&["localhost"], false),
        &ca.pem,
        false,
    );
    let ca_file = server::write(dir.path(), "ca.pem", &ca.pem);
    let channel = format!("ankusa.wrongpass.{}", suffix());
    let (got, task) = subscribe(&r, &channel).await;
    let env = hook(br#"{"id":"evt_wrong_pass"}"#);

    for userinfo in [format!("{ACL_USER}:wrong-pw-1234"), ":wrong-pw-1234".into()] {
        let wrong = build(
            &SinkBuilder::new(),
            sink_cfg(
                &r.tls_url(&userinfo, "localhost"),
                &channel,
                ca_tls(&ca_file),
            ),
        );
        let m = fails_with(&wrong, &env, &["not_connected: auth:", "WRONGPASS"]).await;
        eprintln!("wrong password: {m}");
    }
    // No password where the server requires one.
    let none = build(
        &SinkBuilder::new(),
        sink_cfg(
            &format!("rediss://localhost:{}/0", r.tls_port),
            &channel,
            ca_tls(&ca_file),
        ),
    );
    fails_with(&none, &env, &["NOAUTH"]).await;

    let fixed = build(
        &SinkBuilder::new(),
        sink_cfg(
            &r.tls_url(&format!("{ACL_USER}:{ACL_PASSWORD}"), "localhost"),
            &channel,
            ca_tls(&ca_file),
        ),
    );
    delivers(&fixed, &env).await;
    check_message(&wait_received(&got, 1).await[0], &env, &ctx());
    task.abort();
}

/// Nothing listening: the `tcp_connect` step.
#[tokio::test]
async fn rediss_nothing_listening_fails_at_tcp_connect() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("ankusa test CA");
    let port = free_port();
    let sink = build(
        &SinkBuilder::new(),
        sink_cfg(
            &format!("rediss://:{DEFAULT_PASSWORD}@localhost:{port}/0"),
            "ch",
            ca_tls(&server::write(dir.path(), "ca.pem", &ca.pem)),
        ),
    );
    fails_with(
        &sink,
        &hook(b"{}"),
        &["not_connected: tcp_connect:", "refused"],
    )
    .await;
}
