//! Tenant fairness: tenant B sends 99× tenant A's load to a slow destination (20 ms per
//! delivery). Prints A's p99 delivery lag (receipt → the destination's answer) alone and
//! beside B, their ratio, the most rows B held, and A's ingest latency (request → 201, which
//! the delivery lag includes: it tells the commit's share of the lag from dispatch's). The spec's bound is 2×, this project's 1.5×.
//!
//! With `tenants` above 2, the other `tenants - 2` tenants (one source each) share
//! `others_per_sec` hooks/s round robin (after one hook each, so every one has work due), to a
//! destination that answers in 200 ms, beside B:
//! at 10 000 tenants (issue 33) the target is A's p99 ≤ 1.2× its solo p99. `concurrency` is
//! `dispatch.concurrency` (attempts running at once; default 32).
//!
//! `target/release/tenant_fairness [a_per_sec] [seconds] [tenants] [concurrency] [others_per_sec]`

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ankusa_bench::*;
use http_body_util::Full;
use hyper::Request;
use serde_json::json;

const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("receiver") {
        return run_receiver(
            SocketAddr::from(([127, 0, 0, 1], args[2].parse()?)),
            Duration::from_millis(20),
        );
    }
    if args.get(1).map(String::as_str) == Some("receiver-slow") {
        return run_receiver(
            SocketAddr::from(([127, 0, 0, 1], args[2].parse()?)),
            Duration::from_millis(200),
        );
    }
    let arg = |i: usize| args.get(i).and_then(|s| s.parse::<f64>().ok());
    let rate_a = arg(1).unwrap_or(20.0);
    let secs = arg(2).unwrap_or(20.0) as u64;
    let tenants = arg(3).unwrap_or(2.0).max(2.0) as u64;
    let concurrency = arg(4).unwrap_or(32.0) as u64;
    let others_rate = arg(5).unwrap_or(1000.0);
    let others = tenants - 2;
    let (_rx, rx) = spawn_self("receiver")?;
    let (_slow, slow) = spawn_self("receiver-slow")?;
    let window = 256;
    let sink = |to: SocketAddr, path: &str| {
        format!(
            "    sinks:\n      - type: http\n        url: http://{to}{path}\n        secret: {SINK_SECRET}\n"
        )
    };
    let mut cfg = format!(
        "egress: {{allow_http: true, allow_loopback: true}}\ndispatch: {{concurrency: {concurrency}, tenants: {{default: {{max_inflight: {window}}}}}}}\nsources:\n  a:\n    tenant: a\n{}  b:\n    tenant: b\n{}",
        sink(rx, "/a"),
        sink(rx, "/b")
    );
    for i in 0..others {
        cfg.push_str(&format!("  o{i}:\n    tenant: o{i}\n{}", sink(slow, "/o")));
    }
    let booted = std::time::Instant::now();
    let g = start_gateway(&cfg)?;
    emit(
        json!({"case": "boot", "tenants": tenants, "ready_ms": booted.elapsed().as_millis() as u64}),
    );
    let rt = runtime()?;
    let make = |path: &'static str| -> MakeRequest {
        Arc::new(move |n| {
            Request::post(path)
                .header("host", "bench")
                .body(Full::new(body_1k(n)))
                .expect("request")
        })
    };
    let conns = 4;
    let run_a = || {
        rt.block_on(closed_loop(
            g.ingest,
            conns,
            Duration::ZERO,
            Duration::from_secs(secs),
            Some(rate_a / conns as f64),
            make("/webhooks/a"),
        ))
    };
    // A alone.
    let mut a_alone_ingest = run_a()?.latencies;
    std::thread::sleep(Duration::from_millis(500));
    let alone = rt.block_on(get_json(rx, "/stats?path=/a"))?;
    let _ = rt.block_on(get_json(rx, "/reset"));

    // A beside B at 99× A's load (and the others, when there are any).
    let b_rate = rate_a * 99.0;
    // Paced loads in the background for the whole of A's run (plus 2 s).
    let background = |connections: usize, per_s: f64, make: MakeRequest| {
        rt.spawn(closed_loop(
            g.ingest,
            connections,
            Duration::ZERO,
            Duration::from_secs(secs + 2),
            Some(per_s / connections as f64),
            make,
        ))
    };
    let make_o: MakeRequest = Arc::new(move |n| {
        Request::post(format!("/webhooks/o{}", n % others.max(1)))
            .header("host", "bench")
            .body(Full::new(body_1k(n)))
            .expect("request")
    });
    if others > 0 {
        // Every other tenant gets work due before A is measured: requests go round robin over
        // them, unpaced, until each has had at least one (their receiver drains 160/s, so all
        // still have work due when A's run ends).
        let seeded = rt.block_on(closed_loop(
            g.ingest,
            32,
            Duration::ZERO,
            Duration::from_secs((others / 3_000).max(2)),
            None,
            make_o.clone(),
        ))?;
        emit(
            json!({"case": "others_seeded", "hooks": seeded.ok, "tenants": others, "per_s": seeded.per_sec().round()}),
        );
    }
    let others_load =
        (others > 0 && others_rate > 0.0).then(|| background(32, others_rate, make_o));
    let b = background(64, b_rate, make("/webhooks/b"));
    std::thread::sleep(Duration::from_secs(1));
    let admin = g.admin;
    let watcher = rt.spawn(async move {
        let mut max = 0.0f64;
        for _ in 0..(secs * 4) {
            if let Ok(text) = metrics_text(admin).await {
                let v = metric_value(&text, "ankusa_dispatch_tenant_inflight{tenant=\"b\"}");
                max = max.max(v);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        max
    });
    let mut a_beside_ingest = run_a()?.latencies;
    let b_result = rt.block_on(b)??;
    let b_max = rt.block_on(watcher)?;
    let others_result = match others_load {
        Some(h) => Some(rt.block_on(h)??),
        None => None,
    };
    std::thread::sleep(Duration::from_millis(500));
    let o_stats = rt.block_on(get_json(slow, "/stats?path=/o"))?;
    let pending = rt
        .block_on(metrics_text(g.admin))
        .map(|t| metric_value(&t, "ankusa_queue_pending"))
        .unwrap_or(0.0);
    let beside = rt.block_on(get_json(rx, "/stats?path=/a"))?;
    let b_stats = rt.block_on(get_json(rx, "/stats?path=/b"))?;
    let a_alone = alone["p99_ms"].as_f64().unwrap_or(0.0);
    let a_beside = beside["p99_ms"].as_f64().unwrap_or(0.0);
    emit(
        json!({"case": "tenant_a_alone", "per_s": rate_a, "delivered": alone["count"], "p50_ms": alone["p50_ms"], "p99_ms": a_alone, "ingest_p50_ms": a_alone_ingest.quantile_ms(0.5), "ingest_p99_ms": a_alone_ingest.quantile_ms(0.99)}),
    );
    emit(
        json!({"case": "tenant_a_beside_b", "per_s": rate_a, "delivered": beside["count"], "p50_ms": beside["p50_ms"], "p99_ms": a_beside, "ingest_p50_ms": a_beside_ingest.quantile_ms(0.5), "ingest_p99_ms": a_beside_ingest.quantile_ms(0.99)}),
    );
    emit(
        json!({"case": "tenant_b", "offered_per_s": b_rate, "accepted_per_s": b_result.per_sec().round(), "delivered": b_stats["count"], "p99_ms": b_stats["p99_ms"], "max_inflight": b_max, "window": window}),
    );
    if let Some(o) = &others_result {
        emit(
            json!({"case": "others", "tenants": others, "offered_per_s": others_rate, "accepted_per_s": o.per_sec().round(), "delivered": o_stats["count"], "p50_ms": o_stats["p50_ms"], "p99_ms": o_stats["p99_ms"], "pending_after": pending}),
        );
    }
    let ratio = if a_alone > 0.0 {
        a_beside / a_alone
    } else {
        0.0
    };
    let target = if others > 0 { 1.2 } else { 1.5 };
    emit(
        json!({"case": "summary", "tenants": tenants, "concurrency": concurrency, "a_p99_ratio": (ratio * 100.0).round() / 100.0, "target_ratio": target, "b_within_window": b_max <= window as f64, "meets_target": ratio <= target && b_max <= window as f64}),
    );
    Ok(())
}
