//! A NATS sink whose TLS settings are wrong, through the real binary: the broker requires TLS
//! (a private CA made by the test) and a password. Each attempt fails transient with an error
//! naming the step (`tls_handshake`, and the server certificate's subject), the hook stays
//! queued, and once the config is fixed and reloaded the hook lands in the stream.

mod common;

use std::time::{Duration, Instant};

use ankusa_testkit::nats_server::*;
use ankusa_testkit::pki::Ca;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wrong_ca_keeps_the_hook_queued_until_a_reload_fixes_it() {
    // The test's own TLS client needs a process-wide provider (the gateway installs its own).
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let tmp = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("ankusa test CA");
    let server = ca.leaf("nats-gw-test", &["127.0.0.1"], false);
    let port = free_port();
    let _nats = NatsServer::start(
        tmp.path(),
        port,
        &Spec {
            server: Some(&server),
            client_ca: Some(&ca),
            verify: false,
            users: true,
            nkey_user: None,
        },
    );
    let right_ca = tmp.path().join("right-ca.pem");
    std::fs::write(&right_ca, &ca.pem).expect("write");
    let wrong_ca = tmp.path().join("wrong-ca.pem");
    std::fs::write(&wrong_ca, Ca::new("some other CA").pem).expect("write");
    let stream = create_stream(port, &right_ca, None, "HOOKS").await;

    let config = |ca_file: &std::path::Path| {
        format!(
            "egress: {{allow_loopback: true}}\ndispatch: {{breaker_failures: 0}}\nsources:\n  s:\n    retry: {{base_ms: 50, max_ms: 300}}\n    sinks:\n      - type: nats\n        servers: [\"tls://127.0.0.1:{port}\"]\n        subject: hooks.s\n        publish_timeout_ms: 2000\n        tls: {{ca_file: \"{}\"}}\n        auth: {{username: {USER}, password: {PASSWORD}}}\n",
            ca_file.display()
        )
    };
    let g = Gateway::start(&config(&wrong_ca));
    let c = client();
    let id = post_hook(&c, &g, "/webhooks/s", "{}").await;
    let row = retried_row(&c, &g, &id, 30).await;
    let err = row["last_error"].as_str().unwrap_or_default();
    assert!(
        err.contains("tls_handshake") && err.contains("CN=nats-gw-test"),
        "the step and the server certificate: {row}"
    );
    assert!(stored_ids(&stream).await.is_empty());
    let log = g.log();
    assert!(log.contains("tls_handshake"), "the log names the step");
    assert!(!log.contains(PASSWORD), "the log shows the password");

    g.write_config(&config(&right_ca));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ids = stored_ids(&stream).await;
        if !ids.is_empty() {
            assert_eq!(ids, vec![id.clone()], "the queued hook, once");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not delivered after the reload:\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
