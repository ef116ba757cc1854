//! Direct mode (`wal.type: none`) against the brokers driven alone at the same durability, in
//! one run, at the same concurrency (64): RabbitMQ on 127.0.0.1:5672 (a lapin confirm channel,
//! mandatory persistent publishes of 1 KiB, each awaiting its confirm) and NATS JetStream on
//! 127.0.0.1:4222 (publishes of 1 KiB to a file stream, each awaiting its ack); then the
//! gateway in direct mode with one sink of that broker (1 KiB hooks signed with Standard
//! Webhooks, 64 keep-alive connections; a `201` only after the broker confirmed); then the same
//! gateway and sink under `wal.type: disk` (a `201` after the synced commit, delivery after).
//! RabbitMQ is also driven alone with the sink's own message (`rabbitmq_alone_sink_message`:
//! message v1 and the sink's AMQP properties), the like-for-like baseline of direct mode.
//! Prints accepted/s and p50/p99 per case and the direct/alone ratios (aim: >= 0.8), and per
//! case the CPU each process used (the broker, the gateway, this load generator; from
//! `/proc/<pid>/stat` over the case's whole run, warm-up included) as cores and as µs per
//! accepted hook: on a small machine the three share the cores, which bounds the ratio.
//!
//! `cargo build --release --workspace --bins && ANKUSA_BIN=target/release/ankusa target/release/direct [seconds]`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ankusa_bench::cpu::{CpuProbe, cpu_line, pids_named};
use ankusa_bench::*;
use ankusa_core::{DeliveryCtx, Envelope, Verification};
use ankusa_sinks::message;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use serde_json::json;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CONCURRENCY: usize = 64;
const RABBIT: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const NATS: &str = "nats://127.0.0.1:4222";

/// One message as the RabbitMQ sink publishes it for a verified 1 KiB hook of source `bench`
/// (a fresh id each time): the queue message v1 bytes (`message::encode`: the body base64'd
/// in its JSON envelope, the forwarded Standard Webhooks headers) and the sink's AMQP
/// properties with its `ankusa_*` headers (`message::attributes`). The "alone" case that
/// publishes these measures the broker on the same bytes the sink sends it.
fn sink_message(body: &bytes::Bytes) -> (Vec<u8>, BasicProperties) {
    let mut env = Envelope::new("default", "bench", body.clone());
    env.content_type = Some("application/json".into());
    env.verification = Verification::OK;
    env.headers = vec![
        ("content-type".into(), "application/json".into()),
        ("webhook-id".into(), format!("msg_{}", env.id.simple())),
        (
            "webhook-timestamp".into(),
            (env.received_at / 1000).to_string(),
        ),
    ];
    let ctx = DeliveryCtx {
        instance: "bench".into(),
        region: None,
        attempt: 1,
        replay_id: None,
        forward_headers: env.headers.clone(),
        tenant_for_pools: "default".into(),
        claim_check: None,
        ordering_key: None,
        traceparent: None,
        original_sha256: None,
    };
    let json = message::encode(&env, &ctx, None);
    (json, ankusa_sinks::rabbitmq::properties(&env, &ctx))
}

/// RabbitMQ driven alone over `conn` for `duration` at the bench's concurrency: a confirm
/// channel, mandatory publishes to `exchange` of what `next` makes, each awaiting its confirm.
fn rabbit_alone(
    rt: &tokio::runtime::Runtime,
    conn: &Connection,
    exchange: &str,
    duration: Duration,
    next: impl Fn() -> (Vec<u8>, BasicProperties) + Send + Sync + 'static,
) -> anyhow::Result<LoadResult> {
    rt.block_on(async {
        let pc = conn.create_channel().await?;
        pc.confirm_select(ConfirmSelectOptions::default()).await?;
        let (pc, exchange, next) = (Arc::new(pc), exchange.to_string(), Arc::new(next));
        anyhow::Ok(
            closed_loop_op(duration, move |_| {
                let (pc, exchange) = (pc.clone(), exchange.clone());
                let (bytes, props) = next();
                async move {
                    let c = pc
                        .basic_publish(
                            exchange.as_str().into(),
                            "ankusa.bench".into(),
                            BasicPublishOptions {
                                mandatory: true,
                                immediate: false,
                            },
                            &bytes,
                            props,
                        )
                        .await
                        .map_err(|e| e.to_string())?
                        .await
                        .map_err(|e| e.to_string())?;
                    if c.is_ack() {
                        Ok(())
                    } else {
                        Err("nack".into())
                    }
                }
            })
            .await,
        )
    })
}

