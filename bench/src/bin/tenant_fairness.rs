//! Tenant fairness: tenant B sends 99× tenant A's load to a slow destination (20 ms per
//! delivery). Prints A's p99 delivery lag (receipt → the destination's answer) alone and
//! beside B, their ratio, and the most rows B held. The spec's bound is 2×, this project's 1.5×.
//!
//! `target/release/tenant_fairness [a_per_sec] [seconds]`

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
    let rate_a: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20.0);
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let (_rx, rx) = spawn_self("receiver")?;
    let window = 256;
    let sink = |path: &str| {
        format!(
            "    sinks:\n      - type: http\n        url: http://{rx}{path}\n        secret: {SINK_SECRET}\n"
        )
    };
    let cfg = format!(
        "egress: {{allow_http: true, allow_loopback: true}}\ndispatch: {{tenants: {{default: {{max_inflight: {window}}}}}}}\nsources:\n  a:\n    tenant: a\n{}  b:\n    tenant: b\n{}",
        sink("/a"),
        sink("/b")
    );
    let g = start_gateway(&cfg)?;
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
    run_a()?;
    std::thread::sleep(Duration::from_millis(500));
    let alone = rt.block_on(get_json(rx, "/stats?path=/a"))?;
    let _ = rt.block_on(get_json(rx, "/reset"));

    // A beside B at 99× A's load.
    let b_rate = rate_a * 99.0;
    let b = {
        let make_b = make("/webhooks/b");
        let ingest = g.ingest;
        rt.spawn(async move {
            closed_loop(
                ingest,
                64,
                Duration::ZERO,
                Duration::from_secs(secs + 2),
                Some(b_rate / 64.0),
                make_b,
            )
            .await
        })
    };
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
    run_a()?;
    let b_result = rt.block_on(b)??;
    let b_max = rt.block_on(watcher)?;
    std::thread::sleep(Duration::from_millis(500));
    let beside = rt.block_on(get_json(rx, "/stats?path=/a"))?;
    let b_stats = rt.block_on(get_json(rx, "/stats?path=/b"))?;
    let a_alone = alone["p99_ms"].as_f64().unwrap_or(0.0);
    let a_beside = beside["p99_ms"].as_f64().unwrap_or(0.0);
    emit(
        json!({"case": "tenant_a_alone", "per_s": rate_a, "delivered": alone["count"], "p50_ms": alone["p50_ms"], "p99_ms": a_alone}),
    );
    emit(
        json!({"case": "tenant_a_beside_b", "per_s": rate_a, "delivered": beside["count"], "p50_ms": beside["p50_ms"], "p99_ms": a_beside}),
    );
    emit(
        json!({"case": "tenant_b", "offered_per_s": b_rate, "accepted_per_s": b_result.per_sec().round(), "delivered": b_stats["count"], "p99_ms": b_stats["p99_ms"], "max_inflight": b_max, "window": window}),
    );
    let ratio = if a_alone > 0.0 {
        a_beside / a_alone
    } else {
        0.0
    };
    emit(
        json!({"case": "summary", "a_p99_ratio": (ratio * 100.0).round() / 100.0, "target_ratio": 1.5, "b_within_window": b_max <= window as f64, "meets_target": ratio <= 1.5 && b_max <= window as f64}),
    );
    Ok(())
}
