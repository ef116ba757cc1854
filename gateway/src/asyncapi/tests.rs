use super::*;

fn config(yaml: &str) -> Config {
    ankusa_config::from_rendered_yaml(yaml).expect("config")
}

const SECRET_WORDS: [&str; 6] = [
    "hunter2",
    "s3cr3t-token",
    "AKIDEXAMPLE",
    "wJalrXUtnFEMI",
    "whsec_",
    "vhost-path",
];

fn yaml() -> String {
    r#"
node: {instance: node-7}
sources:
  stripe:
    sink_names: [orders-kafka, orders-rabbit, audit-http]
    sinks:
      - {type: kafka, brokers: ["k1.internal:9093", "k2.internal:9093"], topic: stripe-hooks,
         sasl: {mechanism: plain, username: svc, password: hunter2}}
      - {type: rabbitmq, url: "amqps://svc:hunter2@mq.internal:5671/vhost-path?heartbeat=5", exchange: hooks}
      - {type: http, url: "https://app.internal/hooks", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
  github:
    sinks:
      - {type: nats, servers: ["nats://svc:hunter2@nats.internal:4222"], subject: hooks.github,
         auth: {token: s3cr3t-token}}
      - {type: redis, url: "redis://:hunter2@cache.internal/0", channel: gh}
      - {type: sqs, queue_url: "https://sqs.eu-west-1.amazonaws.com/123456789012/gh-hooks", region: eu-west-1,
         access_key_id: AKIDEXAMPLE, secret_access_key: wJalrXUtnFEMI}
      - {type: google_pubsub, project: acme-prod, topic: gh, auth: token, token: s3cr3t-token}
      - {type: log}
lifecycle:
  sinks:
    - {type: nats, servers: ["nats.internal:4222"], subject: ankusa.events}
"#
    .to_string()
}

#[test]
fn one_channel_per_queue_sink_and_none_for_http_or_log() {
    let doc = document(&config(&yaml()));
    assert_eq!(doc["asyncapi"], "3.0.0");
    assert_eq!(doc["info"]["version"], VERSION);
    let chans = doc["channels"].as_object().expect("channels");
    let mut keys: Vec<&str> = chans.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "github-sink-0",
            "github-sink-1",
            "github-sink-2",
            "github-sink-3",
            "lifecycle-sink-0",
            "stripe-sink-0",
            "stripe-sink-1"
        ]
    );
    assert_eq!(chans["stripe-sink-0"]["address"], "stripe-hooks");
    assert_eq!(chans["stripe-sink-0"]["title"], "stripe → orders-kafka");
    assert_eq!(chans["stripe-sink-1"]["address"], "ankusa.stripe");
    assert_eq!(
        chans["stripe-sink-1"]["bindings"]["amqp"]["exchange"]["name"],
        "hooks"
    );
    assert_eq!(chans["github-sink-0"]["address"], "hooks.github");
    assert_eq!(chans["github-sink-1"]["address"], "gh");
    assert_eq!(chans["github-sink-2"]["address"], "gh-hooks");
    assert_eq!(
        chans["github-sink-3"]["address"],
        "projects/acme-prod/topics/gh"
    );
    assert_eq!(
        chans["lifecycle-sink-0"]["messages"]["message"]["$ref"],
        "#/components/messages/LifecycleMessage"
    );
    let servers = &doc["servers"];
    assert_eq!(servers["stripe-sink-0"]["host"], "k1.internal:9093");
    assert_eq!(servers["stripe-sink-1"]["host"], "mq.internal:5671");
    assert_eq!(servers["github-sink-0"]["host"], "nats.internal:4222");
    assert_eq!(servers["github-sink-1"]["host"], "cache.internal:6379");
    assert_eq!(servers["lifecycle-sink-0"]["host"], "nats.internal:4222");
    assert_eq!(doc["operations"].as_object().map(|o| o.len()), Some(7));
    assert_eq!(
        doc["operations"]["publish-github-sink-0"]["channel"]["$ref"],
        "#/channels/github-sink-0"
    );
}

#[test]
fn no_credential_or_url_path_reaches_the_document() {
    let text = document(&config(&yaml())).to_string();
    for word in SECRET_WORDS {
        assert!(!text.contains(word), "{word} leaked into the document");
    }
}

#[test]
fn a_node_without_queue_sinks_has_no_channels_but_the_schemas() {
    let doc = document(&config("sources: {demo: {sinks: [{type: log}]}}"));
    assert_eq!(doc["channels"], json!({}));
    assert!(doc["components"]["schemas"]["MessageV1"].is_object());
    assert!(doc["components"]["schemas"]["LifecycleEvent"].is_object());
}

#[test]
fn broker_addresses_keep_host_and_port_only() {
    assert_eq!(host_port("user:pw@h:1", 9), "h:1");
    assert_eq!(host_port("h", 9), "h:9");
    assert_eq!(host_port("tls://u:p@h:4443/x?y=1", 9), "h:4443");
    assert_eq!(
        url_host("amqp://u:p@h/vhost", 5672).as_deref(),
        Some("h:5672")
    );
    assert_eq!(url_host("not a url", 1), None);
}
