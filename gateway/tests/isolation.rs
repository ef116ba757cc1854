//! Dispatch isolation through the real binary: circuit breakers, a dead sink of one tenant
//! not delaying another, and tenant fairness under a 99× load behind a slow sink.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use common::receiver::{Receiver, Reply};
use common::*;
use serde_json::Value;

const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn sink(url: &str) -> String {
    format!(
        "    sinks:\n      - type: http\n        url: {url}\n        secret: {SINK_SECRET}\n        timeout_ms: 5000\n"
    )
}

async fn get(c: &reqwest::Client, url: String) -> Value {
    c.get(url).send().await.unwrap().json().await.unwrap()
}

async fn post_id(c: &reqwest::Client, url: String, body: String) -> String {
    let r = post_to(c, &url, body).await;
    assert_eq!(r.status().as_u16(), 201);
    r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn breaker_opens_parks_probes_closes_and_reopens_longer() {
    let status = Arc::new(AtomicU16::new(503));
    let s = status.clone();
    let rx = Receiver::start(move |_, _| Reply::status(s.load(Ordering::SeqCst))).await;
    let cfg = format!(
        "egress: {{allow_http: true, allow_loopback: true}}\ndispatch: {{breaker_failures: 3, breaker_open_ms: 400, breaker_max_open_ms: 1600}}\nsources:\n  s:\n    retry: {{base_ms: 10, max_ms: 20}}\n{}",
        sink(&rx.url("/x"))
    );
    let g = Gateway::start(&cfg);
    let c = client();
    // The first failure is counted before the rest arrive: a breaker with no failure counted
    // cannot know the receiver fails, and every row due then may start at once (as many as
    // arrive before the first answer, which under load is more than the threshold). Once one
    // failure is counted, at most `breaker_failures` - failures attempts of the key run.
    let mut ids = vec![post_id(&c, g.url("/webhooks/s"), "{\"i\":0}".to_string()).await];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let h = get(&c, g.admin_url(&format!("/v1/hooks/{}", ids[0]))).await;
        if h["deliveries"][0]["attempts"].as_u64().unwrap_or(0) >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the first attempt was not recorded: {h}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for i in 1..20 {
        ids.push(post_id(&c, g.url("/webhooks/s"), format!("{{\"i\":{i}}}")).await);
    }
    // Three failures open the breaker; the other rows are parked, not attempted.
    rx.wait_for(Duration::from_secs(5), |r| r.len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let during_open = rx.count();
    assert!(
        during_open <= 4,
        "only the failures that opened the breaker ran: {during_open}"
    );
    let text = g.metrics(&c).await;
    assert_eq!(
        metric(
            &text,
            "ankusa_dispatch_breaker_transitions_total{to=\"open\"}"
        ),
        1.0,
        "{text}"
    );
    let mut attempts = 0;
    for id in &ids {
        let h = get(&c, g.admin_url(&format!("/v1/hooks/{id}"))).await;
        attempts += h["deliveries"][0]["attempts"].as_u64().unwrap();
    }
    assert!(
        attempts <= 4,
        "parked rows spend no attempts ({attempts} in all)"
    );

    // Probes come at growing intervals while the receiver keeps failing: 400, 800, 1600 ms.
    let probes = rx
        .wait_for(Duration::from_secs(8), |r| r.len() >= during_open + 3)
        .await;
    let t: Vec<Instant> = probes[during_open - 1..].iter().map(|r| r.at).collect();
    let gaps: Vec<u128> = t
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_millis())
        .collect();
    assert!(
        gaps[0] >= 350 && gaps[1] >= 700 && gaps[2] >= 1400,
        "reopens longer each time: {gaps:?}"
    );
    assert!(gaps[1] > gaps[0] && gaps[2] > gaps[1]);

    // The destination comes back: the next probe closes it and every hook is delivered.
    status.store(200, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let wal = get(&c, g.admin_url("/v1/wal")).await;
        if wal["hooks"] == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "not drained: {wal}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = g.metrics(&c).await;
    assert!(
        metric(
            &text,
            "ankusa_dispatch_breaker_transitions_total{to=\"closed\"}"
        ) >= 1.0
    );
}

#[tokio::test]
async fn a_parked_row_still_dead_letters_at_its_horizon() {
    let rx = Receiver::start(|_, _| Reply::status(503)).await;
    let cfg = format!(
        "egress: {{allow_http: true, allow_loopback: true}}\ndispatch: {{breaker_failures: 2, breaker_open_ms: 5000}}\nsources:\n  s:\n    retry: {{base_ms: 10, max_ms: 20, max_elapsed_ms: 1500}}\n{}",
        sink(&rx.url("/x"))
    );
    let g = Gateway::start(&cfg);
    let c = client();
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(post_id(&c, g.url("/webhooks/s"), format!("{{\"i\":{i}}}")).await);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let wal = get(&c, g.admin_url("/v1/wal")).await;
        if wal["deliveries"]["dead"] == 6 {
            break;
        }
        assert!(Instant::now() < deadline, "{wal}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let page = get(&c, g.admin_url("/v1/dlq")).await;
    let parked: Vec<&Value> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"].as_str().unwrap().contains("retry_horizon"))
        .collect();
    assert!(
        !parked.is_empty(),
        "rows parked behind the open breaker died at the horizon: {page}"
    );
    for e in parked {
        let lived = e["dead_at"].as_u64().unwrap() - e["first_attempt_at"].as_u64().unwrap();
        assert!(
            (1_500..4_000).contains(&lived),
            "dead at the 1.5 s horizon, not the 5 s breaker period ({lived} ms)"
        );
        // Parked rows spend no attempts: at most the ones that opened the breaker (a row's
        // quick retry can come before another row's failure opens it).
        assert!(e["attempts"].as_u64().unwrap() <= 2, "{e}");
    }
}

/// Tenant A's destination is down (every attempt hangs until the attempt timeout); tenant
/// B's hooks keep flowing at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_sink_of_one_tenant_does_not_delay_another() {
    let rx = Receiver::start(|_, r| {
        if r.path == "/a" {
            Reply::status(200).delay(Duration::from_secs(30))
        } else {
            Reply::status(200)
        }
    })
    .await;
    let cfg = format!(
        "egress: {{allow_http: true, allow_loopback: true}}\ndispatch: {{attempt_timeout_ms: 3000}}\nsources:\n  a:\n    tenant: a\n{}  b:\n    tenant: b\n{}",
        sink(&rx.url("/a")),
        sink(&rx.url("/b"))
    );
    let g = Gateway::start(&cfg);
    let c = client();
    for i in 0..300 {
        post_id(&c, g.url("/webhooks/a"), format!("{{\"i\":{i}}}")).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut lags = Vec::new();
    for i in 0..40 {
        let t = Instant::now();
        let id = post_id(&c, g.url("/webhooks/b"), format!("{{\"i\":{i}}}")).await;
        let got = rx
            .wait_for(Duration::from_secs(5), |r| {
                r.iter()
                    .any(|x| x.header("x-ankusa-id").as_deref() == Some(id.as_str()))
            })
            .await;
        let at = got
            .iter()
            .find(|x| x.header("x-ankusa-id").as_deref() == Some(id.as_str()))
            .unwrap()
            .at;
        lags.push(at.duration_since(t));
    }
    lags.sort();
    let p99 = lags[lags.len() * 99 / 100 - 1];
    assert!(
        p99 < Duration::from_millis(300),
        "tenant B waited behind tenant A's dead sink: p99 {p99:?}"
    );
}
