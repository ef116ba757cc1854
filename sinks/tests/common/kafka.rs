//! The test's own Kafka clients (rdkafka, as the sink), built from a `ClientConfig` that says
//! how to reach the broker (plaintext, or TLS with the test's CA and client certificate): a
//! topic created, records read back. Imports `suffix` from `common`.

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::OwnedMessage;
use rdkafka::{Offset, TopicPartitionList};

use super::suffix;

/// A client config for `broker` in plaintext.
pub fn kafka_client(broker: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", broker);
    c
}

/// Creates `topic` (one partition) through an admin client made from `client`.
pub async fn kafka_create_topic(client: &ClientConfig, topic: &str) {
    let admin: AdminClient<DefaultClientContext> = client.create().expect("admin client");
    let r = admin
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("create_topics");
    for t in r {
        t.expect("topic created");
    }
}

/// Reads up to `n` records of partition 0 from the beginning, for at most `wait`.
pub async fn kafka_consume(
    client: &ClientConfig,
    topic: &str,
    n: usize,
    wait: Duration,
) -> Vec<OwnedMessage> {
    let consumer: StreamConsumer = client
        .clone()
        .set("group.id", format!("ankusa-test-{}", suffix()))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("partition");
    consumer.assign(&tpl).expect("assign");
    let end = Instant::now() + wait;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < end {
        match tokio::time::timeout(Duration::from_millis(500), consumer.recv()).await {
            Ok(Ok(m)) => out.push(m.detach()),
            Ok(Err(e)) => eprintln!("consumer: {e}"),
            Err(_) => {}
        }
    }
    out
}

/// The hook ids of the records `kafka_consume` reads.
pub async fn kafka_ids(
    client: &ClientConfig,
    topic: &str,
    n: usize,
    wait: Duration,
) -> Vec<String> {
    let records = kafka_consume(client, topic, n, wait).await;
    records
        .iter()
        .filter_map(|m| m.payload())
        .map(super::message_id)
        .collect()
}
