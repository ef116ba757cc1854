//! Claim-check benchmark, printed as JSON lines: for each store that answers on loopback — the
//! data dir (local files), S3 (moto_server, 127.0.0.1:5000) and GCS (fake-gcs-server, 9023),
//! started by `tests/brokers/start.sh` — `claims` bodies of `kib` KiB
//! are checked in 32 at a time, as the attempts of one dispatch round do (p50/p99 of one
//! check-in; in a blob store the 32 share a pack), then redeemed through the claim port's real router
//! on a loopback listener by 8 concurrent readers with a tenant token (`redeems` GETs of whole
//! claims and as many of one 4 KiB `Range`): p50/p99 latency and redeems/s.
//!
//! `target/release/claim_redeem [claims] [kib] [redeems]` (defaults 200, 100, 2000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_bench::Latencies;
use ankusa_config::ClaimToken;
use ankusa_core::{ClaimCheck, Envelope};
use ankusa_gateway::blob::BlobStore;
use ankusa_gateway::claim_check::{self, Claims};
use serde_json::json;

const TOKEN: &str = "bench-claim-reader-0001";
const READERS: usize = 8;
/// Check-ins made together (a dispatch round's attempts).
const ROUND: usize = 32;

fn up(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(1),
    )
    .is_ok()
}

/// A fresh bucket or container on the emulator, and the `claim_check.store` block naming it.
async fn store_block(kind: &str) -> anyhow::Result<String> {
    let c = reqwest::Client::new();
    let name = format!("bench-claims-{:08x}", fastrand::u32(..));
    match kind {
        "s3" => {
            let r = c
                .put(format!("http://127.0.0.1:5000/{name}"))
                .send()
                .await?;
            anyhow::ensure!(r.status().is_success(), "create bucket: {}", r.status());
            Ok(format!(
                "type: s3\ns3: {{bucket: {name}, endpoint: \"http://127.0.0.1:5000\", region: us-east-1, access_key_id: bench, secret_access_key: bench}}\n"
            ))
        }
        _ => {
            let r = c
                .post("http://127.0.0.1:9023/storage/v1/b?project=ankusa")
                .json(&json!({ "name": name }))
                .send()
                .await?;
            anyhow::ensure!(r.status().is_success(), "create bucket: {}", r.status());
            Ok(format!(
                "type: gcs\ngcs: {{bucket: {name}, endpoint: \"http://127.0.0.1:9023\", anonymous: true}}\n"
            ))
        }
    }
}

fn build(block: &str) -> anyhow::Result<BlobStore> {
    let indented: String = block.lines().map(|l| format!("    {l}\n")).collect();
    let cfg = ankusa_config::from_rendered_yaml(&format!("claim_check:\n  store:\n{indented}"))?;
    let st = cfg.claim_check.store.expect("a store block");
    Ok(claim_check::store_of(&st)?)
}

async fn run(
    kind: &str,
    claims: Arc<Claims>,
    n: usize,
    kib: usize,
    redeems: usize,
) -> anyhow::Result<serde_json::Value> {
    let mut checkin = Latencies::default();
    let mut ids = Vec::with_capacity(n);
    let hooks: Vec<Envelope> = (0..n)
        .map(|i| {
            let body: Vec<u8> = (0..kib * 1024)
                .map(|j| ((i * 31 + j) % 251) as u8)
                .collect();
            Envelope::new("acme", "bench", bytes::Bytes::from(body))
        })
        .collect();
    for round in hooks.chunks(ROUND) {
        let timed = round.iter().map(|env| async {
            let t = Instant::now();
            let r = claims.check_in(env).await;
            (t.elapsed(), r)
        });
        for (took, r) in futures::future::join_all(timed).await {
            let r = r.map_err(|e| anyhow::anyhow!(e))?;
            checkin.record(took);
            ids.push(r.urn.rsplit(':').next().unwrap_or_default().to_string());
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server =
        tokio::spawn(async move { axum::serve(listener, claim_check::router(claims)).await });
    let ids = Arc::new(ids);
    let mut out = json!({"case": "claim_redeem", "store": kind, "claims": n, "kib": kib});
    for (label, range) in [("whole", None), ("range_4k", Some("bytes=1000-5095"))] {
        let client = reqwest::Client::new();
        let started = Instant::now();
        let mut tasks = Vec::new();
        for r in 0..READERS {
            let (client, ids) = (client.clone(), ids.clone());
            tasks.push(tokio::spawn(async move {
                let mut lat = Latencies::default();
                for k in (r..redeems).step_by(READERS) {
                    let id = &ids[k % ids.len()];
                    let mut req = client
                        .get(format!("http://{addr}/v1/claims/acme/{id}"))
                        .bearer_auth(TOKEN);
                    if let Some(range) = range {
                        req = req.header("range", range);
                    }
                    let t = Instant::now();
                    let resp = req.send().await?;
                    anyhow::ensure!(resp.status().is_success(), "redeem: {}", resp.status());
                    resp.bytes().await?;
                    lat.record(t.elapsed());
                }
                Ok::<_, anyhow::Error>(lat)
            }));
        }
        let mut lat = Latencies::default();
        for t in tasks {
            lat.merge(t.await??);
        }
        let secs = started.elapsed().as_secs_f64();
        out[label] = json!({
            "p50_ms": lat.quantile_ms(0.5),
            "p99_ms": lat.quantile_ms(0.99),
            "per_s": (redeems as f64 / secs).round(),
        });
    }
    out["checkin_p50_ms"] = json!(checkin.quantile_ms(0.5));
    out["checkin_p99_ms"] = json!(checkin.quantile_ms(0.99));
    server.abort();
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(200);
    let kib = args.get(1).copied().unwrap_or(100);
    let redeems = args.get(2).copied().unwrap_or(2000);
    let tokens = vec![ClaimToken::for_tenants(TOKEN, &["acme"])];
    let dir = tempfile::tempdir()?;
    let local = Claims::local(dir.path().join("claims"), tokens.clone())?;
    println!("{}", run("local", local, n, kib, redeems).await?);
    for (kind, port) in [("s3", 5000), ("gcs", 9023)] {
        if !up(port) {
            println!(
                "{}",
                json!({"case": "claim_redeem", "store": kind, "skipped": format!("nothing listens on 127.0.0.1:{port}")})
            );
            continue;
        }
        let store = build(&store_block(kind).await?)?;
        let cfg = ankusa_config::ClaimCheckConfig {
            tokens: tokens.clone(),
            ..Default::default()
        };
        let claims = Claims::in_store(
            store,
            &cfg,
            8_000_000,
            ankusa_gateway::metrics::ClaimMetrics::unregistered(),
        )?;
        println!("{}", run(kind, claims, n, kib, redeems).await?);
    }
    Ok(())
}
