//! Many tenants behind one slow receiver (one shared destination) through the real binary: the
//! rows they hold stay within a few times the receiver's pool, and a tenant with its own
//! receiver is delivered as if they were not there. In its own test binary so no sibling test
//! competes for the CPU while it measures the light tenant's lag.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::receiver::{Receiver, Reply};
use common::*;

const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHERS: usize = 200;
const POOL: u32 = 2;

/// 200 tenants, one hook each, post to a receiver that answers in 1 s through a pool of 2
/// connections (2 deliveries a second for all of them); the global window is 64 rows and 16
/// attempts. Before shared destinations the 200 rows filled the window and the attempt slots
/// (each attempt waiting for one of the 2 connections), and tenant A's hooks to its own, fast
/// receiver waited for window rows that freed 2 a second: ~30 s. Now the slow receiver holds at
/// most 8 × its pool, the other tenants wait unscanned, and A's hooks go out at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_behind_a_slow_receiver_hold_a_few_times_its_pool_not_the_window() {
    let slow = Receiver::start(|_, _| Reply::status(200).delay(Duration::from_secs(1))).await;
    let fast = Receiver::start(|_, _| Reply::status(200)).await;
    let sink = |url: String, pool: Option<u32>| {
        let pool = pool.map_or(String::new(), |p| format!("        pool_size: {p}\n"));
        format!(
            "    sinks:\n      - type: http\n        url: {url}\n        secret: {SINK_SECRET}\n        timeout_ms: 10000\n{pool}"
        )
    };
    let mut cfg = format!(
        "egress: {{allow_http: true, allow_loopback: true}}\ndispatch: {{max_inflight: 64, concurrency: 16}}\nsources:\n  a:\n    tenant: a\n{}",
        sink(fast.url("/a"), None)
    );
    for i in 0..OTHERS {
        cfg.push_str(&format!(
            "  o{i}:\n    tenant: o{i}\n{}",
            sink(slow.url("/o"), Some(POOL))
        ));
    }
    let g = Gateway::start_in(tmpfs_tempdir(), &cfg, &[]);
    let c = client();
    for i in 0..OTHERS {
        let r = c
            .post(g.url(&format!("/webhooks/o{i}")))
            .body(format!("{{\"o\":{i}}}"))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "o{i}: {}", r.status());
    }
    // The slow receiver is saturated and the others wait for it.
    let mut waiting = 0.0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && waiting == 0.0 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let text = g.metrics(&c).await;
        waiting = metric(&text, "ankusa_dispatch_tenants_waiting_destination");
    }
    assert!(waiting > 0.0, "no tenant waits for the slow receiver");

    let started = Instant::now();
    for n in 0..20 {
        let r = c
            .post(g.url("/webhooks/a"))
            .body(format!("{{\"a\":{n}}}"))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "a: {}", r.status());
        let text = g.metrics(&c).await;
        let claimed = metric(&text, "ankusa_dispatch_claimed ");
        assert!(
            claimed <= (8 * POOL) as f64 + 20.0,
            "{claimed} rows claimed: the slow receiver holds more than 8 × its pool"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Panics naming the wait when A's hooks are not all delivered.
    let delivered = fast
        .wait_for(Duration::from_secs(10), |r| r.len() == 20)
        .await;
    let lags: Vec<u64> = delivered
        .iter()
        .map(|r| {
            let received: u64 = r.header("x-ankusa-received-at").unwrap().parse().unwrap();
            let at = SystemTime::now() - r.at.elapsed();
            let at_ms = at.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
            at_ms.saturating_sub(received)
        })
        .collect();
    let worst = lags.iter().max().copied().unwrap_or_default();
    let slow_done = slow.received().len();
    eprintln!(
        "A delivered 20 in {:?}, worst lag {worst} ms; slow receiver had {slow_done} of {OTHERS}",
        started.elapsed()
    );
    // The slow receiver takes 100 s for all 200: A's hooks did not wait for it.
    assert!(
        slow_done < OTHERS,
        "the others' backlog drained before A was measured"
    );
    assert!(
        worst < 3_000,
        "A's worst delivery lag {worst} ms: it waited behind the slow receiver's tenants"
    );
    // Every other tenant's hook is still delivered, at the receiver's pace.
    slow.wait_for(Duration::from_secs(30), |r| r.len() >= slow_done + 20)
        .await;
}
