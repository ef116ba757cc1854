//! Direct mode (`wal.type: none`) through the real binary, against the real RabbitMQ
//! (127.0.0.1:5672) and a NATS JetStream server of each test's own: a `201` arrives only once
//! both brokers hold the hook (read back with the test's own clients the instant it arrives); a
//! broker that goes away turns ingest into `503 sink_unavailable` + `Retry-After` within the
//! deadline, the other broker keeping exactly one copy; an open breaker calls no sink; a
//! source with no durable sink is refused; `kill -9` under load loses no hook answered `201`.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ankusa_testkit::brokers::{rabbit_teardown, rabbit_topology};
use ankusa_testkit::nats_server::{NatsServer, Spec};
use common::*;
use lapin::options::{BasicGetOptions, QueuePurgeOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties};
use serde_json::Value;

const RABBIT: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// The test's brokers: a queue bound to its own exchange on the shared RabbitMQ, and its own
/// NATS server with a file-stored stream `HOOKS` on `hooks.>`.
struct Brokers {
    _tmp: tempfile::TempDir,
    nats: NatsServer,
    _conn: Connection,
    ch: Channel,
    exchange: String,
    queue: String,
}

impl Brokers {
    async fn start(name: &str) -> Brokers {
        let tmp = tempfile::tempdir().unwrap();
        let nats = NatsServer::start(&tmp.path().join("nats"), free_port(), &Spec::plain());
        let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
        js.create_stream(async_nats::jetstream::stream::Config {
            name: "HOOKS".into(),
            subjects: vec!["hooks.>".into()],
            storage: async_nats::jetstream::stream::StorageType::File,
            ..Default::default()
        })
        .await
        .unwrap();
        let conn = Connection::connect(RABBIT, ConnectionProperties::default())
            .await
            .expect("RabbitMQ on 127.0.0.1:5672");
        let ch = conn.create_channel().await.unwrap();
        let suffix = uuid::Uuid::now_v7().simple().to_string();
        let exchange = format!("direct-{name}-{suffix}");
        let queue = format!("direct-{name}-q-{suffix}");
        rabbit_topology(&ch, &exchange, &queue, "ankusa.s", FieldTable::default())
            .await
            .unwrap();
        ch.queue_purge(queue.as_str().into(), QueuePurgeOptions::default())
            .await
            .unwrap();
        Brokers {
            _tmp: tmp,
            nats,
            _conn: conn,
            ch,
            exchange,
            queue,
        }
    }

    /// A direct gateway config whose source `s` publishes to both brokers.
    fn config(&self, extra: &str) -> String {
        format!(
            "wal: {{type: none, publish_timeout_ms: 1500, retry_after_s: 3}}\negress: {{allow_loopback: true}}\n{extra}sources:\n  s:\n    dedupe: {{header: x-event-id}}\n    sinks:\n      - type: rabbitmq\n        url: {RABBIT}\n        exchange: {}\n        confirm_timeout_ms: 1000\n      - type: nats\n        servers: [\"{}\"]\n        subject: hooks.s\n        publish_timeout_ms: 1000\n",
            self.exchange,
            self.nats.url(),
        )
    }

    /// Every message in the queue now (taken off it), as `message_id`s.
    async fn drain_rabbit(&self) -> Vec<String> {
        self.drain_rabbit_messages()
            .await
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }

    /// Every message in the queue now (taken off it): `message_id` and the queue message.
    async fn drain_rabbit_messages(&self) -> Vec<(String, Value)> {
        let mut ids = Vec::new();
        while let Some(m) = self
            .ch
            .basic_get(self.queue.as_str().into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            let id = m
                .delivery
                .properties
                .message_id()
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default();
            let msg = serde_json::from_slice(&m.delivery.data).unwrap_or(Value::Null);
            ids.push((id, msg));
        }
        ids
    }

    /// Every hook id in the stream.
    async fn stream_ids(&self) -> Vec<String> {
        let js = async_nats::jetstream::new(async_nats::connect(self.nats.url()).await.unwrap());
        let mut stream = js.get_stream("HOOKS").await.unwrap();
        let last = stream.info().await.unwrap().state.last_sequence;
        let mut ids = Vec::new();
        for seq in 1..=last {
            if let Ok(m) = stream.get_raw_message(seq).await {
                let v: Value = serde_json::from_slice(&m.payload).unwrap();
                ids.push(v["id"].as_str().unwrap_or_default().to_string());
            }
        }
        ids
    }

    async fn teardown(&self) {
        let _ = rabbit_teardown(&self.ch, &self.exchange, &self.queue).await;
    }
}

