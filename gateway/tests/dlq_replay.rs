//! The DLQ (paging while rows are added, filters, delete), replay jobs (idempotent creation,
//! a job surviving kill -9, auto-pause), the end-to-end zero-loss run through two kill -9s,
//! admin scopes and metrics, all through the real binary.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::receiver::{Receiver, Reply};
use common::*;
use serde_json::{Value, json};

const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn config(url: &str, extra: &str) -> String {
    format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
http: {{routing: tenant_path}}
dispatch: {{breaker_failures: 0}}
{extra}
sources:
  s:
    trust_url_tenant: true
    retry: {{base_ms: 20, max_ms: 50}}
    sinks:
      - type: http
        url: {url}
        secret: {SINK_SECRET}
"#
    )
}

/// A receiver whose status the test flips; it records every delivery.
async fn switchable(initial: u16) -> (Receiver, Arc<AtomicU16>) {
    let status = Arc::new(AtomicU16::new(initial));
    let s = status.clone();
    let rx = Receiver::start(move |_, _| Reply::status(s.load(Ordering::SeqCst))).await;
    (rx, status)
}

async fn ingest_n(c: &reqwest::Client, g: &Gateway, tenant: &str, n: usize) -> Vec<String> {
    let path = format!("/webhooks/{tenant}/s");
    common::post_ids(c, g, &path, n, |i| {
        format!("{{\"tenant\":\"{tenant}\",\"i\":{i}}}")
    })
    .await
}

