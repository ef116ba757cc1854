//! The NATS sink against nats-servers that require TLS (and, in one, a client certificate),
//! each started by the test on a free port with certificates from a private CA made here.
//! Right CA and credentials deliver; a wrong CA, a wrong host name, an expired server
//! certificate and a wrong password each fail transient (the hook stays queued) with an error
//! naming the step, and the same hook lands, once, after the fix.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ankusa_config::{NatsAuth, NatsSinkConfig, NatsTls, SinkConfig, SinkTls};
use ankusa_core::{Envelope, Sink, SinkError};
use ankusa_sinks::SinkBuilder;
use ankusa_testkit::nats_server::*;
use ankusa_testkit::pki::{Ca, write};
use common::*;
use std::sync::Arc;

const SUBJECT: &str = "hooks.tls";
const SERVER_CN: &str = "nats-test-server";

/// A running server and the files a sink config points at.
struct Fixture {
    _dir: tempfile::TempDir,
    nats: NatsServer,
    ca: Ca,
    /// The right CA, as a file.
    ca_file: PathBuf,
    stream: async_nats::jetstream::stream::Stream,
}

/// A server with a certificate for `nats.test` and 127.0.0.1 (not `localhost`), a password
/// user, and `nkey_user` when given.
async fn fixture(verify: bool, nkey_user: Option<String>) -> Fixture {
    init();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("ankusa test CA");
    let server = ca.leaf(SERVER_CN, &["nats.test", "127.0.0.1"], false);
    let port = free_port();
    let nats = NatsServer::start(
        dir.path(),
        port,
        &Spec {
            server: Some(&server),
            client_ca: Some(&ca),
            verify,
            users: true,
            nkey_user,
        },
    );
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let client = if verify {
        let c = ca.leaf("test-client", &["test-client"], false);
        Some((
            write(dir.path(), "tc.pem", &c.cert),
            write(dir.path(), "tc.key", &c.key),
        ))
    } else {
        None
    };
    let stream = create_stream(
        port,
        &ca_file,
        client.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
        &format!("TLS_{}", suffix()),
    )
    .await;
    Fixture {
        _dir: dir,
        nats,
        ca,
        ca_file,
        stream,
    }
}

impl Fixture {
    fn server(&self, host: &str) -> String {
        format!("tls://{host}:{}", self.nats.port)
    }

    /// A sink config that should deliver: the right CA, the password user.
    fn good(&self) -> NatsSinkConfig {
        let mut c = NatsSinkConfig::new(vec![self.server("127.0.0.1")], SUBJECT);
        c.publish_timeout_ms = 2_000;
        c.tls = NatsTls::Settings(SinkTls {
            ca_file: Some(self.ca_file.clone().into()),
            ..Default::default()
        });
        c.auth = Some(NatsAuth {
            username: Some(USER.into()),
            password: Some(PASSWORD.into()),
            ..Default::default()
        });
        c
    }

    fn dir(&self) -> &Path {
        &self.nats.dir
    }
}

fn sink(builder: &SinkBuilder, cfg: NatsSinkConfig) -> Arc<dyn Sink> {
    build(builder, SinkConfig::Nats(cfg))
}

