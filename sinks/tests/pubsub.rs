//! Google Pub/Sub sink against the Pub/Sub emulator (127.0.0.1:8085, and a throwaway one for
//! the restart test) over REST. The tests create topics and subscriptions; the sink never does.

mod common;

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ankusa_config::{EgressConfig, GooglePubsubSinkConfig, PubsubAuth, SinkConfig};
use ankusa_core::SinkError;
use ankusa_sinks::SinkBuilder;
use ankusa_sinks::batcher::Item;
use ankusa_sinks::pubsub::{self, PubsubMessage};
use common::*;
use serde_json::{Value, json};

const EMULATOR: &str = "http://127.0.0.1:8085";
const PROJECT: &str = "ankusa-test";

fn http() -> reqwest::Client {
    reqwest::Client::new()
}

/// Creates a topic and a subscription on it.
async fn topic(endpoint: &str, topic: &str) -> String {
    pubsub_topic(endpoint, PROJECT, topic).await
}

/// Pulls (and acks) until `n` messages or `wait` passed; returns the `message` objects.
async fn pull(endpoint: &str, sub: &str, n: usize, wait: Duration) -> Vec<Value> {
    let base = format!("{endpoint}/v1/projects/{PROJECT}/subscriptions/{sub}");
    let end = Instant::now() + wait;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < end {
        let Ok(r) = http()
            .post(format!("{base}:pull"))
            .json(&json!({"maxMessages": 100}))
            .timeout(Duration::from_secs(3))
            .send()
            .await
        else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let v: Value = r.json().await.unwrap_or_default();
        let got = v["receivedMessages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if got.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let acks: Vec<Value> = got.iter().map(|m| m["ackId"].clone()).collect();
        let _ = http()
            .post(format!("{base}:acknowledge"))
            .json(&json!({"ackIds": acks}))
            .send()
            .await;
        out.extend(got.into_iter().map(|m| m["message"].clone()));
    }
    out
}

fn data(m: &Value) -> Vec<u8> {
    pubsub_data(m)
}

fn attr(m: &Value, k: &str) -> Option<String> {
    m["attributes"][k].as_str().map(str::to_string)
}

fn sink_cfg(endpoint: &str, topic: &str) -> GooglePubsubSinkConfig {
    let mut c = GooglePubsubSinkConfig::new(PROJECT, topic);
    c.auth = PubsubAuth::None;
    c.endpoint = Some(endpoint.into());
    c
}

#[tokio::test]
async fn pubsub_end_to_end_every_field() {
    init();
    require("Pub/Sub emulator", 8085);
    let t = format!("hooks-{}", suffix());
    let sub = topic(EMULATOR, &t).await;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::GooglePubsub(sink_cfg(EMULATOR, &t)));
    assert_eq!(sink.type_name(), "google_pubsub");
    let env = hook(br#"{"id":"evt_1"}"#);
    let c = ctx();
    sink.deliver(&env, &c).await.expect("published");
    let msgs = pull(EMULATOR, &sub, 1, Duration::from_secs(10)).await;
    assert_eq!(msgs.len(), 1);
    check_message(&data(&msgs[0]), &env, &c);
    check_attributes(|k| attr(&msgs[0], k), &env, &c);
    assert!(msgs[0].get("orderingKey").is_none_or(|k| k == ""));
    // A static ordering key travels as orderingKey.
    let mut cfg = sink_cfg(EMULATOR, &t);
    cfg.message_ordering_key = Some("stripe".into());
    let sink = build(&builder, SinkConfig::GooglePubsub(cfg));
    sink.deliver(&env, &c).await.unwrap();
    let msgs = pull(EMULATOR, &sub, 1, Duration::from_secs(10)).await;
    assert_eq!(msgs[0]["orderingKey"], "stripe");
}

/// The endpoint obeys the egress policy on connect. By name, the client's resolver refuses a
/// loopback answer (transient, naming the class and the field, nothing sent); as an IP literal
/// it is refused before the request; with `egress.allow_loopback` the name is resolved by the
/// same resolver and the hook is published.
#[tokio::test]
async fn pubsub_egress_checks_the_endpoint_on_connect() {
    init();
    require("Pub/Sub emulator", 8085);
    let t = format!("egress-{}", suffix());
    let sub = topic(EMULATOR, &t).await;
    let builder = SinkBuilder::new();
    let by_name = sink_cfg("http://localhost:8085", &t);
    let sink = build_with(
        &builder,
        SinkConfig::GooglePubsub(by_name.clone()),
        EgressConfig::default(),
    );
    refused_by_name(sink, "(endpoint)", &builder).await;
    let sink = build_with(
        &builder,
        SinkConfig::GooglePubsub(sink_cfg(EMULATOR, &t)),
        EgressConfig::default(),
    );
    assert_transient(
        sink.deliver(&hook(b"x"), &ctx()).await,
        "egress_denied: loopback (endpoint)",
    );
    let sink = build(&builder, SinkConfig::GooglePubsub(by_name));
    let env = hook(br#"{"id":"evt_by_name"}"#);
    sink.deliver(&env, &ctx()).await.expect("published by name");
    // Only that one: nothing was published while refused. (No pull before the publish: an
    // abandoned pull can take the message on the emulator.)
    let msgs = pull(EMULATOR, &sub, 2, Duration::from_secs(5)).await;
    assert_eq!(msgs.len(), 1);
    check_message(&data(&msgs[0]), &env, &ctx());
}

#[tokio::test]
async fn pubsub_missing_topic_is_permanent_config() {
    init();
    require("Pub/Sub emulator", 8085);
    let builder = SinkBuilder::new();
    let t = format!("missing-{}", suffix());
    let sink = build(&builder, SinkConfig::GooglePubsub(sink_cfg(EMULATOR, &t)));
    assert_config(sink.deliver(&hook(b"x"), &ctx()).await, "NOT_FOUND");
    let mut cfg = sink_cfg(EMULATOR, &t);
    cfg.batch = false;
    let sink = build(&builder, SinkConfig::GooglePubsub(cfg));
    assert_config(sink.deliver(&hook(b"x"), &ctx()).await, "NOT_FOUND");
}

#[tokio::test]
async fn pubsub_oversized_never_sent_and_claims() {
    init();
    require("Pub/Sub emulator", 8085);
    let t = format!("big-{}", suffix());
    let sub = topic(EMULATOR, &t).await;
    let builder = SinkBuilder::new();
    let mut cfg = sink_cfg(EMULATOR, &t);
    cfg.max_message_bytes = 100_000;
    cfg.inline_max_bytes = 1_000_000;
    let sink = build(&builder, SinkConfig::GooglePubsub(cfg));
    let env = hook(&vec![b'p'; 150_000]);
    let mut c = ctx();
    c.claim_check = Some(check_in_for(&env));
    assert_permanent(sink.deliver(&env, &c).await, "message_too_large");
    assert_eq!(
        builder.pubsub_stats.requests.load(Ordering::Relaxed),
        0,
        "no request"
    );
    let sink = build(&builder, SinkConfig::GooglePubsub(sink_cfg(EMULATOR, &t)));
    let env = hook(&vec![b'p'; 100_000]);
    assert_transient(sink.deliver(&env, &ctx()).await, "claim check unavailable");
    let mut c = ctx();
    c.claim_check = Some(check_in_for(&env));
    sink.deliver(&env, &c).await.expect("claim published");
    let msgs = pull(EMULATOR, &sub, 1, Duration::from_secs(10)).await;
    let d = data(&msgs[0]);
    assert!(d.len() < 4000);
    check_message(&d, &env, &c);
}

#[tokio::test]
async fn pubsub_batches_settle_each_message() {
    init();
    require("Pub/Sub emulator", 8085);
    let t = format!("batch-{}", suffix());
    let sub = topic(EMULATOR, &t).await;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::GooglePubsub(sink_cfg(EMULATOR, &t)));
    let envs: Vec<_> = (0..40)
        .map(|i| {
            let mut e = hook(format!("{{\"n\":{i}}}").as_bytes());
            e.tenant = ["t1", "t2"][i % 2].into();
            e
        })
        .collect();
    let c = ctx();
    let results = futures::future::join_all(envs.iter().map(|e| sink.deliver(e, &c))).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let requests = builder.pubsub_stats.requests.load(Ordering::Relaxed);
    assert!(requests <= 3, "40 messages in {requests} requests");
    let msgs = pull(EMULATOR, &sub, 40, Duration::from_secs(15)).await;
    let by_id: HashMap<String, Value> = msgs
        .iter()
        .map(|m| (attr(m, "ankusa_id").unwrap(), m.clone()))
        .collect();
    assert_eq!(by_id.len(), 40);
    for e in &envs {
        check_message(&data(&by_id[&e.id.to_string()]), e, &c);
    }
}

fn item(data: &[u8], attempt: u32) -> Item<PubsubMessage> {
    Item {
        payload: PubsubMessage::new(data.to_vec(), vec![], None),
        attempt,
    }
}

/// The emulator answers INVALID_ARGUMENT for a batch holding an empty message: the batch is
/// bisected, the empty one alone is permanent, every other message is published in order.
#[tokio::test]
async fn pubsub_bisects_an_invalid_argument_batch() {
    init();
    require("Pub/Sub emulator", 8085);
    let t = format!("bisect-{}", suffix());
    let sub = topic(EMULATOR, &t).await;
    let stats = Arc::new(ankusa_sinks::batcher::BatchStats::default());
    let client = pubsub::client(&sink_cfg(EMULATOR, &t), http(), stats.clone());
    let items: Vec<_> = (0..9)
        .map(|i| {
            if i == 5 {
                item(b"", 1)
            } else {
                item(format!("m{i}").as_bytes(), 1)
            }
        })
        .collect();
    let results = client.publish_batch(&items).await;
    for (i, r) in results.iter().enumerate() {
        if i == 5 {
            assert!(
                matches!(r, Err(SinkError::Permanent(m)) if m.contains("INVALID_ARGUMENT")),
                "{r:?}"
            );
        } else {
            assert!(r.is_ok(), "{i}: {r:?}");
        }
    }
    let splits = stats.bisections.load(Ordering::Relaxed);
    assert!(splits <= pubsub::split_budget(9) as u64, "{splits} splits");
    assert_eq!(splits, 3, "9 → [0,4) ok + [4,9) → [4,6) → [5,6) alone");
    let msgs = pull(EMULATOR, &sub, 8, Duration::from_secs(10)).await;
    let got: Vec<String> = msgs
        .iter()
        .map(|m| String::from_utf8(data(m)).unwrap())
        .collect();
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(sorted, ["m0", "m1", "m2", "m3", "m4", "m6", "m7", "m8"]);

    // Sixteen bad messages need 15 splits; the budget is 2·(4+1) = 10, so some are left
    // unresolved as transient batch_rejected, and nothing is sent.
    let stats = Arc::new(ankusa_sinks::batcher::BatchStats::default());
    let client = pubsub::client(&sink_cfg(EMULATOR, &t), http(), stats.clone());
    let items: Vec<_> = (0..16).map(|_| item(b"", 1)).collect();
    let results = client.publish_batch(&items).await;
    assert_eq!(stats.bisections.load(Ordering::Relaxed), 10);
    let rejected = results
        .iter()
        .filter(|r| matches!(r, Err(SinkError::Transient(m)) if m.starts_with("batch_rejected")))
        .count();
    let permanent = results
        .iter()
        .filter(|r| matches!(r, Err(SinkError::Permanent(_))))
        .count();
    assert!(rejected > 0 && rejected + permanent == 16, "{results:?}");
}

/// The emulator keeps nothing across a restart, so the restart is staged like the SQS one:
/// deliveries held while the consumer drains what was acknowledged, the emulator SIGKILLed,
/// deliveries failing against it, a new emulator with the topic recreated before they resume.
#[tokio::test]
async fn pubsub_restart_loses_no_hook() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let path = dir.path().to_path_buf();
    let server = Restartable::start(port, Duration::from_secs(60), move || {
        Owned::spawn(
            "pubsub",
            &path,
            Command::new(
                "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator",
            )
            .args(["--host=127.0.0.1", &format!("--port={port}")]),
        )
    })
    .await;
    let sub = topic(&endpoint, "restart").await;
    let received = Ids::default();
    let consumer = {
        let (endpoint, sub) = (endpoint.clone(), sub.clone());
        collect_ids(received.clone(), move || {
            let (endpoint, sub) = (endpoint.clone(), sub.clone());
            async move {
                let msgs = pull(&endpoint, &sub, 1, Duration::from_millis(300)).await;
                msgs.iter().filter_map(|m| attr(m, "ankusa_id")).collect()
            }
        })
    };
    let builder = SinkBuilder::new();
    let mut cfg = sink_cfg(&endpoint, "restart");
    cfg.timeout_ms = 1_000;
    let sink = build(&builder, SinkConfig::GooglePubsub(cfg));
    let gate = Gate::default();
    let recreate = async move {
        // The emulator answers on its port slightly before it serves requests.
        let deadline = Instant::now() + Duration::from_secs(30);
        while http().get(&endpoint).send().await.is_err() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        topic(&endpoint, "restart").await;
    };
    let run = deliver_through_restart(
        sink,
        40,
        Duration::from_millis(20),
        Duration::from_secs(150),
        gate.clone(),
        server.crash_emulator(gate, received.clone(), recreate),
    )
    .await;
    run.all_received("pubsub restart", &received).await;
    consumer.abort();
}
