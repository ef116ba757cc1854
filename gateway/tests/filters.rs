//! Sink filters and transforms through the real binary (docs/filters.md): three HTTP sinks of
//! one source, filtered on the body's type, on a header and not at all, get exactly their
//! hooks of 300, each signed; a transformed body verifies with an independent Standard
//! Webhooks implementation; a hook no filter takes is answered, counted and not stored; a
//! filter that fails follows `on_filter_error`; a bad expression is refused at load with its
//! field and position.

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use common::receiver::{Receiver, Reply};
use common::*;
use serde_json::Value;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const EGRESS: &str = "egress: {allow_http: true, allow_loopback: true}\n";

fn http_sink(url: &str, extra: &str) -> String {
    format!("      - type: http\n        url: {url}\n        secret: {SECRET}\n{extra}")
}

async fn post(c: &reqwest::Client, g: &Gateway, headers: &[(&str, &str)], body: &str) -> String {
    let mut r = c
        .post(g.url("/webhooks/shop"))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let v: Value = resp.json().await.unwrap();
    v["id"].as_str().unwrap().to_string()
}

fn ids(got: &[common::receiver::Received]) -> BTreeSet<String> {
    got.iter()
        .map(|r| r.header("x-ankusa-id").expect("x-ankusa-id"))
        .collect()
}

/// The sum of the samples of `name` carrying every one of `labels` (`key="value"`).
fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && labels.iter().all(|want| rest.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

#[tokio::test]
async fn three_sinks_get_exactly_their_hooks_and_a_transformed_body_verifies() {
    let invoices = Receiver::start(|_, _| Reply::status(200)).await;
    let orders = Receiver::start(|_, _| Reply::status(200)).await;
    let all = Receiver::start(|_, _| Reply::status(200)).await;
    let transform = "        filter: 'body.type.startsWith(\"invoice.\")'\n        transform:\n          body: '{\"invoice\": body.data.object.id, \"amount\": body.data.object.amount}'\n          headers: '{\"x-event-type\": body.type}'\n";
    let by_header = "        filter: 'headers[\"x-shopify-topic\"] == \"orders/create\"'\n";
    let cfg = format!(
        "{EGRESS}sources:\n  shop:\n    sinks:\n{}{}{}",
        http_sink(&invoices.url("/invoices"), transform),
        http_sink(&orders.url("/orders"), by_header),
        http_sink(&all.url("/all"), ""),
    );
    let g = Gateway::start(&cfg);
    let c = client();

    let mut want_invoices = BTreeSet::new();
    let mut want_orders = BTreeSet::new();
    let mut want_all = BTreeSet::new();
    let mut sent = std::collections::HashMap::new();
    for i in 0..300u32 {
        let (kind, topic) = match i % 3 {
            0 => ("invoice.paid", "none"),
            1 => ("customer.created", "orders/create"),
            _ => ("charge.refunded", "orders/updated"),
        };
        let body = format!(
            r#"{{"type":"{kind}","n":{i},"data":{{"object":{{"id":"in_{i}","amount":{}}}}}}}"#,
            i * 10
        );
        let id = post(&c, &g, &[("x-shopify-topic", topic)], &body).await;
        if kind.starts_with("invoice.") {
            want_invoices.insert(id.clone());
        }
        if topic == "orders/create" {
            want_orders.insert(id.clone());
        }
        want_all.insert(id.clone());
        sent.insert(id, (i, body));
    }
    assert_eq!(want_invoices.len(), 100);
    assert_eq!(want_orders.len(), 100);

    all.wait_for(Duration::from_secs(60), |r| r.len() >= 300)
        .await;
    invoices
        .wait_for(Duration::from_secs(30), |r| r.len() >= 100)
        .await;
    orders
        .wait_for(Duration::from_secs(30), |r| r.len() >= 100)
        .await;
    // Let anything misrouted arrive before counting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ids(&invoices.received()), want_invoices, "{}", g.log_tail());
    assert_eq!(ids(&orders.received()), want_orders);
    assert_eq!(ids(&all.received()), want_all);
    assert_eq!(invoices.count(), 100, "each hook once");
    assert_eq!(orders.count(), 100);
    assert_eq!(all.count(), 300);

    let wh = standardwebhooks::Webhook::new(SECRET).unwrap();
    for rx in [&orders, &all] {
        for r in rx.received() {
            wh.verify(&r.body, &r.headers).expect("signed");
            let id = r.header("x-ankusa-id").unwrap();
            assert_eq!(
                r.body,
                sent[&id].1.as_bytes(),
                "untransformed sinks get the body as received"
            );
        }
    }
    for r in invoices.received() {
        // The signature covers the transformed body, checked by an independent implementation.
        wh.verify(&r.body, &r.headers)
            .expect("a transformed body verifies with standardwebhooks");
        let id = r.header("x-ankusa-id").unwrap();
        let i = sent[&id].0;
        let got: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            got,
            serde_json::json!({"invoice": format!("in_{i}"), "amount": i * 10})
        );
        assert_eq!(r.header("x-event-type").as_deref(), Some("invoice.paid"));
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("application/json")
        );
    }

    let m = g.metrics(&c).await;
    let results = |result: &str| {
        let result = format!("result=\"{result}\"");
        metric(
            &m,
            "ankusa_filter_results_total",
            &["sink_type=\"http\"", &result],
        )
    };
    assert_eq!(results("matched"), 200.0, "{m}");
    assert_eq!(results("filtered"), 400.0);
    assert_eq!(metric(&m, "ankusa_hooks_unrouted_total", &[]), 0.0);
}

