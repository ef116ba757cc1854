//! The Kafka sink against Tansu: `kafka` (the machine's Tansu on 9092, next to an rdkafka
//! FutureProducer alone) and `kafka-tls` (`security_protocol: ssl` vs plaintext: two Tansus of
//! the bench's own, each behind its relay, plain or terminating TLS, and advertising it).
//! Imports `measure` and `tls`.

use std::time::Duration;

use ankusa_config::{KafkaSinkConfig, SinkConfig};
use ankusa_sinks::SinkBuilder;
use ankusa_testkit::brokers::memory_tansu;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::tls_proxy::TlsProxy;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::measure::{BoxErr, build, line, message_payload, rate, suffix, through_sink, tls_line};
use crate::tls::{Pki, bind_loopback};

/// Creates `topic` (one partition) through an admin client made from `client`.
async fn create_topic(client: &ClientConfig, topic: &str) -> Result<(), BoxErr> {
    let admin: AdminClient<DefaultClientContext> = client.create()?;
    for r in admin
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await?
    {
        r.map_err(|(t, e)| format!("{t}: {e}"))?;
    }
    Ok(())
}

pub async fn plain(n: u64) -> Result<(), BoxErr> {
    let broker = "127.0.0.1:9092";
    let topic = format!("bench-{}", suffix());
    create_topic(ClientConfig::new().set("bootstrap.servers", broker), &topic).await?;
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Kafka(KafkaSinkConfig::new(vec![broker.into()], &topic)),
    );
    let s = through_sink(sink, n).await;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker)
        .set("acks", "all")
        .set("linger.ms", "2")
        .create()?;
    let payload = message_payload();
    let a = rate(n, |_| {
        let (producer, topic, payload) = (&producer, &topic, &payload);
        async move {
            producer
                .send(
                    FutureRecord::to(topic).key("t1/bench").payload(payload),
                    Duration::from_secs(0),
                )
                .await
                .map(|_| ())
                .map_err(|(e, _)| e.to_string())
        }
    })
    .await;
    line(
        "kafka",
        n,
        s,
        a,
        "rdkafka FutureProducer, acks=all, 1.5 KiB records",
        None,
    );
    Ok(())
}

/// The Kafka sink (librdkafka) over `security_protocol: ssl` vs plaintext: two Tansus of the
/// bench's own (memory storage), each behind its relay (plain or TLS) and advertising it.
pub async fn tls(n: u64) -> Result<(), BoxErr> {
    let pki = Pki::new(&["localhost"])?;
    let topic = format!("bench-tls-{}", suffix());
    let mut rates = Vec::new();
    for tls in [false, true] {
        let (listener, port) = bind_loopback().await?;
        let upstream = free_port();
        let _tansu = memory_tansu(pki.dir.path(), upstream, &format!("localhost:{port}"));
        let _relay = if tls {
            TlsProxy::serve(listener, &pki.server, None, upstream)
        } else {
            TlsProxy::relay(listener, upstream)
        };
        let broker = format!("localhost:{port}");
        let mut admin = ClientConfig::new();
        admin.set("bootstrap.servers", &broker);
        let mut cfg = KafkaSinkConfig::new(vec![broker], &topic);
        if tls {
            admin
                .set("security.protocol", "ssl")
                .set("ssl.ca.pem", &pki.ca.pem);
            cfg.tls = Some(pki.sink_tls());
        }
        create_topic(&admin, &topic).await?;
        let builder = SinkBuilder::new();
        let sink = build(&builder, SinkConfig::Kafka(cfg));
        rates.push(through_sink(sink, n).await);
    }
    tls_line(
        "kafka-tls",
        n,
        rates[0],
        rates[1],
        "plaintext via a plain relay vs ssl via a TLS relay, a Tansu (memory) behind each",
    );
    Ok(())
}
