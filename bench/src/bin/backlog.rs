//! A large backlog behind a dead sink: seeds N hooks (default 10 million, 1 KiB bodies, one
//! HTTP sink each) through the store's own ingest commit in large synced batches, then starts
//! the release gateway on that data with the sink's port closed and measures:
//!
//! - `restart_clean`: spawn → `/ready` 200 after the seeding process closed the store, and the
//!   gateway's RSS at that moment;
//! - `dead_sink`: the gateway's RSS sampled every 200 ms for 20 s while dispatch works against
//!   the dead sink (max and last), and `ankusa_queue_pending`;
//! - `restart_kill9`: spawn → `/ready` again after a `kill -9` of that gateway;
//! - `drain`: a receiver comes up on the sink's port; from its first delivery (when the
//!   breaker's open period ends), ingest continues at a paced 1 000 hooks/s (16 connections)
//!   for 30 s: delivered/s in that window, the ingest's p99, the pending rows left.
//!
//! Targets (issue 33): RSS < 512 MiB with 10M behind a dead sink; restart to `/ready` < 2 s.
//! Prints one JSON line per case.
//!
//! `target/release/backlog [hooks] [data-dir]` (a data dir given is kept, and a second run on
//! it skips seeding; the figures then include what the first run's phases left behind).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_bench::*;
use ankusa_core::Envelope;
use ankusa_store::{IngestRecord, Store};
use http_body_util::Full;
use hyper::Request;
use serde_json::json;

const BATCH: u64 = 10_000;
const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("receiver") {
        return run_receiver(
            SocketAddr::from(([127, 0, 0, 1], args[2].parse()?)),
            Duration::ZERO,
        );
    }
    let hooks: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let tmp = tempfile::tempdir()?;
    let data = args
        .get(2)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tmp.path().join("data"));
    let store_path = data.join("bench").join("store");
    let marker = data.join(format!("seeded-{hooks}"));
    if !marker.exists() {
        seed(&store_path, hooks)?;
        std::fs::write(&marker, b"")?;
    }

    let sink_port = free_port();
    let cfg = format!(
        r#"
node: {{instance: bench}}
egress: {{allow_http: true, allow_loopback: true}}
sources:
  bench:
    sinks:
      - type: http
        url: http://127.0.0.1:{sink_port}/in
        secret: {SINK_SECRET}
"#
    );

    let (g, ready) = start_timed(&cfg, &data)?;
    let pid = g.child.0.id();
    emit(json!({
        "case": "restart_clean",
        "hooks": hooks,
        "ready_ms": ready.as_millis() as u64,
        "rss_mib": rss_mib(pid),
        "target_ready_ms": 2000,
    }));

    let rt = runtime()?;
    let (mut max, mut last) = (0f64, 0f64);
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        last = rss_mib(pid);
        max = max.max(last);
        std::thread::sleep(Duration::from_millis(200));
    }
    let pending = pending(&rt, g.admin);
    emit(json!({
        "case": "dead_sink",
        "hooks": hooks,
        "seconds": 20,
        "rss_max_mib": max,
        "rss_last_mib": last,
        "queue_pending": pending,
        "target_rss_mib": 512,
    }));

    // SIGKILL: nothing is flushed or closed.
    let GatewayProc { mut child, .. } = g;
    child.0.kill()?;
    child.0.wait()?;
    let (g, ready) = start_timed(&cfg, &data)?;
    emit(json!({
        "case": "restart_kill9",
        "hooks": hooks,
        "ready_ms": ready.as_millis() as u64,
        "rss_mib": rss_mib(g.child.0.id()),
        "target_ready_ms": 2000,
    }));

    drain(&rt, &g, sink_port, hooks)?;
    Ok(())
}

