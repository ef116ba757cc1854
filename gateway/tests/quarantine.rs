//! The quarantine pen through the real binary: hooks signed with a secret the source does not
//! have are answered 202 and held; a config fix and a `quarantine` replay job release each
//! exactly once (signed, with the job's replay id); entries survive kill -9 with their byte
//! count; a forged flood is rate limited (429) and capped (503) per source while another
//! source keeps getting 201; one source's flood never spends another source's share, nor one
//! tenant's another tenant's (the shares survive kill -9); a body over the pen's cap is 413;
//! old entries expire; purges honour their filters and limit.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::receiver::{Receiver, Reply};
use common::*;
use serde_json::{Value, json};

const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const PROVIDER_SECRET: &str = "the-provider-signs-with-this";
const STALE_SECRET: &str = "the-source-has-this-one";

/// One GitHub-verified source `gh` (secret `source_secret`, dedupe on the delivery id) that
/// quarantines what fails, delivering to `url`; `extra` adds top-level sections or sources.
fn config(url: &str, source_secret: &str, extra: &str) -> String {
    format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
{extra}
sources:
  gh:
    verify: {{type: github, secret: "{source_secret}"}}
    on_verify_failure: quarantine
    dedupe: github
    sinks:
      - type: http
        url: {url}
        secret: {SINK_SECRET}
"#
    )
}

async fn post_github(
    c: &reqwest::Client,
    g: &Gateway,
    path: &str,
    secret: &str,
    delivery: &str,
    body: &str,
) -> reqwest::Response {
    c.post(g.url(path))
        .header("content-type", "application/json")
        .header("x-github-event", "push")
        .header("x-github-delivery", delivery)
        .header(
            "x-hub-signature-256",
            github_signature(secret, body.as_bytes()),
        )
        .body(body.to_string())
        .send()
        .await
        .expect("post")
}

/// Posts a hook that the source cannot verify and expects it quarantined; its id.
async fn quarantine_one(c: &reqwest::Client, g: &Gateway, path: &str, i: usize) -> String {
    let body = format!("{{\"n\":{i}}}");
    let r = post_github(c, g, path, PROVIDER_SECRET, &format!("d-{i}"), &body).await;
    assert_eq!(r.status().as_u16(), 202, "hook {i} quarantined");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["quarantined"], true, "{v}");
    v["id"].as_str().expect("an id").to_string()
}

