//! Ingest through three gateway processes with fleet dedupe on vs off, in one run: the same
//! load (1 KiB hooks signed with Standard Webhooks, every one with its own `webhook-id`, so
//! every hook is keyed, spread evenly over the three ingest ports by 3 × 22 keep-alive
//! connections), edge only. Off, each process commits what it receives; on, a hook whose key
//! another process owns (about 2/3 of them) is forwarded to it over the fleet listener
//! (HTTP/2, mutual TLS) and committed there. Prints accepted/s and p50/p99 per case, the share
//! of hooks that hopped, the on/off ratio and the forward latency from the processes' own
//! histograms.
//!
//! `cargo build --release --workspace --bins && ANKUSA_BIN=target/release/ankusa target/release/fleet [seconds]`

use std::sync::Arc;
use std::time::Duration;

use ankusa_bench::*;
use ankusa_testkit::pki::{Ca, write};
use serde_json::json;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const PODS: usize = 3;
const CONNECTIONS_PER_POD: usize = 22;

fn config(me: usize, fleet: Option<(&[u16], &std::path::Path)>) -> String {
    let mut c = format!(
        "node: {{instance: gw-{me}, roles: [edge]}}\nsources:\n  bench:\n    verify: {{type: standard_webhooks, secret: \"{SECRET}\"}}\n    dedupe: standard_webhooks\n    sinks: [{{type: log}}]\n"
    );
    if let Some((ports, tls)) = fleet {
        let t = |f: &str| tls.join(f).display().to_string();
        c.push_str(&format!(
            "fleet:\n  ip: 127.0.0.1\n  port: {}\n  tls:\n    cert_file: {}\n    key_file: {}\n    ca_file: {}\n  members:\n",
            ports[me],
            t("tls.crt"),
            t("tls.key"),
            t("ca.crt")
        ));
        for (i, p) in ports.iter().enumerate() {
            c.push_str(&format!("    gw-{i}: https://localhost:{p}\n"));
        }
    }
    c
}

/// One case: three processes, the load spread over them; (accepted/s, p50, p99, line).
fn run(
    rt: &tokio::runtime::Runtime,
    case: &str,
    fleet: Option<&std::path::Path>,
    duration: Duration,
) -> anyhow::Result<(f64, serde_json::Value)> {
    let ports: Vec<u16> = (0..PODS).map(|_| free_port()).collect();
    let pods = (0..PODS)
        .map(|i| start_gateway(&config(i, fleet.map(|t| (ports.as_slice(), t)))))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let key = ankusa_verify::standard_webhooks_key(SECRET).map_err(|e| anyhow::anyhow!("{e}"))?;
    let key = Arc::new(key);
    let results = rt.block_on(async {
        let mut loads = Vec::new();
        for (i, g) in pods.iter().enumerate() {
            let key = key.clone();
            // Distinct webhook ids per process: every hook is a new event.
            let offset = (i as u64) << 40;
            let make: MakeRequest =
                Arc::new(move |n| signed_request("/webhooks/bench", &key, n + offset));
            loads.push(closed_loop(
                g.ingest,
                CONNECTIONS_PER_POD,
                Duration::from_secs(2),
                duration,
                None,
                make,
            ));
        }
        futures::future::join_all(loads).await
    });
    let mut total = LoadResult {
        elapsed: duration,
        ..LoadResult::default()
    };
    for r in results {
        let r = r?;
        total.ok += r.ok;
        total.all_ok += r.all_ok;
        total.refused += r.refused;
        total.errors += r.errors;
        total.elapsed = total.elapsed.max(r.elapsed);
        total.latencies.merge(r.latencies);
    }
    let mut line = total.line(case, PODS * CONNECTIONS_PER_POD);
    let (mut forwarded, mut answered, mut fwd_sum, mut fwd_count) = (0.0, 0.0, 0.0, 0.0);
    for g in &pods {
        let m = rt.block_on(metrics_text(g.admin))?;
        forwarded += metric_value(&m, "ankusa_fleet_forwarded_total{outcome=\"accepted\"}");
        answered += metric_value(&m, "ankusa_ingest_requests_total{outcome=\"accepted\"}");
        fwd_sum += metric_value(&m, "ankusa_fleet_forward_duration_seconds_sum");
        fwd_count += metric_value(&m, "ankusa_fleet_forward_duration_seconds_count");
    }
    if fleet.is_some() {
        line["forwarded_share"] = json!((forwarded / answered.max(1.0) * 1000.0).round() / 1000.0);
        line["forward_mean_ms"] =
            json!((fwd_sum / fwd_count.max(1.0) * 1000.0 * 1000.0).round() / 1000.0);
    }
    line["pods"] = json!(PODS);
    emit(line.clone());
    Ok((total.per_sec(), line))
}

fn main() -> anyhow::Result<()> {
    let duration = seconds_arg();
    let rt = runtime()?;
    let tls = tempfile::tempdir()?;
    let ca = Ca::new("bench fleet CA");
    let pair = ca.leaf("localhost", &["localhost"], false);
    write(tls.path(), "tls.crt", &pair.cert);
    write(tls.path(), "tls.key", &pair.key);
    write(tls.path(), "ca.crt", &ca.pem);

    let (off, off_line) = run(&rt, "ingest_3_pods_fleet_off", None, duration)?;
    let (on, on_line) = run(&rt, "ingest_3_pods_fleet_on", Some(tls.path()), duration)?;
    emit(json!({
        "case": "summary",
        "fleet_off_per_s": off.round(),
        "fleet_on_per_s": on.round(),
        "on_to_off_ratio": (on / off * 1000.0).round() / 1000.0,
        "fleet_off_p99_ms": off_line["p99_ms"],
        "fleet_on_p99_ms": on_line["p99_ms"],
        "forwarded_share": on_line["forwarded_share"],
        "forward_mean_ms": on_line["forward_mean_ms"],
    }));
    Ok(())
}