#[tokio::test]
async fn unrouted_hooks_are_answered_and_filter_errors_follow_the_policy() {
    let skip = Receiver::start(|_, _| Reply::status(200)).await;
    let deliver = Receiver::start(|_, _| Reply::status(200)).await;
    let cfg = format!(
        "{EGRESS}sources:\n  shop:\n    sinks:\n{}{}",
        http_sink(
            &skip.url("/skip"),
            "        filter: 'body.data.amount > 100'\n        on_filter_error: skip\n"
        ),
        http_sink(
            &deliver.url("/deliver"),
            "        filter: 'body.data.amount > 100'\n"
        ),
    );
    let g = Gateway::start(&cfg);
    let c = client();

    let big = post(&c, &g, &[], r#"{"data":{"amount":500}}"#).await;
    let small = post(&c, &g, &[], r#"{"data":{"amount":5}}"#).await;
    // No `data`: the filter cannot be evaluated (no such key).
    let broken = post(&c, &g, &[], r#"{"type":"ping"}"#).await;
    let not_json = post(&c, &g, &[], "not json at all").await;

    deliver
        .wait_for(Duration::from_secs(20), |r| r.len() >= 3)
        .await;
    skip.wait_for(Duration::from_secs(20), |r| !r.is_empty())
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ids(&skip.received()), BTreeSet::from([big.clone()]));
    assert_eq!(
        ids(&deliver.received()),
        BTreeSet::from([big, broken.clone(), not_json.clone()]),
        "on_filter_error: deliver (the default) sends what its filter cannot judge"
    );

    // The small hook matched no sink: answered 201, counted, and not kept (no archive).
    let r = c
        .get(g.admin_url(&format!("/v1/hooks/{small}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let m = g.metrics(&c).await;
    assert_eq!(metric(&m, "ankusa_hooks_unrouted_total", &[]), 1.0, "{m}");
    assert_eq!(
        metric(&m, "ankusa_filter_errors_total", &[]),
        4.0,
        "two sinks failed on each of two hooks: {m}"
    );
    assert_eq!(
        metric(
            &m,
            "ankusa_filter_results_total",
            &["result=\"error_skipped\""]
        ),
        2.0
    );
}

fn check_config(text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.yml");
    std::fs::write(&p, text).unwrap();
    let out = Command::new(BIN)
        .arg("check-config")
        .arg("--config")
        .arg(&p)
        .env_remove("ANKUSA_CONFIG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout),
    )
}

#[test]
fn a_bad_expression_is_refused_at_load_with_its_field_and_position() {
    let cases = [
        // (filter or transform keys, the field named, a word of the reason)
        (
            "filter: 'body.type == '",
            "sources.shop.sinks[0].filter",
            "line 1",
        ),
        ("filter: 'source'", "sources.shop.sinks[0].filter", "bool"),
        (
            "filter: 'payload.type == \"x\"'",
            "sources.shop.sinks[0].filter",
            "payload",
        ),
        (
            "filter: 'size + \"a\" == 1'",
            "sources.shop.sinks[0].filter",
            "line 1",
        ),
        (
            "filter: 'body.s.matches(body.p)'",
            "sources.shop.sinks[0].filter",
            "literal",
        ),
        (
            "on_filter_error: skip",
            "sources.shop.sinks[0].on_filter_error",
            "filter",
        ),
        (
            "transform: {headers: 'size'}",
            "sources.shop.sinks[0].transform.headers",
            "map",
        ),
        ("transform: {}", "sources.shop.sinks[0].transform", "body"),
    ];
    for (keys, field, reason) in cases {
        let cfg = format!("sources:\n  shop:\n    sinks:\n      - type: log\n        {keys}\n");
        let (code, out) = check_config(&cfg);
        assert_eq!(code, 78, "{keys}: {out}");
        assert!(out.contains(field), "{keys}: {out}");
        assert!(out.contains(reason), "{keys}: {out}");
    }
    // A hostile expression is refused at load, in bounded time.
    let deep = format!("{}1{}", "(".repeat(200), ")".repeat(200));
    let (code, out) = check_config(&format!(
        "sources:\n  shop:\n    sinks:\n      - type: log\n        filter: '{deep} == 1'\n"
    ));
    assert_eq!(code, 78, "{out}");
    assert!(out.contains("sources.shop.sinks[0].filter"), "{out}");
    let (code, out) = check_config(
        "sources:\n  shop:\n    sinks:\n      - type: log\n        filter: 'body.type == \"a\"'\n        transform: {body: 'body.data'}\n",
    );
    assert_eq!(code, 0, "{out}");
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn dry_run(c: &reqwest::Client, g: &Gateway, body: Value) -> (u16, Value) {
    let r = g
        .admin_post(c, "/v1/sources/shop/filters/test", &body)
        .await;
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

#[tokio::test]
async fn the_dry_run_counts_exactly_over_an_archive_window_on_s3() {
    let c = client();
    let bucket = moto_bucket(&c, "ankusa-filters").await;
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let cfg = format!(
        "{EGRESS}storage:\n  type: s3\n  roll_ms: 200\n  interval_ms: 50\n{}sources:\n  shop:\n    sinks:\n{}{}",
        moto_s3_yaml(&bucket, "  "),
        http_sink(
            &rx.url("/paid"),
            "        filter: 'body.type == \"invoice.paid\"'\n"
        ),
        http_sink(&rx.url("/all"), ""),
    );
    let g = Gateway::start(&cfg);
    let kinds = ["invoice.paid", "charge.refunded", "customer.created"];
    let body = |i: usize| format!(r#"{{"type":"{}","n":{i}}}"#, kinds[i % 3]);
    for i in 0..6 {
        post(&c, &g, &[], &body(i)).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let from = now_ms();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut window = Vec::new();
    for i in 6..36 {
        window.push((post(&c, &g, &[], &body(i)).await, i));
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    let to = now_ms();
    tokio::time::sleep(Duration::from_millis(20)).await;
    for i in 36..42 {
        post(&c, &g, &[], &body(i)).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let st = g.admin_json(&c, "/v1/status").await;
        if st["archive"]["pending"] == 0 && st["archive"]["archived"] == 42 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never archived: {st}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Other filters than the configured ones, over the window only: exact counts.
    let (status, v) = dry_run(
        &c,
        &g,
        serde_json::json!({
            "sinks": [
                {"filter": "body.n % 2 == 0", "transform": {"body": "{\"n\": body.n}", "headers": "{\"x-kind\": body.type}"}},
                {"filter": "body.type == \"charge.refunded\" || body.missing == 1", "on_filter_error": "skip"}
            ],
            "archive": {"from": from, "to": to},
            "samples": 2
        }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["examined"], 30, "{v}");
    assert_eq!(v["truncated"], false);
    let even = window.iter().filter(|(_, i)| i % 2 == 0).count() as u64;
    let refunds = window.iter().filter(|(_, i)| i % 3 == 1).count() as u64;
    assert_eq!(v["sinks"][0]["matched"], even, "{v}");
    assert_eq!(v["sinks"][0]["filtered"], 30 - even);
    assert_eq!(v["sinks"][1]["matched"], refunds, "{v}");
    assert_eq!(v["sinks"][1]["filtered"], 30 - refunds);
    assert_eq!(
        v["sinks"][1]["filter_errors"]["no_such_key"],
        30 - refunds,
        "the other hooks have no `missing` key: {v}"
    );
    let samples = v["sinks"][0]["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2, "{v}");
    let first_even = window.iter().find(|(_, i)| i % 2 == 0).unwrap();
    assert_eq!(samples[0]["hook_id"], first_even.0.as_str());
    assert_eq!(samples[0]["body"], serde_json::json!({"n": first_even.1}));
    assert_eq!(samples[0]["headers"]["x-kind"], kinds[first_even.1 % 3]);

    // The configured filters over a limit smaller than the window.
    let (status, v) = dry_run(
        &c,
        &g,
        serde_json::json!({"archive": {"from": from, "to": to, "limit": 9}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["examined"], 9);
    assert_eq!(v["truncated"], true);
    assert_eq!(
        v["sinks"][0]["matched"], 3,
        "every third is invoice.paid: {v}"
    );
    assert_eq!(v["sinks"][1]["matched"], 9);

    // A sample hook, and refusals.
    let (status, v) = dry_run(
        &c,
        &g,
        serde_json::json!({"hook": {"body": {"type": "invoice.paid"}}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["examined"], 1);
    assert_eq!(v["sinks"][0]["matched"], 1);
    let (status, v) = dry_run(
        &c,
        &g,
        serde_json::json!({"sinks": [{"filter": "body.type =="}, {}], "hook": {"body": {}}}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"], "invalid_filter");
    assert_eq!(v["field"], "sinks[0].filter", "{v}");
    let (status, v) = dry_run(&c, &g, serde_json::json!({"sinks": [{}], "hook": {}})).await;
    assert_eq!((status, v["field"].as_str()), (400, Some("sinks")), "{v}");
    let (status, _) = dry_run(&c, &g, serde_json::json!({})).await;
    assert_eq!(status, 400);
    // Nothing was delivered by the dry runs: the receiver got the 42 hooks' deliveries only.
    rx.wait_for(Duration::from_secs(30), |r| r.len() >= 56)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.count(), 42 + 14, "{}", g.log_tail());

    // An archive replay of the window to the filtered sink: its current filter decides, unless
    // the job ignores it.
    let window_replay = |ignore: bool| {
        let mut body = serde_json::json!({"kind": "archive", "source_id": "shop", "from": from, "to": to, "sinks": [0]});
        if ignore {
            body["ignore_filters"] = Value::Bool(true);
        }
        body
    };
    let job = replay(&c, &g, window_replay(false)).await;
    assert_eq!(
        (
            job["released"].as_u64(),
            job["skipped"].as_u64(),
            job["moved"].as_u64()
        ),
        (Some(10), Some(20), Some(10)),
        "{job}"
    );
    let job = replay(&c, &g, window_replay(true)).await;
    assert_eq!(
        (
            job["released"].as_u64(),
            job["skipped"].as_u64(),
            job["moved"].as_u64()
        ),
        (Some(30), Some(0), Some(30)),
        "{job}"
    );
    rx.wait_for(Duration::from_secs(30), |r| r.len() >= 56 + 40)
        .await;
    let paid_again = rx
        .received()
        .iter()
        .filter(|r| r.path == "/paid" && r.header("x-ankusa-replay-id").is_some())
        .count();
    assert_eq!(paid_again, 40, "{}", g.log_tail());
}

/// Dead rows of the whole node (`GET /v1/dlq`'s counter).
async fn dead_total(c: &reqwest::Client, g: &Gateway) -> u64 {
    g.admin_json(c, "/v1/dlq").await["total"]
        .as_u64()
        .unwrap_or(0)
}

async fn replay(c: &reqwest::Client, g: &Gateway, body: Value) -> Value {
    let r = g.admin_post(c, "/v1/replays", &body).await;
    assert_eq!(r.status().as_u16(), 202, "{body}");
    let job: Value = r.json().await.unwrap();
    wait_job_done(c, g, job["id"].as_str().unwrap()).await
}

#[tokio::test]
async fn a_dlq_replay_applies_the_current_filter_unless_told_to_ignore_it() {
    let rx = Receiver::start(|_, _| Reply::status(500)).await;
    let cfg = |extra: &str| {
        format!(
            "{EGRESS}dispatch: {{breaker_failures: 0}}\nsources:\n  shop:\n    retry: {{base_ms: 20, max_ms: 50, max_attempts: 1}}\n    sinks:\n{}",
            http_sink(&rx.url("/a"), extra)
        )
    };
    let g = Gateway::start(&cfg(""));
    let c = client();
    let mut sent = Vec::new();
    for n in 0..10 {
        sent.push(post(&c, &g, &[], &format!(r#"{{"n":{n}}}"#)).await);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while dead_total(&c, &g).await < 10 {
        assert!(std::time::Instant::now() < deadline, "{}", g.log_tail());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The sink gets a filter after its hooks died; the receiver is fixed.
    g.write_config(&cfg("        filter: 'body.n < 4'\n"));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // `GET /v1/config` redacts expressions (not on its allowlist): the reload is in the log.
    while !g.log().contains("config reloaded generation=2") {
        assert!(std::time::Instant::now() < deadline, "{}", g.log_tail());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rx.set(|_, _| Reply::status(200));
    // The receiver also recorded the failed attempts: only what comes after counts.
    let failed_attempts = rx.count();

    let job = replay(
        &c,
        &g,
        serde_json::json!({"kind": "dlq", "source_id": "shop"}),
    )
    .await;
    assert_eq!(
        (&job["moved"], &job["skipped"], &job["delivered"]),
        (
            &serde_json::json!(4),
            &serde_json::json!(6),
            &serde_json::json!(4)
        ),
        "{job}"
    );
    assert_eq!(ids(&rx.received()[failed_attempts..]), ids_of(&sent[..4]));
    assert_eq!(
        dead_total(&c, &g).await,
        6,
        "what the filter turns away stays dead"
    );

    // A targeted replay sends the rest.
    let job = replay(
        &c,
        &g,
        serde_json::json!({"kind": "dlq", "source_id": "shop", "ignore_filters": true}),
    )
    .await;
    assert_eq!(
        (&job["moved"], &job["skipped"]),
        (&serde_json::json!(6), &serde_json::json!(0)),
        "{job}"
    );
    assert_eq!(job["ignore_filters"], true);
    rx.wait_for(Duration::from_secs(20), |r| r.len() >= 10)
        .await;
    assert_eq!(ids(&rx.received()), ids_of(&sent));
    assert_eq!(dead_total(&c, &g).await, 0);

    // Only dlq and archive jobs take the option.
    let r = g
        .admin_post(
            &c,
            "/v1/replays",
            &serde_json::json!({"kind": "quarantine", "ignore_filters": true}),
        )
        .await;
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["error"].as_str(), v["field"].as_str()),
        (Some("invalid_filter"), Some("ignore_filters")),
        "{v}"
    );
}

fn ids_of(ids: &[String]) -> BTreeSet<String> {
    ids.iter().cloned().collect()
}
