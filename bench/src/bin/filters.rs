//! Filter benchmark (docs/filters.md): the durable gateway's ingest (edge only, Standard Webhooks verified,
//! 1 KiB, 64 connections) with a source of three sinks, without and with a filter on each,
//! alternated over `rounds` so drift hits both alike; the ratio filtered / plain (target
//! ≥ 0.9). What one hook's filters cost alone is `filter/examples/filter_cost.rs`.
//!
//! `cargo build --release -p ankusa-gateway -p ankusa-bench && target/release/filters [seconds] [rounds]`

use std::time::Duration;

use ankusa_bench::*;
use serde_json::json;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CONNECTIONS: usize = 64;
/// The same three filters as `filter/examples/filter_cost.rs`.
const FILTERS: [&str; 3] = [
    r#"body.type == "invoice.paid""#,
    r#"headers["content-type"].startsWith("application/json") && size < 4096"#,
    r#"["invoice.paid", "invoice.payment_failed"].exists(t, t == body.type)"#,
];

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let secs: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);

    let rt = runtime()?;
    let make = signed_requests("/webhooks/bench", SECRET)?;
    let cfg = |filtered: bool| {
        let sink = |i: usize| {
            if filtered {
                format!("{{type: log, filter: '{}'}}", FILTERS[i])
            } else {
                "{type: log}".to_string()
            }
        };
        format!(
            "node: {{roles: [edge]}}\nsources:\n  bench:\n    verify: {{type: standard_webhooks, secret: \"{SECRET}\"}}\n    sinks: [{}, {}, {}]\n",
            sink(0),
            sink(1),
            sink(2)
        )
    };
    let mut plain = Vec::new();
    let mut filtered = Vec::new();
    for round in 0..rounds {
        for with_filters in [false, true] {
            let g = start_gateway(&cfg(with_filters))?;
            let mut r = rt.block_on(closed_loop(
                g.ingest,
                CONNECTIONS,
                Duration::from_secs(2),
                Duration::from_secs(secs),
                None,
                make.clone(),
            ))?;
            let case = if with_filters {
                "ingest_3_sinks_filtered"
            } else {
                "ingest_3_sinks_plain"
            };
            let mut line = r.line(case, CONNECTIONS);
            line["round"] = json!(round);
            emit(line);
            if with_filters {
                let m = rt.block_on(metrics_text(g.admin))?;
                anyhow::ensure!(
                    metric_value(&m, "ankusa_hooks_unrouted_total") == 0.0,
                    "every bench hook matches the filters"
                );
                filtered.push(r.per_sec());
            } else {
                plain.push(r.per_sec());
            }
        }
    }
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    let ratio = sum(&filtered) / sum(&plain);
    emit(json!({
        "case": "summary",
        "filtered_to_plain_ratio": (ratio * 1000.0).round() / 1000.0,
        "per_round": plain.iter().zip(&filtered).map(|(p, f)| ((f / p) * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
        "target_ratio": 0.9,
        "meets_target": ratio >= 0.9,
    }));
    Ok(())
}
