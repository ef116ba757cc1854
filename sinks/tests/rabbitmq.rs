//! RabbitMQ sink against a real broker (127.0.0.1:5672, guest/guest), and for the restart test
//! a second RabbitMQ node the test owns (own node name, ports and data dir), SIGKILLed and
//! started again on the same data dir.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use ankusa_config::{EgressConfig, RabbitmqSinkConfig, SinkConfig};
use ankusa_core::SinkError;
use ankusa_sinks::SinkBuilder;
use ankusa_testkit::brokers::{rabbit_teardown, rabbit_topology};
use common::*;
use lapin::options::{BasicGetOptions, ExchangeDeleteOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties};

const URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

async fn channel(url: &str) -> (Connection, Channel) {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .expect("connect to RabbitMQ");
    let ch = conn.create_channel().await.expect("channel");
    (conn, ch)
}

/// Declares the exchange as the sink does and binds a queue to `routing_key`.
async fn topology(ch: &Channel, exchange: &str, queue: &str, routing_key: &str, args: FieldTable) {
    rabbit_topology(ch, exchange, queue, routing_key, args)
        .await
        .expect("declare the exchange and the queue");
}

/// Deletes the test's queue and exchange.
async fn teardown(ch: &Channel, exchange: &str, queue: &str) {
    rabbit_teardown(ch, exchange, queue)
        .await
        .expect("delete the queue and the exchange");
}

async fn get(ch: &Channel, queue: &str) -> Option<lapin::message::BasicGetMessage> {
    ch.basic_get(queue.into(), BasicGetOptions { no_ack: true })
        .await
        .expect("basic.get")
}

fn header(t: &FieldTable, k: &str) -> Option<String> {
    match t.inner().get(k) {
        Some(AMQPValue::LongString(s)) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        Some(other) => panic!("{k} is {other:?}"),
        None => None,
    }
}

/// `localhost` resolves to loopback, refused on connect by the default egress policy: a
/// transient refusal naming the class and the field (the URL's password never shown), nothing
/// dialed. (Every other test here delivers with `egress.allow_loopback`.)
#[tokio::test]
async fn rabbitmq_egress_refuses_a_loopback_name() {
    init();
    let builder = SinkBuilder::new();
    let cfg = RabbitmqSinkConfig::new(
        "amqp://guest:egress-pw@localhost:5672/%2f",
        format!("ankusa.egress.{}", suffix()),
    );
    let sink = build_with(&builder, SinkConfig::Rabbitmq(cfg), EgressConfig::default());
    refused_by_name(sink, "(url)", &builder).await;
}

#[tokio::test]
async fn rabbitmq_end_to_end_every_field() {
    init();
    require("RabbitMQ", 5672);
    let sfx = suffix();
    let exchange = format!("ankusa.test.{sfx}");
    let queue = format!("ankusa.q.{sfx}");
    let (_conn, ch) = channel(URL).await;
    topology(
        &ch,
        &exchange,
        &queue,
        "ankusa.stripe",
        FieldTable::default(),
    )
    .await;
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(URL, &exchange)),
    );
    let env = hook(br#"{"id":"evt_1"}"#);
    let c = ctx();
    sink.deliver(&env, &c).await.expect("confirmed");
    let m = get(&ch, &queue)
        .await
        .expect("a message in the bound queue");
    check_message(&m.delivery.data, &env, &c);
    let p = &m.delivery.properties;
    assert_eq!(
        p.message_id().as_ref().map(|s| s.as_str().to_string()),
        Some(env.id.to_string())
    );
    assert_eq!(*p.delivery_mode(), Some(2), "persistent");
    assert_eq!(
        p.content_type().as_ref().map(|s| s.as_str()),
        Some("application/json")
    );
    assert_eq!(m.delivery.routing_key.as_str(), "ankusa.stripe");
    let headers = p.headers().clone().expect("headers");
    check_attributes(|k| header(&headers, k), &env, &c);
    teardown(&ch, &exchange, &queue).await;
}

