//! Scan cost against idle tenants: one tenant with 10⁶ due rows beside N tenants whose one row
//! is due next week (N = 0, 1 000, 10 000, 100 000). Times the real scheduler's claim scan
//! (`dispatch::measure_scans`) and prints per case the tenants a scan visited and its
//! median/p99 time, for a scan claiming 1 row and for a full batch of 128.
//!
//! `target/release/dispatch_tick [hot_rows]`

use std::sync::Arc;

use ankusa_bench::*;
use ankusa_config::DispatchConfig;
use ankusa_core::now_ms;
use ankusa_gateway::dispatch::measure_scans;
use ankusa_store::{IngestRecord, Store};
use serde_json::json;

fn envelope(tenant: &str) -> ankusa_core::Envelope {
    ankusa_core::Envelope::new(tenant, "s", bytes::Bytes::from_static(b"{}"))
}

fn ingest(store: &Store, tenant_of: impl Fn(u64) -> String, n: u64, at: u64) -> anyhow::Result<()> {
    let mut i = 0;
    while i < n {
        let recs: Vec<IngestRecord> = (i..(i + 10_000).min(n))
            .map(|k| IngestRecord {
                envelope: envelope(&tenant_of(k)),
                sinks: vec!["log"],
                lanes: vec![],
                dedupe: None,
                skip_sinks: Vec::new(),
            })
            .collect();
        store.commit_ingest(&recs, at, false)?;
        i += recs.len() as u64;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let hot_rows: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let week = 7 * 24 * 3_600_000;
    // The single-row baseline.
    {
        let dir = tempfile::tempdir()?;
        let store = Arc::new(Store::open(&dir.path().join("store"))?);
        ingest(&store, |_| "solo".into(), 1, now_ms())?;
        let d = DispatchConfig {
            batch: 1,
            ..Default::default()
        };
        let s = measure_scans(store.clone(), &d, 1)?;
        emit(
            json!({"case": "one_row_one_tenant", "visited": s[0].visited, "claimed": s[0].claimed, "scan_us": s[0].micros}),
        );
    }
    for idle in [0u64, 1_000, 10_000, 100_000] {
        let dir = tempfile::tempdir()?;
        let store = Arc::new(Store::open(&dir.path().join("store"))?);
        ingest(&store, |_| "hot".into(), hot_rows, now_ms())?;
        ingest(&store, |k| format!("idle-{k}"), idle, now_ms() + week)?;
        for batch in [1u32, 128] {
            let d = DispatchConfig {
                batch,
                ..Default::default()
            };
            let load = std::time::Instant::now();
            let mut scans = measure_scans(store.clone(), &d, 200)?;
            let startup_ms = load.elapsed().as_millis() as u64;
            let visited = scans.iter().map(|s| s.visited).max().unwrap_or(0);
            scans.sort_by_key(|s| s.micros);
            emit(json!({
                "case": format!("hot_{hot_rows}_idle_{idle}_batch_{batch}"),
                "idle_tenants": idle,
                "max_visited_per_scan": visited,
                "claimed_per_scan": scans[0].claimed,
                "scan_p50_us": scans[scans.len() / 2].micros,
                "scan_p99_us": scans[scans.len() * 99 / 100].micros,
                "load_and_200_scans_ms": startup_ms,
            }));
        }
    }
    Ok(())
}
