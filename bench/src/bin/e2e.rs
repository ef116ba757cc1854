//! End to end: sustained ingest with delivery to a fast local HTTP receiver (a separate
//! process). Phase 1 drives 64 connections as fast as they go and prints ingest/s and
//! delivered/s; phase 2 paces ingest at 80 % of phase 1's rate and prints ingest/s,
//! delivered/s, p50/p99 receipt→delivery (from `x-ankusa-received-at` to the receiver) and
//! whether the backlog grew. Target: delivery keeps up at ≥ 80 % of the maximum durable
//! ingest rate.
//!
//! `target/release/e2e [seconds]`

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ankusa_bench::*;
use http_body_util::Full;
use hyper::Request;
use serde_json::json;

const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CONNECTIONS: usize = 64;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("receiver") {
        return run_receiver(
            SocketAddr::from(([127, 0, 0, 1], args[2].parse()?)),
            Duration::ZERO,
        );
    }
    let secs: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let (_rx, rx) = spawn_self("receiver")?;
    let cfg = format!(
        r#"
egress: {{allow_http: true, allow_loopback: true, pools: {{pool_size: 128}}}}
dispatch:
  concurrency: 128
  sink_concurrency: 128
  tenants: {{default: {{max_inflight: 4096, concurrency: 128}}}}
sources:
  bench:
    sinks:
      - type: http
        url: http://{rx}/in
        secret: {SINK_SECRET}
"#
    );
    let g = start_gateway(&cfg)?;
    let rt = runtime()?;
    let make: MakeRequest = Arc::new(|n| {
        Request::post("/webhooks/bench")
            .header("host", "bench")
            .header("content-type", "application/json")
            .body(Full::new(body_1k(n)))
            .expect("request")
    });

    // Phase 1: as fast as it goes.
    let before = rt.block_on(get_json(rx, "/stats"))?["count"]
        .as_u64()
        .unwrap_or(0);
    let mut max = rt.block_on(closed_loop(
        g.ingest,
        CONNECTIONS,
        Duration::from_secs(2),
        Duration::from_secs(secs),
        None,
        make.clone(),
    ))?;
    let after = rt.block_on(get_json(rx, "/stats"))?["count"]
        .as_u64()
        .unwrap_or(0);
    let wal = rt.block_on(get_json(g.admin, "/v1/wal"))?;
    emit(json!({
        "case": "e2e_max_ingest",
        "ingest_per_s": max.per_sec().round(),
        "delivered_per_s": ((after - before) as f64 / max.elapsed.as_secs_f64()).round(),
        "ack_p99_ms": max.latencies.quantile_ms(0.99),
        "pending_after": wal["deliveries"]["pending"],
    }));
    let max_rate = max.per_sec();

    // Let the backlog drain before the paced phase.
    drain(&rt, g.admin)?;
    let _ = rt.block_on(get_json(rx, "/reset"));

    // Phase 2: paced at 80 % of the maximum.
    let target = max_rate * 0.8;
    let pending0 = rt.block_on(get_json(g.admin, "/v1/wal"))?["deliveries"]["pending"]
        .as_i64()
        .unwrap_or(0);
    let paced = rt.block_on(closed_loop(
        g.ingest,
        CONNECTIONS,
        Duration::from_millis(500),
        Duration::from_secs(secs),
        Some(target / CONNECTIONS as f64),
        make,
    ))?;
    let stats = rt.block_on(get_json(rx, "/stats"))?;
    let pending1 = rt.block_on(get_json(g.admin, "/v1/wal"))?["deliveries"]["pending"]
        .as_i64()
        .unwrap_or(0);
    let delivered_per_s =
        stats["count"].as_f64().unwrap_or(0.0) / (paced.elapsed.as_secs_f64() + 0.5);
    emit(json!({
        "case": "e2e_paced_80pct",
        "target_ingest_per_s": target.round(),
        "ingest_per_s": paced.per_sec().round(),
        "delivered_per_s": delivered_per_s.round(),
        "receipt_to_delivery_p50_ms": stats["p50_ms"],
        "receipt_to_delivery_p99_ms": stats["p99_ms"],
        "pending_start": pending0,
        "pending_end": pending1,
        "backlog_grows": pending1 > pending0 + (target as i64 / 2),
        "keeps_up": delivered_per_s >= paced.per_sec() * 0.95,
    }));
    Ok(())
}

fn drain(rt: &tokio::runtime::Runtime, admin: SocketAddr) -> anyhow::Result<()> {
    for _ in 0..600 {
        let wal = rt.block_on(get_json(admin, "/v1/wal"))?;
        if wal["deliveries"]["pending"].as_i64() == Some(0) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    anyhow::bail!("backlog did not drain")
}