/// Two attempts through the broken sink (as dispatch would retry): each transient, naming
/// `needles`, never showing the password; then the fixed sink delivers the same hook, and
/// the stream holds it once.
async fn fails_then_lands(
    f: &Fixture,
    broken: NatsSinkConfig,
    fixed: NatsSinkConfig,
    needles: &[&str],
) -> String {
    let builder = SinkBuilder::new();
    let env = hook(br#"{"id":"evt_tls"}"#);
    let mut c = ctx();
    let broken = sink(&builder, broken);
    let mut first = String::new();
    for attempt in 1..=2 {
        c.attempt = attempt;
        match broken.deliver(&env, &c).await {
            Err(SinkError::Transient(m)) => {
                for n in needles {
                    assert!(m.contains(n), "{m:?} lacks {n:?}");
                }
                assert!(!m.contains(PASSWORD), "{m:?} shows the password");
                if first.is_empty() {
                    first = m;
                }
            }
            other => panic!("expected a transient failure naming {needles:?}, got {other:?}"),
        }
    }
    c.attempt = 3;
    deliver_until(&sink(&builder, fixed), &env, &c, Duration::from_secs(15)).await;
    assert_eq!(
        stored_ids(&f.stream).await,
        vec![env.id.to_string()],
        "the hook landed once"
    );
    first
}

/// Retries a delivery (a sink's failed dial is refused for 2 s before the next) until it is
/// acknowledged.
async fn deliver_until(
    sink: &Arc<dyn Sink>,
    env: &Envelope,
    c: &ankusa_core::DeliveryCtx,
    within: Duration,
) {
    let end = Instant::now() + within;
    loop {
        match sink.deliver(env, c).await {
            Ok(()) => return,
            Err(e) => {
                assert!(
                    !e.is_permanent(),
                    "a TLS or auth failure is never permanent: {e}"
                );
                assert!(Instant::now() < end, "not delivered within {within:?}: {e}");
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn nats_tls_right_ca_and_password_deliver() {
    let f = fixture(false, None).await;
    let builder = SinkBuilder::new();
    let s = sink(&builder, f.good());
    let env = hook(br#"{"id":"evt_ok"}"#);
    let c = ctx();
    s.deliver(&env, &c).await.expect("delivered over TLS");
    let m = f.stream.get_raw_message(1).await.expect("stored");
    check_message(&m.payload, &env, &c);
    // The CA given as PEM text in the config works the same.
    let mut pem = f.good();
    pem.tls = NatsTls::Settings(SinkTls {
        ca_pem: Some(f.ca.pem.clone().into()),
        ..Default::default()
    });
    let env2 = hook(br#"{"id":"evt_ok2"}"#);
    sink(&builder, pem)
        .deliver(&env2, &c)
        .await
        .expect("delivered with ca_pem");
    assert_eq!(
        stored_ids(&f.stream).await,
        vec![env.id.to_string(), env2.id.to_string()]
    );
}

#[tokio::test]
async fn nats_tls_wrong_ca_names_the_handshake_and_the_certificate() {
    let f = fixture(false, None).await;
    let other = Ca::new("some other CA");
    let mut broken = f.good();
    broken.tls = NatsTls::Settings(SinkTls {
        ca_file: Some(write(f.dir(), "other-ca.pem", &other.pem).into()),
        ..Default::default()
    });
    let m = fails_then_lands(
        &f,
        broken,
        f.good(),
        &["tls_handshake", "not issued by a trusted CA", SERVER_CN],
    )
    .await;
    // `tls: true` (the system's roots) refuses the private CA the same way.
    let mut system = f.good();
    system.tls = NatsTls::Enabled(true);
    let r = sink(&SinkBuilder::new(), system)
        .deliver(&hook(b"{}"), &ctx())
        .await;
    assert_transient(r, "tls_handshake");
    eprintln!("wrong CA: {m}");
}

#[tokio::test]
async fn nats_tls_wrong_host_name_is_refused_and_server_name_fixes_it() {
    let f = fixture(false, None).await;
    // `localhost` is not among the certificate's names (nats.test, 127.0.0.1).
    let mut broken = f.good();
    broken.servers = vec![f.server("localhost")];
    // The fix keeps dialing `localhost` and checks the certificate against `nats.test`.
    let mut fixed = broken.clone();
    fixed.tls = NatsTls::Settings(SinkTls {
        ca_file: Some(f.ca_file.clone().into()),
        server_name: Some("nats.test".into()),
        ..Default::default()
    });
    let m = fails_then_lands(
        &f,
        broken,
        fixed,
        &[
            "tls_handshake",
            "not valid for the server name",
            "nats.test",
        ],
    )
    .await;
    eprintln!("wrong host name: {m}");
}

#[tokio::test]
async fn nats_wrong_password_names_auth_and_never_the_password() {
    let f = fixture(false, None).await;
    let mut broken = f.good();
    broken.auth = Some(NatsAuth {
        username: Some(USER.into()),
        password: Some("not-the-password".into()),
        ..Default::default()
    });
    let m = fails_then_lands(&f, broken, f.good(), &["auth: authorization violation"]).await;
    assert!(!m.contains("not-the-password"), "{m}");
    eprintln!("wrong password: {m}");
}

/// The server's certificate expired: the same sink retries until the server has a fresh one.
#[tokio::test]
async fn nats_tls_expired_server_certificate_is_retried_until_renewed() {
    init();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("ankusa test CA");
    let port = free_port();
    let expired = ca.leaf(SERVER_CN, &["127.0.0.1"], true);
    let spec = |leaf| Spec {
        server: Some(leaf),
        client_ca: Some(&ca),
        verify: false,
        users: true,
        nkey_user: None,
    };
    let mut nats = NatsServer::start(dir.path(), port, &spec(&expired));
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let mut cfg = NatsSinkConfig::new(vec![format!("tls://127.0.0.1:{port}")], SUBJECT);
    cfg.tls = NatsTls::Settings(SinkTls {
        ca_file: Some(ca_file.clone().into()),
        ..Default::default()
    });
    cfg.auth = Some(NatsAuth {
        username: Some(USER.into()),
        password: Some(PASSWORD.into()),
        ..Default::default()
    });
    let builder = SinkBuilder::new();
    let s = sink(&builder, cfg);
    let env = hook(br#"{"id":"evt_expired"}"#);
    let c = ctx();
    let r = s.deliver(&env, &c).await;
    assert_transient(r, "tls_handshake: server certificate expired");
    match s.deliver(&env, &c).await {
        Err(SinkError::Transient(m)) => assert!(m.contains(SERVER_CN), "{m}"),
        other => panic!("{other:?}"),
    }
    // Renewed: the server restarts on the same port and store with a current certificate.
    nats.kill();
    let fresh = ca.leaf(SERVER_CN, &["127.0.0.1"], false);
    let nats = NatsServer::start(dir.path(), port, &spec(&fresh));
    let st = create_stream(port, &ca_file, None, "EXPIRED").await;
    deliver_until(&s, &env, &c, Duration::from_secs(15)).await;
    assert_eq!(stored_ids(&st).await, vec![env.id.to_string()]);
    drop(nats);
}

/// `verify: true`: a client certificate from the CA is required. Without one the handshake is
/// refused (transient, naming the step); with one (and an NKey user this time) it delivers.
#[tokio::test]
async fn nats_mutual_tls_with_an_nkey_user() {
    let kp = nkeys::KeyPair::new_user();
    let seed = kp.seed().expect("seed");
    let f = fixture(true, Some(kp.public_key())).await;
    let client = f.ca.leaf("ankusa-gateway", &["ankusa-gateway"], false);
    let nkey_auth = Some(NatsAuth {
        nkey_seed: Some(seed.clone().into()),
        ..Default::default()
    });
    let mut broken = f.good();
    broken.auth = nkey_auth.clone();
    let mut fixed = broken.clone();
    fixed.tls = NatsTls::Settings(SinkTls {
        ca_file: Some(f.ca_file.clone().into()),
        cert_file: Some(write(f.dir(), "client.pem", &client.cert).into()),
        key_pem: Some(client.key.clone().into()),
        ..Default::default()
    });
    let m = fails_then_lands(&f, broken, fixed, &["tls_handshake"]).await;
    assert!(!m.contains(&seed), "{m}");
    eprintln!("no client certificate: {m}");
}

/// A `.creds` file the sink cannot read is named (`auth.credentials_file`) without its path's
/// content, and retried like any failed dial.
#[tokio::test]
async fn nats_unreadable_credentials_file_is_named() {
    let f = fixture(false, None).await;
    let mut cfg = f.good();
    let creds = write(
        f.dir(),
        "bad.creds",
        "-----BEGIN NATS USER JWT-----\nnot-a-jwt-secret-text\n------END NATS USER JWT------\n",
    );
    cfg.auth = Some(NatsAuth {
        credentials_file: Some(creds.into()),
        ..Default::default()
    });
    let r = sink(&SinkBuilder::new(), cfg.clone())
        .deliver(&hook(b"{}"), &ctx())
        .await;
    match r {
        Err(SinkError::Transient(m)) => {
            assert!(m.contains("auth.credentials_file"), "{m}");
            assert!(!m.contains("not-a-jwt-secret-text"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    cfg.auth = Some(NatsAuth {
        credentials_file: Some(f.dir().join("missing.creds").into()),
        ..Default::default()
    });
    let r = sink(&SinkBuilder::new(), cfg)
        .deliver(&hook(b"{}"), &ctx())
        .await;
    assert_transient(r, "auth.credentials_file");
}

/// A CA file that cannot be read fails the dial, naming the setting.
#[tokio::test]
async fn nats_tls_missing_ca_file_is_named() {
    let f = fixture(false, None).await;
    let mut cfg = f.good();
    cfg.tls = NatsTls::Settings(SinkTls {
        ca_file: Some(f.dir().join("nope.pem").into()),
        ..Default::default()
    });
    let r = sink(&SinkBuilder::new(), cfg)
        .deliver(&hook(b"{}"), &ctx())
        .await;
    assert_transient(r, "tls_setup: tls.ca_file: cannot read the file");
}
