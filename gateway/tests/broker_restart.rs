//! A broker that goes away mid-run, through the real binary: hooks keep being accepted, their
//! deliveries fail and are retried by dispatch, and once the broker is back every hook
//! answered 201 is in the stream (at least once). The NATS server is this test's own, with
//! file storage, killed with SIGKILL and restarted on the same store.
//!
//! A broker the egress policy refuses is a failure of the same kind: its hooks stay queued and
//! are retried, and are delivered once a reload allows the broker.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ankusa_testkit::nats_server::{NatsServer, Spec};
use common::*;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hooks_survive_a_broker_restart_with_visible_retries() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut nats = NatsServer::start(tmp.path(), port, &Spec::plain());
    let url = format!("nats://127.0.0.1:{port}");
    {
        let nc = async_nats::connect(&url).await.unwrap();
        let js = async_nats::jetstream::new(nc);
        js.create_stream(async_nats::jetstream::stream::Config {
            name: "HOOKS".into(),
            subjects: vec!["hooks.>".into()],
            storage: async_nats::jetstream::stream::StorageType::File,
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let g = Gateway::start(&format!(
        "egress: {{allow_loopback: true}}\ndispatch: {{breaker_failures: 0}}\nsources:\n  s:\n    retry: {{base_ms: 50, max_ms: 300}}\n    sinks:\n      - type: nats\n        servers: [\"127.0.0.1:{port}\"]\n        subject: hooks.s\n        publish_timeout_ms: 1000\n"
    ));
    let c = client();
    let mut acked = Vec::new();
    for i in 0..90 {
        if i == 30 {
            nats.kill();
        }
        if i == 60 {
            nats.spawn();
        }
        let r = post_to(&c, &g.url("/webhooks/s"), format!("{{\"i\":{i}}}")).await;
        assert_eq!(
            r.status().as_u16(),
            201,
            "ingest never depends on the broker"
        );
        acked.push(
            r.json::<Value>().await.unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Every acked hook reaches the stream, at least once.
    let nc = async_nats::connect(&url).await.unwrap();
    let js = async_nats::jetstream::new(nc);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen: HashSet<String> = HashSet::new();
    loop {
        let mut stream = js.get_stream("HOOKS").await.unwrap();
        let last = stream.info().await.unwrap().state.last_sequence;
        seen.clear();
        for seq in 1..=last {
            if let Ok(m) = stream.get_raw_message(seq).await {
                let v: Value = serde_json::from_slice(&m.payload).unwrap();
                seen.insert(v["id"].as_str().unwrap().to_string());
            }
        }
        if acked.iter().all(|id| seen.contains(id)) {
            break;
        }
        let missing = acked.iter().filter(|id| !seen.contains(*id)).count();
        assert!(
            Instant::now() < deadline,
            "{missing} acked hooks never reached the stream:\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let text = g.metrics(&c).await;
    let failed: f64 = text
        .lines()
        .filter(|l| {
            l.starts_with("ankusa_dispatch_attempt_duration_seconds_count")
                && l.contains("sink=\"nats\"")
                && !l.contains("result=\"ok\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        failed > 0.0,
        "deliveries failed while the broker was down and were retried:\n{text}"
    );
    eprintln!(
        "{} hooks acked, all in the stream; {failed} failed attempts while the broker was away",
        acked.len()
    );
}

/// A Redis sink named by `localhost` loads (a name is checked on connect, not at load), but the
/// default egress policy refuses the loopback address it resolves to: each attempt fails
/// transient with `egress_denied: loopback`, the hook stays queued (never dead-lettered), and
/// a reload that sets `egress.allow_loopback` delivers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broker_refused_by_egress_keeps_its_hooks_queued_until_allowed() {
    let channel = format!("ankusa-egress-{}", uuid::Uuid::now_v7().simple());
    let mut pubsub = redis_subscriber(&channel).await;
    let config = |egress: &str| {
        format!(
            "egress: {egress}\ndispatch: {{breaker_failures: 0}}\nsources:\n  s:\n    retry: {{base_ms: 50, max_ms: 300}}\n    sinks:\n      - type: redis\n        url: redis://localhost:6379/0\n        channel: {channel}\n"
        )
    };
    let g = Gateway::start(&config("{}"));
    let c = client();
    let id = post_hook(&c, &g, "/webhooks/s", "{}").await;
    let row = retried_row(&c, &g, &id, 20).await;
    let err = row["last_error"].as_str().unwrap_or_default();
    assert!(
        err.contains("egress_denied: loopback (url)"),
        "the class and the field: {row}"
    );
    assert!(
        !err.contains("localhost") && !err.contains("127.0.0.1"),
        "{err}"
    );

    g.write_config(&config("{allow_loopback: true}"));
    let m = next_message(&mut pubsub, &g, 20).await;
    assert_eq!(m["id"], id.as_str());
}
