//! Quarantine flood: a forged flood on one source (every hook fails verification and goes to
//! the pen) beside a second source's valid hooks at a fixed rate. Prints the valid hooks' p99
//! ack latency alone and beside the flood, their ratio (the target is at most 1.5×), and the
//! pen's write throughput under the flood: once with caps high enough that every forged hook
//! is written (group commit of the pen), once with the default per-source bucket (20/s after
//! a burst of 100: the flood is answered 429 from memory).
//!
//! A third case paces the written flood at `flood_per_sec` (default 2 000/s): a flood a provider
//! or an attacker sends at a rate, rather than as fast as the two cores can answer, so the ratio
//! shows what the pen's writes cost the other source rather than what the flood's CPU does.
//!
//! `target/release/quarantine_flood [valid_per_sec] [seconds] [flood_per_sec]`

use std::sync::Arc;
use std::time::Duration;

use ankusa_bench::*;
use http_body_util::Full;
use hyper::Request;
use serde_json::json;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const FLOOD_CONNECTIONS: usize = 32;
const VALID_CONNECTIONS: usize = 4;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let rate: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200.0);
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let flood_rate: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2_000.0);
    let rt = runtime()?;
    let valid = signed_requests("/webhooks/ok", SECRET)?;
    let forged: MakeRequest = Arc::new(|n| {
        Request::post("/webhooks/forged")
            .header("host", "bench")
            .header("content-type", "application/json")
            .header("x-hub-signature-256", "sha256=00")
            .body(Full::new(body_1k(n)))
            .expect("request")
    });
    let duration = Duration::from_secs(secs);
    let cfg = |quarantine: &str| {
        format!(
            "node: {{roles: [edge]}}\nquarantine: {quarantine}\nsources:\n  ok:\n    verify: {{type: standard_webhooks, secret: \"{SECRET}\"}}\n    sinks: [{{type: log}}]\n  forged:\n    verify: {{type: github, secret: \"not-what-the-flood-signs-with\"}}\n    on_verify_failure: quarantine\n    sinks: [{{type: log}}]\n"
        )
    };
    let valid_alone = |g: &GatewayProc| -> anyhow::Result<LoadResult> {
        rt.block_on(closed_loop(
            g.ingest,
            VALID_CONNECTIONS,
            Duration::from_secs(1),
            duration,
            Some(rate / VALID_CONNECTIONS as f64),
            valid.clone(),
        ))
    };
    let beside_flood =
        |g: &GatewayProc, paced: Option<f64>| -> anyhow::Result<(LoadResult, LoadResult)> {
            let flood = {
                let (ingest, forged) = (g.ingest, forged.clone());
                let per_conn = paced.map(|r| r / FLOOD_CONNECTIONS as f64);
                rt.spawn(async move {
                    closed_loop(
                        ingest,
                        FLOOD_CONNECTIONS,
                        Duration::from_secs(1),
                        duration + Duration::from_secs(1),
                        per_conn,
                        forged,
                    )
                    .await
                })
            };
            let v = valid_alone(g)?;
            let f = rt.block_on(flood)??;
            Ok((v, f))
        };

    let mut summary = serde_json::Map::new();
    let mut alone_p99 = 0.0;
    let uncapped = "{burst: 100000000, rate: 100000000, max_bytes: 68719476736}";
    for (case, quarantine, paced) in [
        ("flood_written", uncapped, None),
        ("flood_written_paced", uncapped, Some(flood_rate)),
        ("flood_rate_limited", "{}", None),
    ] {
        let g = start_gateway(&cfg(quarantine))?;
        if alone_p99 == 0.0 {
            let mut a = valid_alone(&g)?;
            alone_p99 = a.latencies.quantile_ms(0.99);
            emit(json!({
                "case": "valid_alone", "per_s": rate, "accepted": a.ok, "refused": a.refused,
                "p50_ms": a.latencies.quantile_ms(0.5), "p99_ms": alone_p99,
            }));
        }
        let (mut v, mut f) = beside_flood(&g, paced)?;
        let pen = rt.block_on(get_json(g.admin, "/v1/quarantine?limit=1"))?;
        let p99 = v.latencies.quantile_ms(0.99);
        let ratio = if alone_p99 > 0.0 {
            p99 / alone_p99
        } else {
            0.0
        };
        emit(json!({
            "case": format!("valid_beside_{case}"), "per_s": rate, "accepted": v.ok,
            "refused": v.refused, "p50_ms": v.latencies.quantile_ms(0.5), "p99_ms": p99,
            "p99_ratio_to_alone": (ratio * 100.0).round() / 100.0,
        }));
        emit(json!({
            "case": case, "connections": FLOOD_CONNECTIONS, "flood_paced_per_s": paced,
            "quarantined_per_s": f.per_sec().round(), "refused": f.refused,
            "p50_ms": f.latencies.quantile_ms(0.5), "p99_ms": f.latencies.quantile_ms(0.99),
            "pen_entries": pen["total"], "pen_bytes": pen["bytes"],
        }));
        summary.insert(case.into(), json!((ratio * 100.0).round() / 100.0));
        drop(g);
    }
    let worst = summary
        .values()
        .filter_map(|v| v.as_f64())
        .fold(0.0f64, f64::max);
    emit(json!({
        "case": "summary", "p99_ratios": summary, "target_ratio": 1.5, "meets_target": worst <= 1.5,
    }));
    Ok(())
}
