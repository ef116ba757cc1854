//! Store backups and boot restore through the real binary: signed hooks (some pending, some
//! dead in the DLQ) survive a clean stop, the loss of the whole data dir and a restart, with
//! their original ids, from a local directory and from S3 (moto_server on 127.0.0.1:5000,
//! started by `tests/brokers/start.sh`); a backup with one flipped byte refuses to start
//! (`store_restore_failed`) and leaves no store behind; a node never writes over another
//! store's backups (`foreign_backup`).

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::receiver::{Receiver, Reply};
use common::*;
use serde_json::Value;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SINK_SECRET: &str = "whsec_c2VjcmV0LW90aGVyc2VjcmV0LW90aGVy";

/// Two signed sources: `live` keeps its hooks pending (the receiver refuses, the next attempt
/// is minutes away), `dies` dead-letters them after one attempt.
fn config(sink: &str, backup: &str) -> String {
    format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
dispatch: {{breaker_failures: 0}}
{backup}
sources:
  live:
    verify: {{type: standard_webhooks, secret: "{SECRET}"}}
    dedupe: standard_webhooks
    retry: {{base_ms: 600000, max_ms: 600000, max_attempts: 10}}
    sinks:
      - type: http
        url: {sink}
        secret: {SINK_SECRET}
  dies:
    verify: {{type: standard_webhooks, secret: "{SECRET}"}}
    retry: {{base_ms: 20, max_ms: 50, max_attempts: 1}}
    sinks:
      - type: http
        url: {sink}
        secret: {SINK_SECRET}
"#
    )
}

fn local_backup(dir: &Path) -> String {
    format!(
        "backup:\n  enabled: true\n  interval_ms: 60000\n  store:\n    type: local\n    local:\n      dir: {}\n",
        dir.display()
    )
}

fn s3_backup(bucket: &str) -> String {
    format!(
        "backup:\n  enabled: true\n  interval_ms: 60000\n  key_prefix: team-b\n  store:\n    type: s3\n{}",
        moto_s3_yaml(bucket, "    ")
    )
}

/// POSTs `n` signed hooks to `source`; their webhook-ids and gateway ids.
async fn post_signed(
    c: &reqwest::Client,
    g: &Gateway,
    source: &str,
    n: usize,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 0..n {
        let msg = format!("msg_{source}_{i}");
        let body = format!("{{\"source\":\"{source}\",\"i\":{i}}}");
        let (status, v) = post_one(c, g, source, &msg, &body).await;
        assert_eq!(status, 201, "{v}");
        out.push((msg, v["id"].as_str().expect("id").to_string()));
    }
    out
}

