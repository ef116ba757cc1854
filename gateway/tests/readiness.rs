//! `/ready` tells the truth about the listeners: it answers `200` only once every configured
//! listener (ingest, admin, claim check) is bound, and names them; a port taken by another
//! process stops the start with the listener named, and no `/ready` says `ready` meanwhile.

mod common;

use std::time::{Duration, Instant};

use common::*;

#[test]
fn ready_names_every_listener_and_each_accepts_connections() {
    let g = Gateway::start("claim_check:\n  tokens: [every-tenant-reader-01]\nsources: {}\n");
    for url in [g.url("/ready"), g.admin_url("/ready")] {
        let (status, body) = blocking_get_text(&url).unwrap();
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "ready", "{body}");
        assert_eq!(
            v["listeners"],
            serde_json::json!(["ingest", "admin", "claim_check"]),
            "{body}"
        );
    }
    for addr in [g.ingest, g.admin, g.claims] {
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1))
            .unwrap_or_else(|e| panic!("{addr}: {e}"));
    }

    let plain = Gateway::start("claim_check:\n  enabled: false\nsources: {}\n");
    let (_, body) = blocking_get_text(&plain.url("/ready")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["listeners"],
        serde_json::json!(["ingest", "admin"]),
        "{body}"
    );
}

#[test]
fn a_taken_admin_port_stops_the_start_and_ingest_never_says_ready() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin_port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ankusa.yml");
    std::fs::write(&config, "sources: {}\n").unwrap();
    let ingest = free_port();
    let mut child = std::process::Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .env("ANKUSA_DATA_DIR", dir.path().join("data"))
        .env("ANKUSA_HTTP_IP", "127.0.0.1")
        .env("ANKUSA_HTTP_PORT", ingest.to_string())
        .env("ANKUSA_ADMIN_IP", "127.0.0.1")
        .env("ANKUSA_ADMIN_PORT", &admin_port)
        .env_remove("ANKUSA_CONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{ingest}/ready");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Ok((code, body)) = blocking_get_text(&url) {
            assert_ne!(code, 200, "ready while the admin port is not bound: {body}");
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the gateway did not stop");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("cannot bind admin"), "{err}");
    drop(taken);
}
