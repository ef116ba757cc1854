//! The archive and the bounded DLQ through the real binary: delivered hooks are packed into
//! segments on S3 (moto_server on 127.0.0.1:5000, started by `tests/brokers/start.sh`) and on
//! the local filesystem, fetched back by id, re-sent over a receive-time window by an archive
//! replay (exactly that window, byte-identical, with the job's replay id); a corrupted segment
//! is caught by its sha256 and reported, not sent; a job killed with -9 mid-way resumes and queues
//! each hook once; a DLQ over `queue.dlq.max_rows` answers
//! `503 dlq_full` while its rows are not archived and evicts them once they are, losing none.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use base64::Engine;
use common::receiver::{Receiver, Reply};
use common::*;
use serde_json::{Value, json};

const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn config(url: &str, storage: &str, extra: &str) -> String {
    format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
dispatch: {{breaker_failures: 0}}
{storage}
{extra}
sources:
  s:
    retry: {{base_ms: 20, max_ms: 50, max_attempts: 1}}
    sinks: [{{type: http, url: "{url}", secret: "{SINK_SECRET}"}}]
"#
    )
}

fn s3_storage(bucket: &str) -> String {
    format!(
        "storage:\n  type: s3\n  key_prefix: team-a\n  roll_ms: 200\n  interval_ms: 50\n{}",
        moto_s3_yaml(bucket, "  ")
    )
}