/// `hooks` pending hooks for source `bench` (one HTTP sink), committed like the ack path
/// commits them, `BATCH` per synced write.
fn seed(store_path: &std::path::Path, hooks: u64) -> anyhow::Result<()> {
    let t = Instant::now();
    let store = Store::open(store_path)?;
    let mut n = 0u64;
    while n < hooks {
        let records: Vec<IngestRecord> = (n..(n + BATCH).min(hooks))
            .map(|i| IngestRecord {
                envelope: Envelope::new("default", "bench", body_1k(i)),
                sinks: vec!["http"],
                lanes: vec![],
                dedupe: None,
                skip_sinks: vec![],
            })
            .collect();
        store.commit_ingest(&records, ankusa_core::now_ms(), false)?;
        n += records.len() as u64;
    }
    store.flush()?;
    drop(store);
    let secs = t.elapsed().as_secs_f64();
    let disk = dir_bytes(store_path);
    emit(json!({
        "case": "seed",
        "hooks": hooks,
        "seconds": (secs * 10.0).round() / 10.0,
        "hooks_per_s": (hooks as f64 / secs).round(),
        "disk_bytes": disk,
        "bytes_per_hook": (disk as f64 / hooks.max(1) as f64).round(),
    }));
    Ok(())
}

/// Spawns the gateway on `data` and times it to its first `/ready` 200.
fn start_timed(cfg: &str, data: &std::path::Path) -> anyhow::Result<(GatewayProc, Duration)> {
    let t = Instant::now();
    let g = spawn_gateway(cfg, tempfile::tempdir()?, data)?;
    wait_http_ok_every(
        g.admin,
        "/ready",
        Duration::from_secs(600),
        Duration::from_millis(5),
    )?;
    Ok((g, t.elapsed()))
}

/// The receiver comes up on the sink's port; once the first delivery arrived (the breaker the
/// dead sink opened lets a probe through when its period ends), ingest goes on at a paced
/// 1 000/s while the backlog drains, and the deliveries within that window are counted.
fn drain(
    rt: &tokio::runtime::Runtime,
    g: &GatewayProc,
    sink_port: u16,
    hooks: u64,
) -> anyhow::Result<()> {
    let secs = 30;
    let (_rx, rx) = spawn_self_on("receiver", sink_port)?;
    let delivered = || -> u64 {
        rt.block_on(get_json(rx, "/stats"))
            .ok()
            .and_then(|v| v["count"].as_u64())
            .unwrap_or(0)
    };
    let up = Instant::now();
    while delivered() == 0 {
        if up.elapsed() > Duration::from_secs(600) {
            anyhow::bail!("nothing was delivered within 600 s of the receiver coming up");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let first_delivery_ms = up.elapsed().as_millis() as u64;
    let before = pending(rt, g.admin);
    let make: MakeRequest = Arc::new(|n| {
        Request::post("/webhooks/bench")
            .header("host", "bench")
            .header("content-type", "application/json")
            .body(Full::new(body_1k(n)))
            .expect("request")
    });
    let at_start = delivered();
    let t = Instant::now();
    let mut load = rt.block_on(closed_loop(
        g.ingest,
        16,
        Duration::ZERO,
        Duration::from_secs(secs),
        Some(1000.0 / 16.0),
        make,
    ))?;
    let elapsed = t.elapsed().as_secs_f64();
    let in_window = delivered().saturating_sub(at_start);
    let after = pending(rt, g.admin);
    emit(json!({
        "case": "drain",
        "hooks": hooks,
        "first_delivery_after_ms": first_delivery_ms,
        "seconds": (elapsed * 10.0).round() / 10.0,
        "delivered": in_window,
        "delivered_per_s": (in_window as f64 / elapsed).round(),
        "ingest_accepted_per_s": load.per_sec().round(),
        "ingest_refused": load.refused,
        "ingest_p99_ms": load.latencies.quantile_ms(0.99),
        "pending_before": before,
        "pending_after": after,
        "rss_mib": rss_mib(g.child.0.id()),
    }));
    Ok(())
}

fn pending(rt: &tokio::runtime::Runtime, admin: SocketAddr) -> f64 {
    rt.block_on(metrics_text(admin))
        .map(|t| metric_value(&t, "ankusa_queue_pending"))
        .unwrap_or(-1.0)
}

/// Resident memory of `pid` in MiB (`VmRSS`), 0 when unreadable.
fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| (kb / 1024.0 * 10.0).round() / 10.0)
}
