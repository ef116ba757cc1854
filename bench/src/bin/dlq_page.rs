//! DLQ page latency at scale: seeds N dead rows (default 10 million) through the store API,
//! starts the release gateway on that data, and times `GET /v1/dlq` over HTTP: the first page
//! and a mid-cursor page, without a filter and with `tenant`, `sink`, `error_class` and
//! `tenant`+`error_class` filters. Prints one JSON line per case (p50/p99 of 200 requests).
//! While it pages, ingest runs beside it at `ingest_fraction` (default 0.8) of the rate the
//! same gateway reached just before with 64 connections unpaced (0 turns that off).
//! Targets: every case p99 < 20 ms at 10M rows; < 10 ms at 100M rows beside ingest (issue 33).
//!
//! `target/release/dlq_page [rows] [data-dir] [ingest_fraction]` (the data dir is kept when
//! given, so a second run skips seeding).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ankusa_bench::*;
use ankusa_store::{DeadCursor, DeadSeed, ErrorClass, Store};
use serde_json::json;

const TENANTS: u64 = 100;
const SAMPLES: usize = 200;
/// How long the ingest beside the pages runs; the 10 cases of 200 pages take a few seconds.
const INGEST_BESIDE_SECS: u64 = 60;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let rows: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let keep = args.get(2).map(std::path::PathBuf::from);
    let tmp = tempfile::tempdir()?;
    let data = keep.clone().unwrap_or_else(|| tmp.path().join("data"));
    let store_path = data.join("default").join("store");
    let base = 1_700_000_000_000u64;
    let ingest_fraction: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(0.8);

    let seeded_marker = data.join(format!("seeded-{rows}"));
    if !seeded_marker.exists() {
        let t = Instant::now();
        let store = Store::open(&store_path)?;
        let body = bytes::Bytes::from_static(br#"{"id":"evt_1","type":"invoice.paid"}"#);
        let classes = [
            ErrorClass::Permanent,
            ErrorClass::Transient,
            ErrorClass::Throttled,
        ];
        let mut n = 0u64;
        while n < rows {
            let chunk: Vec<DeadSeed> = (n..(n + 20_000).min(rows))
                .map(|i| DeadSeed {
                    tenant: format!("t{}", i % TENANTS),
                    source_id: format!("src{}", i % 7),
                    sink: (i % 2) as u16,
                    sink_type: "http".into(),
                    error_class: classes[(i % 3) as usize],
                    dead_at: base + i,
                    body: body.clone(),
                })
                .collect();
            store.bulk_load_dead(&chunk)?;
            n += chunk.len() as u64;
        }
        store.flush()?;
        drop(store);
        std::fs::write(&seeded_marker, b"")?;
        let bytes = dir_bytes(&store_path);
        emit(json!({
            "case": "seed",
            "rows": rows,
            "seconds": t.elapsed().as_secs_f64(),
            "rows_per_s": (rows as f64 / t.elapsed().as_secs_f64()).round(),
            "store_bytes": bytes,
            "bytes_per_dead_row": bytes / rows.max(1),
        }));
    }

    let cfg = "node: {roles: [edge]}\nsources:\n  s:\n    sinks: [{type: log}]\n";
    let g = start_gateway_on(cfg, &data)?;
    let rt = runtime()?;
    let make: MakeRequest = std::sync::Arc::new(|n| {
        hyper::Request::post("/webhooks/s")
            .header("host", "bench")
            .body(http_body_util::Full::new(body_1k(n)))
            .expect("request")
    });
    let beside = if ingest_fraction > 0.0 {
        let mut max = rt.block_on(closed_loop(
            g.ingest,
            64,
            Duration::from_secs(1),
            Duration::from_secs(5),
            None,
            make.clone(),
        ))?;
        emit(max.line("ingest_max", 64));
        let rate = max.per_sec() * ingest_fraction;
        let ingest = g.ingest;
        let load = rt.spawn(closed_loop(
            ingest,
            64,
            Duration::from_secs(1),
            Duration::from_secs(INGEST_BESIDE_SECS),
            Some(rate / 64.0),
            make,
        ));
        std::thread::sleep(Duration::from_secs(2));
        Some((load, rate, Instant::now()))
    } else {
        None
    };
    let mid = DeadCursor::new(base + rows / 2, u64::MAX, u16::MAX).encode();
    let filters = [
        ("none", String::new()),
        ("tenant", "&tenant=t42".to_string()),
        ("sink", "&sink=1".to_string()),
        ("error_class", "&error_class=throttled".to_string()),
        (
            "tenant_error_class",
            "&tenant=t42&error_class=permanent".to_string(),
        ),
    ];
    let mut worst: f64 = 0.0;
    for (name, q) in &filters {
        for (page, cursor) in [
            ("first", String::new()),
            ("mid_cursor", format!("&cursor={mid}")),
        ] {
            let path = format!("/v1/dlq?limit=100{q}{cursor}");
            let (mut lat, entries) = rt.block_on(time_gets(g.admin, &path))?;
            let p99 = lat.quantile_ms(0.99);
            worst = worst.max(p99);
            emit(json!({
                "case": format!("dlq_{page}_{name}"),
                "rows": rows,
                "entries": entries,
                "p50_ms": lat.quantile_ms(0.5),
                "p99_ms": p99,
            }));
        }
    }
    let mut ingest_per_s = None;
    if let Some((load, rate, started)) = beside {
        let paging_s = started.elapsed().as_secs_f64();
        let mut r = rt.block_on(load)??;
        let mut line = r.line("ingest_beside", 64);
        line["target_per_s"] = json!(rate.round());
        // The pages ran within the load's window (it started 1 s of warm-up plus 2 s before).
        line["covered_paging"] = json!(paging_s + 1.0 < INGEST_BESIDE_SECS as f64);
        ingest_per_s = Some(r.per_sec().round());
        emit(line);
    }
    let target = if rows >= 100_000_000 { 10.0 } else { 20.0 };
    emit(
        json!({"case": "summary", "rows": rows, "ingest_beside_per_s": ingest_per_s, "worst_p99_ms": worst, "target_p99_ms": target, "meets_target": worst < target}),
    );
    drop(g);
    Ok(())
}

/// `SAMPLES` sequential GETs on one keep-alive connection; returns latencies and the entry
/// count of the last page.
async fn time_gets(addr: SocketAddr, path: &str) -> anyhow::Result<(Latencies, usize)> {
    use http_body_util::BodyExt;
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut lat = Latencies::default();
    let mut entries = 0;
    for _ in 0..SAMPLES {
        let req = hyper::Request::get(path)
            .header("host", "bench")
            .body(http_body_util::Full::new(bytes::Bytes::new()))?;
        sender.ready().await?;
        let t = Instant::now();
        let resp = sender.send_request(req).await?;
        let body = resp.into_body().collect().await?.to_bytes();
        lat.record(t.elapsed());
        let v: serde_json::Value = serde_json::from_slice(&body)?;
        entries = v["entries"].as_array().map_or(0, Vec::len);
    }
    Ok((lat, entries))
}

/// Starts the gateway on an existing data dir.
fn start_gateway_on(config: &str, data: &std::path::Path) -> anyhow::Result<GatewayProc> {
    let g = spawn_gateway(config, tempfile::tempdir()?, data)?;
    wait_http_ok(g.admin, "/ready", Duration::from_secs(300))?;
    Ok(g)
}
