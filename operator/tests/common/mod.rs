//! Fixtures shared by the operator's test files (each includes this module with
//! `mod common;`): custom resources built from JSON with their own `apiVersion` and `kind`,
//! Secret values for the renderer, and the sink types with options that render and validate
//! for each. Not every file uses every fixture.
#![allow(dead_code)]

use ankusa_crds::SinkType;
use ankusa_operator::render::SecretValues;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// A `K` from its fields (`metadata`, `spec`, `status`, ...), its `apiVersion` and `kind` its
/// type's own.
pub fn resource<K>(mut fields: Value) -> K
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    fields["apiVersion"] = json!(K::api_version(&()));
    fields["kind"] = json!(K::kind(&()));
    serde_json::from_value(fields).expect("a valid object")
}

/// A `K` with `metadata` and `spec`.
pub fn object<K>(metadata: Value, spec: Value) -> K
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    resource(json!({"metadata": metadata, "spec": spec}))
}

/// The metadata of `name` in namespace `ns` at `generation`.
pub fn meta(name: &str, generation: i64) -> Value {
    json!({"name": name, "namespace": "ns", "generation": generation})
}

/// Secret values from (Secret, key, value) triples.
pub fn secrets(pairs: &[(&str, &str, &str)]) -> SecretValues {
    let mut out = SecretValues::new();
    for (name, key, value) in pairs {
        out.entry(name.to_string())
            .or_default()
            .insert(key.to_string(), value.as_bytes().to_vec());
    }
    out
}

/// Every sink type, with its name in manifests.
pub const SINK_TYPES: [(SinkType, &str); 8] = [
    (SinkType::Http, "http"),
    (SinkType::Log, "log"),
    (SinkType::Kafka, "kafka"),
    (SinkType::Rabbitmq, "rabbitmq"),
    (SinkType::Nats, "nats"),
    (SinkType::Redis, "redis"),
    (SinkType::Sqs, "sqs"),
    (SinkType::GooglePubsub, "google_pubsub"),
];

/// Options that render and validate for each sink type, before anything else is set.
pub fn base_options(t: &str) -> Value {
    match t {
        "http" => json!({"url": "https://receiver.example.com/h", "allow_unsigned": true}),
        "log" => json!({}),
        "kafka" => json!({"brokers": ["kafka.example.com:9092"], "topic": "hooks"}),
        "rabbitmq" => json!({"url": "amqp://rabbit.example.com:5672/%2f", "exchange": "hooks"}),
        "nats" => json!({"servers": ["nats://nats.example.com:4222"], "subject": "hooks"}),
        "redis" => json!({"url": "redis://redis.example.com:6379/0", "channel": "hooks"}),
        "sqs" => {
            json!({"queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/hooks", "region": "us-east-1"})
        }
        _ => json!({"project": "proj", "topic": "hooks", "auth": "none"}),
    }
}
