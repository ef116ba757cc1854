//! Operational lifecycle events through the real binary (the config-reload, dead-letter and
//! breaker ones are `lifecycle.rs`'s): the pen's `quarantine.held` / `quarantine.released`
//! are per-interval counts that sum to the hooks penned and released; a replay job emits
//! exactly one `replay.succeeded`, `replay.failed` (an archive job that met a damaged segment)
//! or `replay.paused` (a job that paused itself) with its fields; a config pushed with
//! `PUT /v1/config` emits exactly its `source.*` events and no secret; hooks dead-lettered by
//! hand (`POST /v1/sources/{id}/dead_letter`) emit no `hook.dead_lettered` while dispatch's
//! dead letters beside them do. Each event is parsed by an independent CloudEvents
//! implementation (`common::events`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use cloudevents::AttributesReader;
use common::events::{self, of_type};
use common::receiver::{Receiver, Reply};
use common::*;
use serde_json::{Value, json};

/// The lifecycle sink's signing secret.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Secrets of the sources; none may reach an event.
const PROVIDER_SECRET: &str = "provider-signs-with-this-LEAK-1";
const STALE_SECRET: &str = "source-has-this-stale-one-LEAK-2";
const ROTATED_SECRET: &str = "rotated-verify-secret-LEAK-3";
/// A secret in a sink URL's path (shown as `[redacted]`).
const PATH_SECRET: &str = "path-token-LEAK-4";
const FORBIDDEN: &[&str] = &[
    SECRET,
    PROVIDER_SECRET,
    STALE_SECRET,
    ROTATED_SECRET,
    PATH_SECRET,
];
const NODE_TOKEN: &str = "node-token-0123456789";
const WAIT: Duration = Duration::from_secs(30);

fn http_sink(url: &str) -> String {
    format!("{{type: http, url: \"{url}\", secret: {SECRET}}}")
}

/// `lifecycle` to `lc_url` (with `lifecycle_extra` keys), `extra` top-level keys and `sources`
/// (YAML lines under `sources:`).
fn config(lc_url: &str, lifecycle_extra: &str, extra: &str, sources: &str) -> String {
    format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
dispatch: {{breaker_failures: 0}}
{extra}
lifecycle:
  {lifecycle_extra}
  sinks:
    - {lc}
sources:
{sources}
"#,
        lc = http_sink(lc_url)
    )
}

async fn wait_events(lc: &Receiver, ty: &str, n: usize) -> Vec<(cloudevents::Event, Value)> {
    events::wait_events(lc, FORBIDDEN, ty, n, WAIT).await
}

/// The sum of `data.count` over `evs`, each checked to be a count of `source` in `tenant`.
fn count_sum(evs: &[&Value], tenant: &str, source: &str, interval_s: u64) -> u64 {
    evs.iter()
        .map(|e| {
            assert_eq!(e["subject"], source, "{e}");
            let d = &e["data"];
            assert_eq!(d["tenant"], tenant, "{e}");
            assert_eq!(d["source"], source, "{e}");
            assert_eq!(d["interval_s"], interval_s, "{e}");
            let n = d["count"].as_u64().expect("a count");
            assert!(n > 0, "only non-zero counts are emitted: {e}");
            n
        })
        .sum()
}

