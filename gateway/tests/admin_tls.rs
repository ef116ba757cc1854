//! The admin API over TLS (`admin.tls`, set through `ANKUSA_ADMIN_TLS_*` as the operator does),
//! through the real binary: plain HTTP is refused with `400 tls_required`, a client that
//! trusts the issuing CA gets through and one that trusts another CA does not, a certificate
//! swapped on disk is served without a restart (a damaged one is not: the previous one stays),
//! and unusable files stop the start with the field named and nothing of the key printed.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use ankusa_testkit::pki::Ca;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A serving certificate for `localhost`, signed by `ca`: (chain PEM, key PEM).
fn leaf(ca: &Ca) -> (String, String) {
    let pair = ca.server(&["localhost"], false);
    (pair.cert, pair.key)
}

/// Replaces a file the way a Secret volume does: a new file renamed over the old one.
fn swap(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A client trusting only `ca`; every request opens a new connection, so each one sees the
/// certificate served at that moment.
fn trusting(ca: &Ca) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .tls_certs_only([reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap()])
        .timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .unwrap()
}

async fn health(c: &reqwest::Client, g: &Gateway) -> Result<u16, String> {
    c.get(format!("https://localhost:{}/health", g.admin.port()))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .map_err(|e| format!("{e:?}"))
}

#[tokio::test]
async fn admin_api_serves_https_only_and_follows_certificate_swaps() {
    let (a, b) = (Ca::new("admin CA a"), Ca::new("admin CA b"));
    let tls_dir = tempfile::tempdir().unwrap();
    let (cert_file, key_file) = (
        tls_dir.path().join("tls.crt"),
        tls_dir.path().join("tls.key"),
    );
    let (cert, key) = leaf(&a);
    std::fs::write(&cert_file, &cert).unwrap();
    std::fs::write(&key_file, &key).unwrap();
    let g = Gateway::start_with(
        "sources: {}\n",
        &[
            ("ANKUSA_ADMIN_TLS_CERT_FILE", &path_str(&cert_file)),
            ("ANKUSA_ADMIN_TLS_KEY_FILE", &path_str(&key_file)),
        ],
    );

    // Plain HTTP gets a plain answer naming the problem, and the connection ends.
    let mut s = tokio::net::TcpStream::connect(g.admin).await.unwrap();
    s.write_all(b"GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut answer))
        .await
        .expect("the connection is closed after the answer")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.ends_with("{\"error\":\"tls_required\"}"), "{answer}");

    let (with_a, with_b) = (trusting(&a), trusting(&b));
    assert_eq!(health(&with_a, &g).await, Ok(200));
    let refused = health(&with_b, &g).await.unwrap_err();
    assert!(refused.contains("UnknownIssuer"), "{refused}");

    // A damaged rotation (a key that is not PEM) leaves the certificate in service.
    swap(&key_file, "not a key");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(health(&trusting(&a), &g).await, Ok(200));
    swap(&key_file, &key);

    // A rotation to a certificate of CA b: served within seconds, same process.
    let pid = g.pid();
    let (cert_b, key_b) = leaf(&b);
    swap(&key_file, &key_b);
    swap(&cert_file, &cert_b);
    let deadline = Instant::now() + Duration::from_secs(10);
    while health(&with_b, &g).await != Ok(200) {
        assert!(
            Instant::now() < deadline,
            "the new certificate is not served:\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A new client (no TLS session to resume) trusting only CA a is refused now.
    assert!(health(&trusting(&a), &g).await.is_err());
    assert_eq!(g.pid(), pid);
    assert!(
        g.log()
            .contains("TLS certificate reloaded section=\"admin.tls\""),
        "{}",
        g.log()
    );
    assert!(g.log().contains("TLS certificate not reloaded"));

    // The probes and the ingest port are not affected.
    assert_eq!(blocking_get(&g.url("/ready")).unwrap(), 200);
}

#[test]
fn unusable_certificate_files_stop_the_start_naming_the_field() {
    let a = Ca::new("admin CA");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ankusa.yml");
    std::fs::write(&config, "sources: {}\n").unwrap();
    let (cert, _) = leaf(&a);
    let (_, other_key) = leaf(&a);
    let cert_file = dir.path().join("tls.crt");
    let key_file = dir.path().join("tls.key");
    std::fs::write(&cert_file, &cert).unwrap();
    let cases: [(&str, Option<&str>, &str); 3] = [
        (
            "a key of another certificate",
            Some(&other_key),
            "admin.tls.key_file",
        ),
        ("no key file", None, "admin.tls.key_file"),
        ("a key file without PEM", Some("junk"), "admin.tls.key_file"),
    ];
    for (what, key, field) in cases {
        let _ = std::fs::remove_file(&key_file);
        if let Some(k) = key {
            std::fs::write(&key_file, k).unwrap();
        }
        let out = std::process::Command::new(BIN)
            .arg("--config")
            .arg(&config)
            .env("ANKUSA_DATA_DIR", dir.path().join("data"))
            .env("ANKUSA_HTTP_PORT", free_port().to_string())
            .env("ANKUSA_ADMIN_PORT", free_port().to_string())
            .env("ANKUSA_CLAIM_CHECK_PORT", free_port().to_string())
            .env("ANKUSA_ADMIN_TLS_CERT_FILE", &cert_file)
            .env("ANKUSA_ADMIN_TLS_KEY_FILE", &key_file)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{what}: started anyway");
        assert!(text.contains(field), "{what}: {text}");
        assert!(!text.contains("PRIVATE KEY"), "{what}: {text}");
    }
}
