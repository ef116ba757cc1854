//! Durable ingest in `wal.type: disk` vs `wal.type: dual`, in one run: the same gateway, the
//! same load (1 KiB hooks signed with Standard Webhooks, 64 keep-alive connections on loopback,
//! edge only), acking after the synced commit alone, then also after the intake log confirmed
//! the hook: Tansu (Kafka protocol) on 127.0.0.1:9092 and nats-server with JetStream on
//! 127.0.0.1:4222 (`tests/brokers/start.sh` starts Tansu; NATS runs on the machine). Prints
//! accepted/s and p50/p99 per case and the dual/disk ratios (aim: >= 0.7 with p99 < 20 ms).
//!
//! `cargo build --release --workspace --bins && ANKUSA_BIN=target/release/ankusa target/release/dual [seconds]`

use std::time::Duration;

use ankusa_bench::*;
use serde_json::json;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CONNECTIONS: usize = 64;

async fn kafka_topic(topic: &str) -> anyhow::Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", "127.0.0.1:9092")
        .create()?;
    for r in admin
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await?
    {
        r.map_err(|(t, e)| anyhow::anyhow!("create topic {t}: {e}"))?;
    }
    Ok(())
}

async fn jetstream_stream(name: &str, subject: &str) -> anyhow::Result<()> {
    let client = async_nats::connect("nats://127.0.0.1:4222").await?;
    let js = async_nats::jetstream::new(client);
    js.get_or_create_stream(async_nats::jetstream::stream::Config {
        name: name.into(),
        subjects: vec![format!("{subject}.>")],
        storage: async_nats::jetstream::stream::StorageType::File,
        ..Default::default()
    })
    .await
    .map_err(|e| anyhow::anyhow!("stream: {e}"))?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let duration = seconds_arg();
    let rt = runtime()?;
    let make = signed_requests("/webhooks/bench", SECRET)?;
    let cfg = |extra: &str| {
        format!(
            "node: {{roles: [edge]}}\n{extra}\nsources:\n  bench:\n    verify: {{type: standard_webhooks, secret: \"{SECRET}\"}}\n    sinks: [{{type: log}}]\n"
        )
    };
    let run = |extra: &str, case: &str| -> anyhow::Result<(f64, f64)> {
        let g = start_gateway(&cfg(extra))?;
        let mut r = rt.block_on(closed_loop(
            g.ingest,
            CONNECTIONS,
            Duration::from_secs(2),
            duration,
            None,
            make.clone(),
        ))?;
        let wal = rt.block_on(get_json(g.admin, "/v1/wal"))?;
        let p99 = r.latencies.quantile_ms(0.99);
        let mut line = r.line(case, CONNECTIONS);
        line["intake"] = wal["intake"].clone();
        emit(line);
        Ok((r.per_sec(), p99))
    };

    let (disk, disk_p99) = run("", "ingest_disk")?;
    let mut summary = serde_json::Map::new();
    summary.insert("case".into(), json!("summary"));
    summary.insert("disk_per_s".into(), json!(disk.round()));
    summary.insert("disk_p99_ms".into(), json!(disk_p99));

    let topic = format!("ankusa-intake-bench-{}", suffix());
    rt.block_on(kafka_topic(&topic))?;
    let (kafka, kafka_p99) = run(
        &format!(
            "wal: {{type: dual}}\nintake:\n  kafka: {{brokers: [\"127.0.0.1:9092\"], topic: {topic}}}\n"
        ),
        "ingest_dual_kafka",
    )?;
    summary.insert("dual_kafka_per_s".into(), json!(kafka.round()));
    summary.insert("dual_kafka_p99_ms".into(), json!(kafka_p99));
    summary.insert(
        "dual_kafka_to_disk_ratio".into(),
        json!((kafka / disk * 1000.0).round() / 1000.0),
    );

    let s = suffix();
    let subject = format!("bench_{s}");
    rt.block_on(jetstream_stream(&format!("BENCH_{s}"), &subject))?;
    let (js, js_p99) = run(
        &format!(
            "wal: {{type: dual}}\nintake:\n  jetstream: {{servers: [\"nats://127.0.0.1:4222\"], subject: {subject}}}\n"
        ),
        "ingest_dual_jetstream",
    )?;
    summary.insert("dual_jetstream_per_s".into(), json!(js.round()));
    summary.insert("dual_jetstream_p99_ms".into(), json!(js_p99));
    summary.insert(
        "dual_jetstream_to_disk_ratio".into(),
        json!((js / disk * 1000.0).round() / 1000.0),
    );
    summary.insert("target_ratio".into(), json!(0.7));
    summary.insert("target_p99_ms".into(), json!(20.0));
    summary.insert(
        "kafka_meets_target".into(),
        json!(kafka / disk >= 0.7 && kafka_p99 < 20.0),
    );
    emit(serde_json::Value::Object(summary));
    Ok(())
}