/// `CONCURRENCY` tasks each running `op` back to back for `duration` after a 2 s warm-up.
async fn closed_loop_op<F, Fut>(duration: Duration, op: F) -> LoadResult
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send,
{
    let op = Arc::new(op);
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let seq = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let (op, measuring, stop, seq) = (op.clone(), measuring.clone(), stop.clone(), seq.clone());
        tasks.push(tokio::spawn(async move {
            let (mut lat, mut ok, mut all_ok, mut errors) =
                (Latencies::default(), 0u64, 0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let n = seq.fetch_add(1, Ordering::Relaxed);
                let started = Instant::now();
                let r = op(n).await;
                all_ok += u64::from(r.is_ok());
                if measuring.load(Ordering::Relaxed) {
                    match r {
                        Ok(()) => {
                            ok += 1;
                            lat.record(started.elapsed());
                        }
                        Err(_) => errors += 1,
                    }
                }
            }
            (lat, ok, all_ok, errors)
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(duration).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut r = LoadResult {
        elapsed,
        ..LoadResult::default()
    };
    for t in tasks {
        if let Ok((lat, ok, all_ok, errors)) = t.await {
            r.latencies.merge(lat);
            r.ok += ok;
            r.all_ok += all_ok;
            r.errors += errors;
        }
    }
    r
}

fn main() -> anyhow::Result<()> {
    let duration = seconds_arg();
    let rt = runtime()?;
    let make = signed_requests("/webhooks/bench", SECRET)?;
    let payload: Arc<Vec<u8>> = Arc::new(body_1k(0).to_vec());
    let mut summary = serde_json::Map::new();
    summary.insert("case".into(), json!("summary"));

    // The gateway with one sink, in `wal` mode `wal`.
    let gateway = |wal: &str, sink: &str, case: &str, broker: &str| -> anyhow::Result<(f64, f64)> {
        let g = start_gateway(&format!(
            "node: {{roles: [edge, dispatch]}}\nwal: {{type: {wal}}}\negress: {{allow_loopback: true}}\nsources:\n  bench:\n    verify: {{type: standard_webhooks, secret: \"{SECRET}\"}}\n    sinks:\n{sink}"
        ))?;
        let probe = CpuProbe::start(vec![
            ("broker", pids_named(broker)),
            ("gateway", vec![g.child.0.id()]),
            ("loadgen", vec![std::process::id()]),
        ]);
        let mut r = rt.block_on(closed_loop(
            g.ingest,
            CONCURRENCY,
            Duration::from_secs(2),
            duration,
            None,
            make.clone(),
        ))?;
        let cpu = probe.finish(r.per_sec());
        let p99 = r.latencies.quantile_ms(0.99);
        emit(r.line(case, CONCURRENCY));
        cpu_line(case, cpu);
        Ok((r.per_sec(), p99))
    };

    // RabbitMQ: alone, direct, disk.
    let sfx = suffix();
    let exchange = format!("bench.direct.{sfx}");
    let queue = format!("bench.direct.q.{sfx}");
    let (conn, ch) = rt.block_on(async {
        let conn = Connection::connect(RABBIT, ConnectionProperties::default()).await?;
        let ch = conn.create_channel().await?;
        ankusa_testkit::brokers::rabbit_topology(
            &ch,
            &exchange,
            &queue,
            "#",
            FieldTable::default(),
        )
        .await?;
        anyhow::Ok((conn, ch))
    })?;
    let probe = CpuProbe::start(vec![
        ("broker", pids_named("beam.smp")),
        ("loadgen", vec![std::process::id()]),
    ]);
    let raw = payload.clone();
    let mut alone = rabbit_alone(&rt, &conn, &exchange, duration, move || {
        (
            raw.to_vec(),
            BasicProperties::default().with_delivery_mode(2),
        )
    })?;
    let alone_p99 = alone.latencies.quantile_ms(0.99);
    let alone_rate = alone.per_sec();
    emit(alone.line("rabbitmq_alone", CONCURRENCY));
    cpu_line("rabbitmq_alone", probe.finish(alone_rate));
    // The same, publishing what the sink publishes (message v1 and its properties).
    let probe = CpuProbe::start(vec![
        ("broker", pids_named("beam.smp")),
        ("loadgen", vec![std::process::id()]),
    ]);
    let body = bytes::Bytes::from(payload.to_vec());
    let mut same = rabbit_alone(&rt, &conn, &exchange, duration, move || sink_message(&body))?;
    let same_rate = same.per_sec();
    let same_p99 = same.latencies.quantile_ms(0.99);
    emit(same.line("rabbitmq_alone_sink_message", CONCURRENCY));
    cpu_line("rabbitmq_alone_sink_message", probe.finish(same_rate));
    let rabbit_sink =
        format!("      - type: rabbitmq\n        url: {RABBIT}\n        exchange: {exchange}\n");
    let (direct, direct_p99) = gateway("none", &rabbit_sink, "direct_rabbitmq", "beam.smp")?;
    let (disk, disk_p99) = gateway("disk", &rabbit_sink, "disk_rabbitmq", "beam.smp")?;
    rt.block_on(ankusa_testkit::brokers::rabbit_teardown(
        &ch, &exchange, &queue,
    ))?;
    for (k, v) in [
        ("rabbitmq_alone_per_s", alone_rate.round()),
        ("rabbitmq_alone_p99_ms", alone_p99),
        ("rabbitmq_alone_sink_message_per_s", same_rate.round()),
        ("rabbitmq_alone_sink_message_p99_ms", same_p99),
        (
            "direct_to_rabbitmq_alone_sink_message",
            (direct / same_rate * 1000.0).round() / 1000.0,
        ),
        ("direct_rabbitmq_per_s", direct.round()),
        ("direct_rabbitmq_p99_ms", direct_p99),
        ("disk_rabbitmq_per_s", disk.round()),
        ("disk_rabbitmq_p99_ms", disk_p99),
        (
            "direct_to_rabbitmq_alone",
            (direct / alone_rate * 1000.0).round() / 1000.0,
        ),
        (
            "direct_to_disk_rabbitmq",
            (direct / disk * 1000.0).round() / 1000.0,
        ),
    ] {
        summary.insert(k.into(), json!(v));
    }

    // NATS JetStream: alone, direct, disk.
    let subject = format!("benchdirect{sfx}");
    let js = rt.block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(NATS).await?);
        js.create_stream(async_nats::jetstream::stream::Config {
            name: format!("BENCHDIRECT{sfx}"),
            subjects: vec![format!("{subject}.>")],
            storage: async_nats::jetstream::stream::StorageType::File,
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow::anyhow!("stream: {e}"))?;
        anyhow::Ok(js)
    })?;
    let probe = CpuProbe::start(vec![
        ("broker", pids_named("nats-server")),
        ("loadgen", vec![std::process::id()]),
    ]);
    let mut alone = rt.block_on({
        let (js, subject, payload) = (js.clone(), subject.clone(), payload.clone());
        closed_loop_op(duration, move |_| {
            let (js, subject, payload) = (js.clone(), subject.clone(), payload.clone());
            async move {
                js.publish(format!("{subject}.alone"), payload.to_vec().into())
                    .await
                    .map_err(|e| e.to_string())?
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(())
            }
        })
    });
    let alone_p99 = alone.latencies.quantile_ms(0.99);
    let alone_rate = alone.per_sec();
    emit(alone.line("jetstream_alone", CONCURRENCY));
    cpu_line("jetstream_alone", probe.finish(alone_rate));
    let nats_sink = format!(
        "      - type: nats\n        servers: [\"{NATS}\"]\n        subject: {subject}.gw\n"
    );
    let (direct, direct_p99) = gateway("none", &nats_sink, "direct_jetstream", "nats-server")?;
    let (disk, disk_p99) = gateway("disk", &nats_sink, "disk_jetstream", "nats-server")?;
    let _ = rt.block_on(js.delete_stream(format!("BENCHDIRECT{sfx}")));
    for (k, v) in [
        ("jetstream_alone_per_s", alone_rate.round()),
        ("jetstream_alone_p99_ms", alone_p99),
        ("direct_jetstream_per_s", direct.round()),
        ("direct_jetstream_p99_ms", direct_p99),
        ("disk_jetstream_per_s", disk.round()),
        ("disk_jetstream_p99_ms", disk_p99),
        (
            "direct_to_jetstream_alone",
            (direct / alone_rate * 1000.0).round() / 1000.0,
        ),
        (
            "direct_to_disk_jetstream",
            (direct / disk * 1000.0).round() / 1000.0,
        ),
    ] {
        summary.insert(k.into(), json!(v));
    }
    summary.insert("target_ratio".into(), json!(0.8));
    emit(serde_json::Value::Object(summary));
    drop(conn);
    Ok(())
}
