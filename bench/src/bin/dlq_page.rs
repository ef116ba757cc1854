//! DLQ page latency at scale: seeds N dead rows (default 10 million) through the store API,
//! starts the release gateway on that data, and times `GET /v1/dlq` over HTTP: the first page
//! and a mid-cursor page, without a filter and with `tenant`, `sink`, `error_class` and
//! `tenant`+`error_class` filters. Prints one JSON line per case (p50/p99 of 200 requests).
//! Target: every case p99 < 20 ms.
//!
//! `target/release/dlq_page [rows] [data-dir]` (the data dir is kept when given, so a second
//! run skips seeding).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ankusa_bench::*;
use ankusa_store::{DeadCursor, DeadSeed, ErrorClass, Store};
use serde_json::json;

const TENANTS: u64 = 100;
const SAMPLES: usize = 200;

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
        emit(json!({"case": "seed", "rows": rows, "seconds": t.elapsed().as_secs_f64()}));
    }

    let cfg = "node: {roles: [edge]}\nsources:\n  s:\n    sinks: [{type: log}]\n";
    let g = start_gateway_on(cfg, &data)?;
    let rt = runtime()?;
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
    emit(
        json!({"case": "summary", "rows": rows, "worst_p99_ms": worst, "target_p99_ms": 20.0, "meets_target": worst < 20.0}),
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
