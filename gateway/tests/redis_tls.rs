//! A Redis sink over `rediss://` through the real binary, against a redis-server that requires
//! TLS and a password: a wrong CA, then a wrong password, each keep the hook queued (retried,
//! never dead-lettered) with a `last_error` that names the step (the TLS handshake with the
//! server certificate's subject, then `auth`) and never the password; the reload that fixes the
//! config delivers it.

mod common;

use std::time::Duration;

use ankusa_testkit::pki::{Ca, write};
use ankusa_testkit::redis_server::{ACL_PASSWORD, ACL_USER, TlsRedis};
use common::*;

fn config(url: &str, channel: &str, ca_file: &std::path::Path) -> String {
    format!(
        "egress: {{allow_loopback: true}}\ndispatch: {{breaker_failures: 0}}\nsources:\n  s:\n    \
         retry: {{base_ms: 50, max_ms: 300}}\n    sinks:\n      - type: redis\n        url: {url}\n        \
         channel: {channel}\n        tls: {{ca_file: {}}}\n",
        ca_file.display()
    )
}

/// Waits until the hook's delivery has failed at least `n` times with an error containing
/// `needle` (retried, never dead-lettered); returns that error.
async fn failing_with(g: &Gateway, c: &reqwest::Client, id: &str, n: u64, needle: &str) -> String {
    let what = format!("no failed attempt naming {needle:?}");
    let row = wait_delivery_row(c, g, id, Duration::from_secs(30), &what, |row| {
        assert_ne!(row["state"], "dead", "retried, never dead-lettered: {row}");
        let err = row["last_error"].as_str().unwrap_or_default();
        attempts(row) >= n && err.contains(needle)
    })
    .await;
    row["last_error"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rediss_wrong_ca_then_wrong_password_keep_the_hook_queued_until_a_reload_fixes_them() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("ankusa test CA");
    let other = Ca::new("some other CA");
    let r = TlsRedis::start(
        dir.path(),
        &ca.server(&["localhost"], false),
        &ca.pem,
        false,
    );
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let other_file = write(dir.path(), "other.pem", &other.pem);
    let channel = format!("ankusa-tls-{}", uuid::Uuid::now_v7().simple());

    let sub = redis::Client::open(r.plain_url()).unwrap();
    let mut pubsub = sub.get_async_pubsub().await.expect("subscriber");
    pubsub.subscribe(&channel).await.unwrap();

    let right = r.tls_url(&format!("{ACL_USER}:{ACL_PASSWORD}"), "localhost");
    let wrong_pw = r.tls_url(&format!("{ACL_USER}:wrong-pw-1234"), "localhost");
    let g = Gateway::start(&config(&right, &channel, &other_file));
    let c = client();
    let id = post_hook(&c, &g, "/webhooks/s", "{\"n\":1}").await;

    let err = failing_with(&g, &c, &id, 2, "tls_handshake").await;
    assert!(
        err.contains("not issued by a trusted CA") && err.contains("subject CN=localhost"),
        "{err}"
    );
    eprintln!("wrong CA: {err}");

    // Reload: the right CA, a wrong password.
    g.write_config(&config(&wrong_pw, &channel, &ca_file));
    let err = failing_with(&g, &c, &id, 3, "auth:").await;
    assert!(err.contains("WRONGPASS"), "{err}");
    assert!(!err.contains("wrong-pw-1234"), "the password shows: {err}");
    assert!(!g.log().contains("wrong-pw-1234"), "the password is logged");
    eprintln!("wrong password: {err}");

    // Reload: both right; the queued hook is delivered.
    g.write_config(&config(&right, &channel, &ca_file));
    let m = next_message(&mut pubsub, &g, 30).await;
    assert_eq!(m["id"], id.as_str());
    assert!(!g.log().contains(ACL_PASSWORD), "the password is logged");
}