#[tokio::test]
async fn rabbitmq_unroutable_then_deleted_exchange() {
    init();
    require("RabbitMQ", 5672);
    let exchange = format!("ankusa.unroutable.{}", suffix());
    let builder = SinkBuilder::new();
    let mut cfg = RabbitmqSinkConfig::new(URL, &exchange);
    cfg.routing_key = Some("static.key".into());
    let sink = build(&builder, SinkConfig::Rabbitmq(cfg));
    // No queue bound: the mandatory publish comes back.
    assert_transient(
        sink.deliver(&hook(b"x"), &ctx()).await,
        "unroutable: static.key",
    );
    // The exchange deleted under the sink: the broker closes the channel (404).
    let (_conn, ch) = channel(URL).await;
    ch.exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
        .await
        .unwrap();
    assert_transient(sink.deliver(&hook(b"x"), &ctx()).await, "channel_closed");
    // The next delivery reopens the channel and re-declares the exchange.
    assert_transient(sink.deliver(&hook(b"x"), &ctx()).await, "unroutable");
    ch.exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn rabbitmq_nack_from_a_full_queue() {
    init();
    require("RabbitMQ", 5672);
    let sfx = suffix();
    let exchange = format!("ankusa.nack.{sfx}");
    let queue = format!("ankusa.nackq.{sfx}");
    let (_conn, ch) = channel(URL).await;
    let mut args = FieldTable::default();
    args.insert("x-max-length".into(), AMQPValue::LongInt(1));
    args.insert(
        "x-overflow".into(),
        AMQPValue::LongString("reject-publish".into()),
    );
    topology(&ch, &exchange, &queue, "#", args).await;
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(URL, &exchange)),
    );
    sink.deliver(&hook(b"1"), &ctx()).await.expect("first fits");
    assert_transient(sink.deliver(&hook(b"2"), &ctx()).await, "nacked");
    teardown(&ch, &exchange, &queue).await;
}

#[tokio::test]
async fn rabbitmq_busy_past_max_inflight_and_claims() {
    init();
    require("RabbitMQ", 5672);
    let sfx = suffix();
    let exchange = format!("ankusa.busy.{sfx}");
    let queue = format!("ankusa.busyq.{sfx}");
    let (_conn, ch) = channel(URL).await;
    topology(&ch, &exchange, &queue, "#", FieldTable::default()).await;
    let builder = SinkBuilder::new();
    let mut cfg = RabbitmqSinkConfig::new(URL, &exchange);
    cfg.max_inflight = 1;
    let sink = build(&builder, SinkConfig::Rabbitmq(cfg));
    sink.deliver(&hook(b"warm"), &ctx()).await.unwrap();
    let envs: Vec<_> = (0..20).map(|i| hook(format!("{i}").as_bytes())).collect();
    let c = ctx();
    let results = futures::future::join_all(envs.iter().map(|e| sink.deliver(e, &c))).await;
    let busy = results
        .iter()
        .filter(|r| matches!(r, Err(SinkError::Transient(m)) if m.starts_with("busy")))
        .count();
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert!(busy > 0, "{results:?}");
    assert_eq!(busy + ok, 20, "{results:?}");
    // A body over the inline limit goes as a claim, never inline.
    let big = hook(&vec![b'b'; 100_000]);
    assert_transient(sink.deliver(&big, &ctx()).await, "claim check unavailable");
    let mut cc = ctx();
    cc.claim_check = Some(check_in_for(&big));
    sink.deliver(&big, &cc).await.expect("claim confirmed");
    let mut last = None;
    while let Some(m) = get(&ch, &queue).await {
        last = Some(m);
    }
    let m = last.expect("messages");
    assert!(m.delivery.data.len() < 4000);
    check_message(&m.delivery.data, &big, &cc);
    teardown(&ch, &exchange, &queue).await;
}

