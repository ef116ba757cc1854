//! Every URL or server-entry check of a sink is value-free: the operator lets a Secret fill
//! these options, so an error (which reaches statuses, Events and logs) names the field and
//! what is expected, and quotes no part of the value — not even what precedes the first `:`.

use crate::*;

const PART: &str = "xoxb-9f2c41secretpart";

fn message(s: SinkConfig) -> String {
    crate::testing::check_sink(s, false)
        .expect_err("should be refused")
        .to_string()
}

/// Values a Secret might put into a URL option: a bare token with a `:`, a token as a scheme,
/// a token with no `:` at all, a token as the host of an unknown scheme.
fn values() -> Vec<String> {
    vec![
        format!("{PART}:rest-of-token"),
        format!("{PART}://host.example:443/p"),
        PART.to_string(),
        format!("{PART}:{PART}"),
    ]
}

#[test]
fn url_checks_never_quote_the_value() {
    for v in values() {
        let mut pubsub = GooglePubsubSinkConfig::new("proj", "topic");
        pubsub.auth = PubsubAuth::None;
        pubsub.endpoint = Some(v.clone().into());
        let mut sqs_endpoint =
            SqsSinkConfig::new("https://sqs.us-east-1.amazonaws.com/123456789012/q");
        sqs_endpoint.region = Some("us-east-1".into());
        sqs_endpoint.endpoint = Some(v.clone().into());
        let mut http = HttpSinkConfig::new(v.clone());
        http.allow_unsigned = true;
        let cases: Vec<(&str, SinkConfig)> = vec![
            ("url", SinkConfig::Http(http)),
            (
                "url",
                SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(v.clone(), "ex")),
            ),
            (
                "url",
                SinkConfig::Redis(RedisSinkConfig::new(v.clone(), "ch")),
            ),
            ("queue_url", SinkConfig::Sqs(SqsSinkConfig::new(v.clone()))),
            ("endpoint", SinkConfig::Sqs(sqs_endpoint)),
            ("endpoint", SinkConfig::GooglePubsub(pubsub)),
            (
                "brokers[0]",
                SinkConfig::Kafka(KafkaSinkConfig::new(vec![v.clone()], "t")),
            ),
            (
                "servers[0]",
                SinkConfig::Nats(NatsSinkConfig::new(vec![v.clone()], "a.b")),
            ),
        ];
        for (field, sink) in cases {
            let ty = sink.type_name();
            let m = message(sink);
            assert!(
                m.contains(&format!("sources.src.sinks[0].{field}")),
                "{ty} {v}: the error names another field: {m}"
            );
            assert!(
                !m.contains("secretpart"),
                "{ty} {v}: the error quotes the value: {m}"
            );
        }
    }
}
