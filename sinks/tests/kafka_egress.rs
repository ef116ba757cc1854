//! The Kafka connect guard against a broker of the test's own (support/kafka_responder.rs):
//! a cluster that advertises, in a later metadata answer, a broker at an address the egress
//! policy refuses is never connected to there: a counting listener on that address sees no
//! connection. The same cluster under a policy that allows the address is connected to (so the
//! scenario does make librdkafka follow the advertised broker). Also: the intake log's producer
//! is guarded the same way, and a token librdkafka would quote into its error never reaches
//! the sink's error.

mod common;

#[path = "support/kafka_responder.rs"]
mod kafka_responder;

use std::time::{Duration, Instant};

use ankusa_config::{
    EgressConfig, KafkaSasl, KafkaSaslMechanism, KafkaSecurityProtocol, KafkaSinkConfig, SinkConfig,
};
use ankusa_core::SinkError;
use ankusa_sinks::SinkBuilder;
use common::*;
use kafka_responder::Responder;

/// Under `egress`, one delivery through a sink whose bootstrap broker is `responder`; waits
/// until the responder has seen a Produce and `settle` has passed, then returns the outcome.
async fn deliver_once(responder: &Responder, topic: &str, egress: EgressConfig) -> SinkError {
    let mut cfg = KafkaSinkConfig::new(vec![format!("127.0.0.1:{}", responder.port)], topic);
    // Long enough for librdkafka to take the NOT_LEADER answer, refresh metadata and try the
    // broker advertised then (its reconnect backoff starts at 100 ms).
    cfg.produce_timeout_ms = 4_000;
    let builder = SinkBuilder::new();
    let sink = build_with(&builder, SinkConfig::Kafka(cfg), egress);
    match sink.deliver(&hook(b"{}"), &ctx()).await {
        Err(e) => e,
        Ok(()) => panic!("the responder acknowledges no record: the delivery cannot succeed"),
    }
}

fn only_127_0_0_1() -> EgressConfig {
    EgressConfig {
        allow_cidrs: vec!["127.0.0.1/32".into()],
        ..EgressConfig::default()
    }
}

#[tokio::test]
async fn kafka_a_broker_advertised_later_at_a_refused_address_is_never_connected_to() {
    init();
    let topic = format!("hooks-{}", suffix());
    // 127.0.0.2 is loopback: refused, since the policy allows 127.0.0.1 alone.
    let refused = Counter::start("127.0.0.2").await;
    let responder = Responder::start(&topic, ("127.0.0.2", refused.port)).await;
    let before = refused_loopback();
    let started = Instant::now();
    let e = deliver_once(&responder, &topic, only_127_0_0_1()).await;
    assert!(
        responder.produced(),
        "the first metadata answer (127.0.0.1 only) passed and a record was sent"
    );
    assert!(
        responder.metadata_requests() >= 2,
        "metadata was asked again"
    );
    assert_eq!(
        refused.connections(),
        0,
        "librdkafka connected to the refused address"
    );
    let m = match &e {
        SinkError::Transient(m) => m.clone(),
        other => panic!("expected a transient failure, got {other:?}"),
    };
    assert!(
        m.contains("egress_denied: loopback (a broker librdkafka connects to)"),
        "{m}"
    );
    assert!(!m.contains("127.0.0.2"), "the error names no address: {m}");
    assert!(
        refused_loopback() > before,
        "the refused connect was counted"
    );
    eprintln!("refused as expected after {:?}: {m}", started.elapsed());
}

/// The control: the same cluster, the advertised address allowed: librdkafka does connect to
/// it (so the test above shows the guard, not a scenario that never reaches the address).
#[tokio::test]
async fn kafka_a_broker_advertised_later_is_connected_to_when_the_policy_allows_it() {
    init();
    let topic = format!("hooks-{}", suffix());
    let allowed = Counter::start("127.0.0.2").await;
    let responder = Responder::start(&topic, ("127.0.0.2", allowed.port)).await;
    let egress = EgressConfig {
        allow_cidrs: vec!["127.0.0.0/8".into()],
        ..EgressConfig::default()
    };
    let e = deliver_once(&responder, &topic, egress).await;
    assert!(responder.produced());
    assert!(matches!(e, SinkError::Transient(_)), "{e:?}");
    assert!(
        allowed.connections() >= 1,
        "librdkafka never tried the advertised broker: {e:?}"
    );
}

fn refused_loopback() -> u64 {
    ankusa_sinks::kafka::refused_connects()
        .into_iter()
        .find(|(c, _)| *c == "loopback")
        .map(|(_, n)| n)
        .unwrap_or(0)
}

fn refused_link_local() -> u64 {
    ankusa_sinks::kafka::refused_connects()
        .into_iter()
        .find(|(c, _)| *c == "link_local")
        .map(|(_, n)| n)
        .unwrap_or(0)
}

/// The intake log's producer (`wal.type: dual`) is guarded too, under the intake policy:
/// loopback passes (the responder), a link-local broker advertised later (the cloud metadata
/// address) does not.
#[tokio::test]
async fn kafka_intake_producer_is_guarded() {
    use rdkafka::producer::FutureRecord;
    init();
    let topic = format!("intake-{}", suffix());
    let responder = Responder::start(&topic, ("169.254.169.254", 9092)).await;
    let cfg = KafkaSinkConfig::new(vec![format!("127.0.0.1:{}", responder.port)], &topic);
    let mut client =
        ankusa_sinks::kafka::intake_client_config(&cfg, "intake.kafka").expect("settings");
    client.set("message.timeout.ms", "4000");
    // The responder offers no InitProducerId, which an idempotent producer waits for.
    client.set("enable.idempotence", "false");
    let producer = ankusa_sinks::kafka::intake_producer(&client).expect("producer");
    let before = refused_link_local();
    let sent = producer
        .send(
            FutureRecord::to(&topic).key("node-0").payload("x"),
            Duration::from_secs(0),
        )
        .await;
    assert!(sent.is_err(), "nothing acknowledges the record");
    assert!(responder.produced());
    assert_eq!(
        producer.guard().last_refusal().map(|d| d.as_str()),
        Some("link_local"),
        "the advertised link-local broker was refused"
    );
    assert!(refused_link_local() > before);
}

/// A token librdkafka would refuse (a control character): librdkafka's refusal quotes up to
/// 512 bytes of the token into its error; the sink refuses it first, naming the setting, and
/// no part of the token reaches the delivery error.
#[tokio::test]
async fn kafka_a_refused_oauthbearer_token_is_never_quoted() {
    init();
    let topic = format!("hooks-{}", suffix());
    let responder = Responder::start(&topic, ("127.0.0.2", 9)).await;
    let token = format!("planted-secret-{}\u{1}", "t".repeat(600));
    let mut cfg = KafkaSinkConfig::new(vec![format!("127.0.0.1:{}", responder.port)], &topic);
    cfg.security_protocol = Some(KafkaSecurityProtocol::SaslPlaintext);
    cfg.sasl = Some(KafkaSasl {
        mechanism: KafkaSaslMechanism::Oauthbearer,
        username: Default::default(),
        password: Default::default(),
        token: Some(token.clone().into()),
        token_file: None,
    });
    cfg.produce_timeout_ms = 3_000;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::Kafka(cfg));
    let m = match sink.deliver(&hook(b"{}"), &ctx()).await {
        Err(SinkError::Transient(m)) => m,
        other => panic!("expected a transient failure, got {other:?}"),
    };
    assert!(!m.contains("planted") && !m.contains("tttt"), "{m}");
    assert!(m.contains("not_connected"), "{m}");
    eprintln!("refused without the token: {m}");
}