async fn post_one(
    c: &reqwest::Client,
    g: &Gateway,
    source: &str,
    msg: &str,
    body: &str,
) -> (u16, Value) {
    let mut r = c
        .post(g.url(&format!("/webhooks/{source}")))
        .body(body.to_string());
    for (k, v) in standard_webhooks_headers(SECRET, msg, now_secs(), body.as_bytes()) {
        r = r.header(k, v);
    }
    let resp = r.send().await.expect("post");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// SIGTERM, and the final backup was written. (The exit status is not asserted: the process
/// sometimes aborts in RocksDB's teardown after `stopped`, with or without backups.)
fn clean_stop(g: &mut Gateway) {
    g.terminate().expect("it ran");
    let log = g.log();
    let final_at = log.rfind("clean stop: writing a final backup");
    assert!(
        final_at.is_some_and(|at| log[at..].contains("backup written")),
        "{}",
        g.log_tail()
    );
}

async fn wait_dead(c: &reqwest::Client, g: &Gateway, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let wal = g.admin_json(c, "/v1/wal").await;
        if wal["deliveries"]["dead"].as_i64() == Some(n) {
            return;
        }
        assert!(Instant::now() < deadline, "never {n} dead: {wal}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn dlq_ids(c: &reqwest::Client, g: &Gateway) -> HashSet<String> {
    let page = g.admin_json(c, "/v1/dlq?limit=1000").await;
    page["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("a DLQ page: {page}"))
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect()
}

async fn hook_status(c: &reqwest::Client, g: &Gateway, id: &str) -> u16 {
    c.get(g.admin_url(&format!("/v1/hooks/{id}")))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Posts hooks, stops cleanly, deletes the data dir, restarts: everything is back. Returns the
/// backup id the node says it restored.
async fn round_trip(backup: &str) -> String {
    let rx = Receiver::start(|_, _| Reply::status(500)).await;
    let mut g = Gateway::start(&config(&rx.url("/in"), backup));
    let c = client();
    let live = post_signed(&c, &g, "live", 30).await;
    let dead = post_signed(&c, &g, "dies", 10).await;
    wait_dead(&c, &g, 10).await;
    let dlq = dlq_ids(&c, &g).await;
    assert_eq!(
        dlq,
        dead.iter()
            .map(|(_, id)| id.clone())
            .collect::<HashSet<_>>()
    );
    let st = g.admin_json(&c, "/v1/status").await;
    assert_eq!(st["backup"]["runs"], 0, "none yet: {st}");
    assert!(st["backup"].get("restored_from").is_none(), "{st}");
    let m = g.metrics(&c).await;
    assert!(
        m.contains("ankusa_backup_runs_total{outcome=\"ok\"} 0"),
        "{m}"
    );
    assert!(m.contains("ankusa_backup_age_seconds"), "{m}");

    // A clean stop writes the final backup; then the volume is lost.
    clean_stop(&mut g);
    std::fs::remove_dir_all(g.data_dir()).unwrap();

    let started = Instant::now();
    g.spawn_again();
    g.wait_ready(Duration::from_secs(60));
    eprintln!("restored and ready in {:?}", started.elapsed());
    let c = client();
    let st = g.admin_json(&c, "/v1/status").await;
    let restored = st["backup"]["restored_from"]
        .as_str()
        .unwrap_or_else(|| panic!("restored_from: {st}"))
        .to_string();
    for (_, id) in &live {
        assert_eq!(hook_status(&c, &g, id).await, 200, "hook {id} is back");
    }
    assert_eq!(dlq_ids(&c, &g).await, dlq, "every dead row, same ids");
    let wal = g.admin_json(&c, "/v1/wal").await;
    assert_eq!(wal["deliveries"]["pending"], 30, "{wal}");
    // Dedupe state came back too: a provider retry gets the original id.
    let (msg, id) = &live[7];
    let (s, v) = post_one(&c, &g, "live", msg, "{\"source\":\"live\",\"i\":7}").await;
    assert_eq!((s, v["id"].as_str()), (201, Some(id.as_str())), "{v}");
    assert_eq!(v["duplicate"], true, "{v}");
    assert!(g.log().contains("store restored from backup"));
    restored
}

#[tokio::test]
async fn a_local_backup_brings_back_every_hook_and_dead_row_after_the_data_dir_is_lost() {
    let blobs = tempfile::tempdir().unwrap();
    let restored = round_trip(&local_backup(blobs.path())).await;
    let latest: Value =
        serde_json::from_slice(&std::fs::read(blobs.path().join("backup/default/LATEST")).unwrap())
            .unwrap();
    assert_eq!(latest["backup_id"], restored.as_str(), "{latest}");
    // SST files are content-keyed and shared; the rest goes per backup.
    let files: Vec<_> = std::fs::read_dir(blobs.path().join("backup/default/files"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !files.is_empty() && files.iter().all(|f| f.ends_with(".sst")),
        "{files:?}"
    );
}

#[tokio::test]
async fn an_s3_backup_brings_back_every_hook_and_dead_row_after_the_data_dir_is_lost() {
    let c = client();
    let bucket = moto_bucket(&c, "ankusa-backup").await;
    let restored = round_trip(&s3_backup(&bucket)).await;
    // Objects are private (an unsigned GET is refused): the listing shows LATEST and the
    // manifest of the backup restored.
    let listing = c
        .get(format!(
            "{MOTO}/{bucket}?list-type=2&prefix=team-b/backup/default/"
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        listing.contains("<Key>team-b/backup/default/LATEST</Key>"),
        "{listing}"
    );
    assert!(
        listing.contains(&format!("team-b/backup/default/manifests/{restored}.json")),
        "{listing}"
    );
    assert!(listing.contains(".sst</Key>"), "{listing}");
}

/// Runs the gateway on `g`'s config and data dir in the foreground: it must exit (a refused
/// start) within the timeout.
fn run_expecting_exit(g: &Gateway, timeout: Duration) -> (std::process::ExitStatus, String) {
    let stderr_path = g.dir.path().join("refused.stderr");
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(&g.config_path)
        .env("ANKUSA_DATA_DIR", g.data_dir())
        .env("ANKUSA_HTTP_IP", "127.0.0.1")
        .env("ANKUSA_HTTP_PORT", g.ingest.port().to_string())
        .env("ANKUSA_ADMIN_IP", "127.0.0.1")
        .env("ANKUSA_ADMIN_PORT", g.admin.port().to_string())
        .env("ANKUSA_CLAIM_CHECK_IP", "127.0.0.1")
        .env("ANKUSA_CLAIM_CHECK_PORT", g.claims.port().to_string())
        .env_remove("ANKUSA_CONFIG")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&stderr_path).unwrap()))
        .spawn()
        .expect("spawn ankusa");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the gateway started instead of refusing:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (
        status,
        std::fs::read_to_string(&stderr_path).unwrap_or_default(),
    )
}

fn ssts(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect()
}

#[tokio::test]
async fn a_tampered_backup_refuses_to_start_and_never_starts_empty() {
    let rx = Receiver::start(|_, _| Reply::status(500)).await;
    let blobs = tempfile::tempdir().unwrap();
    let mut g = Gateway::start(&config(&rx.url("/in"), &local_backup(blobs.path())));
    let c = client();
    post_signed(&c, &g, "live", 20).await;
    clean_stop(&mut g);
    std::fs::remove_dir_all(g.data_dir()).unwrap();

    // One byte of one uploaded SST file, same size.
    let files = ssts(&blobs.path().join("backup/default/files"));
    let victim = files.first().expect("an uploaded sst").clone();
    let mut bytes = std::fs::read(&victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&victim, &bytes).unwrap();

    let (status, stderr) = run_expecting_exit(&g, Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "a refused start: {status}");
    assert!(stderr.contains("store_restore_failed"), "{stderr}");
    assert!(
        stderr.contains(".sst") && stderr.contains("sha256"),
        "names the file: {stderr}"
    );
    let store = g.data_dir().join("default/store");
    assert!(
        !store.join("CURRENT").exists(),
        "no store was started in its place"
    );
    assert!(!g.data_dir().join("default/RESTORE-IN-PROGRESS").exists());
    // And again: still refused, never an empty start.
    let (status, stderr) = run_expecting_exit(&g, Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("store_restore_failed"), "{stderr}");
}

#[tokio::test]
async fn a_node_never_writes_over_another_stores_backups() {
    let rx = Receiver::start(|_, _| Reply::status(500)).await;
    let blobs = tempfile::tempdir().unwrap();
    let mut a = Gateway::start(&config(&rx.url("/in"), &local_backup(blobs.path())));
    let c = client();
    post_signed(&c, &a, "live", 5).await;
    clean_stop(&mut a);
    let latest_path = blobs.path().join("backup/default/LATEST");
    let latest = std::fs::read(&latest_path).unwrap();

    // Another node with its own store, then backups on at the same place (same instance name,
    // same prefix): it must refuse, every time, and leave the first node's LATEST alone.
    let mut b = Gateway::start(&config(&rx.url("/in"), ""));
    post_signed(&c, &b, "live", 3).await;
    b.terminate();
    b.write_config(
        &config(&rx.url("/in"), &local_backup(blobs.path()))
            .replace("interval_ms: 60000", "interval_ms: 1000"),
    );
    b.spawn_again();
    b.wait_ready(Duration::from_secs(30));
    let c = client();
    let deadline = Instant::now() + Duration::from_secs(30);
    let st = loop {
        let st = b.admin_json(&c, "/v1/status").await;
        if st["backup"]["failures"].as_u64() >= Some(1) {
            break st;
        }
        assert!(Instant::now() < deadline, "never refused: {st}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        st["backup"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("foreign_backup")),
        "{st}"
    );
    assert!(
        st["backup"].get("restored_from").is_none(),
        "its own store: {st}"
    );
    let m = b.metrics(&c).await;
    assert!(
        metric(&m, "ankusa_backup_refused_total{reason=\"foreign_backup\"}") >= 1.0,
        "{m}"
    );
    assert!(metric(&m, "ankusa_backup_runs_total{outcome=\"failed\"}") >= 1.0);
    b.terminate();
    assert_eq!(std::fs::read(&latest_path).unwrap(), latest, "untouched");
    assert!(b.log().contains("foreign_backup"));
}
