//! The schemas of a Sink's typed option fields (`spec.http`, `spec.kafka`, ...), generated
//! from the gateway's own config types, so `kubectl explain sink.spec.kafka.sasl` prints the
//! gateway's field docs and `kubectl apply` refuses a misspelled option before anything runs.
//!
//! Each schema is the config type's, less what a manifest may not hold: the routing keys
//! (`filter`, `on_filter_error`, `transform`: a Source's, per sink entry), credentials and
//! paths (`keys`) are left out (credentials come from `secretRefs`, files never), an option a
//! Secret may fill (`url`, `queue_url`) is not `required`, and no default is written (the
//! gateway's defaults live in `ankusa-config` alone).

use schemars::{JsonSchema, Schema, SchemaGenerator};

use super::SinkType;
use super::keys::{is_credential_key, is_path_key, secret_ref_paths};

/// The schema of `T` (a gateway sink config) as the typed option field of sink type `t`.
fn typed<T: JsonSchema>(g: &mut SchemaGenerator, t: SinkType, doc: &str) -> Schema {
    let mut v = serde_json::Value::from(g.subschema_for::<T>());
    if let Some(reference) = v.get("$ref").and_then(|r| r.as_str()).map(String::from) {
        // A generator that does not inline hands out a reference: resolve it.
        let name = reference.rsplit('/').next().unwrap_or_default().to_string();
        if let Some(def) = g.definitions().get(&name) {
            v = def.clone();
        }
    }
    let fillable: Vec<&str> = secret_ref_paths(t)
        .iter()
        .filter(|p| !p.contains('.'))
        .copied()
        .collect();
    prune(&mut v);
    // Which hooks a sink gets and how they look belong to a Source's use of the Sink
    // (`Source.spec.sinks[].filter`), not to the Sink (nor to an intake log).
    if let Some(props) = v.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for k in ROUTING_KEYS {
            props.remove(k);
        }
    }
    if let Some(req) = v.get_mut("required").and_then(|r| r.as_array_mut()) {
        req.retain(|k| k.as_str().is_some_and(|k| !fillable.contains(&k)));
        if req.is_empty() {
            v.as_object_mut().map(|o| o.remove("required"));
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.insert("description".into(), doc.into());
        o.insert("type".into(), "object".into());
    }
    let mut s = Schema::try_from(v).unwrap_or_default();
    crate::common::strip_defaults(&mut s);
    s
}

/// A sink entry's routing keys, set per Source (`SourceSink`), never in a Sink's options.
pub const ROUTING_KEYS: [&str; 3] = ["filter", "on_filter_error", "transform"];

/// Leaves credential and path options out, at any depth, with their `required` entries; and
/// `nullable` (an option is left out, not set to null): a server before 1.25 publishes a
/// nullable property to OpenAPI v2 without its type, and kubectl then checks nothing below it,
/// so a misspelled option would pass `kubectl apply` there.
fn prune(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove("nullable");
            let mut removed = Vec::new();
            if let Some(serde_json::Value::Object(props)) = m.get_mut("properties") {
                props.retain(|k, _| {
                    let keep = !is_credential_key(k) && !is_path_key(k);
                    if !keep {
                        removed.push(k.clone());
                    }
                    keep
                });
            }
            if let Some(serde_json::Value::Array(req)) = m.get_mut("required") {
                req.retain(|k| k.as_str().is_some_and(|k| !removed.iter().any(|r| r == k)));
            }
            m.values_mut().for_each(prune);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(prune),
        _ => {}
    }
}

macro_rules! typed_fields {
    ($($f:ident: $t:ty = $ty:ident, $doc:literal;)*) => {
        $(
            pub(crate) fn $f(g: &mut SchemaGenerator) -> Schema {
                typed::<$t>(g, SinkType::$ty, $doc)
            }
        )*
    };
}

typed_fields! {
    http: ankusa_config::HttpSinkConfig = Http,
        "The options of an `http` sink (only with `type: http`): the receiver URL (or \
         `secretRefs.url`), method, timeout and headers; the signing secret comes from \
         `secretRefs.secret`.";
    log: ankusa_config::LogSinkConfig = Log,
        "The options of a `log` sink (only with `type: log`): ordering only.";
    kafka: ankusa_config::KafkaSinkConfig = Kafka,
        "The options of a `kafka` sink (only with `type: kafka`): brokers, topic, SASL and \
         TLS; credentials come from `secretRefs` (`sasl.username`, `sasl.password`, \
         `sasl.token`, `tls.*_pem`).";
    rabbitmq: ankusa_config::RabbitmqSinkConfig = Rabbitmq,
        "The options of a `rabbitmq` sink (only with `type: rabbitmq`): the AMQP URL (or \
         `secretRefs.url` when it holds a password), exchange and routing key.";
    nats: ankusa_config::NatsSinkConfig = Nats,
        "The options of a `nats` sink (only with `type: nats`): servers and the JetStream \
         subject; credentials come from `secretRefs` (`auth.*`, `tls.*_pem`).";
    redis: ankusa_config::RedisSinkConfig = Redis,
        "The options of a `redis` sink (only with `type: redis`): the Redis URL (or \
         `secretRefs.url` when it holds a password) and the channel.";
    sqs: ankusa_config::SqsSinkConfig = Sqs,
        "The options of an `sqs` sink (only with `type: sqs`): the queue URL, region and \
         batching; static credentials come from `secretRefs` (`access_key_id`, \
         `secret_access_key`, `session_token`).";
    pubsub: ankusa_config::GooglePubsubSinkConfig = GooglePubsub,
        "The options of a `google_pubsub` sink (only with `type: google_pubsub`): project, \
         topic and batching; a token comes from `secretRefs.token`.";
}