#[tokio::test]
async fn a_fixed_secret_and_a_quarantine_job_release_every_held_hook_once() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let g = Gateway::start(&config(&rx.url("/in"), STALE_SECRET, ""));
    let c = client();

    // The provider signs with a secret the source does not have: held, answered 202.
    let mut held = Vec::new();
    for i in 0..5 {
        held.push(quarantine_one(&c, &g, "/webhooks/gh", i).await);
    }
    // One that will never verify, and one the provider will retry after the fix.
    let r = post_github(
        &c,
        &g,
        "/webhooks/gh",
        "forged",
        "d-forged",
        "{\"forged\":1}",
    )
    .await;
    assert_eq!(r.status().as_u16(), 202);
    let forged: Value = r.json().await.unwrap();
    let retried = quarantine_one(&c, &g, "/webhooks/gh", 99).await;

    let page = g.admin_json(&c, "/v1/quarantine").await;
    let entries = page["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 7, "{page}");
    assert_eq!(page["total"], 7);
    assert!(page["bytes"].as_u64().unwrap() > 0);
    let listed: Vec<&str> = entries.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(listed[0], retried, "newest first");
    assert_eq!(*listed.last().unwrap(), held[0]);
    for e in entries {
        assert_eq!(e["source_id"], "gh");
        assert_eq!(e["tenant"], "default");
        assert_eq!(e["reason"], "no_matching_signature");
        assert_eq!(e["method"], "POST");
        assert_eq!(e["path"], "/webhooks/gh");
        assert!(e["size"].as_u64().unwrap() > 0);
        assert!(e.get("body").is_none(), "no bodies in a listing");
    }
    let wal = g.admin_json(&c, "/v1/wal").await;
    assert_eq!(wal["hooks"], 0, "nothing committed: {wal}");
    let m = g.metrics(&c).await;
    assert_eq!(metric(&m, "ankusa_quarantine_entries "), 7.0);
    assert_eq!(
        metric(&m, "ankusa_ingest_requests_total{outcome=\"quarantined\"}"),
        7.0
    );

    // Fix the secret by reloading the config file.
    g.write_config(&config(&rx.url("/in"), PROVIDER_SECRET, ""));
    let r = c
        .post(g.admin_url("/v1/config/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    // The provider's own retry of d-99 gets through now, before the release.
    let r = post_github(
        &c,
        &g,
        "/webhooks/gh",
        PROVIDER_SECRET,
        "d-99",
        "{\"n\":99}",
    )
    .await;
    assert_eq!(r.status().as_u16(), 201);
    let accepted_retry: Value = r.json().await.unwrap();

    // A dlq-only filter is refused for a quarantine job.
    let r = g
        .admin_post(
            &c,
            "/v1/replays",
            &json!({"kind": "quarantine", "error_class": "transient"}),
        )
        .await;
    assert_eq!(r.status().as_u16(), 400);
    let r = g
        .admin_post(
            &c,
            "/v1/replays",
            &json!({"kind": "quarantine", "source_id": "gh"}),
        )
        .await;
    assert_eq!(r.status().as_u16(), 202);
    let job: Value = r.json().await.unwrap();
    assert_eq!(job["kind"], "quarantine");
    let job_id = job["id"].as_str().unwrap().to_string();
    let done = wait_job_done(&c, &g, &job_id).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["released"], 5, "{done}");
    assert_eq!(
        done["skipped"], 2,
        "the forged hook stays, the retried one is a duplicate: {done}"
    );
    assert_eq!(done["delivered"], 5, "{done}");

    // Each released hook reached the receiver once, signed, with its original id and the
    // job's replay id; the provider's retry once, without one.
    let deadline = Instant::now() + Duration::from_secs(30);
    while rx.received().len() < 6 {
        assert!(
            Instant::now() < deadline,
            "{} deliveries",
            rx.received().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = rx.received();
    assert_eq!(got.len(), 6, "no hook twice");
    let wh = standardwebhooks::Webhook::new(SINK_SECRET).unwrap();
    let mut replayed = HashSet::new();
    for r in &got {
        wh.verify(&r.body, &r.headers)
            .expect("delivery signature verifies");
        assert_eq!(r.header("x-ankusa-verification").as_deref(), Some("ok"));
        let id = r.header("x-ankusa-id").unwrap();
        match r.header("x-ankusa-replay-id") {
            Some(rid) => {
                assert_eq!(rid, job_id);
                assert!(replayed.insert(id));
            }
            None => assert_eq!(id, accepted_retry["id"].as_str().unwrap()),
        }
    }
    let held: HashSet<String> = held.into_iter().collect();
    assert_eq!(replayed, held, "the released hooks keep their ids");

    // The forged hook is all that is left.
    let page = g.admin_json(&c, "/v1/quarantine").await;
    let left: Vec<&str> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(left, vec![forged["id"].as_str().unwrap()]);
    let m = g.metrics(&c).await;
    assert_eq!(metric(&m, "ankusa_quarantine_entries "), 1.0);
}

#[tokio::test]
async fn entries_and_their_bytes_survive_kill_9() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let mut g = Gateway::start(&config(
        &rx.url("/in"),
        STALE_SECRET,
        "quarantine: {max_bytes: 20000}",
    ));
    let c = client();
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(quarantine_one(&c, &g, "/webhooks/gh", i).await);
    }
    let before = g.admin_json(&c, "/v1/quarantine").await;
    let m = g.metrics(&c).await;
    let bytes = metric(&m, "ankusa_quarantine_bytes ");
    assert!(bytes > 0.0);
    assert_eq!(before["bytes"].as_f64(), Some(bytes));

    g.kill9();
    g.spawn_again();
    g.wait_ready(Duration::from_secs(30));
    // The old client's pooled connections died with the process.
    let c = client();

    let after = g.admin_json(&c, "/v1/quarantine").await;
    assert_eq!(after["total"], 10, "{after}");
    assert_eq!(after["bytes"], before["bytes"]);
    assert_eq!(after["entries"], before["entries"]);
    let m = g.metrics(&c).await;
    assert_eq!(metric(&m, "ankusa_quarantine_entries "), 10.0);
    assert_eq!(metric(&m, "ankusa_quarantine_bytes "), bytes);

    // The restarted pen still counts what it holds against the cap: it fills after about
    // (cap - held) / entry size more, not cap / entry size.
    let per_entry = bytes / 10.0;
    let room = ((20000.0 - bytes) / per_entry).floor() as usize;
    let mut more = 0;
    loop {
        let body = format!("{{\"n\":{}}}", 100 + more);
        let r = post_github(&c, &g, "/webhooks/gh", PROVIDER_SECRET, "d-more", &body).await;
        match r.status().as_u16() {
            202 => more += 1,
            503 => {
                assert_eq!(r.headers()["retry-after"], "60");
                let v: Value = r.json().await.unwrap();
                assert_eq!(v["error"], "quarantine_full");
                break;
            }
            s => panic!("unexpected {s}"),
        }
        assert!(
            more <= room + 1,
            "{more} more entries fit: the restart forgot the bytes"
        );
    }
    assert!(
        more + 1 >= room,
        "only {more} more fit, expected about {room}"
    );
}

/// Forged requests as fast as `conns` connections can send them, until `stop`; counts answers.
fn flood(
    c: &reqwest::Client,
    url: String,
    conns: usize,
    body_bytes: usize,
    stop: Arc<AtomicBool>,
) -> (Vec<tokio::task::JoinHandle<()>>, Arc<[AtomicUsize; 4]>) {
    // 202, 429 quarantine_rate_limited, 503 quarantine_full, anything else
    let counts: Arc<[AtomicUsize; 4]> = Arc::new(Default::default());
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(body_bytes));
    let tasks = (0..conns)
        .map(|_| {
            let (c, url, stop, counts, body) = (
                c.clone(),
                url.clone(),
                stop.clone(),
                counts.clone(),
                body.clone(),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(r) = c
                        .post(&url)
                        .header("x-hub-signature-256", "sha256=00")
                        .body(body.clone())
                        .send()
                        .await
                    else {
                        counts[3].fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let status = r.status().as_u16();
                    let retry_after = r.headers().get("retry-after").cloned();
                    let err = r
                        .json::<Value>()
                        .await
                        .ok()
                        .and_then(|v| v["error"].as_str().map(String::from));
                    let slot = match (status, err.as_deref()) {
                        (202, _) => 0,
                        (429, Some("quarantine_rate_limited")) => {
                            assert!(retry_after.is_some(), "429 without Retry-After");
                            1
                        }
                        (503, Some("quarantine_full")) => {
                            assert_eq!(retry_after.unwrap(), "60");
                            2
                        }
                        _ => 3,
                    };
                    counts[slot].fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    (tasks, counts)
}

/// A second source, `ok`, that verifies with Standard Webhooks and rejects failures.
fn with_ok_source(url: &str) -> String {
    format!(
        r#"
  ok:
    verify: {{type: standard_webhooks, secret: {SINK_SECRET}}}
    sinks:
      - type: http
        url: {url}
        secret: {SINK_SECRET}
"#
    )
}

async fn post_ok(c: &reqwest::Client, g: &Gateway, i: usize) -> u16 {
    let body = format!("{{\"ok\":{i}}}");
    let mut req = c.post(g.url("/webhooks/ok")).body(body.clone());
    for (k, v) in
        standard_webhooks_headers(SINK_SECRET, &format!("m{i}"), now_secs(), body.as_bytes())
    {
        req = req.header(k, v);
    }
    req.send().await.expect("post").status().as_u16()
}

#[tokio::test]
async fn a_forged_flood_is_limited_per_source_while_another_source_is_accepted() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    // Rate limited: 20 back to back, then 5 a second.
    let text = config(
        &rx.url("/in"),
        STALE_SECRET,
        "quarantine: {burst: 20, rate: 5}",
    ) + &with_ok_source(&rx.url("/ok"));
    let g = Gateway::start(&text);
    let c = client();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let (tasks, counts) = flood(&c, g.url("/webhooks/gh"), 8, 100, stop.clone());
    for i in 0..50 {
        assert_eq!(
            post_ok(&c, &g, i).await,
            201,
            "valid hook {i} during the flood"
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let [held, limited, full, other] = [0, 1, 2, 3].map(|i| counts[i].load(Ordering::Relaxed));
    assert_eq!((full, other), (0, 0));
    assert!(limited >= 20, "the flood was refused: {limited} 429s");
    let most = 20 + (5.0 * secs).ceil() as usize + 1;
    assert!(
        held >= 20 && held <= most,
        "{held} held in {secs:.1} s (at most {most})"
    );
    let page = g.admin_json(&c, "/v1/quarantine?limit=1000").await;
    assert_eq!(
        page["total"].as_u64(),
        Some(held as u64),
        "nothing stored for a 429"
    );
    drop(g);

    // Capped: a pen of 20 kB fills, then refuses every source's failed hooks with 503; the
    // other source's valid hooks are still accepted.
    let text = config(
        &rx.url("/in"),
        STALE_SECRET,
        "quarantine: {burst: 100000, rate: 100000, max_bytes: 20000}",
    ) + &with_ok_source(&rx.url("/ok"));
    let g = Gateway::start(&text);
    let stop = Arc::new(AtomicBool::new(false));
    let (tasks, counts) = flood(&c, g.url("/webhooks/gh"), 8, 1000, stop.clone());
    for i in 0..50 {
        assert_eq!(
            post_ok(&c, &g, i).await,
            201,
            "valid hook {i} while the pen is full"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while counts[2].load(Ordering::Relaxed) < 50 {
        assert!(Instant::now() < deadline, "the pen never filled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(counts[3].load(Ordering::Relaxed), 0);
    let page = g.admin_json(&c, "/v1/quarantine?limit=1000").await;
    let bytes = page["bytes"].as_u64().unwrap();
    assert!(bytes <= 20000, "the cap holds: {bytes}");
    assert_eq!(
        page["total"].as_u64(),
        Some(counts[0].load(Ordering::Relaxed) as u64),
        "every 202 is held, nothing else"
    );
}

/// Admin requests with a bearer token.
async fn admin(
    c: &reqwest::Client,
    g: &Gateway,
    method: reqwest::Method,
    token: &str,
    path: &str,
) -> (u16, Value) {
    let r = c
        .request(method, g.admin_url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn purges_take_filters_and_a_limit_oldest_first_and_free_the_bytes() {
    const ROOT: &str = "root-token-0123456789";
    const ACME: &str = "acme-token-0123456789";
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let extra = format!(
        r#"
admin:
  tokens:
    - {{token: {ROOT}, scopes: ["*"]}}
    - {{token: {ACME}, scopes: [dlq:read, dlq:write, tenant:acme]}}
"#
    );
    let text = config(&rx.url("/in"), STALE_SECRET, &extra)
        + &format!(
            r#"
  beta:
    tenant: beta
    verify: {{type: github, secret: "{STALE_SECRET}"}}
    on_verify_failure: quarantine
    sinks:
      - type: http
        url: {}
        secret: {SINK_SECRET}
"#,
            rx.url("/in")
        );
    let text = text.replacen("  gh:\n", "  gh:\n    tenant: acme\n", 1);
    let g = Gateway::start(&text);
    let c = client();
    let mut gh = Vec::new();
    for i in 0..4 {
        gh.push(quarantine_one(&c, &g, "/webhooks/gh", i).await);
    }
    let mut beta = Vec::new();
    for i in 0..3 {
        beta.push(quarantine_one(&c, &g, "/webhooks/beta", 10 + i).await);
    }
    use reqwest::Method;
    let (_, all) = admin(&c, &g, Method::GET, ROOT, "/v1/quarantine").await;
    assert_eq!(all["total"], 7);
    let size = |id: &str| -> u64 {
        all["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap()["size"]
            .as_u64()
            .unwrap()
    };

    // A tenant-limited token sees and purges its tenant only.
    let (s, mine) = admin(&c, &g, Method::GET, ACME, "/v1/quarantine").await;
    assert_eq!(s, 200);
    let mine: Vec<&str> = mine["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(mine.len(), 4);
    assert!(mine.iter().all(|id| gh.iter().any(|g| g == id)));
    let (s, v) = admin(&c, &g, Method::GET, ACME, "/v1/quarantine?tenant=beta").await;
    assert_eq!((s, v["scope"].as_str()), (403, Some("tenant:beta")));
    let (s, _) = admin(&c, &g, Method::DELETE, ACME, "/v1/quarantine?tenant=beta").await;
    assert_eq!(s, 403);

    // limit: the two oldest of source gh go, with their bytes.
    let (s, v) = admin(
        &c,
        &g,
        Method::DELETE,
        ACME,
        "/v1/quarantine?source_id=gh&limit=2",
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["deleted"], 2);
    assert_eq!(v["bytes"].as_u64(), Some(size(&gh[0]) + size(&gh[1])));
    // id: exactly one entry.
    let (_, v) = admin(
        &c,
        &g,
        Method::DELETE,
        ROOT,
        &format!("/v1/quarantine?id={}", beta[1]),
    )
    .await;
    assert_eq!(v["deleted"], 1);
    // since/until on received_at: nothing before the first hook.
    let (_, v) = admin(&c, &g, Method::DELETE, ROOT, "/v1/quarantine?until=1000").await;
    assert_eq!(v["deleted"], 0);
    let (_, left) = admin(&c, &g, Method::GET, ROOT, "/v1/quarantine").await;
    let left_ids: HashSet<&str> = left["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    let want: HashSet<&str> = [&gh[2], &gh[3], &beta[0], &beta[2]]
        .iter()
        .map(|s| s.as_str())
        .collect();
    assert_eq!(left_ids, want);
    let freed = size(&gh[0]) + size(&gh[1]) + size(&beta[1]);
    assert_eq!(
        left["bytes"].as_u64(),
        Some(all["bytes"].as_u64().unwrap() - freed)
    );
    let m = g.metrics_as(&c, ROOT).await;
    assert_eq!(
        metric(&m, "ankusa_quarantine_bytes "),
        (all["bytes"].as_u64().unwrap() - freed) as f64
    );

    // Bad parameters name the field.
    for (q, field) in [
        ("limit=0", "limit"),
        ("limit=10001", "limit"),
        ("id=nope", "id"),
        ("since=5&until=4", "since"),
    ] {
        let (s, v) = admin(&c, &g, Method::DELETE, ROOT, &format!("/v1/quarantine?{q}")).await;
        assert_eq!((s, v["field"].as_str()), (400, Some(field)), "{q}: {v}");
    }
    // Everything else, oldest first, in one call.
    let (_, v) = admin(&c, &g, Method::DELETE, ROOT, "/v1/quarantine").await;
    assert_eq!(v["deleted"], 4);
    let (_, v) = admin(&c, &g, Method::GET, ROOT, "/v1/quarantine").await;
    assert_eq!(
        (v["total"].as_u64(), v["bytes"].as_u64()),
        (Some(0), Some(0))
    );
}

#[tokio::test]
async fn a_release_job_resumes_after_kill_9_and_releases_each_entry_once() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let mut g = Gateway::start(&config(
        &rx.url("/in"),
        STALE_SECRET,
        "quarantine: {burst: 1000}",
    ));
    let c = client();
    let n = 200;
    let mut held = HashSet::new();
    for i in 0..n {
        held.insert(quarantine_one(&c, &g, "/webhooks/gh", i).await);
    }
    g.write_config(&config(
        &rx.url("/in"),
        PROVIDER_SECRET,
        "quarantine: {burst: 1000}",
    ));
    let r = c
        .post(g.admin_url("/v1/config/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // 40 entries a second: the job is mid-scan when the process dies.
    let r = g
        .admin_post(
            &c,
            "/v1/replays",
            &json!({"kind": "quarantine", "rate": 40}),
        )
        .await;
    assert_eq!(r.status().as_u16(), 202);
    let job_id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let j = g.admin_json(&c, &format!("/v1/replays/{job_id}")).await;
        if j["released"].as_u64().unwrap_or(0) >= 40 {
            assert_eq!(j["state"], "running", "killed mid-job: {j}");
            break;
        }
        assert!(Instant::now() < deadline, "no progress: {j}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    g.kill9();
    g.spawn_again();
    g.wait_ready(Duration::from_secs(30));
    let c = client();
    let done = wait_job_done(&c, &g, &job_id).await;
    assert_eq!(
        done["released"], n,
        "each entry released exactly once: {done}"
    );
    assert_eq!(done["skipped"], 0, "{done}");
    let page = g.admin_json(&c, "/v1/quarantine").await;
    assert_eq!(page["total"], 0, "{page}");
    // Delivery is at least once (a kill can repeat one): every held hook arrived.
    let got: HashSet<String> = rx
        .received()
        .iter()
        .filter(|r| r.header("x-ankusa-replay-id").as_deref() == Some(job_id.as_str()))
        .filter_map(|r| r.header("x-ankusa-id"))
        .collect();
    assert_eq!(got, held);
}

/// A second `quarantine` source `id` (GitHub, the stale secret); `pin` adds its tenant.
fn quarantine_source(id: &str, url: &str, pin: Option<&str>) -> String {
    let tenant = pin
        .map(|t| format!("    tenant: {t}\n"))
        .unwrap_or_default();
    format!(
        r#"
  {id}:
{tenant}    verify: {{type: github, secret: "{STALE_SECRET}"}}
    on_verify_failure: quarantine
    sinks:
      - type: http
        url: {url}
        secret: {SINK_SECRET}
"#
    )
}

/// One forged request shaped like `flood`'s (so every entry of a source has one size): its
/// status and error code.
async fn forged(c: &reqwest::Client, url: &str, body_bytes: usize) -> (u16, Option<String>) {
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(body_bytes));
    let r = c
        .post(url)
        .header("x-hub-signature-256", "sha256=00")
        .body(body)
        .send()
        .await
        .expect("post");
    let status = r.status().as_u16();
    let err = r
        .json::<Value>()
        .await
        .ok()
        .and_then(|v| v["error"].as_str().map(String::from));
    (status, err)
}

/// Forged requests to `url` until the first that is not `202`, which must be
/// `503 quarantine_full`: how many were held.
async fn fill(c: &reqwest::Client, url: &str, body_bytes: usize) -> usize {
    for held in 0..200 {
        match forged(c, url, body_bytes).await {
            (202, _) => {}
            (503, Some(e)) if e == "quarantine_full" => return held,
            other => panic!("hook {held} to {url}: {other:?}"),
        }
    }
    panic!("{url} was never refused");
}

/// (entries, bytes, every entry's size) of the listing for `query`.
async fn listed(c: &reqwest::Client, g: &Gateway, query: &str) -> (u64, u64, Vec<u64>) {
    let page = g
        .admin_json(c, &format!("/v1/quarantine?limit=1000&{query}"))
        .await;
    let sizes: Vec<u64> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["size"].as_u64().unwrap())
        .collect();
    (sizes.len() as u64, sizes.iter().sum(), sizes)
}

/// `bytes` fill `share` to within one entry of `size`: the next one would cross it.
fn full_to_the_share(bytes: u64, sizes: &[u64], share: u64, what: &str) {
    let size = sizes[0];
    assert!(sizes.iter().all(|s| *s == size), "{what}: sizes {sizes:?}");
    assert!(
        bytes <= share && bytes + size > share,
        "{what}: {bytes} bytes held of a {share} share, entries of {size}"
    );
}

#[tokio::test]
async fn one_source_flooding_never_spends_another_sources_share_even_after_kill_9() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    // Two quarantine sources and no share configured: each gets half of the 40 kB cap.
    let text = config(
        &rx.url("/in"),
        STALE_SECRET,
        "quarantine: {burst: 100000, rate: 100000, max_bytes: 40000}",
    ) + &quarantine_source("gh2", &rx.url("/in"), None);
    let mut g = Gateway::start(&text);
    let c = client();
    let stop = Arc::new(AtomicBool::new(false));
    let (tasks, counts) = flood(&c, g.url("/webhooks/gh"), 8, 1000, stop.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    while counts[2].load(Ordering::Relaxed) < 50 {
        assert!(Instant::now() < deadline, "gh's share never filled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // While gh's flood goes on, refused, gh2's forged hooks are held — every one of them,
    // until gh2's own share.
    let held2 = fill(&c, &g.url("/webhooks/gh2"), 1000).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(counts[3].load(Ordering::Relaxed), 0, "only 202s and 503s");
    let (n1, b1, sizes1) = listed(&c, &g, "source_id=gh").await;
    let (n2, b2, sizes2) = listed(&c, &g, "source_id=gh2").await;
    assert_eq!(
        n1,
        counts[0].load(Ordering::Relaxed) as u64,
        "every 202 held"
    );
    assert_eq!(n2, held2 as u64);
    full_to_the_share(b1, &sizes1, 20000, "gh");
    full_to_the_share(b2, &sizes2, 20000, "gh2");

    g.kill9();
    g.spawn_again();
    g.wait_ready(Duration::from_secs(30));
    let c = client();
    // The shares are remembered: both sources are refused at once.
    for source in ["gh", "gh2"] {
        let (status, err) = forged(&c, &g.url(&format!("/webhooks/{source}")), 1000).await;
        assert_eq!(
            (status, err.as_deref()),
            (503, Some("quarantine_full")),
            "{source}"
        );
    }
    // And the counters agree with the entries.
    let page = g.admin_json(&c, "/v1/quarantine?limit=1").await;
    assert_eq!(page["total"].as_u64(), Some(n1 + n2), "{page}");
    assert_eq!(page["bytes"].as_u64(), Some(b1 + b2), "{page}");
    let m = g.metrics(&c).await;
    assert_eq!(metric(&m, "ankusa_quarantine_entries "), (n1 + n2) as f64);
    assert_eq!(metric(&m, "ankusa_quarantine_bytes "), (b1 + b2) as f64);
    assert_eq!(
        metric(&m, "ankusa_quarantine_full_total{scope=\"source\"}"),
        2.0
    );
    let status = g.admin_json(&c, "/v1/status").await;
    let by_source: Vec<(String, u64)> = status["quarantine"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["source"].as_str().unwrap().to_string(),
                s["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(by_source, vec![("gh".into(), b1), ("gh2".into(), b2)]);

    // A purge frees that source's share, and only that source's.
    let r = c
        .delete(g.admin_url("/v1/quarantine?source_id=gh2&limit=2"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["deleted"], 2);
    assert_eq!(fill(&c, &g.url("/webhooks/gh2"), 1000).await, 2);
    let (status, _) = forged(&c, &g.url("/webhooks/gh"), 1000).await;
    assert_eq!(status, 503);
}

#[tokio::test]
async fn one_tenant_cannot_spend_another_tenants_share() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let extra = "http: {routing: tenant_path}\n\
                 quarantine: {burst: 100000, rate: 100000, max_bytes: 100000, max_bytes_per_tenant: 6000}";
    // `gh` answers every URL tenant; `pinned` only acme.
    let text = config(&rx.url("/in"), STALE_SECRET, extra)
        + &quarantine_source("pinned", &rx.url("/in"), Some("acme"));
    let g = Gateway::start(&text);
    let c = client();
    let acme = fill(&c, &g.url("/webhooks/acme/gh"), 500).await;
    assert!(acme >= 3, "only {acme} held");
    // acme's share spans its sources: its pinned source is refused too.
    let (status, err) = forged(&c, &g.url("/webhooks/acme/pinned"), 500).await;
    assert_eq!((status, err.as_deref()), (503, Some("quarantine_full")));
    // Another tenant of the same source has its whole share.
    assert_eq!(fill(&c, &g.url("/webhooks/beta/gh"), 500).await, acme);
    let (status, _) = forged(&c, &g.url("/webhooks/gamma/gh"), 500).await;
    assert_eq!(status, 202, "the source's own share is far from full");
    let (n, bytes, sizes) = listed(&c, &g, "tenant=acme").await;
    assert_eq!(n, acme as u64);
    full_to_the_share(bytes, &sizes, 6000, "acme");
    let m = g.metrics(&c).await;
    assert_eq!(
        metric(&m, "ankusa_quarantine_full_total{scope=\"tenant\"}"),
        3.0
    );
}

#[tokio::test]
async fn a_body_over_the_pens_cap_is_413_and_stores_nothing() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let g = Gateway::start(&config(
        &rx.url("/in"),
        STALE_SECRET,
        "quarantine: {max_body_bytes: 1000}",
    ));
    let c = client();
    let r = c
        .post(g.url("/webhooks/gh"))
        .header("x-hub-signature-256", "sha256=00")
        .body("x".repeat(1001))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v,
        json!({"error": "payload_too_large", "max_body_bytes": 1000})
    );
    // The cap is the pen's: a hook that verifies is not held to it.
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(2000));
    let r = post_github(&c, &g, "/webhooks/gh", STALE_SECRET, "d-big", &big).await;
    assert_eq!(r.status().as_u16(), 201);
    let (status, _) = forged(&c, &g.url("/webhooks/gh"), 900).await;
    assert_eq!(status, 202, "a body within the cap is held");
    let page = g.admin_json(&c, "/v1/quarantine").await;
    assert_eq!(page["total"], 1, "nothing stored for the 413: {page}");
    let m = g.metrics(&c).await;
    assert_eq!(
        metric(
            &m,
            "ankusa_ingest_requests_total{outcome=\"quarantine_too_large\"}"
        ),
        1.0
    );
}

/// Polls the pen until it holds `n` entries, counted and listed; their ids. (A page read while
/// an expiry pass commits can count the pass and still list the rows it removed.)
async fn wait_total(c: &reqwest::Client, g: &Gateway, n: u64, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let page = g.admin_json(c, "/v1/quarantine?limit=1000").await;
        let ids: Vec<String> = page["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect();
        if page["total"].as_u64() == Some(n) && ids.len() as u64 == n {
            return ids;
        }
        assert!(Instant::now() < deadline, "never {n} entries: {page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn old_entries_expire_and_the_counters_follow_across_kill_9() {
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    // 0.002 h: entries expire 7.2 s after they were received; a pass every 100 ms.
    let mut g = Gateway::start(&config(
        &rx.url("/in"),
        STALE_SECRET,
        "quarantine: {retention_hours: 0.002, expire_interval_ms: 100}",
    ));
    let c = client();
    let t0 = Instant::now();
    for i in 0..3 {
        quarantine_one(&c, &g, "/webhooks/gh", i).await;
    }
    // Held across a kill -9, and expired by the restarted process.
    g.kill9();
    g.spawn_again();
    g.wait_ready(Duration::from_secs(30));
    let c = client();
    assert!(
        t0.elapsed() < Duration::from_secs(7),
        "restart too slow to test"
    );
    let page = g.admin_json(&c, "/v1/quarantine").await;
    assert_eq!(page["total"], 3, "{page}");
    // Newer entries, 4 s younger.
    tokio::time::sleep(Duration::from_secs(4).saturating_sub(t0.elapsed())).await;
    let mut newer = HashSet::new();
    for i in 10..12 {
        newer.insert(quarantine_one(&c, &g, "/webhooks/gh", i).await);
    }
    let (_, all_bytes, _) = listed(&c, &g, "").await;
    let left = wait_total(&c, &g, 2, Duration::from_secs(15)).await;
    assert_eq!(
        left.into_iter().collect::<HashSet<_>>(),
        newer,
        "the old ones went"
    );
    let page = g.admin_json(&c, "/v1/quarantine").await;
    let (_, kept_bytes, _) = listed(&c, &g, "").await;
    assert_eq!(page["bytes"].as_u64(), Some(kept_bytes));
    assert!(kept_bytes < all_bytes);
    let m = g.metrics(&c).await;
    assert_eq!(metric(&m, "ankusa_quarantine_expired_total "), 3.0);
    assert_eq!(metric(&m, "ankusa_quarantine_entries "), 2.0);
    assert_eq!(metric(&m, "ankusa_quarantine_bytes "), kept_bytes as f64);
    // Then the newer ones, and every counter is back at zero.
    wait_total(&c, &g, 0, Duration::from_secs(15)).await;
    let page = g.admin_json(&c, "/v1/quarantine").await;
    assert_eq!(page["bytes"], 0);
    let status = g.admin_json(&c, "/v1/status").await;
    assert_eq!(status["quarantine"]["entries"], 0, "{status}");
    assert!(
        status["quarantine"]["sources"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "{status}"
    );
    let m = g.metrics(&c).await;
    assert_eq!(metric(&m, "ankusa_quarantine_expired_total "), 5.0);
    assert_eq!(metric(&m, "ankusa_quarantine_bytes "), 0.0);
}
