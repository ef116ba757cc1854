//! Lifecycle events through the real binary: a config change emits exactly its
//! `io.ankusa.source.*` events to an HTTP receiver, each checked against the CloudEvents 1.0
//! spec by an independent implementation (`cloudevents-sdk`); a refused change emits nothing;
//! the trail lists them (`GET /v1/lifecycle`, tenant-scoped) and survives `kill -9`; the
//! reserved source is `404` at ingest; a dead-lettered hook emits exactly one
//! `hook.dead_lettered`; breaker transitions are events; the per-type ceiling drops the excess;
//! a lifecycle sink that hangs holds none of the hooks' room; a `kind: lifecycle` replay
//! re-delivers a window with the original event ids.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use cloudevents::{AttributesReader, Event};
use common::events::{self, of_type};
use common::receiver::{Received, Receiver, Reply};
use common::*;
use serde_json::{Value, json};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// A value that must never reach an event (a verify secret).
const VERIFY_SECRET: &str = "gh-verify-secret-DO-NOT-LEAK";

fn http_sink(url: &str) -> String {
    format!("{{type: http, url: \"{url}\", secret: {SECRET}}}")
}

/// `lifecycle` to `lc_url` plus `extra` (top-level keys) and `sources` (YAML lines under
/// `sources:`).
fn config(lc_url: &str, lifecycle_extra: &str, extra: &str, sources: &str) -> String {
    format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
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

/// Every request's body parsed by the independent implementation (`common::events`), with
/// neither secret anywhere in it.
fn cloudevents(received: &[Received]) -> Vec<(Event, Value)> {
    events::cloudevents(received, &[VERIFY_SECRET, SECRET])
}

async fn trail(c: &reqwest::Client, g: &Gateway, query: &str) -> Value {
    g.admin_json(c, &format!("/v1/lifecycle{query}")).await
}

/// `GET /v1/lifecycle<q>` with `token`, answered `200`.
async fn list_as(c: &reqwest::Client, g: &Gateway, token: &str, q: &str) -> Value {
    let r = c
        .get(g.admin_url(&format!("/v1/lifecycle{q}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json::<Value>().await.unwrap()
}

fn ids(page: &Value) -> Vec<String> {
    page["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["id"].as_str().expect("id").to_string())
        .collect()
}

#[tokio::test]
async fn a_config_change_emits_exactly_its_source_events_and_the_trail_survives_kill9() {
    let lc = Receiver::start(|_, _| Reply::status(200)).await;
    let hooks = Receiver::start(|_, _| Reply::status(200)).await;
    let sources = |a_path: &str, with_b: bool, with_c: bool| {
        let mut s = format!(
            "  a:\n    verify: {{type: github, secret: {VERIFY_SECRET}}}\n    sinks: [{}]\n",
            http_sink(&hooks.url(a_path))
        );
        if with_b {
            s.push_str(&format!(
                "  b:\n    sinks: [{}]\n",
                http_sink(&hooks.url("/b"))
            ));
        }
        if with_c {
            s.push_str(&format!(
                "  c:\n    tenant: acme\n    sinks: [{}]\n",
                http_sink(&hooks.url("/c"))
            ));
        }
        s
    };
    let admin = "admin: {tokens: [{token: node-token-0123456789, scopes: ['*']}, {token: acme-token-0123456789, scopes: ['dlq:read', 'tenant:acme']}]}";
    let mut g = Gateway::start(&config(
        &lc.url("/lc"),
        "",
        admin,
        &sources("/a", true, false),
    ));
    let c = client();
    let node = |r: reqwest::RequestBuilder| r.bearer_auth("node-token-0123456789");

    // Nothing at start: the sources a node boots with are not changes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(lc.count(), 0);

    // a's sink changes (its verify secret stays), b goes, c comes.
    g.write_config(&config(
        &lc.url("/lc"),
        "",
        admin,
        &sources("/a2", false, true),
    ));
    let r = node(c.post(g.admin_url("/v1/config/reload")))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    lc.wait_for(Duration::from_secs(20), |r| r.len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = cloudevents(&lc.received());
    assert_eq!(got.len(), 3, "exactly three events");
    let mut kinds: Vec<(String, String)> = got
        .iter()
        .map(|(e, _)| (e.ty().to_string(), e.subject().unwrap_or("").to_string()))
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("io.ankusa.source.created".to_string(), "c".to_string()),
            ("io.ankusa.source.deleted".to_string(), "b".to_string()),
            ("io.ankusa.source.updated".to_string(), "a".to_string()),
        ]
    );
    let updated = of_type(&got, "io.ankusa.source.updated")[0];
    assert_eq!(updated["data"]["changed"], json!(["sinks"]), "{updated}");
    assert_eq!(
        updated["data"]["after"]["sinks"][0]["url"],
        format!("http://{}/[redacted]", hooks.addr),
        "the sink URL is shown as the config API shows it"
    );
    let created = of_type(&got, "io.ankusa.source.created")[0];
    assert_eq!(created["data"]["after"]["tenant"], "acme");

    // A refused change installs nothing and emits nothing.
    g.write_config(&config(
        &lc.url("/lc"),
        "",
        admin,
        "  bad id!:\n    sinks: [{type: log}]\n",
    ));
    let r = node(c.post(g.admin_url("/v1/config/reload")))
        .send()
        .await
        .unwrap();
    assert!(!r.status().is_success());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(lc.count(), 3, "a refused change emits nothing");

    // The reserved source is not an ingest route.
    for path in ["/webhooks/ankusa:lifecycle", "/webhooks/ankusa%3Alifecycle"] {
        let r = c.post(g.url(path)).body("{}").send().await.unwrap();
        assert_eq!(r.status().as_u16(), 404, "{path}");
    }

    // The trail lists the same events (node-wide: only for a node-wide token).
    let sent: BTreeSet<String> = got.iter().map(|(e, _)| e.id().to_string()).collect();
    let page = list_as(&c, &g, "node-token-0123456789", "").await;
    assert_eq!(
        ids(&page).into_iter().collect::<BTreeSet<_>>(),
        sent,
        "{page}"
    );
    let page = list_as(&c, &g, "acme-token-0123456789", "").await;
    assert_eq!(ids(&page).len(), 0, "config events are node-wide: {page}");
    let page = list_as(
        &c,
        &g,
        "node-token-0123456789",
        "?type=io.ankusa.source.deleted",
    )
    .await;
    assert_eq!(ids(&page).len(), 1);
    let page = list_as(&c, &g, "node-token-0123456789", "?limit=2").await;
    assert_eq!(ids(&page).len(), 2);
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_string();
    let r = c
        .get(g.admin_url(&format!("/v1/lifecycle?cursor={cursor}")))
        .bearer_auth("node-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(ids(&r.json::<Value>().await.unwrap()).len(), 1);
    let r = c
        .get(g.admin_url("/v1/lifecycle?type=io.ankusa.nope"))
        .bearer_auth("node-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // kill -9 (with the file back at the config in force): the trail is still there, whole.
    g.write_config(&config(
        &lc.url("/lc"),
        "",
        admin,
        &sources("/a2", false, true),
    ));
    g.kill9();
    g.restart();
    // A new client: the old one's pooled connections died with the process.
    let c = client();
    let page = list_as(&c, &g, "node-token-0123456789", "").await;
    assert_eq!(
        ids(&page).into_iter().collect::<BTreeSet<_>>(),
        sent,
        "after kill -9: {page}"
    );
    let m = g.metrics_as(&c, "node-token-0123456789").await;
    assert!(m.contains("ankusa_lifecycle_trail_events"), "{m}");
}

/// Polls the lifecycle receiver until `n` events of type `ty` arrived; all events so far.
async fn wait_events(lc: &Receiver, ty: &str, n: usize, within: Duration) -> Vec<(Event, Value)> {
    events::wait_events(lc, &[VERIFY_SECRET, SECRET], ty, n, within).await
}

#[tokio::test]
async fn a_dead_lettered_hook_emits_exactly_one_event_and_breakers_emit_their_transitions() {
    let lc = Receiver::start(|_, _| Reply::status(200)).await;
    // `gone` answers 410 (permanent: dead at the first attempt); `flaky` fails until told.
    let gone = Receiver::start(|_, _| Reply::status(410)).await;
    let status = Arc::new(AtomicU16::new(503));
    let s = status.clone();
    let flaky = Receiver::start(move |_, _| Reply::status(s.load(Ordering::SeqCst))).await;
    let sources = format!(
        "  gone:\n    tenant: acme\n    sinks: [{}]\n  flaky:\n    retry: {{base_ms: 20, max_ms: 50}}\n    sinks: [{}]\n",
        http_sink(&gone.url("/gone")),
        http_sink(&flaky.url("/flaky"))
    );
    let extra = "dispatch: {breaker_failures: 3, breaker_open_ms: 300, breaker_max_open_ms: 300}";
    let g = Gateway::start(&config(&lc.url("/lc"), "", extra, &sources));
    let c = client();

    // The hook carries a trace context: its event carries it as the `traceparent` extension.
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let r = post_with_header(&c, &g.url("/webhooks/gone"), "traceparent", tp).await;
    assert_eq!(r.status(), 201);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let got = wait_events(
        &lc,
        "io.ankusa.hook.dead_lettered",
        1,
        Duration::from_secs(20),
    )
    .await;
    let dead = of_type(&got, "io.ankusa.hook.dead_lettered");
    let (ev, _) = got
        .iter()
        .find(|(e, _)| e.ty() == "io.ankusa.hook.dead_lettered")
        .unwrap();
    assert_eq!(
        ev.extension("traceparent").map(|v| v.to_string()),
        Some(tp.to_string()),
        "the Distributed Tracing extension"
    );
    let d = &dead[0]["data"];
    assert_eq!(dead[0]["subject"], id.as_str());
    assert_eq!(d["hook_id"], id.as_str());
    assert_eq!(d["source"], "gone");
    assert_eq!(d["tenant"], "acme");
    assert_eq!(d["sink"], 0);
    assert_eq!(d["sink_name"], "sinks[0]");
    assert_eq!(d["error_class"], "permanent");
    assert_eq!(d["attempts"], 1);
    // The trail holds it under its tenant.
    let page = trail(&c, &g, "?tenant=acme&type=io.ankusa.hook.dead_lettered").await;
    assert_eq!(ids(&page), [dead[0]["id"].as_str().unwrap().to_string()]);

    // The flaky sink opens its breaker; once it answers 200 a probe closes it.
    post_hook(&c, &g, "/webhooks/flaky", "{}").await;
    let got = wait_events(
        &lc,
        "io.ankusa.sink.breaker_opened",
        1,
        Duration::from_secs(20),
    )
    .await;
    let opened = of_type(&got, "io.ankusa.sink.breaker_opened")[0].clone();
    assert_eq!(opened["subject"], "flaky/sinks[0]");
    assert_eq!(opened["data"]["tenant"], "default");
    status.store(200, Ordering::SeqCst);
    wait_events(
        &lc,
        "io.ankusa.sink.breaker_closed",
        1,
        Duration::from_secs(20),
    )
    .await;

    // Exactly one dead letter event, however long we wait.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let got = cloudevents(&lc.received());
    assert_eq!(of_type(&got, "io.ankusa.hook.dead_lettered").len(), 1);
    let m = g.metrics(&c).await;
    assert!(
        metric(
            &m,
            "ankusa_lifecycle_events_total{type=\"io.ankusa.hook.dead_lettered\"}"
        ) == 1.0,
        "{m}"
    );
}

#[tokio::test]
async fn the_rate_ceiling_drops_the_excess_of_a_type_and_counts_it() {
    let lc = Receiver::start(|_, _| Reply::status(200)).await;
    let gone = Receiver::start(|_, _| Reply::status(410)).await;
    let sources = format!("  gone:\n    sinks: [{}]\n", http_sink(&gone.url("/gone")));
    let g = Gateway::start(&config(
        &lc.url("/lc"),
        "max_per_minute: 5",
        "dispatch: {breaker_failures: 0}",
        &sources,
    ));
    let c = client();
    post_ids(&c, &g, "/webhooks/gone", 20, |i| format!("{{\"i\":{i}}}")).await;
    // Every row dies; only five events are built this minute.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = g.metrics(&c).await;
        let dropped = metric(&m, "ankusa_lifecycle_dropped_total{reason=\"rate\"}");
        let built = metric(
            &m,
            "ankusa_lifecycle_events_total{type=\"io.ankusa.hook.dead_lettered\"}",
        );
        if dropped + built >= 20.0 {
            // A minute boundary in the middle lets up to five more through.
            assert!((5.0..=10.0).contains(&built), "{built} built");
            break;
        }
        assert!(Instant::now() < deadline, "{m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = cloudevents(&lc.received());
    assert!((5..=10).contains(&got.len()), "{} delivered", got.len());
}

#[tokio::test]
async fn a_hanging_lifecycle_sink_holds_no_room_of_the_hooks() {
    // The lifecycle receiver hangs every request far past the test.
    let lc = Receiver::start(|_, _| Reply::status(200).delay(Duration::from_secs(120))).await;
    let gone = Receiver::start(|_, _| Reply::status(410)).await;
    let ok = Receiver::start(|_, _| Reply::status(200)).await;
    let sources = format!(
        "  gone:\n    sinks: [{}]\n  ok:\n    sinks: [{}]\n",
        http_sink(&gone.url("/gone")),
        http_sink(&ok.url("/ok"))
    );
    // A small node: 8 attempts at once, 30 s per attempt.
    let extra = "dispatch: {concurrency: 8, breaker_failures: 0, attempt_timeout_ms: 30000}";
    let g = Gateway::start(&config(
        &lc.url("/lc"),
        "max_per_minute: 1000",
        extra,
        &sources,
    ));
    let c = client();

    // Baseline: 200 hooks to the healthy sink.
    let started = Instant::now();
    post_ids(&c, &g, "/webhooks/ok", 200, |i| format!("{{\"i\":{i}}}")).await;
    ok.wait_for(Duration::from_secs(30), |r| r.len() >= 200)
        .await;
    let baseline = started.elapsed();

    // 50 dead letters: 50 lifecycle events, each attempt hanging in the lifecycle sink.
    post_ids(&c, &g, "/webhooks/gone", 50, |i| format!("{{\"i\":{i}}}")).await;
    lc.wait_for(Duration::from_secs(20), |r| r.len() >= 4).await;

    // The healthy sink's hooks flow at their normal speed meanwhile.
    let started = Instant::now();
    post_ids(&c, &g, "/webhooks/ok", 200, |i| format!("{{\"j\":{i}}}")).await;
    ok.wait_for(Duration::from_secs(30), |r| r.len() >= 400)
        .await;
    let during = started.elapsed();
    assert!(
        during < baseline * 3 + Duration::from_secs(2),
        "hooks slowed by the hanging lifecycle sink: {during:?} vs {baseline:?}"
    );
    // The lifecycle rows are still pending (held only by their own sink).
    let wal = g.admin_json(&c, "/v1/wal").await;
    assert!(
        wal["deliveries"]["pending"].as_i64().unwrap_or(0) >= 40,
        "{wal}"
    );
}

#[tokio::test]
async fn a_lifecycle_replay_redelivers_a_window_with_the_original_event_ids() {
    let lc = Receiver::start(|_, _| Reply::status(200)).await;
    let hooks = Receiver::start(|_, _| Reply::status(200)).await;
    let src = |ids: &[&str]| {
        ids.iter()
            .map(|id| format!("  {id}:\n    sinks: [{}]\n", http_sink(&hooks.url("/h"))))
            .collect::<String>()
    };
    let g = Gateway::start(&config(&lc.url("/lc"), "", "", &src(&["a"])));
    let c = client();

    // Two changes, two windows: b in the first, c in the second.
    let t0 = now_ms();
    g.write_config(&config(&lc.url("/lc"), "", "", &src(&["a", "b"])));
    wait_events(&lc, "io.ankusa.source.created", 1, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t1 = now_ms();
    tokio::time::sleep(Duration::from_millis(20)).await;
    g.write_config(&config(&lc.url("/lc"), "", "", &src(&["a", "b", "c"])));
    let first = wait_events(&lc, "io.ankusa.source.created", 2, Duration::from_secs(20)).await;
    let by_subject = |s: &str| {
        first
            .iter()
            .find(|(e, _)| e.subject() == Some(s))
            .map(|(e, v)| (e.id().to_string(), v.clone()))
            .expect("an event")
    };
    let (b_id, b_event) = by_subject("b");
    let (c_id, _) = by_subject("c");
    let before = lc.count();

    // A filter of another kind is refused, naming it.
    let r = g
        .admin_post(
            &c,
            "/v1/replays",
            &json!({"kind": "lifecycle", "since": t0, "source_id": "a"}),
        )
        .await;
    assert_eq!(r.status(), 400);
    let r = g
        .admin_post(&c, "/v1/replays", &json!({"kind": "lifecycle"}))
        .await;
    assert_eq!(r.status(), 400, "since is required");

    let r = g
        .admin_post(
            &c,
            "/v1/replays",
            &json!({"kind": "lifecycle", "since": t0, "until": t1}),
        )
        .await;
    assert_eq!(r.status(), 202, "a job created");
    let job: Value = r.json().await.unwrap();
    let job_id = job["id"].as_str().unwrap().to_string();
    let done = wait_job_done(&c, &g, &job_id).await;
    assert_eq!(done["released"], 1, "{done}");

    // The window's one event arrives again, the same id and the same bytes; c's does not.
    let got = wait_events(
        &lc,
        "io.ankusa.replay.succeeded",
        1,
        Duration::from_secs(20),
    )
    .await;
    let again: Vec<&(Event, Value)> = got[before..]
        .iter()
        .filter(|(e, _)| e.ty() == "io.ankusa.source.created")
        .collect();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].0.id(), b_id);
    assert_ne!(again[0].0.id(), c_id);
    assert_eq!(again[0].1, b_event, "the same event");
    let succeeded = of_type(&got, "io.ankusa.replay.succeeded")[0];
    assert_eq!(succeeded["subject"], job_id.as_str());
    assert_eq!(succeeded["data"]["kind"], "lifecycle");
    // The re-emit is not a new trail event: the trail still holds the two (plus the job's own).
    let page = trail(&c, &g, "?type=io.ankusa.source.created").await;
    assert_eq!(ids(&page).len(), 2, "{page}");
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

#[tokio::test]
async fn a_reload_that_turns_lifecycle_on_emits_the_changes_it_makes() {
    let lc = Receiver::start(|_, _| Reply::status(200)).await;
    let off =
        "egress: {allow_http: true, allow_loopback: true}\nsources:\n  a: {sinks: [{type: log}]}\n";
    let g = Gateway::start(off);
    let c = client();
    g.write_config(&config(
        &lc.url("/lc"),
        "",
        "",
        "  a: {sinks: [{type: log}]}\n  n: {sinks: [{type: log}]}\n",
    ));
    let r = c
        .post(g.admin_url("/v1/config/reload"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let got = wait_events(&lc, "io.ankusa.source.created", 1, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0.subject(), Some("n"));
}

#[tokio::test]
async fn a_lifecycle_row_that_dies_is_in_the_dlq_and_emits_no_event_of_its_own() {
    // The lifecycle receiver refuses everything permanently.
    let lc = Receiver::start(|_, _| Reply::status(410)).await;
    let g = Gateway::start(&config(
        &lc.url("/lc"),
        "",
        "",
        "  a: {sinks: [{type: log}]}\n",
    ));
    let c = client();
    g.write_config(&config(
        &lc.url("/lc"),
        "",
        "",
        "  a: {sinks: [{type: log}]}\n  b: {sinks: [{type: log}]}\n",
    ));
    let r = c
        .post(g.admin_url("/v1/config/reload"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    // Its row dies at the first attempt and is listed as the lifecycle source's.
    let deadline = Instant::now() + Duration::from_secs(20);
    let dlq = loop {
        let d = g.admin_json(&c, "/v1/dlq").await;
        if d["entries"].as_array().is_some_and(|e| !e.is_empty()) {
            break d;
        }
        assert!(Instant::now() < deadline, "never dead: {d}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(dlq["entries"][0]["source_id"], "ankusa:lifecycle");
    assert_eq!(dlq["entries"][0]["tenant"], "ankusa:lifecycle");
    // No `hook.dead_lettered` for it: the trail holds only the config event.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let page = trail(&c, &g, "").await;
    let types: Vec<&str> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["io.ankusa.source.created"], "{page}");
    assert_eq!(
        lc.count(),
        1,
        "one attempt, no retry of a permanent refusal"
    );
}
