//! Black-box tests of the ingest status map against the real binary: 201, 201 duplicate, 400,
//! 401, 404, 413, 429, 503 overload and 503 when the store cannot write.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn config() -> String {
    format!(
        r#"
node:
  roles: [edge]
rate_limits:
  tenants:
    limited: {{rate: 1, burst: 2}}
http:
  max_body_bytes: 1000
sources:
  sw:
    verify: {{type: standard_webhooks, secret: "{SECRET}"}}
    dedupe: standard_webhooks
    sinks: [{{type: log}}]
  gh:
    verify: {{type: github, secret: "It's a Secret to Everybody"}}
    on_verify_failure: accept_flag
    sinks: [{{type: log}}]
  open:
    sinks: [{{type: log}}]
  lim:
    tenant: limited
    sinks: [{{type: log}}]
"#
    )
}

async fn post(
    c: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    body: &'static [u8],
) -> (u16, Value) {
    let mut r = c.post(url).body(body);
    for (k, v) in headers {
        r = r.header(k, v);
    }
    let resp = r.send().await.expect("request");
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_ingest_status_map() {
    let g = Gateway::start(&config());
    let c = client();
    let body: &'static [u8] = br#"{"test": 2432232314}"#;

    // 201, then 201 duplicate with the original id (dedupe on webhook-id).
    let h = standard_webhooks_headers(SECRET, "msg_1", now_secs(), body);
    let (s, first) = post(&c, &g.url("/webhooks/sw"), &h, body).await;
    assert_eq!(s, 201, "{first}");
    assert_eq!(first["status"], "accepted");
    assert!(first.get("duplicate").is_none());
    let (s, dup) = post(&c, &g.url("/webhooks/sw"), &h, body).await;
    assert_eq!(s, 201);
    assert_eq!(dup["id"], first["id"]);
    assert_eq!(dup["duplicate"], true);

    // 401: wrong secret, stale timestamp, missing headers.
    let bad = standard_webhooks_headers("whsec_c2VjcmV0LW90aGVy", "msg_2", now_secs(), body);
    assert_eq!(
        post(&c, &g.url("/webhooks/sw"), &bad, body).await,
        (401, serde_json::json!({"error": "invalid_signature"}))
    );
    let stale = standard_webhooks_headers(SECRET, "msg_3", now_secs() - 600, body);
    assert_eq!(post(&c, &g.url("/webhooks/sw"), &stale, body).await.0, 401);
    assert_eq!(post(&c, &g.url("/webhooks/sw"), &[], body).await.0, 401);

    // accept_flag: a failed check is stored, flagged.
    let wrong = vec![(
        "x-hub-signature-256".to_string(),
        github_signature("nope", body),
    )];
    let (s, flagged) = post(&c, &g.url("/webhooks/gh"), &wrong, body).await;
    assert_eq!(s, 201);
    let hook: Value = g
        .admin_json(
            &c,
            &format!("/v1/hooks/{}", flagged["id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(
        hook["verification"],
        serde_json::json!({"status": "failed", "flagged": true})
    );
    let good = vec![(
        "x-hub-signature-256".to_string(),
        github_signature("It's a Secret to Everybody", body),
    )];
    let (s, ok) = post(&c, &g.url("/webhooks/gh"), &good, body).await;
    assert_eq!(s, 201);
    let hook: Value = g
        .admin_json(&c, &format!("/v1/hooks/{}", ok["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        hook["verification"],
        serde_json::json!({"status": "ok", "flagged": false})
    );

    // 404: unknown source, a path outside the prefix.
    assert_eq!(
        post(&c, &g.url("/webhooks/nope"), &[], body).await,
        (404, serde_json::json!({"error": "unknown_source"}))
    );
    assert_eq!(post(&c, &g.url("/elsewhere"), &[], body).await.0, 404);

    // 400: a header byte outside the allowed range, named.
    let resp = c
        .post(g.url("/webhooks/open"))
        .header(
            "x-note",
            reqwest::header::HeaderValue::from_bytes("caf\u{e9}".as_bytes()).unwrap(),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        v,
        serde_json::json!({"error": "invalid_header", "header": "x-note"})
    );

    // 413: declared too large (answered without reading), and a chunked body cut at the limit.
    let big: &'static [u8] = Box::leak(vec![b'x'; 2000].into_boxed_slice());
    let (s, v) = post(&c, &g.url("/webhooks/open"), &[], big).await;
    assert_eq!(s, 413, "{v}");
    assert_eq!(v["error"], "payload_too_large");
    let chunks = futures::stream::iter((0..20).map(|_| Ok::<_, std::io::Error>(vec![b'y'; 100])));
    let resp = post_to(
        &c,
        &g.url("/webhooks/open"),
        reqwest::Body::wrap_stream(chunks),
    )
    .await;
    assert_eq!(resp.status().as_u16(), 413);
    // The rest of that body is unread: the connection ends with the answer, and says so.
    assert_eq!(
        resp.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"close"[..])
    );

    // 429 past the tenant's burst, with Retry-After; nothing stored.
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..4 {
        let resp = post_to(&c, &g.url("/webhooks/lim"), body).await;
        statuses.push(resp.status().as_u16());
        if resp.status().as_u16() == 201 {
            assert!(
                resp.headers().get("connection").is_none(),
                "a 201 keeps the connection"
            );
        }
        if resp.status().as_u16() == 429 {
            retry_after = resp
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
            let v: Value = resp.json().await.unwrap();
            assert_eq!(v["error"], "rate_limited");
        }
    }
    assert_eq!(&statuses[..2], &[201, 201]);
    assert_eq!(statuses[2], 429, "{statuses:?}");
    assert_eq!(retry_after.as_deref(), Some("1"));

    // The store holds what was answered 201 (dup collapsed, refused ones absent).
    let wal: Value = g.admin_json(&c, "/v1/wal").await;
    assert_eq!(wal["hooks"], 5, "{wal}");
}

#[tokio::test]
async fn tenant_routes_and_pinned_sources() {
    let g = Gateway::start(
        r#"
node: {roles: [edge]}
http: {routing: tenant_path}
sources:
  shared:
    trust_url_tenant: true
    sinks: [{type: log}]
  pinned:
    tenant: acme
    sinks: [{type: log}]
"#,
    );
    let c = client();
    let ok = |s: u16| s == 201;
    assert!(ok(post_to(&c, &g.url("/webhooks/t1/shared"), "{}")
        .await
        .status()
        .as_u16()));
    assert!(ok(post_to(&c, &g.url("/webhooks/acme/pinned"), "{}")
        .await
        .status()
        .as_u16()));
    let r = post_to(&c, &g.url("/webhooks/other/pinned"), "{}").await;
    assert_eq!(
        r.status().as_u16(),
        404,
        "a pinned source answers only its tenant"
    );
    let r = post_to(&c, &g.url("/webhooks/bad.tenant/shared"), "{}").await;
    assert_eq!(r.status().as_u16(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "invalid_tenant");
    let r = post_to(&c, &g.url("/webhooks/shared"), "{}").await;
    assert_eq!(r.status().as_u16(), 404);
}

#[tokio::test]
async fn overload_is_503_with_retry_after_and_nothing_stored() {
    // One partition that waits up to 1 s to fill a batch of 100 and holds at most 2 records:
    // the third concurrent request finds the queue full.
    let g = Gateway::start(
        r#"
node: {roles: [edge]}
batcher: {partitions: 1, max_batch: 100, max_delay_ms: 1000, max_queue: 2}
sources:
  open:
    sinks: [{type: log}]
"#,
    );
    let c = client();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let c = c.clone();
        let url = g.url("/webhooks/open");
        tasks.push(tokio::spawn(async move {
            let r = post_to(&c, &url, "{}").await;
            let status = r.status().as_u16();
            let ra = r
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
            let v: Value = r.json().await.unwrap_or(Value::Null);
            (status, ra, v)
        }));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let mut accepted = 0;
    let mut overload = 0;
    for t in tasks {
        let (s, ra, v) = t.await.unwrap();
        match s {
            201 => accepted += 1,
            503 => {
                overload += 1;
                assert_eq!(v["error"], "overload");
                assert_eq!(ra.as_deref(), Some("1"));
            }
            other => panic!("unexpected {other} {v}"),
        }
    }
    assert_eq!(accepted, 2);
    assert_eq!(overload, 4);
    let wal: Value = g.admin_json(&c, "/v1/wal").await;
    assert_eq!(wal["hooks"], 2);
}

/// A full disk: the commit fails, the request is `503 store_unavailable` (never 201), `/ready`
/// turns 503, and once space is freed the store reopens and ingest succeeds again.
#[tokio::test]
async fn a_store_that_cannot_write_answers_503_and_recovers() {
    assert!(
        is_root(),
        "this test mounts a small tmpfs to fill the disk; run it as root (CI does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=24m", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(status.success(), "mount tmpfs");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let data = mnt.join("data");
    let cfg = "node: {roles: [edge]}\nsources:\n  open:\n    sinks: [{type: log}]\n";
    let g = Gateway::start_with(cfg, &[("ANKUSA_DATA_DIR", data.to_str().unwrap())]);
    let c = client();
    let r = post_to(&c, &g.url("/webhooks/open"), "{}").await;
    assert_eq!(r.status().as_u16(), 201);

    // Fill the disk.
    let filler = mnt.join("filler");
    let _ = std::process::Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "count=64"])
        .arg(format!("of={}", filler.display()))
        .stderr(std::process::Stdio::null())
        .status();
    let body = vec![b'z'; 900];
    let mut saw_503 = false;
    for _ in 0..50 {
        let r = post_to(&c, &g.url("/webhooks/open"), body.clone()).await;
        match r.status().as_u16() {
            201 => continue,
            503 => {
                let ra = r.headers().get("retry-after").cloned();
                let v: Value = r.json().await.unwrap();
                assert_eq!(v["error"], "store_unavailable");
                assert!(ra.is_some());
                saw_503 = true;
                break;
            }
            s => panic!("unexpected status {s}"),
        }
    }
    assert!(
        saw_503,
        "a full disk must refuse with 503:\n{}",
        g.log_tail()
    );
    let ready = c.get(g.admin_url("/ready")).send().await.unwrap();
    assert_eq!(ready.status().as_u16(), 503);

    // Free the space: writes resume (the store reopens at most every 5 s).
    std::fs::remove_file(&filler).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = post_to(&c, &g.url("/webhooks/open"), "{}").await;
        if r.status().as_u16() == 201 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ingest did not recover:\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while c
        .get(g.admin_url("/ready"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
        != 200
    {
        assert!(std::time::Instant::now() < deadline, "not ready again");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
