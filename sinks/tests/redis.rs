//! Redis pub/sub sink against a real redis-server (127.0.0.1:6379, and a throwaway one for
//! the restart test).

mod common;

use std::collections::HashSet;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ankusa_config::{EgressConfig, RedisSinkConfig, SinkConfig};
use ankusa_sinks::SinkBuilder;
use common::*;
use futures::StreamExt;

const URL: &str = "redis://127.0.0.1:6379/0";

/// Payloads a subscriber received, in order.
type Received = Arc<Mutex<Vec<Vec<u8>>>>;

/// Subscribes to `channel` and forwards every payload; resubscribes after a disconnect.
fn subscriber(url: String, channel: String) -> (Received, tokio::task::JoinHandle<()>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    let task = tokio::spawn(async move {
        loop {
            let attempt = async {
                let client = redis::Client::open(url.as_str())?;
                let mut ps = client.get_async_pubsub().await?;
                ps.subscribe(&channel).await?;
                let mut stream = ps.on_message();
                while let Some(m) = stream.next().await {
                    sink.lock().unwrap().push(m.get_payload_bytes().to_vec());
                }
                Ok::<(), redis::RedisError>(())
            };
            let _ = attempt.await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    (got, task)
}

async fn wait_subscribed(url: &str, channel: &str) {
    let client = redis::Client::open(url).unwrap();
    for _ in 0..100 {
        if let Ok(mut c) = client.get_multiplexed_async_connection().await {
            let n: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(channel)
                .query_async(&mut c)
                .await
                .unwrap_or_default();
            if n.first().is_some_and(|(_, k)| *k > 0) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("subscriber never subscribed to {channel}");
}

#[tokio::test]
async fn redis_end_to_end_every_field() {
    init();
    require("Redis", 6379);
    let channel = format!("ankusa.test.{}", suffix());
    let (got, task) = subscriber(URL.into(), channel.clone());
    wait_subscribed(URL, &channel).await;
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Redis(RedisSinkConfig::new(URL, &channel)),
    );
    assert!(!sink.durable(), "pub/sub keeps no copy");
    assert_eq!(sink.type_name(), "redis");
    let env = hook(br#"{"id":"evt_1","type":"invoice.paid"}"#);
    let mut c = ctx();
    sink.deliver(&env, &c).await.expect("delivered");
    // A replay carries its replay id.
    c.replay_id = Some("0192f1c0-aaaa-7000-8000-000000000001".into());
    sink.deliver(&env, &c).await.expect("replay delivered");
    for _ in 0..100 {
        if got.lock().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let msgs = got.lock().unwrap().clone();
    assert_eq!(msgs.len(), 2);
    check_message(&msgs[0], &env, &ctx());
    check_message(&msgs[1], &env, &c);
    task.abort();
}

/// `localhost` is a name, so config validation lets it through; it resolves to loopback,
/// which the default egress policy refuses on connect: a transient refusal naming the class and
/// the field, nothing dialed. With `egress.allow_loopback` the same sink delivers.
#[tokio::test]
async fn redis_egress_refuses_a_loopback_name_unless_allowed() {
    init();
    require("Redis", 6379);
    let channel = format!("ankusa.egress.{}", suffix());
    let cfg = SinkConfig::Redis(RedisSinkConfig::new("redis://localhost:6379/0", &channel));
    let builder = SinkBuilder::new();
    let sink = build_with(&builder, cfg.clone(), EgressConfig::default());
    refused_by_name(sink, "(url)", &builder).await;

    let (got, task) = subscriber(URL.into(), channel.clone());
    wait_subscribed(URL, &channel).await;
    let allowed = SinkBuilder::new();
    let sink = build(&allowed, cfg);
    let env = hook(br#"{"id":"evt_by_name"}"#);
    sink.deliver(&env, &ctx())
        .await
        .expect("delivered by name with allow_loopback");
    for _ in 0..100 {
        if !got.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let msgs = got.lock().unwrap().clone();
    assert_eq!(msgs.len(), 1);
    check_message(&msgs[0], &env, &ctx());
    task.abort();
}

#[tokio::test]
async fn redis_no_subscribers_is_transient() {
    init();
    require("Redis", 6379);
    let builder = SinkBuilder::new();
    let channel = format!("ankusa.nobody.{}", suffix());
    let sink = build(
        &builder,
        SinkConfig::Redis(RedisSinkConfig::new(URL, channel)),
    );
    assert_transient(sink.deliver(&hook(b"x"), &ctx()).await, "no_subscribers");
}

#[tokio::test]
async fn redis_claim_over_inline_limit() {
    init();
    require("Redis", 6379);
    let channel = format!("ankusa.claim_check.{}", suffix());
    let (got, task) = subscriber(URL.into(), channel.clone());
    wait_subscribed(URL, &channel).await;
    let builder = SinkBuilder::new();
    let mut cfg = RedisSinkConfig::new(URL, &channel);
    cfg.inline_max_bytes = 1024;
    let sink = build(&builder, SinkConfig::Redis(cfg));
    assert_eq!(sink.inline_max_bytes(), Some(1024));
    let env = hook(&vec![b'z'; 5000]);
    // Without a claim: never inline over the limit.
    assert_transient(sink.deliver(&env, &ctx()).await, "claim check unavailable");
    let mut c = ctx();
    c.claim_check = Some(check_in_for(&env));
    sink.deliver(&env, &c).await.expect("claim delivered");
    for _ in 0..100 {
        if !got.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let msgs = got.lock().unwrap().clone();
    assert_eq!(msgs.len(), 1, "only the claim message was published");
    let v = check_message(&msgs[0], &env, &c);
    assert!(
        msgs[0].len() < 2000,
        "no inline bytes: {} bytes",
        msgs[0].len()
    );
    assert!(
        v["claim"]
            .as_str()
            .unwrap()
            .starts_with("urn:ankusa:claim:v1:acme:")
    );
    task.abort();
}

#[tokio::test]
async fn redis_refused_connection_is_transient_and_hides_the_password() {
    init();
    let port = free_port();
    let builder = SinkBuilder::new();
    let url = format!("redis://:hunter2-secret@127.0.0.1:{port}/0");
    let sink = build(&builder, SinkConfig::Redis(RedisSinkConfig::new(url, "c")));
    match sink.deliver(&hook(b"x"), &ctx()).await {
        Err(ankusa_core::SinkError::Transient(m)) => {
            assert!(m.starts_with("not_connected"), "{m}");
            assert!(!m.contains("hunter2"), "{m}");
        }
        other => panic!("{other:?}"),
    }
}

/// The broker is killed (SIGKILL) and restarted while hooks flow; each failed delivery is
/// retried like dispatch would; every hook must reach the subscriber at least once.
#[tokio::test]
async fn redis_restart_loses_no_hook() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let path = dir.path().to_path_buf();
    let server = Restartable::start(port, Duration::from_secs(10), move || {
        Owned::spawn(
            "redis",
            &path,
            Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&path),
        )
    })
    .await;
    let url = format!("redis://127.0.0.1:{port}/0");
    let channel = format!("ankusa.restart.{}", suffix());
    let (got, task) = subscriber(url.clone(), channel.clone());
    wait_subscribed(&url, &channel).await;
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Redis(RedisSinkConfig::new(&url, &channel)),
    );
    let run = deliver_through_restart(
        sink,
        60,
        Duration::from_millis(20),
        Duration::from_secs(60),
        Gate::default(),
        server.crash(Duration::from_millis(400), Duration::from_millis(700)),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let received: HashSet<String> = got.lock().unwrap().iter().map(|m| message_id(m)).collect();
    run.none_lost("redis restart", &received);
    task.abort();
}

/// Sinks rebuilt from the same config (a reload) share one connection; it closes after
/// `idle_timeout_ms` with nothing in flight, and the next delivery opens a new one.
#[tokio::test]
async fn redis_connection_is_shared_and_closed_when_idle() {
    init();
    require("Redis", 6379);
    let channel = format!("ankusa.idle.{}", suffix());
    let (_got, task) = subscriber(URL.into(), channel.clone());
    wait_subscribed(URL, &channel).await;
    let builder = SinkBuilder::new();
    let mut cfg = RedisSinkConfig::new(URL, &channel);
    cfg.idle_timeout_ms = 200;
    let a = build(&builder, SinkConfig::Redis(cfg.clone()));
    assert_eq!(
        builder.open_connections(),
        0,
        "nothing dials before the first delivery"
    );
    a.deliver(&hook(b"1"), &ctx()).await.unwrap();
    let b = build(&builder, SinkConfig::Redis(cfg));
    drop(a);
    b.deliver(&hook(b"2"), &ctx()).await.unwrap();
    assert_eq!(
        builder.open_connections(),
        1,
        "one connection for both sinks"
    );
    builder.reap_idle();
    assert_eq!(builder.open_connections(), 1, "not idle yet");
    tokio::time::sleep(Duration::from_millis(300)).await;
    builder.reap_idle();
    assert_eq!(builder.open_connections(), 0, "closed when idle");
    b.deliver(&hook(b"3"), &ctx()).await.unwrap();
    assert_eq!(
        builder.open_connections(),
        1,
        "reopened on the next delivery"
    );
    task.abort();
}

/// The connection goes to the address the policy checked: the server is named by a name that
/// exists in no DNS, answered 127.0.0.1 by the policy's resolver; the publish reaches it (no
/// subscriber: `no_subscribers`).
#[tokio::test]
async fn redis_dials_the_address_it_checked() {
    init();
    require("Redis", 6379);
    let builder = builder_resolving_to("127.0.0.1");
    let channel = format!("ankusa.checked.{}", suffix());
    let sink = build(
        &builder,
        SinkConfig::Redis(RedisSinkConfig::new(
            "redis://redis.ankusa.invalid:6379/0",
            &channel,
        )),
    );
    assert_transient(sink.deliver(&hook(b"x"), &ctx()).await, "no_subscribers");
}
