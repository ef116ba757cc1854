//! Archive benchmarks, printed as JSON lines:
//! 1. Compactor throughput: `hooks` 1 KiB hooks committed to a store with the archive on, then
//!    packed into 16 MiB segments and uploaded (moto_server's S3 on 127.0.0.1:5000 when it
//!    answers, and a local directory), timed from the first tick to the last catalogue commit:
//!    hooks/s and MB/s.
//! 2. Ingest with the compactor running vs without: the release binary under the same
//!    closed-loop load (32 connections, 1 KiB bodies, a log sink), once without `storage` and
//!    once archiving to moto (or a local directory), in one run: the ratio.
//!
//! `target/release/archive [hooks] [seconds]` (run `tests/brokers/start.sh` first for moto).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_bench::*;
use ankusa_gateway::archive::{Archive, Tick};
use ankusa_gateway::metrics::Metrics;
use ankusa_store::{IngestRecord, Store};
use http_body_util::Full;
use hyper::Request;
use serde_json::json;

const MOTO: &str = "http://127.0.0.1:5000";
const CONNECTIONS: usize = 32;

fn moto_up() -> bool {
    std::net::TcpStream::connect_timeout(
        &"127.0.0.1:5000".parse().expect("address"),
        Duration::from_secs(1),
    )
    .is_ok()
}

fn s3_yaml(bucket: &str) -> String {
    format!(
        "storage:\n  type: s3\n  interval_ms: 200\n  roll_ms: 1000\n  s3: {{bucket: {bucket}, endpoint: \"{MOTO}\", access_key_id: bench, secret_access_key: bench}}\n"
    )
}

fn local_yaml(dir: &std::path::Path) -> String {
    format!(
        "storage:\n  type: local\n  interval_ms: 200\n  roll_ms: 1000\n  local: {{dir: {}}}\n",
        dir.display()
    )
}

async fn make_bucket(name: &str) -> anyhow::Result<()> {
    let r = reqwest::Client::new()
        .put(format!("{MOTO}/{name}"))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "create bucket: {}", r.status());
    Ok(())
}

/// Commits `n` 1 KiB hooks, then runs the compactor to the end; (seconds, segments).
async fn compactor_run(storage_yaml: &str, n: usize) -> anyhow::Result<(f64, u64)> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(Store::open(&dir.path().join("store"))?);
    let cfg: ankusa_config::Config = ankusa_config::from_rendered_yaml(storage_yaml)?;
    let mut storage = cfg.storage.expect("a storage section");
    // The tail is cut at once rather than after `roll_ms`: the figure is packing and uploading.
    storage.roll_ms = 1;
    // No dispatcher runs here: every hook is archived at once rather than once delivered.
    storage.archive_at = ankusa_config::ArchiveAt::Ack;
    let metrics = Arc::new(Metrics::new());
    let archive = Archive::new(store.clone(), &storage, "bench-0", metrics)
        .map_err(|e| anyhow::anyhow!(e))?;
    for chunk in 0..n.div_ceil(1000) {
        let recs: Vec<IngestRecord> = (0..1000.min(n - chunk * 1000))
            .map(|i| IngestRecord {
                envelope: ankusa_core::Envelope::new(
                    "default",
                    "s",
                    body_1k((chunk * 1000 + i) as u64),
                ),
                sinks: vec!["log"],
                lanes: vec![],
                dedupe: None,
                skip_sinks: Vec::new(),
            })
            .collect();
        store.commit_ingest(&recs, ankusa_core::now_ms(), false)?;
    }
    let started = Instant::now();
    let mut segments = 0;
    loop {
        match archive.tick().await? {
            Tick::Rolled { .. } => segments += 1,
            Tick::Idle => break,
            Tick::Waiting => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    Ok((started.elapsed().as_secs_f64(), segments))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let hooks: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let rt = runtime()?;
    let moto = moto_up();
    let bucket = format!("ankusa-bench-{:08x}", std::process::id());
    if moto {
        rt.block_on(make_bucket(&bucket))?;
    }
    let blobs = tempfile::tempdir()?;

    // 1. The compactor alone.
    let mut targets = vec![("local", local_yaml(&blobs.path().join("compactor")))];
    if moto {
        targets.push(("s3_moto", s3_yaml(&bucket)));
    }
    for (store, yaml) in &targets {
        let (s, segments) = rt.block_on(compactor_run(yaml, hooks))?;
        emit(json!({
            "case": "compactor", "store": store, "hooks": hooks, "segments": segments,
            "seconds": (s * 100.0).round() / 100.0,
            "hooks_per_s": (hooks as f64 / s).round(),
            "mb_per_s": ((hooks as f64 * 1.2 / 1024.0) / s * 10.0).round() / 10.0,
        }));
    }

    // 2. Ingest with and without the compactor, same load, one run.
    let make: MakeRequest = Arc::new(|n| {
        Request::post("/webhooks/s")
            .header("host", "bench")
            .header("content-type", "application/json")
            .body(Full::new(body_1k(n)))
            .expect("request")
    });
    let duration = Duration::from_secs(secs);
    let base = "sources:\n  s:\n    sinks: [{type: log}]\nlog: {level: warn}\n";
    let (archived_name, archived_yaml) = if moto {
        ("s3_moto", s3_yaml(&bucket))
    } else {
        ("local", local_yaml(&blobs.path().join("ingest")))
    };
    let mut rates = Vec::new();
    for (case, extra) in [
        ("without_archive", String::new()),
        (archived_name, archived_yaml),
    ] {
        let g = start_gateway(&format!("{base}{extra}"))?;
        let mut r = rt.block_on(closed_loop(
            g.ingest,
            CONNECTIONS,
            Duration::from_secs(1),
            duration,
            None,
            make.clone(),
        ))?;
        let st = rt.block_on(get_json(g.admin, "/v1/status"))?;
        emit(json!({
            "case": "ingest", "archive": case, "connections": CONNECTIONS,
            "accepted_per_s": r.per_sec().round(), "refused": r.refused, "errors": r.errors,
            "p50_ms": r.latencies.quantile_ms(0.5), "p99_ms": r.latencies.quantile_ms(0.99),
            "archive_status": st["archive"],
        }));
        rates.push(r.per_sec());
        drop(g);
    }
    emit(json!({
        "case": "summary", "ingest_ratio_with_archive": ((rates[1] / rates[0]) * 100.0).round() / 100.0,
        "s3": if moto { "moto_server 127.0.0.1:5000" } else { "not running: local directory only" },
    }));
    Ok(())
}