/// The ids of the trail's events matching `query`, oldest first.
async fn trail_ids(
    c: &reqwest::Client,
    g: &Gateway,
    token: Option<&str>,
    query: &str,
) -> Vec<String> {
    let mut req = c.get(g.admin_url(&format!("/v1/lifecycle{query}")));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    for f in FORBIDDEN {
        assert!(!text.contains(f), "a secret in the trail: {text}");
    }
    let page: Value = serde_json::from_str(&text).unwrap();
    page["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["id"].as_str().expect("id").to_string())
        .collect()
}

fn github_source(id: &str, secret: &str, sink: &str) -> String {
    format!(
        "  {id}:\n    tenant: acme\n    verify: {{type: github, secret: \"{secret}\"}}\n    on_verify_failure: quarantine\n    sinks: [{sink}]\n"
    )
}

async fn post_github(c: &reqwest::Client, g: &Gateway, secret: &str, i: usize) -> u16 {
    let body = format!("{{\"n\":{i}}}");
    c.post(g.url("/webhooks/gh"))
        .header("content-type", "application/json")
        .header("x-github-event", "push")
        .header("x-github-delivery", format!("d-{i}"))
        .header(
            "x-hub-signature-256",
            github_signature(secret, body.as_bytes()),
        )
        .body(body)
        .send()
        .await
        .expect("post")
        .status()
        .as_u16()
}

#[tokio::test]
async fn quarantine_held_and_released_are_interval_counts_summing_to_the_hooks() {
    const N: usize = 10;
    let lc = Receiver::start(|_, _| Reply::status(200)).await;
    let hooks = Receiver::start(|_, _| Reply::status(200)).await;
    let sink = http_sink(&hooks.url("/gh"));
    let cfg = |secret: &str| {
        config(
            &lc.url("/lc"),
            "count_interval_s: 1",
            "",
            &github_source("gh", secret, &sink),
        )
    };
    let g = Gateway::start(&cfg(STALE_SECRET));
    let c = client();

    // N hooks the source cannot verify: each penned (202), none committed.
    for i in 0..N {
        assert_eq!(
            post_github(&c, &g, PROVIDER_SECRET, i).await,
            202,
            "hook {i}"
        );
    }
    let held_ty = "io.ankusa.quarantine.held";
    let got = events::wait_until(&lc, FORBIDDEN, held_ty, WAIT, |evs| {
        evs.iter()
            .map(|e| e["data"]["count"].as_u64().unwrap_or(0))
            .sum::<u64>()
            >= N as u64
    })
    .await;
    let held = of_type(&got, held_ty);
    assert_eq!(count_sum(&held, "acme", "gh", 1), N as u64, "{held:?}");
    assert!(
        held.len() <= N / 2,
        "counts per interval, not an event per hook: {} events",
        held.len()
    );
    assert!(
        of_type(&got, "io.ankusa.quarantine.released").is_empty(),
        "nothing released yet"
    );
    // The trail holds them under the source's tenant.
    let in_trail = trail_ids(&c, &g, None, &format!("?type={held_ty}&tenant=acme")).await;
    assert_eq!(in_trail.len(), held.len(), "{in_trail:?}");

    // The source learns the provider's secret; a quarantine job releases every penned hook.
    g.write_config(&cfg(PROVIDER_SECRET));
    let r = c
        .post(g.admin_url("/v1/config/reload"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let r = g
        .admin_post(
            &c,
            "/v1/replays",
            &json!({"kind": "quarantine", "source_id": "gh"}),
        )
        .await;
    assert_eq!(r.status(), 202);
    let job = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = wait_job_done(&c, &g, &job).await;
    assert_eq!(done["released"], N as u64, "{done}");
    let released_ty = "io.ankusa.quarantine.released";
    let got = events::wait_until(&lc, FORBIDDEN, released_ty, WAIT, |evs| {
        evs.iter()
            .map(|e| e["data"]["count"].as_u64().unwrap_or(0))
            .sum::<u64>()
            >= N as u64
    })
    .await;
    let released = of_type(&got, released_ty);
    assert_eq!(
        count_sum(&released, "acme", "gh", 1),
        N as u64,
        "{released:?}"
    );
    assert!(released.len() <= N / 2, "{} events", released.len());
    hooks.wait_for(WAIT, |r| r.len() >= N).await;

    // A verified hook is not penned: two more intervals pass and no count moves.
    assert_eq!(post_github(&c, &g, PROVIDER_SECRET, 99).await, 201);
    let settled = Instant::now();
    let job_ty = "io.ankusa.replay.succeeded";
    wait_events(&lc, job_ty, 1).await;
    while settled.elapsed() < Duration::from_millis(2_500) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = events::cloudevents(&lc.received(), FORBIDDEN);
    assert_eq!(
        count_sum(&of_type(&got, held_ty), "acme", "gh", 1),
        N as u64
    );
    assert_eq!(
        count_sum(&of_type(&got, released_ty), "acme", "gh", 1),
        N as u64
    );
    let job_ev = of_type(&got, job_ty);
    assert_eq!(job_ev.len(), 1);
    assert_eq!(job_ev[0]["subject"], job.as_str());
    assert_eq!(job_ev[0]["data"]["kind"], "quarantine");
    assert_eq!(job_ev[0]["data"]["released"], N as u64);
}

fn local_storage(dir: &std::path::Path) -> String {
    format!(
        "storage:\n  type: local\n  roll_ms: 100\n  interval_ms: 50\n  local:\n    dir: {}\n",
        dir.display()
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

async fn create_job(c: &reqwest::Client, g: &Gateway, body: Value) -> String {
    let r = g.admin_post(c, "/v1/replays", &body).await;
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, 202, "a new job: {v}");
    v["id"].as_str().unwrap().to_string()
}

/// The events of type `ty` about job `job`, once `n` of them arrived.
async fn job_events(lc: &Receiver, ty: &str, job: &str, n: usize) -> Vec<Value> {
    let got = events::wait_until(lc, FORBIDDEN, ty, WAIT, |evs| {
        evs.iter().filter(|e| e["subject"] == job).count() >= n
    })
    .await;
    of_type(&got, ty)
        .into_iter()
        .filter(|e| e["subject"] == job)
        .cloned()
        .collect()
}

#[tokio::test]
async fn replay_jobs_emit_one_succeeded_failed_or_paused_event_each() {
    let lc = Receiver::start(|_, _| Reply::status(200)).await;
    let status = Arc::new(AtomicU16::new(200));
    let s = status.clone();
    let flip = Receiver::start(move |_, _| Reply::status(s.load(Ordering::SeqCst))).await;
    let gone = Receiver::start(|_, _| Reply::status(410)).await;
    let blobs = tempfile::tempdir().unwrap();
    let sources = format!(
        "  s:\n    tenant: acme\n    sinks: [{}]\n  dead:\n    sinks: [{}]\n",
        http_sink(&flip.url("/s")),
        http_sink(&gone.url("/dead"))
    );
    let g = Gateway::start(&config(
        &lc.url("/lc"),
        "",
        &local_storage(blobs.path()),
        &sources,
    ));
    let c = client();

    // failed: an archive job over a window whose segment is damaged sends none of its hooks.
    let from = now_ms();
    let ids = post_ids(&c, &g, "/webhooks/s", 2, |i| format!("{{\"i\":{i}}}")).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let st = g.admin_json(&c, "/v1/status").await;
        if st["archive"]["pending"] == 0 && st["archive"]["archived"].as_i64() == Some(2) {
            break;
        }
        assert!(Instant::now() < deadline, "never archived: {st}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let to = now_ms() + 1;
    let h = g
        .admin_json(&c, &format!("/v1/archive/hooks/{}", ids[0]))
        .await;
    let segment = blobs.path().join(h["segment"].as_str().expect("archived"));
    let mut bytes = std::fs::read(&segment).unwrap();
    let n = bytes.len() - 4;
    bytes[n] ^= 0x20;
    std::fs::write(&segment, &bytes).unwrap();
    let archive_job = create_job(
        &c,
        &g,
        json!({"kind": "archive", "from": from, "to": to, "tenant": "acme"}),
    )
    .await;
    let done = wait_job_done(&c, &g, &archive_job).await;
    assert!(done["corrupt_segments"].as_u64().unwrap() >= 1, "{done}");
    let failed = job_events(&lc, "io.ankusa.replay.failed", &archive_job, 1).await;
    assert_eq!(failed.len(), 1);
    let d = &failed[0]["data"];
    assert_eq!(d["job"], archive_job.as_str());
    assert_eq!(d["kind"], "archive");
    assert_eq!(d["state"], "completed", "the job ran to its end: {d}");
    assert!(d["reason"].as_str().unwrap().contains("sha256"), "{d}");
    // Its tenant filter is the event's tenant.
    let trail = trail_ids(&c, &g, None, "?type=io.ankusa.replay.failed&tenant=acme").await;
    assert_eq!(trail, [failed[0]["id"].as_str().unwrap().to_string()]);

    // succeeded: three dead letters, the sink recovers, a dlq job moves all three back.
    status.store(410, Ordering::SeqCst);
    post_ids(&c, &g, "/webhooks/s", 3, |i| format!("{{\"j\":{i}}}")).await;
    wait_events(&lc, "io.ankusa.hook.dead_lettered", 3).await;
    status.store(200, Ordering::SeqCst);
    let dlq_job = create_job(&c, &g, json!({"kind": "dlq", "source_id": "s"})).await;
    let done = wait_job_done(&c, &g, &dlq_job).await;
    assert_eq!(done["moved"], 3, "{done}");
    assert_eq!(done["delivered"], 3, "{done}");
    let ok = job_events(&lc, "io.ankusa.replay.succeeded", &dlq_job, 1).await;
    assert_eq!(ok.len(), 1);
    let d = &ok[0]["data"];
    assert_eq!(d["job"], dlq_job.as_str());
    assert_eq!(d["kind"], "dlq");
    assert_eq!(d["state"], "completed");
    assert_eq!(d["moved"], 3);
    assert_eq!(d["reason"], Value::Null);

    // paused: a slow job whose rows dead-letter again pauses itself after the first.
    post_ids(&c, &g, "/webhooks/dead", 5, |i| format!("{{\"k\":{i}}}")).await;
    wait_events(&lc, "io.ankusa.hook.dead_lettered", 8).await;
    let paused_job = create_job(
        &c,
        &g,
        json!({"kind": "dlq", "source_id": "dead", "rate": 1, "pause_after_dead": 1}),
    )
    .await;
    let paused = job_events(&lc, "io.ankusa.replay.paused", &paused_job, 1).await;
    let d = &paused[0]["data"];
    assert_eq!(d["job"], paused_job.as_str());
    assert_eq!(d["kind"], "dlq");
    assert_eq!(d["state"], "paused");
    assert!(
        d["reason"]
            .as_str()
            .unwrap()
            .contains("dead-lettered again"),
        "{d}"
    );
    let moved = d["moved"].as_u64().unwrap();
    assert!((1..5).contains(&moved), "{d}");
    let j = g.admin_json(&c, &format!("/v1/replays/{paused_job}")).await;
    assert_eq!(j["state"], "paused", "{j}");
    // The row it re-sent died again: that dead letter names the job.
    let got = events::cloudevents(&lc.received(), FORBIDDEN);
    assert!(
        of_type(&got, "io.ankusa.hook.dead_lettered")
            .iter()
            .any(|e| e["data"]["replay_id"] == paused_job.as_str()),
        "a re-death names its replay"
    );

    // One event per job, however long we look: no succeeded for the failed or paused job.
    let got = events::cloudevents(&lc.received(), FORBIDDEN);
    let about = |job: &str| {
        got.iter()
            .filter(|(e, _)| e.subject() == Some(job) && e.ty().starts_with("io.ankusa.replay."))
            .map(|(e, _)| e.ty().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(about(&archive_job), ["io.ankusa.replay.failed"]);
    assert_eq!(about(&dlq_job), ["io.ankusa.replay.succeeded"]);
    assert_eq!(about(&paused_job), ["io.ankusa.replay.paused"]);
}

#[tokio::test]
async fn a_pushed_config_emits_exactly_its_source_events_and_no_secret() {
    let lc = Receiver::start(|_, _| Reply::status(200)).await;
    let hooks = Receiver::start(|_, _| Reply::status(200)).await;
    let admin = format!("admin: {{tokens: [{{token: {NODE_TOKEN}, scopes: ['*']}}]}}");
    let cfg = |a_secret: &str, with_b: bool, with_c: bool| {
        let mut s = format!(
            "  a:\n    verify: {{type: github, secret: \"{a_secret}\"}}\n    sinks: [{}]\n",
            http_sink(&hooks.url("/a"))
        );
        if with_b {
            s.push_str(&format!(
                "  b:\n    sinks: [{}]\n",
                http_sink(&hooks.url("/b"))
            ));
        }
        if with_c {
            s.push_str(&format!(
                "  c:\n    tenant: acme\n    verify: {{type: github, secret: \"{PROVIDER_SECRET}\"}}\n    sinks: [{}]\n",
                http_sink(&hooks.url(&format!("/c/{PATH_SECRET}")))
            ));
        }
        config(&lc.url("/lc"), "", &admin, &s)
    };
    let g = Gateway::start(&cfg(STALE_SECRET, true, false));
    let c = client();
    let put = |body: String| {
        c.put(g.admin_url("/v1/config"))
            .bearer_auth(NODE_TOKEN)
            .body(body)
            .send()
    };

    // a's verify secret rotates, b goes, c comes: one push.
    let r = put(cfg(ROTATED_SECRET, false, true)).await.unwrap();
    assert_eq!(r.status(), 200);
    let reply: Value = r.json().await.unwrap();
    assert_eq!(reply["changed"], true, "{reply}");
    let deadline = Instant::now() + WAIT;
    while lc.count() < 3 {
        assert!(Instant::now() < deadline, "{} events", lc.count());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The same config again changes nothing; a refused one installs nothing. Neither emits;
    // a last push (d comes) is the barrier: its event is the fourth and last.
    let r = put(cfg(ROTATED_SECRET, false, true)).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["changed"], false);
    let r = put(config(
        &lc.url("/lc"),
        "",
        &admin,
        "  bad id!:\n    sinks: [{type: log}]\n",
    ))
    .await
    .unwrap();
    assert_eq!(r.status(), 400);
    let mut last = cfg(ROTATED_SECRET, false, true);
    last.push_str("  d:\n    sinks: [{type: log}]\n");
    let r = put(last).await.unwrap();
    assert_eq!(r.status(), 200);
    let got = wait_events(&lc, "io.ankusa.source.created", 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = {
        let again = events::cloudevents(&lc.received(), FORBIDDEN);
        assert_eq!(again.len(), got.len(), "nothing after the barrier");
        again
    };
    let mut kinds: Vec<(String, String)> = got
        .iter()
        .map(|(e, _)| (e.ty().to_string(), e.subject().unwrap_or("").to_string()))
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("io.ankusa.source.created".to_string(), "c".to_string()),
            ("io.ankusa.source.created".to_string(), "d".to_string()),
            ("io.ankusa.source.deleted".to_string(), "b".to_string()),
            ("io.ankusa.source.updated".to_string(), "a".to_string()),
        ],
        "exactly the pushed changes"
    );
    let updated = of_type(&got, "io.ankusa.source.updated")[0];
    let d = &updated["data"];
    assert_eq!(d["source"], "a");
    assert_eq!(
        d["changed"],
        json!(["verify"]),
        "a rotated secret is a change: {d}"
    );
    assert_eq!(d["before"]["verify"]["secret"], "[redacted]", "{d}");
    assert_eq!(d["after"]["verify"]["secret"], "[redacted]", "{d}");
    let created = of_type(&got, "io.ankusa.source.created");
    let c_ev = created.iter().find(|e| e["subject"] == "c").unwrap();
    assert_eq!(c_ev["data"]["source"], "c");
    assert_eq!(c_ev["data"]["after"]["tenant"], "acme");
    assert_eq!(
        c_ev["data"]["after"]["sinks"][0]["url"],
        format!("http://{}/[redacted]", hooks.addr)
    );
    assert_eq!(c_ev["data"]["after"]["sinks"][0]["secret"], "[redacted]");
    let deleted = of_type(&got, "io.ankusa.source.deleted")[0];
    assert_eq!(deleted["data"]["source"], "b");
    assert!(deleted["data"]["before"]["sinks"].is_array(), "{deleted}");

    // The trail holds exactly these four, and no secret either.
    let trail = trail_ids(&c, &g, Some(NODE_TOKEN), "").await;
    let mut sent: Vec<String> = got.iter().map(|(e, _)| e.id().to_string()).collect();
    let mut trail_sorted = trail.clone();
    sent.sort();
    trail_sorted.sort();
    assert_eq!(trail_sorted, sent);
}

#[tokio::test]
async fn hooks_dead_lettered_by_hand_emit_no_event_and_dispatchs_do() {
    let lc = Receiver::start(|_, _| Reply::status(200)).await;
    let down = Receiver::start(|_, _| Reply::status(503)).await;
    let gone = Receiver::start(|_, _| Reply::status(410)).await;
    // `s` retries far in the future: its rows stay queued between attempts.
    let sources = format!(
        "  s:\n    retry: {{base_ms: 60000, max_ms: 60000}}\n    sinks: [{}]\n  gone:\n    sinks: [{}]\n",
        http_sink(&down.url("/s")),
        http_sink(&gone.url("/gone"))
    );
    let g = Gateway::start(&config(&lc.url("/lc"), "", "", &sources));
    let c = client();

    let queued = post_ids(&c, &g, "/webhooks/s", 3, |i| format!("{{\"i\":{i}}}")).await;
    for id in &queued {
        wait_delivery_row(&c, &g, id, WAIT, "never attempted", |r| attempts(r) >= 1).await;
    }
    let first = post_hook(&c, &g, "/webhooks/gone", "{}").await;
    wait_events(&lc, "io.ankusa.hook.dead_lettered", 1).await;

    // The operator dead-letters s's queued rows (before deleting the source).
    let r = g
        .admin_post(&c, "/v1/sources/s/dead_letter", &json!({}))
        .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["dead_lettered"], 3, "{v}");
    assert_eq!(v["dead"], 3, "{v}");
    let dlq = g.admin_json(&c, "/v1/dlq?source_id=s").await;
    assert_eq!(dlq["entries"].as_array().unwrap().len(), 3, "{dlq}");

    // A dispatch dead letter after it is the barrier: the trail is written in order.
    let second = post_hook(&c, &g, "/webhooks/gone", "{}").await;
    let got = wait_events(&lc, "io.ankusa.hook.dead_lettered", 2).await;
    let hooks: Vec<&str> = of_type(&got, "io.ankusa.hook.dead_lettered")
        .iter()
        .map(|e| e["data"]["hook_id"].as_str().unwrap())
        .collect();
    assert_eq!(hooks, [first.as_str(), second.as_str()]);
    let trail = trail_ids(&c, &g, None, "?type=io.ankusa.hook.dead_lettered").await;
    assert_eq!(trail.len(), 2, "only dispatch's dead letters: {trail:?}");
    assert_eq!(lc.count(), 2, "no other event");
}
