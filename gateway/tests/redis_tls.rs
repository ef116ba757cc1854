//! A Redis sink over `rediss://` through the real binary, against a redis-server that requires
//! TLS and a password: a wrong CA, then a wrong password, each keep the hook queued (retried,
//! never dead-lettered) with a `last_error` that names the step (the TLS handshake with the
//! server certificate's subject, then `auth`) and never the password; the reload that fixes the
//! config delivers it.

mod common;
#[path = "../../sinks/tests/support/redis_tls.rs"]
mod server;

use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use serde_json::Value;
use server::{ACL_PASSWORD, ACL_USER, Ca, TlsRedis};

fn config(url: &str, channel: &str, ca_file: &std::path::Path) -> String {
    format!(
        "egress: {{allow_loopback: true}}\ndispatch: {{breaker_failures: 0}}\nsources:\n  s:\n    \
         retry: {{base_ms: 50, max_ms: 300}}\n    sinks:\n      - type: redis\n        url: {url}\n        \
         channel: {channel}\n        tls: {{ca_file: {}}}\n",
        ca_file.display()
    )
}

/// Waits until the hook's delivery has failed at least `attempts` times with an error
/// containing `needle`; returns that error.
async fn failing_with(
    g: &Gateway,
    c: &reqwest::Client,
    id: &str,
    attempts: u64,
    needle: &str,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let h = g.admin_json(c, &format!("/v1/hooks/{id}")).await;
        let row = h["deliveries"][0].clone();
        let err = row["last_error"].as_str().unwrap_or_default().to_string();
        assert_ne!(row["state"], "dead", "retried, never dead-lettered: {row}");
        if row["attempts"].as_u64().unwrap_or(0) >= attempts && err.contains(needle) {
            return err;
        }
        assert!(
            Instant::now() < deadline,
            "no failed attempt naming {needle:?}: {h}\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    let ca_file = server::write(dir.path(), "ca.pem", &ca.pem);
    let other_file = server::write(dir.path(), "other.pem", &other.pem);
    let channel = format!("ankusa-tls-{}", uuid::Uuid::now_v7().simple());

    let sub = redis::Client::open(r.plain_url()).unwrap();
    let mut pubsub = sub.get_async_pubsub().await.expect("subscriber");
    pubsub.subscribe(&channel).await.unwrap();

    let right = r.tls_url(&format!("{ACL_USER}:{ACL_PASSWORD}"), "localhost");
    let wrong_pw = r.tls_url(&format!("{ACL_USER}:wrong-pw-1234"), "localhost");
    let g = Gateway::start(&config(&right, &channel, &other_file));
    let c = client();
    let resp = c
        .post(g.url("/webhooks/s"))
        .body("{\"n\":1}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let id = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

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
    let msg = tokio::time::timeout(Duration::from_secs(30), pubsub.on_message().next())
        .await
        .unwrap_or_else(|_| panic!("not delivered after the fix:\n{}", g.log_tail()))
        .expect("a message");
    let m: Value = serde_json::from_slice(msg.get_payload_bytes()).unwrap();
    assert_eq!(m["id"], id.as_str());
    assert!(!g.log().contains(ACL_PASSWORD), "the password is logged");
}
