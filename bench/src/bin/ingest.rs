//! Ingest benchmark: 1 KiB JSON hooks signed with Standard Webhooks (verification on), 64
//! keep-alive connections on loopback. Prints accepted/s and p50/p99 ack latency for
//! (1) a no-op handler on the same HTTP stack (the ceiling), (1b) the same handler acking
//! only after a group-committed `fdatasync` of the bodies (the durability floor, three ways),
//! (2) the durable gateway (edge only: every 201 waits for its fsynced group commit), (2b) the
//! same gateway with its data dir on tmpfs (not durable: its cost without the disk), (3) the
//! gateway with dispatch delivering to the log sink at the same time, and the ratios of (2),
//! (2b) and (1b) to (1).
//!
//! `cargo build --release -p ankusa-gateway -p ankusa-bench && target/release/ingest [seconds]`

use std::net::SocketAddr;
use std::time::Duration;

use ankusa_bench::floor::{FloorMode, run_fsync_floor_server};
use ankusa_bench::*;
use serde_json::json;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CONNECTIONS: usize = 64;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("noop") {
        let port: u16 = args[2].parse()?;
        return run_noop_server(SocketAddr::from(([127, 0, 0, 1], port)), 201);
    }
    if let Some(mode) = args.get(1).and_then(|r| FloorMode::from_role(r)) {
        let port: u16 = args[2].parse()?;
        let dir = tempfile::tempdir()?;
        return run_fsync_floor_server(SocketAddr::from(([127, 0, 0, 1], port)), mode, dir.path());
    }
    let secs: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let rt = runtime()?;
    let make = signed_requests("/webhooks/bench", SECRET)?;
    let duration = Duration::from_secs(secs);
    let warmup = Duration::from_secs(2);
    // One measured case: the closed loop against `addr`, reported under `case`.
    let measure = |addr: SocketAddr, case: &str| -> anyhow::Result<LoadResult> {
        let mut r = rt.block_on(closed_loop(
            addr,
            CONNECTIONS,
            warmup,
            duration,
            None,
            make.clone(),
        ))?;
        report(case, &mut r);
        Ok(r)
    };

    // 1. The ceiling: a no-op server in its own process.
    let (_noop, addr) = spawn_self("noop")?;
    let ceiling = measure(addr, "noop_ceiling")?;
    drop(_noop);

    // 1b. The durability floor: the same no-op server, acking only after a group-committed
    // fdatasync of the bodies (no verification, no store), in three ways of syncing. The best
    // of them bounds what any design that fsyncs before the ack reaches on this machine.
    let mut floors = serde_json::Map::new();
    let mut append_floor = 0.0;
    for (mode, role, case) in FloorMode::ALL {
        let (_server, addr) = spawn_self(role)?;
        let r = measure(addr, case)?;
        if mode == FloorMode::Append {
            append_floor = r.per_sec();
        }
        floors.insert(case.into(), json!(ratio3(r.per_sec() / ceiling.per_sec())));
    }

    // 2. The durable gateway, ingest only.
    // Extra gateway config for experiments (e.g. `batcher: {partitions: 1}`).
    let extra = std::env::var("ANKUSA_BENCH_CONFIG").unwrap_or_default();
    let cfg = |roles: &str| {
        format!(
            "node: {{roles: [{roles}]}}\n{extra}\nsources:\n  bench:\n    verify: {{type: standard_webhooks, secret: \"{SECRET}\"}}\n    sinks: [{{type: log}}]\n"
        )
    };
    let g = start_gateway(&cfg("edge"))?;
    let mut durable = measure(g.ingest, "ingest_durable")?;
    let wal = rt.block_on(get_json(g.admin, "/v1/wal"))?;
    emit(commit_stats(
        &rt,
        g.admin,
        durable.elapsed.as_secs_f64() + 2.0,
    )?);
    drop(g);

    // 2b. The same gateway with its data dir on tmpfs, where fdatasync does no I/O. Not
    // durable; it shows what the gateway's own work costs with the disk taken out, i.e. the
    // most any disk-side change could give.
    let mut without_disk = None;
    if let Ok(dir) = tempfile::tempdir_in("/dev/shm") {
        let g = start_gateway_in(&cfg("edge"), dir)?;
        without_disk = Some(measure(g.ingest, "ingest_data_dir_on_tmpfs_not_durable")?);
    }

    // 3. With dispatch delivering every hook to the log sink meanwhile.
    let g = start_gateway(&cfg("edge, dispatch"))?;
    measure(g.ingest, "ingest_durable_with_dispatch")?;
    drop(g);

    let ratio = durable.per_sec() / ceiling.per_sec();
    let p99 = durable.latencies.quantile_ms(0.99);
    emit(json!({
        "case": "summary",
        "durable_to_ceiling_ratio": ratio3(ratio),
        "floor_to_ceiling_ratios": floors,
        "durable_to_append_floor_ratio": ratio3(durable.per_sec() / append_floor),
        "tmpfs_gateway_to_ceiling_ratio": without_disk.map(|r| ratio3(r.per_sec() / ceiling.per_sec())),
        "target_ratio": 0.6,
        "durable_p99_ms": p99,
        "target_p99_ms": 10.0,
        "meets_target": ratio >= 0.6 && p99 < 10.0,
        "hooks_stored_in_case_2": wal["hooks"],
    }));
    Ok(())
}

fn ratio3(r: f64) -> f64 {
    (r * 1000.0).round() / 1000.0
}

fn report(case: &str, r: &mut LoadResult) {
    emit(r.line(case, CONNECTIONS));
}

/// Group-commit figures from the gateway's own metrics: commits per second, records per
/// commit, and the synced write's mean duration.
fn commit_stats(
    rt: &tokio::runtime::Runtime,
    admin: SocketAddr,
    secs: f64,
) -> anyhow::Result<serde_json::Value> {
    let text = rt.block_on(metrics_text(admin))?;
    let value = |name: &str| metric_value(&text, name);
    let commits = value("ankusa_store_commit_batch_records_count");
    let records = value("ankusa_store_commit_batch_records_sum");
    let sync_sum = value("ankusa_wal_sync_duration_seconds_sum");
    Ok(json!({
        "case": "ingest_durable_group_commit",
        "commits_per_s": (commits / secs).round(),
        "records_per_commit": if commits > 0.0 { (records / commits * 10.0).round() / 10.0 } else { 0.0 },
        "commit_mean_ms": if commits > 0.0 { (sync_sum / commits * 1e5).round() / 100.0 } else { 0.0 },
    }))
}