async fn wait_dead(c: &reqwest::Client, g: &Gateway, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let wal = g.admin_json(c, "/v1/wal").await;
        if wal["deliveries"]["dead"].as_i64() == Some(n)
            && wal["deliveries"]["pending"].as_i64() == Some(0)
        {
            return;
        }
        assert!(Instant::now() < deadline, "never {n} dead: {wal}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn dlq_pages_every_row_once_while_rows_are_added() {
    let (rx, _) = switchable(410).await;
    let g = Gateway::start(&config(&rx.url("/in"), ""));
    let c = client();
    let mut before = Vec::new();
    for t in ["t1", "t2", "t3"] {
        before.extend(ingest_n(&c, &g, t, 100).await);
    }
    wait_dead(&c, &g, 300).await;

    // Walk 30 at a time while 60 more rows die.
    let adder = {
        let (c, url) = (c.clone(), g.url("/webhooks/t4/s"));
        tokio::spawn(async move {
            for i in 0..60 {
                let _ = c.post(&url).body(format!("{{\"late\":{i}}}")).send().await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut seen: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut last_dead_at = u64::MAX;
    loop {
        let mut path = "/v1/dlq?limit=30".to_string();
        if let Some(cur) = &cursor {
            path.push_str(&format!("&cursor={cur}"));
        }
        let page = g.admin_json(&c, &path).await;
        for e in page["entries"].as_array().unwrap() {
            let at = e["dead_at"].as_u64().unwrap();
            assert!(at <= last_dead_at, "newest first");
            last_dead_at = at;
            assert_eq!(e["error_class"], "permanent");
            assert!(e["reason"].as_str().unwrap().contains("status 410"));
            seen.push(e["id"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(cur) => cursor = Some(cur.to_string()),
            None => break,
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    adder.await.unwrap();
    let set: HashSet<&String> = seen.iter().collect();
    assert_eq!(set.len(), seen.len(), "no row twice");
    for id in &before {
        assert!(
            set.contains(id),
            "row {id} dead before the walk was not returned"
        );
    }

    // Filters and totals.
    let p = g.admin_json(&c, "/v1/dlq?tenant=t2&limit=1000").await;
    assert_eq!(p["entries"].as_array().unwrap().len(), 100);
    assert!(
        p["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["tenant"] == "t2")
    );
    assert_eq!(p["total"], 100);
    let p = g
        .admin_json(
            &c,
            "/v1/dlq?tenant=t1&source_id=s&sink=0&error_class=permanent&limit=1000",
        )
        .await;
    assert_eq!(p["entries"].as_array().unwrap().len(), 100);
    let p = g.admin_json(&c, "/v1/dlq?error_class=transient").await;
    assert_eq!(p["entries"].as_array().unwrap().len(), 0);
    let r = c
        .get(g.admin_url("/v1/dlq?cursor=garbage"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["error"].as_str(), v["field"].as_str()),
        (Some("invalid_filter"), Some("cursor"))
    );
    let r = c
        .get(g.admin_url("/v1/dlq?limit=1001"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);

    // Delete one tenant's dead rows.
    let d: Value = c
        .delete(g.admin_url("/v1/dlq?tenant=t3"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(d["deleted"], 100);
    assert_eq!(g.admin_json(&c, "/v1/dlq?tenant=t3").await["total"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_job_survives_kill_9_and_finishes() {
    let (rx, status) = switchable(410).await;
    let mut g = Gateway::start(&config(&rx.url("/in"), ""));
    let c = client();
    let mut ids = ingest_n(&c, &g, "acme", 600).await;
    ids.extend(ingest_n(&c, &g, "other", 50).await);
    wait_dead(&c, &g, 650).await;
    status.store(200, Ordering::SeqCst);
    let dead_before = rx.count();

    let job_id = "0192f1c0-0000-7000-8000-00000000abcd";
    let body = json!({"job_id": job_id, "kind": "dlq", "tenant": "acme", "rate": 300});
    let r = g.admin_post(&c, "/v1/replays", &body).await;
    assert_eq!(r.status().as_u16(), 202);
    let r = g.admin_post(&c, "/v1/replays", &body).await;
    assert_eq!(
        r.status().as_u16(),
        200,
        "same job_id and filter: the existing job"
    );
    let other = json!({"job_id": job_id, "kind": "dlq", "tenant": "other"});
    let r = g.admin_post(&c, "/v1/replays", &other).await;
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["error"].as_str(), v["field"].as_str()),
        (Some("invalid_filter"), Some("job_id"))
    );

    // Kill it mid-job, twice over the run.
    tokio::time::sleep(Duration::from_millis(700)).await;
    g.kill9();
    let mid = rx.count() - dead_before;
    assert!(
        mid > 0 && mid < 600,
        "the job was mid-way when killed ({mid} delivered)"
    );
    g.spawn_again();
    g.wait_ready(Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(60);
    let job = loop {
        let j = g.admin_json(&c, &format!("/v1/replays/{job_id}")).await;
        if j["done"] == true {
            break j;
        }
        assert!(
            Instant::now() < deadline,
            "job not done: {j}\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(job["state"], "completed");
    assert_eq!(job["moved"], 600, "{job}");
    assert_eq!(job["delivered"], 600);
    let delivered: HashSet<String> = rx.received()[dead_before..]
        .iter()
        .filter(|r| r.header("x-ankusa-replay-id").as_deref() == Some(job_id))
        .map(|r| r.header("x-ankusa-id").unwrap())
        .collect();
    for id in &ids[..600] {
        assert!(delivered.contains(id), "acme hook {id} not replayed");
    }
    assert!(
        ids[600..].iter().all(|id| !delivered.contains(id)),
        "the tenant filter held"
    );
    assert_eq!(g.admin_json(&c, "/v1/dlq?tenant=other").await["total"], 50);
}

#[tokio::test]
async fn a_job_whose_deliveries_keep_dying_pauses_itself() {
    let (rx, _) = switchable(410).await;
    let g = Gateway::start(&config(&rx.url("/in"), ""));
    let c = client();
    ingest_n(&c, &g, "t", 60).await;
    wait_dead(&c, &g, 60).await;
    let r = g
        .admin_post(
            &c,
            "/v1/replays",
            &json!({"kind": "dlq", "pause_after_dead": 10, "rate": 20}),
        )
        .await;
    assert_eq!(r.status().as_u16(), 202);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let j = loop {
        let j = g.admin_json(&c, &format!("/v1/replays/{id}")).await;
        if j["state"] == "paused" {
            break j;
        }
        assert!(Instant::now() < deadline, "{j}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(j["reason"].as_str().unwrap().contains("dead-lettered"));
    let r = c
        .patch(g.admin_url(&format!("/v1/replays/{id}")))
        .json(&json!({"state": "cancelled"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["state"], "cancelled");
    let r = c
        .get(g.admin_url("/v1/replays/0192f1c0-0000-7000-8000-00000000ffff"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

/// Ingest under load, kill -9 the gateway twice during the run: every hook answered 201 is
/// delivered at least once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn end_to_end_zero_loss_through_two_kill_9() {
    let (rx, _) = switchable(200).await;
    let mut g = Gateway::start(&config(&rx.url("/in"), ""));
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let c = client();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (c, url, acked, stop) = (
            c.clone(),
            g.url("/webhooks/t/s"),
            acked.clone(),
            stop_rx.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !*stop.borrow() {
                n += 1;
                match c
                    .post(&url)
                    .body(format!("{{\"c\":{i},\"n\":{n}}}"))
                    .send()
                    .await
                {
                    Ok(r) if r.status().as_u16() == 201 => {
                        if let Ok(v) = r.json::<Value>().await {
                            acked
                                .lock()
                                .unwrap()
                                .push(v["id"].as_str().unwrap().to_string());
                        }
                    }
                    _ => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        }));
    }
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        g.kill9();
        tokio::time::sleep(Duration::from_millis(200)).await;
        g.spawn_again();
        g.wait_ready(Duration::from_secs(30));
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let _ = stop_tx.send(true);
    for t in tasks {
        t.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 100, "load ran ({} acked)", acked.len());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got: HashSet<String> = rx
            .received()
            .iter()
            .filter_map(|r| r.header("x-ankusa-id"))
            .collect();
        let missing: Vec<&String> = acked.iter().filter(|id| !got.contains(*id)).collect();
        if missing.is_empty() {
            let deliveries = rx.count();
            eprintln!(
                "{} acked, {} deliveries ({} redeliveries)",
                acked.len(),
                deliveries,
                deliveries - got.len()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} acked hooks never delivered, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn admin_tokens_scope_routes_and_tenants() {
    let (rx, _) = switchable(410).await;
    let tokens = r#"
admin:
  tokens:
    - {token: root-token-0123456789, scopes: ["*"]}
    - {token: acme-token-0123456789, scopes: ["dlq:read", "replays:write", "tenant:acme"]}
    - {token: read-token-0123456789, scopes: ["dlq:read"]}
"#;
    let g = Gateway::start(&config(&rx.url("/in"), tokens));
    let c = client();
    ingest_n(&c, &g, "acme", 3).await;
    ingest_n(&c, &g, "beta", 2).await;
    let as_token = |token: &'static str| Admin {
        c: &c,
        g: &g,
        token,
    };
    let (root, acme, read) = (
        as_token("root-token-0123456789"),
        as_token("acme-token-0123456789"),
        as_token("read-token-0123456789"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v: Value = root.get("/v1/wal").await.json().await.unwrap();
        if v["deliveries"]["dead"] == 5 {
            break;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(
        status(c.get(g.admin_url("/v1/dlq")).send().await.unwrap()),
        401
    );
    assert_eq!(
        status(as_token("nope-nope-nope-nope").get("/v1/dlq").await),
        401
    );
    assert_eq!(status(read.get("/v1/status").await), 403);
    let page: Value = acme.get("/v1/dlq").await.json().await.unwrap();
    assert_eq!(page["entries"].as_array().unwrap().len(), 3);
    assert!(
        page["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["tenant"] == "acme")
    );
    let r = acme.get("/v1/dlq?tenant=beta").await;
    assert_eq!(r.status().as_u16(), 403);
    assert_eq!(r.json::<Value>().await.unwrap()["scope"], "tenant:beta");
    // Another tenant's job is 404 to a tenant token; its own is visible.
    let r = root
        .post("/v1/replays", &json!({"tenant": "beta", "rate": 1}))
        .await;
    let beta_job = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        status(acme.get(&format!("/v1/replays/{beta_job}")).await),
        404
    );
    let r = acme.post("/v1/replays", &json!({"tenant": "beta"})).await;
    assert_eq!(r.status().as_u16(), 403);
    let r = acme.post("/v1/replays", &json!({"rate": 1})).await;
    assert_eq!(r.status().as_u16(), 202);
    assert_eq!(
        r.json::<Value>().await.unwrap()["filter"]["tenant"],
        "acme",
        "a tenant token's job is held to its tenant"
    );
    let jobs: Value = acme.get("/v1/replays").await.json().await.unwrap();
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 1);
}

/// The admin API as the holder of a bearer token.
struct Admin<'a> {
    c: &'a reqwest::Client,
    g: &'a Gateway,
    token: &'static str,
}

impl Admin<'_> {
    async fn get(&self, path: &str) -> reqwest::Response {
        self.c
            .get(self.g.admin_url(path))
            .bearer_auth(self.token)
            .send()
            .await
            .unwrap()
    }

    async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.c
            .post(self.g.admin_url(path))
            .bearer_auth(self.token)
            .json(body)
            .send()
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn metrics_have_bounded_labels() {
    let (rx, _) = switchable(200).await;
    let g = Gateway::start(&config(&rx.url("/in"), ""));
    let c = client();
    ingest_n(&c, &g, "t", 3).await;
    for i in 0..200 {
        let _ = c
            .post(g.url(&format!("/webhooks/t/random-{i}")))
            .body("{}")
            .send()
            .await;
        let _ = c
            .post(g.url(&format!("/nowhere/{i}")))
            .body("{}")
            .send()
            .await;
    }
    rx.wait_for(Duration::from_secs(10), |r| r.len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let text = g.metrics(&c).await;
    assert!(
        text.contains("ankusa_ingest_requests_total{outcome=\"accepted\"} 3"),
        "{text}"
    );
    assert!(text.contains("ankusa_ingest_refused_total{reason=\"unknown_source\"} 400"));
    assert!(text.contains("ankusa_wal_sync_duration_seconds_count"));
    assert!(
        text.contains(
            "ankusa_dispatch_attempt_duration_seconds_count{result=\"ok\",sink=\"http\"} 3"
        ),
        "{text}"
    );
    assert!(text.contains("ankusa_store_hooks"));
    assert!(!text.contains("random-"), "no label from request input");
    let series = text.lines().filter(|l| !l.starts_with('#')).count();
    assert!(series < 400, "{series} series");
    let mut by_family: HashMap<&str, usize> = HashMap::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        *by_family
            .entry(l.split(['{', ' ']).next().unwrap())
            .or_default() += 1;
    }
    assert!(by_family.values().all(|&n| n < 40), "{by_family:?}");
}
