//! Ordering lanes through the real binary: hooks of one key arrive in commit order through
//! retries and through a kill -9 restart; a poison hook is dead-lettered and its lane moves
//! on; keys do not block each other.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::receiver::{Received, Receiver, Reply};
use common::*;
use serde_json::Value;

const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn config(url: &str, key: &str) -> String {
    format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
dispatch: {{breaker_failures: 0}}
sources:
  s:
    retry: {{base_ms: 20, max_ms: 40}}
    sinks:
      - type: http
        url: {url}
        secret: {SINK_SECRET}
        ordered: true
{key}"#
    )
}

const BY_HEADER: &str = "        ordering_key: {header: x-entity}\n";

fn n_of(r: &Received) -> u64 {
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    v["n"].as_u64().unwrap()
}

/// The `n`s each key's destination accepted, in the order it accepted them.
fn accepted_by_key(rx: &Receiver, ok: impl Fn(&Received) -> bool) -> HashMap<String, Vec<u64>> {
    let mut out: HashMap<String, Vec<u64>> = HashMap::new();
    for r in rx.received().iter().filter(|r| ok(r)) {
        out.entry(r.header("x-ankusa-ordering-key").unwrap_or_default())
            .or_default()
            .push(n_of(r));
    }
    out
}

async fn send(c: &reqwest::Client, g: &Gateway, key: Option<&str>, n: u64, extra: &str) -> String {
    let mut r = c
        .post(g.url("/webhooks/s"))
        .body(format!("{{\"n\":{n}{extra}}}"));
    if let Some(k) = key {
        r = r.header("x-entity", k);
    }
    let resp = r.send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Fails every third attempt: retries happen all through the run.
fn flaky(n: usize, _: &Received) -> Reply {
    if n.is_multiple_of(3) {
        Reply::status(503)
    } else {
        Reply::status(200)
    }
}

fn accepted(r: &Received, script_ok: &dyn Fn(usize) -> bool, index: usize) -> bool {
    let _ = r;
    script_ok(index)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_key_arrives_in_commit_order_through_retries_and_keys_interleave() {
    let rx = Receiver::start(flaky).await;
    let g = Gateway::start(&config(&rx.url("/in"), BY_HEADER));
    let c = client();
    for n in 1..=30 {
        send(&c, &g, Some("cus_a"), n, "").await;
        send(&c, &g, Some("cus_b"), n, "").await;
    }
    send(&c, &g, None, 1, "").await;
    let all = rx
        .wait_for(Duration::from_secs(30), |r| {
            let ok: Vec<_> = r
                .iter()
                .enumerate()
                .filter(|(i, _)| (i + 1) % 3 != 0)
                .collect();
            ok.len() >= 61
        })
        .await;
    let mut by_key: HashMap<String, Vec<u64>> = HashMap::new();
    for (i, r) in all.iter().enumerate() {
        if accepted(r, &|idx| (idx + 1) % 3 != 0, i) {
            by_key
                .entry(r.header("x-ankusa-ordering-key").unwrap())
                .or_default()
                .push(n_of(r));
        }
    }
    assert_eq!(
        by_key["cus_a"],
        (1..=30).collect::<Vec<_>>(),
        "commit order through retries"
    );
    assert_eq!(by_key["cus_b"], (1..=30).collect::<Vec<_>>());
    assert_eq!(
        by_key[""],
        vec![1],
        "a hook without the key goes to the keyless lane"
    );
    let failed = all.len() - 61;
    assert!(failed >= 20, "retries happened ({failed} failed attempts)");
    let text = g.metrics(&c).await;
    assert!(
        text.contains("ankusa_dispatch_lane_key_missing_total{sink=\"http\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_poison_hook_is_dead_lettered_and_the_lane_moves_on() {
    let rx = Receiver::start(|_, r: &Received| {
        if String::from_utf8_lossy(&r.body).contains("poison") {
            Reply::status(422)
        } else {
            Reply::status(200)
        }
    })
    .await;
    let g = Gateway::start(&config(&rx.url("/in"), BY_HEADER));
    let c = client();
    for n in 1..=5 {
        send(
            &c,
            &g,
            Some("k"),
            n,
            if n == 3 { ",\"poison\":true" } else { "" },
        )
        .await;
    }
    let got = rx.wait_for(Duration::from_secs(10), |r| r.len() >= 5).await;
    assert_eq!(
        got.iter().map(n_of).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    let dlq: Value = g.admin_json(&c, "/v1/dlq").await;
    assert_eq!(dlq["entries"].as_array().unwrap().len(), 1);
    assert!(
        dlq["entries"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("422")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_blocked_key_does_not_block_other_keys() {
    let rx = Receiver::start(|_, r: &Received| {
        if r.header("x-ankusa-ordering-key").as_deref() == Some("stuck") {
            Reply::status(503).header("retry-after", "30")
        } else {
            Reply::status(200)
        }
    })
    .await;
    let g = Gateway::start(&config(&rx.url("/in"), BY_HEADER));
    let c = client();
    for n in 1..=3 {
        send(&c, &g, Some("stuck"), n, "").await;
    }
    let t = Instant::now();
    for n in 1..=20 {
        send(&c, &g, Some("free"), n, "").await;
    }
    let got = rx
        .wait_for(Duration::from_secs(10), |r| {
            r.iter()
                .filter(|x| x.header("x-ankusa-ordering-key").as_deref() == Some("free"))
                .count()
                >= 20
        })
        .await;
    assert!(t.elapsed() < Duration::from_secs(5));
    let stuck = got
        .iter()
        .filter(|x| x.header("x-ankusa-ordering-key").as_deref() == Some("stuck"))
        .count();
    assert_eq!(
        stuck, 1,
        "only the stuck lane's head was tried; its followers wait behind it"
    );
    // Gauges are published once a second.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = g.metrics(&c).await;
        if text.contains("ankusa_dispatch_lanes_blocked 1") {
            break;
        }
        assert!(Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn order_survives_kill_9() {
    let rx = Receiver::start(|_, _| Reply::status(200).delay(Duration::from_millis(40))).await;
    let mut g = Gateway::start(&config(&rx.url("/in"), BY_HEADER));
    let c = client();
    for n in 1..=40 {
        send(&c, &g, Some("k"), n, "").await;
    }
    rx.wait_for(Duration::from_secs(10), |r| r.len() >= 10)
        .await;
    g.kill9();
    g.spawn_again();
    g.wait_ready(Duration::from_secs(30));
    let got = rx
        .wait_for(Duration::from_secs(30), |r| r.iter().any(|x| n_of(x) == 40))
        .await;
    let seq: Vec<u64> = got.iter().map(n_of).collect();
    assert!(
        seq.windows(2).all(|w| w[1] >= w[0]),
        "delivery order went backwards across the restart: {seq:?}"
    );
    let mut distinct = seq.clone();
    distinct.dedup();
    assert_eq!(
        distinct,
        (1..=40).collect::<Vec<_>>(),
        "every hook, in order (a redelivered head is a duplicate in place)"
    );
    let by = accepted_by_key(&rx, |_| true);
    assert_eq!(by.len(), 1);
}
