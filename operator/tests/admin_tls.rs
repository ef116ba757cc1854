//! The operator's admin client against the real gateway binary serving HTTPS with a
//! certificate from `pki::ensure` (what the operator writes into `<gateway>-admin-tls`): it
//! pushes a config to the Gateway's own pod, refuses a pod whose certificate another CA signed
//! or that names another Gateway's pods, never falls back to plain HTTP, and a pushed config
//! holding `${file:...}` is taken literally (a hook signed with that very text verifies).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use ankusa_operator::admin::{AdminClient, AdminError, AdminTrust, PodTarget};
use ankusa_operator::pki::{self, Issued};
use ankusa_testkit::process;

/// A pushed value that would read a file if the pod interpolated it.
const LITERAL: &str = "${file:/etc/passwd}";

const NAMES: [&str; 2] = ["gw-pods.team-a.svc", "*.gw-pods.team-a.svc"];

fn issue(ca_name: &str) -> Issued {
    let names: Vec<String> = NAMES.iter().map(|s| s.to_string()).collect();
    pki::ensure(None, None, ca_name, &names, time::OffsetDateTime::now_utc()).unwrap()
}

struct Pod {
    child: tokio::process::Child,
    http_port: u16,
    admin_port: u16,
    _dir: tempfile::TempDir,
}

/// The gateway binary as the operator's pods run it: admin TLS files named by environment,
/// a bearer token required.
async fn start_pod(issued: &Issued, token: &str) -> Pod {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let cert = write("tls.crt", &issued.leaf.cert_pem);
    let key = write("tls.key", &issued.leaf.key_pem);
    let config = write(
        "pod.yaml",
        &format!("admin:\n  tokens:\n    - token: {token}\n      scopes: ['*']\nsources: {{}}\n"),
    );
    let (http_port, admin_port, claims_port) = (
        process::free_port("127.0.0.1"),
        process::free_port("127.0.0.1"),
        process::free_port("127.0.0.1"),
    );
    let mut cmd = tokio::process::Command::new(ankusa_testkit::gateway_bin());
    cmd.arg("--config")
        .arg(&config)
        .env("ANKUSA_DATA_DIR", dir.path().join("data"))
        .env("ANKUSA_HTTP_PORT", http_port.to_string())
        .env("ANKUSA_ADMIN_PORT", admin_port.to_string())
        .env("ANKUSA_CLAIM_CHECK_PORT", claims_port.to_string())
        .env("ANKUSA_ADMIN_TLS_CERT_FILE", &cert)
        .env("ANKUSA_ADMIN_TLS_KEY_FILE", &key)
        .env_remove("RUST_LOG");
    let log = dir.path().join("gateway.log");
    let child = process::spawn(cmd, &log).expect("spawn the gateway");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", admin_port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "gateway not listening:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Pod {
        child,
        http_port,
        admin_port,
        _dir: dir,
    }
}

fn target(pod: &Pod, token: &str, trust: Option<AdminTrust>) -> PodTarget {
    PodTarget {
        name: "gw-0".into(),
        uid: "uid".into(),
        ip: "127.0.0.1".into(),
        port: pod.admin_port,
        token: token.into(),
        tls: trust.map(Arc::new),
    }
}

fn trust(issued: &Issued, server_name: &str) -> AdminTrust {
    AdminTrust {
        ca_pem: issued.ca.bundle_pem.clone(),
        server_name: server_name.into(),
    }
}

fn unreachable(r: Result<impl std::fmt::Debug, AdminError>) -> String {
    match r {
        Err(AdminError::Unreachable(m)) => m,
        other => panic!("expected the connection to be refused, got {other:?}"),
    }
}

fn gateway_available() -> bool {
    let bin = ankusa_testkit::gateway_bin();
    if Path::new(&bin).exists() {
        return true;
    }
    assert!(
        !ankusa_testkit::control_plane_required(),
        "{} missing (build the workspace first)",
        bin.display()
    );
    eprintln!("\n######## SKIPPED: {} missing\n", bin.display());
    false
}

#[tokio::test]
async fn the_operator_trusts_only_its_gateways_ca_and_name() {
    if !gateway_available() {
        return;
    }
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let token = "0123456789abcdef0123456789abcdef";
    let own = issue("ankusa admin CA team-a/gw");
    let mut pod = start_pod(&own, token).await;
    let client = AdminClient::new(Duration::from_secs(5));

    // The Gateway's own CA and pod domain: config pushes go through.
    let good = target(&pod, token, Some(trust(&own, NAMES[0])));
    let before = client.status(&good).await.expect("status over HTTPS");
    let pushed = format!(
        "admin:\n  tokens:\n    - token: {token}\n      scopes: ['*']\n\
         sources:\n  lit:\n    verify: {{type: github, secret: \"{LITERAL}\"}}\n    \
         sinks:\n      - type: log\n"
    );
    client.put_config(&good, &pushed).await.expect("push");
    let after = client.status(&good).await.unwrap();
    assert_eq!(after.generation, before.generation + 1, "{after:?}");
    // Taken literally: a hook signed with the text `${file:/etc/passwd}` itself verifies.
    let body = br#"{"n":1}"#;
    let mut mac = Hmac::<Sha256>::new_from_slice(LITERAL.as_bytes()).unwrap();
    mac.update(body);
    let sig = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    let r = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/webhooks/lit", pod.http_port))
        .header("x-hub-signature-256", sig)
        .header("x-github-delivery", "d-1")
        .body(&body[..])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);

    // A certificate of another CA (another Gateway's pod, or anyone on the pod network).
    let other = issue("ankusa admin CA team-b/gw");
    let m = unreachable(
        client
            .status(&target(&pod, token, Some(trust(&other, NAMES[0]))))
            .await,
    );
    assert!(m.contains("UnknownIssuer"), "{m}");
    // The right CA but another Gateway's pod domain.
    let m = unreachable(
        client
            .status(&target(
                &pod,
                token,
                Some(trust(&own, "gw-pods.team-b.svc")),
            ))
            .await,
    );
    assert!(m.contains("not valid for name"), "{m}");
    // A damaged bundle is an error of its own, never a fallback to an unverified connection.
    let m = unreachable(
        client
            .status(&target(
                &pod,
                token,
                Some(AdminTrust {
                    ca_pem: "junk".into(),
                    server_name: NAMES[0].into(),
                }),
            ))
            .await,
    );
    assert!(m.contains("admin CA"), "{m}");
    // Plain HTTP reaches nothing: the pod answers 400 tls_required.
    match client.status(&target(&pod, token, None)).await {
        Err(AdminError::Http { status: 400, body }) => assert!(body.contains("tls_required")),
        other => panic!("plain HTTP was not refused: {other:?}"),
    }
    process::stop(&mut pod.child, Duration::from_secs(10)).await;
}