#[tokio::test]
async fn rabbitmq_refused_connection_hides_the_password() {
    init();
    let port = free_port();
    let builder = SinkBuilder::new();
    let url = format!("amqp://guest:s3cret-pw@127.0.0.1:{port}/%2f");
    let sink = build(
        &builder,
        SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(url, "ex")),
    );
    match sink.deliver(&hook(b"x"), &ctx()).await {
        Err(SinkError::Transient(m)) => {
            assert!(m.starts_with("not_connected"), "{m}");
            assert!(!m.contains("s3cret"), "{m}");
        }
        other => panic!("{other:?}"),
    }
}

/// The node is SIGKILLed and started again on its data dir while hooks flow: every confirmed
/// hook is in the durable queue afterwards, and some attempts failed in between.
#[tokio::test]
async fn rabbitmq_restart_loses_no_hook() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let amqp = free_port();
    let dist = free_port();
    let node = format!("ankusa-test-{}@localhost", suffix());
    let path = dir.path().to_path_buf();
    let server = Restartable::start(amqp, Duration::from_secs(90), move || {
        rabbit_node(&path, &node, amqp, dist)
    })
    .await;
    let url = format!("amqp://guest:guest@127.0.0.1:{amqp}/%2f");
    {
        let (conn, ch) = channel(&url).await;
        topology(
            &ch,
            "ankusa.restart",
            "ankusa.restart.q",
            "#",
            FieldTable::default(),
        )
        .await;
        let _ = conn.close(200, "ok".into()).await;
    }
    let builder = SinkBuilder::new();
    let mut cfg = RabbitmqSinkConfig::new(&url, "ankusa.restart");
    cfg.retry_ms = 200;
    let sink = build(&builder, SinkConfig::Rabbitmq(cfg));
    let run = deliver_through_restart(
        sink,
        40,
        Duration::from_millis(25),
        Duration::from_secs(150),
        Gate::default(),
        server.crash(Duration::from_millis(500), Duration::from_millis(500)),
    )
    .await;
    let (_conn, ch) = channel(&url).await;
    let mut ids = HashSet::new();
    while let Some(m) = get(&ch, "ankusa.restart.q").await {
        ids.insert(message_id(&m.delivery.data));
    }
    run.none_lost("rabbitmq restart", &ids);
    server.kill();
}

/// Every dial goes to the address the policy checked: the broker is named by a name that
/// exists in no DNS, which the policy's resolver answers with 127.0.0.1; lapin is never asked
/// to resolve it, so the publish reaches the broker (it comes back unroutable: no queue).
#[tokio::test]
async fn rabbitmq_dials_the_address_it_checked() {
    init();
    require("RabbitMQ", 5672);
    let builder = builder_resolving_to("127.0.0.1");
    let exchange = format!("ankusa.checked.{}", suffix());
    let url = "amqp://guest:guest@rabbit.ankusa.invalid:5672/%2f";
    let mut cfg = RabbitmqSinkConfig::new(url, &exchange);
    cfg.routing_key = Some("nobody.listens".into());
    let sink = build(&builder, SinkConfig::Rabbitmq(cfg));
    assert_transient(
        sink.deliver(&hook(b"x"), &ctx()).await,
        "unroutable: nobody.listens",
    );
    let (_conn, ch) = channel(URL).await;
    ch.exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
        .await
        .unwrap();
}

/// The broker refuses a wrong password: the error names the step and the AMQP reply code, and
/// nothing of the password or of the broker's reply text.
#[tokio::test]
async fn rabbitmq_a_refused_login_is_a_class_word() {
    init();
    require("RabbitMQ", 5672);
    let builder = SinkBuilder::new();
    let url = "amqp://guest:planted-wrong-pw-1@127.0.0.1:5672/%2f";
    let sink = build(
        &builder,
        SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(url, "ankusa.login")),
    );
    let m = fails_with(
        &sink,
        &hook(b"x"),
        &["not_connected: auth: ACCESS-REFUSED (403)"],
    )
    .await;
    assert!(!m.contains("planted"), "{m}");
    // RabbitMQ's reply text ("Login was refused using authentication mechanism PLAIN ...").
    assert!(!m.contains("Login was refused"), "{m}");
}