fn local_storage(dir: &std::path::Path, roll_ms: u64) -> String {
    format!(
        "storage:\n  type: local\n  roll_ms: {roll_ms}\n  interval_ms: 50\n  local:\n    dir: {}\n",
        dir.display()
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn wait_status(
    c: &reqwest::Client,
    g: &Gateway,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let st = g.admin_json(c, "/v1/status").await;
        if pred(&st) {
            return st;
        }
        assert!(Instant::now() < deadline, "never {what}: {st}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every hook accepted so far is in an uploaded segment.
async fn wait_archived(c: &reqwest::Client, g: &Gateway, n: i64) -> Value {
    wait_status(c, g, "archived", |st| {
        st["archive"]["pending"] == 0 && st["archive"]["archived"].as_i64() == Some(n)
    })
    .await
}

async fn start_archive_job(c: &reqwest::Client, g: &Gateway, body: Value) -> String {
    let r = g.admin_post(c, "/v1/replays", &body).await;
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, 202, "a new job: {v}");
    assert_eq!(v["kind"], "archive");
    v["id"].as_str().unwrap().to_string()
}

fn body_of(i: usize, batch: &str) -> String {
    // Bytes a re-encoding would change: a NUL escape, non-ASCII, trailing spaces.
    format!("{{\"batch\":\"{batch}\",\"i\":{i},\"s\":\"caf\u{e9} \\u0000\"}}  ")
}

#[tokio::test]
async fn s3_archive_fetches_by_id_and_a_window_replay_resends_exactly_that_window() {
    let c = client();
    let bucket = moto_bucket(&c, "ankusa-archive").await;

    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let g = Gateway::start(&config(&rx.url("/in"), &s3_storage(&bucket), ""));
    let a = post_ids(&c, &g, "/webhooks/s", 10, |i| body_of(i, "a")).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let from = now_ms();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let b = post_ids(&c, &g, "/webhooks/s", 10, |i| body_of(i, "b")).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let to = now_ms();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let z = post_ids(&c, &g, "/webhooks/s", 10, |i| body_of(i, "z")).await;
    rx.wait_for(Duration::from_secs(30), |r| r.len() >= 30)
        .await;
    let st = wait_archived(&c, &g, 30).await;
    assert_eq!(st["archive"]["store"], "s3", "{st}");
    assert!(st["archive"]["segments"].as_i64().unwrap() >= 1, "{st}");

    // Delivered and archived: the store keeps none of them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while g.admin_json(&c, "/v1/wal").await["hooks"] != 0 {
        assert!(Instant::now() < deadline, "hooks never reclaimed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        c.get(g.admin_url(&format!("/v1/hooks/{}", a[3])))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        404,
        "reclaimed from the store"
    );

    // One hook back by id: a ranged GET of its record, byte-identical.
    let h = g
        .admin_json(&c, &format!("/v1/archive/hooks/{}", a[3]))
        .await;
    let body = base64::engine::general_purpose::STANDARD
        .decode(h["body_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(body, body_of(3, "a").as_bytes(), "{h}");
    let key = h["segment"].as_str().unwrap().to_string();
    assert!(
        key.starts_with("team-a/archive/v1/dt=") && key.ends_with(".seg"),
        "{key}"
    );
    // The objects are really in the bucket: the segment and its index.
    let listing = c
        .get(format!(
            "{MOTO}/{bucket}?list-type=2&prefix=team-a/archive/v1/"
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(listing.contains(&key), "{listing}");
    assert!(listing.contains(&key.replace(".seg", ".idx")), "{listing}");
    let missing = g
        .admin_json(&c, &format!("/v1/archive/hooks/{}", uuid_v7_like()))
        .await;
    assert_eq!(missing["error"], "hook_not_archived", "{missing}");

    // An archive replay over [from, to): exactly batch b, once each, byte-identical bodies.
    let job = start_archive_job(&c, &g, json!({"kind": "archive", "from": from, "to": to})).await;
    let done = wait_job_done(&c, &g, &job).await;
    assert_eq!(done["released"], 10, "{done}");
    assert_eq!(done["delivered"], 10, "{done}");
    let all = rx
        .wait_for(Duration::from_secs(30), |r| r.len() >= 40)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let all = if rx.count() > all.len() {
        rx.received()
    } else {
        all
    };
    assert_eq!(all.len(), 40, "exactly the window again");
    let replayed: Vec<_> = all
        .iter()
        .filter(|r| r.header("x-ankusa-replay-id").as_deref() == Some(job.as_str()))
        .collect();
    assert_eq!(replayed.len(), 10);
    let ids: HashSet<String> = replayed
        .iter()
        .map(|r| r.header("webhook-id").expect("webhook-id"))
        .collect();
    let want: HashSet<String> = b.iter().cloned().collect();
    assert_eq!(ids, want, "the window's hooks, with their original ids");
    for r in &replayed {
        let id = r.header("webhook-id").unwrap();
        let i = b.iter().position(|x| *x == id).unwrap();
        assert_eq!(&r.body[..], body_of(i, "b").as_bytes(), "byte-identical");
    }
    assert!(z.iter().all(|id| !ids.contains(id)) && a.iter().all(|id| !ids.contains(id)));

    // A sink subset that names no sink of the source sends nothing; a bad window is refused.
    let bad = g
        .admin_post(
            &c,
            "/v1/replays",
            &json!({"kind": "archive", "from": to, "to": from}),
        )
        .await;
    assert_eq!(bad.status().as_u16(), 400);
    let v: Value = bad.json().await.unwrap();
    assert_eq!(v["error"], "invalid_filter", "{v}");
    let none = start_archive_job(
        &c,
        &g,
        json!({"kind": "archive", "from": from, "to": to, "sinks": [5]}),
    )
    .await;
    let done = wait_job_done(&c, &g, &none).await;
    assert_eq!(
        (done["released"].as_u64(), done["skipped"].as_u64()),
        (Some(0), Some(10)),
        "{done}"
    );
}

/// A uuid that no hook has.
fn uuid_v7_like() -> String {
    "0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee".to_string()
}

#[tokio::test]
async fn a_corrupted_local_segment_is_reported_by_its_sha256_and_not_sent() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let dir = tempfile::tempdir().unwrap();
    let blobs = dir.path().join("blobs");
    let mut g = Gateway::start(&config(&rx.url("/in"), &local_storage(&blobs, 100), ""));
    let c = client();
    let from = now_ms();
    let a = post_ids(&c, &g, "/webhooks/s", 5, |i| body_of(i, "a")).await;
    wait_archived(&c, &g, 5).await;
    let b = post_ids(&c, &g, "/webhooks/s", 5, |i| body_of(i, "b")).await;
    wait_archived(&c, &g, 10).await;
    rx.wait_for(Duration::from_secs(30), |r| r.len() >= 10)
        .await;

    // The archive survives kill -9 (the catalogue is in the store).
    g.kill9();
    g.restart();
    // A new client: the old one's pooled connections went with the process.
    let c = client();
    let h = g
        .admin_json(&c, &format!("/v1/archive/hooks/{}", b[0]))
        .await;
    assert_eq!(h["id"], b[0].as_str(), "{h}");

    // Where each hook sits (a batch can span two segments if a tick fell inside it).
    let mut seg_of = std::collections::HashMap::new();
    let mut last_of_a: Option<(u64, String)> = None;
    for id in a.iter().chain(&b) {
        let h = g.admin_json(&c, &format!("/v1/archive/hooks/{id}")).await;
        let seg = h["segment"].as_str().expect("archived").to_string();
        if id == &a[0] || seg_of.get(&a[0]) == Some(&seg) {
            let seq = h["seq"].as_u64().unwrap();
            if last_of_a.as_ref().is_none_or(|(s, _)| seq > *s) {
                last_of_a = Some((seq, id.clone()));
            }
        }
        seg_of.insert(id.clone(), seg);
    }
    let damaged = seg_of[&a[0]].clone();
    let expected: HashSet<String> = seg_of
        .iter()
        .filter(|(_, seg)| **seg != damaged)
        .map(|(id, _)| id.clone())
        .collect();
    assert!(
        expected.is_superset(&b.iter().cloned().collect()),
        "b is after a"
    );

    // One flipped byte near the end: inside the body of the segment's last record.
    let path = blobs.join(&damaged);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len() - 4;
    bytes[n] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    // A ranged read of the damaged record is refused, not served.
    let (_, last) = last_of_a.unwrap();
    let r = c
        .get(g.admin_url(&format!("/v1/archive/hooks/{last}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 500);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "archive_corrupt");

    let job = start_archive_job(
        &c,
        &g,
        json!({"kind": "archive", "from": from, "to": now_ms() + 1}),
    )
    .await;
    let done = wait_job_done(&c, &g, &job).await;
    assert_eq!(done["corrupt_segments"], 1, "{done}");
    assert!(
        done["reason"].as_str().unwrap().contains("sha256"),
        "{done}"
    );
    assert_eq!(
        done["released"].as_u64(),
        Some(expected.len() as u64),
        "{done}"
    );
    let want = 10 + expected.len();
    rx.wait_for(Duration::from_secs(30), |r| r.len() >= want)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resent: HashSet<String> = rx
        .received()
        .iter()
        .filter(|r| r.header("x-ankusa-replay-id").as_deref() == Some(job.as_str()))
        .map(|r| r.header("webhook-id").unwrap())
        .collect();
    assert_eq!(resent, expected, "only the intact segments' hooks");
    assert_eq!(rx.count(), want);
}

/// Dead rows of every hook (the receiver refuses everything, one attempt each).
async fn wait_dead(c: &reqwest::Client, g: &Gateway, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let wal = g.admin_json(c, "/v1/wal").await;
        if wal["deliveries"]["dead"].as_i64() == Some(n) && wal["deliveries"]["pending"] == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "never {n} dead: {wal}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `DELETE /v1/dlq?limit=<limit>`: the eviction's answer.
async fn delete_dlq(c: &reqwest::Client, g: &Gateway, limit: usize) -> Value {
    let url = g.admin_url(&format!("/v1/dlq?limit={limit}"));
    c.delete(url).send().await.unwrap().json().await.unwrap()
}

async fn post_status(c: &reqwest::Client, g: &Gateway, body: &str) -> (u16, Option<String>, Value) {
    let r = post_to(c, &g.url("/webhooks/s"), body.to_string()).await;
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    (status, retry, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_full_dlq_refuses_until_its_rows_are_archived_then_evicts_them_and_loses_none() {
    let rx = Receiver::start(|_, _| Reply::status(500)).await;
    let dir = tempfile::tempdir().unwrap();
    // The archive's directory is a file at first: every upload fails, nothing is archived.
    let blobs = dir.path().join("blobs");
    std::fs::write(&blobs, b"not a directory").unwrap();
    let bounds = "queue:\n  dlq:\n    max_rows: 5\n    reap_interval_ms: 100\n";
    let g = Gateway::start(&config(&rx.url("/in"), &local_storage(&blobs, 50), bounds));
    let c = client();
    // Hooks are accepted (and die: one attempt, refused) until the DLQ is over max_rows with
    // nothing archived: from then on new hooks are refused, and nothing is deleted.
    let mut ids = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (status, retry, v) = loop {
        let got = post_status(&c, &g, &format!("{{\"i\":{}}}", ids.len())).await;
        if got.0 != 201 {
            break got;
        }
        ids.push(got.2["id"].as_str().unwrap().to_string());
        assert!(Instant::now() < deadline, "never dlq_full");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(ids.len() > 5, "accepted up to the bound: {}", ids.len());
    assert_eq!((status, retry.as_deref()), (503, Some("60")), "{v}");
    assert_eq!(v["error"], "dlq_full");
    wait_dead(&c, &g, ids.len() as i64).await;
    let st = g.admin_json(&c, "/v1/status").await;
    assert_eq!(st["dlq"]["full"], true, "{st}");
    assert_eq!(st["dlq"]["rows"].as_u64(), Some(ids.len() as u64), "{st}");
    assert!(st["archive"]["failures"].as_u64().unwrap() > 0, "{st}");
    assert!(g.metrics(&c).await.contains("ankusa_dlq_full 1"));
    // DELETE /v1/dlq evicts only archived rows: none yet.
    let del = delete_dlq(&c, &g, 3).await;
    assert_eq!(del["deleted"], 0, "{del}");
    assert!(del["unarchived"].as_u64().unwrap() >= 3, "{del}");

    // The archive comes back: its rows are archived, the oldest evicted down to max_rows,
    // and hooks are accepted again.
    std::fs::remove_file(&blobs).unwrap();
    let st = wait_status(&c, &g, "not full", |st| {
        st["dlq"]["full"] == false && st["dlq"]["rows"].as_i64() <= Some(5)
    })
    .await;
    assert_eq!(st["archive"]["pending"], 0, "{st}");
    let (status, _, v) = post_status(&c, &g, "{\"after\":1}").await;
    assert_eq!(status, 201, "{v}");
    let m = g.metrics(&c).await;
    let over = (ids.len() - 5) as f64;
    assert!(
        metric(&m, "ankusa_dlq_evicted_total{reason=\"max_rows\"}") >= over,
        "{m}"
    );

    // Nothing acked is lost: every id is still dead in the store, or fetchable from the archive.
    let mut in_store = 0;
    let mut in_archive = 0;
    for id in &ids {
        let r = c
            .get(g.admin_url(&format!("/v1/hooks/{id}")))
            .send()
            .await
            .unwrap();
        if r.status().as_u16() == 200 {
            in_store += 1;
            continue;
        }
        let h = g.admin_json(&c, &format!("/v1/archive/hooks/{id}")).await;
        assert_eq!(
            h["id"],
            id.as_str(),
            "hook {id} neither dead nor archived: {h}"
        );
        in_archive += 1;
    }
    assert_eq!(in_store + in_archive, ids.len());
    assert!(
        in_archive >= ids.len() - 5,
        "the evicted ones are in the archive"
    );

    // DELETE /v1/dlq now evicts archived rows and says so.
    let del = delete_dlq(&c, &g, 2).await;
    assert_eq!(del["deleted"], 2, "{del}");
    assert_eq!(del["unarchived"], 0, "{del}");
    assert!(del["bytes"].as_u64().unwrap() > 0, "{del}");
}

#[tokio::test]
async fn an_archive_replay_killed_mid_way_resumes_and_queues_each_hook_once() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let dir = tempfile::tempdir().unwrap();
    let blobs = dir.path().join("blobs");
    let mut g = Gateway::start(&config(&rx.url("/in"), &local_storage(&blobs, 50), ""));
    let c = client();
    let from = now_ms();
    let ids = post_ids(&c, &g, "/webhooks/s", 300, |i| format!("{{\"i\":{i}}}")).await;
    rx.wait_for(Duration::from_secs(60), |r| r.len() >= 300)
        .await;
    wait_archived(&c, &g, 300).await;
    let to = now_ms() + 1;

    // 100 hooks a second: the kill lands mid-way.
    let job = start_archive_job(
        &c,
        &g,
        json!({"kind": "archive", "from": from, "to": to, "rate": 100}),
    )
    .await;
    rx.wait_for(Duration::from_secs(30), |r| r.len() >= 380)
        .await;
    g.kill9();
    let before = restart_and_read_released(&mut g, &job).await;
    assert!(before < 300, "killed mid-way: {before} released");
    let c = client();
    let done = wait_job_done(&c, &g, &job).await;
    assert_eq!(
        done["released"], 300,
        "each hook queued once by the job: {done}"
    );
    let replayed: Vec<String> = rx
        .wait_for(Duration::from_secs(30), |r| {
            r.iter()
                .filter(|x| x.header("x-ankusa-replay-id").as_deref() == Some(job.as_str()))
                .map(|x| x.header("webhook-id"))
                .collect::<HashSet<_>>()
                .len()
                >= 300
        })
        .await
        .iter()
        .filter(|x| x.header("x-ankusa-replay-id").as_deref() == Some(job.as_str()))
        .map(|x| x.header("webhook-id").unwrap())
        .collect();
    let distinct: HashSet<String> = replayed.iter().cloned().collect();
    assert_eq!(distinct, ids.iter().cloned().collect::<HashSet<_>>());
}

/// Restarts a killed gateway and reads how many hooks its job had released when it died.
async fn restart_and_read_released(g: &mut Gateway, job: &str) -> u64 {
    g.restart();
    let c = client();
    let j = g.admin_json(&c, &format!("/v1/replays/{job}")).await;
    j["released"].as_u64().unwrap()
}

/// `GET /v1/archive/hooks/{id}` decides a tenant-limited token's access from the catalogue
/// entry, before the blob store is touched: with every segment file gone, another tenant's
/// token still gets the plain `404 hook_not_archived` (not the `503` a read would give),
/// exactly what a hook that was never archived gets.
#[tokio::test]
async fn another_tenants_archived_hook_is_refused_without_reading_the_blob_store() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let dir = tempfile::tempdir().unwrap();
    let blobs = dir.path().join("blobs");
    const ALL: &str = "admin-every-tenant-0001";
    const ACME: &str = "admin-acme-reader-00001";
    const BETA: &str = "admin-beta-reader-00001";
    let cfg = format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
admin:
  tokens:
    - {{token: {ALL}, scopes: ["*"]}}
    - {{token: {ACME}, scopes: [hooks:read, "tenant:acme"]}}
    - {{token: {BETA}, scopes: [hooks:read, "tenant:beta"]}}
{storage}
sources:
  s:
    tenant: acme
    sinks:
      - type: http
        url: {url}
        secret: {SINK_SECRET}
"#,
        storage = local_storage(&blobs, 100),
        url = rx.url("/in"),
    );
    let g = Gateway::start(&cfg);
    let c = client();
    let ids = post_ids(&c, &g, "/webhooks/s", 1, |i| body_of(i, "t")).await;
    let get = |token: &'static str, id: String| {
        let req = c
            .get(g.admin_url(&format!("/v1/archive/hooks/{id}")))
            .bearer_auth(token);
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, v) = get(ALL, ids[0].clone()).await;
        if status == 200 {
            assert_eq!(v["tenant"], "acme", "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "never archived: {status} {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, v) = get(ACME, ids[0].clone()).await;
    assert_eq!(status, 200, "{v}");
    let (status, before) = get(BETA, ids[0].clone()).await;
    assert_eq!(
        (status, &before["error"]),
        (404, &json!("hook_not_archived"))
    );

    // Every segment gone: a read of the blob store now fails.
    std::fs::remove_dir_all(&blobs).unwrap();
    let (status, v) = get(ACME, ids[0].clone()).await;
    assert_eq!(
        (status, &v["error"]),
        (503, &json!("archive_unavailable")),
        "{v}"
    );
    // Tenant beta's token never gets that far: the same answer as before, and as for a hook
    // that was never archived.
    let (status, after) = get(BETA, ids[0].clone()).await;
    assert_eq!(status, 404, "{after}");
    assert_eq!(after, before);
    let (status, never) = get(BETA, uuid_v7_like()).await;
    assert_eq!(status, 404);
    assert_eq!(never, before);
}