async fn post(c: &reqwest::Client, g: &Gateway, event: &str, body: &str) -> reqwest::Response {
    c.post(g.url("/webhooks/s"))
        .header("x-event-id", event)
        .body(body.to_string())
        .send()
        .await
        .expect("request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_201_means_both_brokers_hold_the_hook_and_a_broker_down_is_503() {
    let mut b = Brokers::start("ack").await;
    let g = Gateway::start(&b.config("dispatch: {breaker_failures: 0}\n"));
    let c = client();

    // Each 201 is read back from both brokers the instant it arrives.
    let mut first = String::new();
    for i in 0..20 {
        let r = post(&c, &g, &format!("evt-{i}"), &format!("{{\"i\":{i}}}")).await;
        assert_eq!(r.status().as_u16(), 201);
        let body: Value = r.json().await.unwrap();
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["id", "status"], "the body is exactly {{id, status}}");
        assert_eq!(body["status"], "accepted");
        let id = body["id"].as_str().unwrap().to_string();
        assert_eq!(
            b.drain_rabbit().await,
            vec![id.clone()],
            "RabbitMQ holds it"
        );
        assert_eq!(
            b.stream_ids().await.last(),
            Some(&id),
            "the stream holds it"
        );
        if i == 0 {
            first = id;
        }
    }
    assert_eq!(b.stream_ids().await.len(), 20);

    // A provider retry of a confirmed event: 201 with the first id, nothing published again.
    let r = post(&c, &g, "evt-0", "{\"i\":0}").await;
    assert_eq!(r.status().as_u16(), 201);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["id"], first.as_str());
    assert_eq!(body["duplicate"], true);
    assert!(b.drain_rabbit().await.is_empty());
    assert_eq!(b.stream_ids().await.len(), 20);

    // Nothing is stored: the routes over stored hooks say so.
    for path in ["/v1/wal", "/v1/dlq", "/v1/replays"] {
        let r = c.get(g.admin_url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 409, "{path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"], "wal_disabled", "{path}");
    }

    // NATS goes away: 503 + Retry-After within publish_timeout_ms + 1 s, naming no sink;
    // RabbitMQ keeps exactly one copy of each refused request (it was called once).
    b.nats.kill();
    for i in 0..3 {
        let started = Instant::now();
        let r = post(&c, &g, &format!("down-{i}"), "{\"down\":true}").await;
        let took = started.elapsed();
        assert_eq!(r.status().as_u16(), 503);
        assert!(
            took < Duration::from_millis(2500),
            "answered after {took:?}"
        );
        assert_eq!(r.headers()["retry-after"], "3");
        let text = r.text().await.unwrap();
        assert_eq!(text, "{\"error\":\"sink_unavailable\"}");
        assert_eq!(
            b.drain_rabbit().await.len(),
            1,
            "RabbitMQ's copy, exactly one"
        );
    }
    let m = g.metrics(&c).await;
    assert_eq!(
        metric(&m, "ankusa_direct_publishes_total{outcome=\"confirmed\"}"),
        20.0
    );
    assert_eq!(
        metric(&m, "ankusa_direct_publishes_total{outcome=\"duplicate\"}"),
        1.0
    );
    let failed = metric(&m, "ankusa_direct_publishes_total{outcome=\"refused\"}")
        + metric(&m, "ankusa_direct_publishes_total{outcome=\"timeout\"}");
    assert_eq!(failed, 3.0);

    // Back: the provider's retry of a refused event is taken, with the same idempotency key.
    b.nats.spawn();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = post(&c, &g, "down-0", "{\"down\":true}").await;
        if r.status().as_u16() == 201 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "NATS never came back for the gateway"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    b.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_open_breaker_calls_no_sink() {
    let mut b = Brokers::start("breaker").await;
    let g = Gateway::start(&b.config(
        "dispatch: {breaker_failures: 2, breaker_open_ms: 60000, breaker_max_open_ms: 60000}\n",
    ));
    let c = client();
    b.nats.kill();
    for i in 0..2 {
        let r = post(&c, &g, &format!("b-{i}"), "{}").await;
        assert_eq!(r.status().as_u16(), 503);
    }
    assert_eq!(
        b.drain_rabbit().await.len(),
        2,
        "both sinks were called twice"
    );
    // The NATS sink's breaker is open: refused at once, RabbitMQ not called.
    let started = Instant::now();
    let r = post(&c, &g, "b-2", "{}").await;
    assert_eq!(r.status().as_u16(), 503);
    assert!(started.elapsed() < Duration::from_millis(500));
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((50..=60).contains(&wait), "Retry-After {wait}");
    assert!(b.drain_rabbit().await.is_empty(), "no sink is called");
    let m = g.metrics(&c).await;
    assert_eq!(
        metric(
            &m,
            "ankusa_direct_publishes_total{outcome=\"breaker_open\"}"
        ),
        1.0
    );
    b.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_under_load_loses_no_hook_answered_201() {
    let b = Brokers::start("kill").await;
    let mut g = Gateway::start(&b.config("dispatch: {breaker_failures: 0}\n"));
    let url = g.url("/webhooks/s");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut posters = Vec::new();
    for t in 0..4 {
        let (url, stop) = (url.clone(), stop.clone());
        posters.push(tokio::spawn(async move {
            let c = client();
            let mut acked = Vec::new();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let r = c
                    .post(&url)
                    .header("x-event-id", format!("t{t}-{n}"))
                    .body(format!("{{\"t\":{t},\"n\":{n}}}"))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status().as_u16() == 201 => {
                        if let Ok(v) = r.json::<Value>().await {
                            acked.push(v["id"].as_str().unwrap_or_default().to_string());
                        }
                    }
                    // Killed mid-request, or refused: not acked.
                    _ => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
            acked
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    g.kill9();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acked = Vec::new();
    for p in posters {
        acked.extend(p.await.unwrap());
    }
    assert!(
        acked.len() >= 20,
        "only {} hooks acked before the kill",
        acked.len()
    );
    eprintln!("{} hooks acked before kill -9", acked.len());
    let in_rabbit: HashSet<String> = b.drain_rabbit().await.into_iter().collect();
    let in_stream: HashSet<String> = b.stream_ids().await.into_iter().collect();
    let lost_rabbit: Vec<&String> = acked.iter().filter(|id| !in_rabbit.contains(*id)).collect();
    let lost_stream: Vec<&String> = acked.iter().filter(|id| !in_stream.contains(*id)).collect();
    assert!(
        lost_rabbit.is_empty() && lost_stream.is_empty(),
        "{} acked hooks: missing from RabbitMQ {lost_rabbit:?}, from the stream {lost_stream:?}",
        acked.len()
    );
    b.teardown().await;
}

#[tokio::test]
async fn a_source_without_a_durable_sink_is_refused_at_load_and_on_reload() {
    let b = Brokers::start("refuse").await;
    let redis_only = "wal: {type: none}\negress: {allow_loopback: true}\nsources:\n  r:\n    sinks:\n      - type: redis\n        url: redis://127.0.0.1:6379/0\n        channel: direct-test\n";
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.yml");
    std::fs::write(&p, redis_only).unwrap();
    let out = std::process::Command::new(BIN)
        .arg("check-config")
        .arg("--config")
        .arg(&p)
        .env_remove("ANKUSA_CONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains("sources.r.sinks") && err.contains("durable"),
        "{err}"
    );

    // A running direct node refuses a pushed config that brings such a source in, even one
    // written for wal.type disk (wal is pinned to the mode it started with).
    let g = Gateway::start(
        &b.config("admin: {tokens: [{token: t0k3n-direct-admin, scopes: [\"*\"]}]}\n"),
    );
    let c = client();
    let pushed = redis_only.replace("wal: {type: none}\n", "");
    let r = c
        .put(g.admin_url("/v1/config"))
        .bearer_auth("t0k3n-direct-admin")
        .body(pushed)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "invalid_config");
    assert_eq!(v["field"], "sources.r.sinks");
    b.teardown().await;
}

/// A body over the sink's inline limit is checked in before any sink is called: the message
/// carries the claim reference, and the claim redeems the instant the `201` arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_large_body_is_claim_checked_before_the_publish() {
    use sha2::Digest;
    let b = Brokers::start("claim").await;
    let config = b.config("dispatch: {breaker_failures: 0}\n").replace(
        "        confirm_timeout_ms: 1000\n",
        "        confirm_timeout_ms: 1000\n        inline_max_bytes: 4096\n",
    );
    let g = Gateway::start(&config);
    let c = client();
    let body: Vec<u8> = (0..100_000u32)
        .map(|i| b"abcdefghij"[(i % 10) as usize])
        .collect();
    let r = c
        .post(g.url("/webhooks/s"))
        .header("x-event-id", "big-1")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let msgs = b.drain_rabbit_messages().await;
    assert_eq!(msgs.len(), 1);
    let (mid, m) = &msgs[0];
    assert_eq!(mid, &id);
    assert!(m.get("body_base64").is_none_or(Value::is_null), "{m}");
    let sha = hex::encode(sha2::Sha256::digest(&body));
    assert_eq!(m["sha256"], sha.as_str());
    let urn = m["claim"].as_str().expect("a claim reference");
    let rest = urn.strip_prefix("urn:ankusa:claim:v1:").expect("claim urn");
    let (tenant, claim_id) = rest.split_once(':').unwrap();
    let got = c
        .get(format!("http://{}/v1/claims/{tenant}/{claim_id}", g.claims))
        .send()
        .await
        .unwrap();
    assert_eq!(got.status().as_u16(), 200);
    let bytes = got.bytes().await.unwrap();
    assert_eq!(hex::encode(sha2::Sha256::digest(&bytes)), sha);
    // The stream got the same reference (one check-in per hook).
    let js = async_nats::jetstream::new(async_nats::connect(b.nats.url()).await.unwrap());
    let mut stream = js.get_stream("HOOKS").await.unwrap();
    let last = stream.info().await.unwrap().state.last_sequence;
    let raw = stream.get_raw_message(last).await.unwrap();
    let v: Value = serde_json::from_slice(&raw.payload).unwrap();
    assert_eq!(v["claim"], m["claim"]);
    b.teardown().await;
}
