//! `Sink`: a destination that Sources deliver to. The operator turns `type` + the typed option
//! field of that type (`http`, `kafka`, ...; or the deprecated free-form `options`) + the
//! values of `secretRefs` and `secretHeaders` into the gateway's own typed sink config.

pub mod keys;
pub(crate) mod options;

pub use options::ROUTING_KEYS;

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, SecretKeyRef, conditions_schema, optional_free_form_object};

/// A JSON object of options.
pub type Options = serde_json::Map<String, serde_json::Value>;

/// The typed option fields of a Sink's spec, one per sink type.
pub const OPTION_FIELDS: &[&str] = &[
    "http", "log", "kafka", "rabbitmq", "nats", "redis", "sqs", "pubsub",
];

/// A delivery destination, usable by any Source of the namespace.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "ankusa.dev",
    version = "v1alpha1",
    kind = "Sink",
    namespaced,
    status = "SinkStatus",
    shortname = "asink",
    category = "ankusa",
    doc = "A delivery destination (http, log, and the queue types the gateway supports)",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Programmed",
        type_ = "string",
        json_path = ".status.programmed",
        description = "gateway pods running this generation / pods of the gateways using it"
    ),
    printcolumn(
        name = "Failing",
        type_ = "integer",
        json_path = ".status.failingPods",
        description = "gateway pods whose latest delivery attempt to this sink failed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Used By",
        type_ = "string",
        priority = 1,
        json_path = ".status.usedBy"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type==\"Ready\")].message"
    )
)]
#[x_kube(
    validation = Rule::new("!has(self.http) || self.type == 'http'")
        .message("spec.http is for type http: set the option field named after spec.type"),
    validation = Rule::new("!has(self.log) || self.type == 'log'")
        .message("spec.log is for type log: set the option field named after spec.type"),
    validation = Rule::new("!has(self.kafka) || self.type == 'kafka'")
        .message("spec.kafka is for type kafka: set the option field named after spec.type"),
    validation = Rule::new("!has(self.rabbitmq) || self.type == 'rabbitmq'")
        .message("spec.rabbitmq is for type rabbitmq: set the option field named after spec.type"),
    validation = Rule::new("!has(self.nats) || self.type == 'nats'")
        .message("spec.nats is for type nats: set the option field named after spec.type"),
    validation = Rule::new("!has(self.redis) || self.type == 'redis'")
        .message("spec.redis is for type redis: set the option field named after spec.type"),
    validation = Rule::new("!has(self.sqs) || self.type == 'sqs'")
        .message("spec.sqs is for type sqs: set the option field named after spec.type"),
    validation = Rule::new("!has(self.pubsub) || self.type == 'google_pubsub'")
        .message("spec.pubsub is for type google_pubsub: set the option field named after spec.type"),
    validation = Rule::new("!has(self.options) || !(has(self.http) || has(self.log) || has(self.kafka) || has(self.rabbitmq) || has(self.nats) || has(self.redis) || has(self.sqs) || has(self.pubsub))")
        .message("spec.options (deprecated) and a typed option field cannot both be set: move the keys of spec.options to the typed field"),
)]
#[serde(rename_all = "camelCase")]
pub struct SinkSpec {
    /// The gateway's sink type.
    #[serde(rename = "type")]
    pub type_: SinkType,
    /// Deprecated (use the field named after `type`: `http`, `kafka`, ...; read for one more
    /// release, with a Warning): the sink's settings as a free-form map with the keys of the
    /// gateway config's sink entry. Credentials are refused here: give them in `secretRefs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_free_form_object")]
    pub options: Option<Options>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "options::http")]
    pub http: Option<Options>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "options::log")]
    pub log: Option<Options>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "options::kafka")]
    pub kafka: Option<Options>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "options::rabbitmq")]
    pub rabbitmq: Option<Options>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "options::nats")]
    pub nats: Option<Options>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "options::redis")]
    pub redis: Option<Options>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "options::sqs")]
    pub sqs: Option<Options>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "options::pubsub")]
    pub pubsub: Option<Options>,
    /// Options whose values come from Secrets, by option name (`secret` for an http sink's
    /// signing secret, a password, a connection URL holding credentials, ...). Several refs
    /// make a rotation list, newest first.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_refs: BTreeMap<String, Vec<SecretKeyRef>>,
    /// Request headers whose values come from Secrets (http), merged into `options.headers`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_headers: BTreeMap<String, SecretKeyRef>,
}

/// Sink types. The queue types are accepted by the CRD now and rendered once the gateway
/// version in use supports them (until then the Sink reports `UnsupportedType`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SinkType {
    Http,
    Log,
    Kafka,
    Rabbitmq,
    Nats,
    Redis,
    Sqs,
    GooglePubsub,
}

impl SinkType {
    /// The spec field holding this type's options (`spec.http`, `spec.pubsub`, ...).
    pub fn field(self) -> &'static str {
        match self {
            SinkType::GooglePubsub => "pubsub",
            other => other.as_str(),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SinkType::Http => "http",
            SinkType::Log => "log",
            SinkType::Kafka => "kafka",
            SinkType::Rabbitmq => "rabbitmq",
            SinkType::Nats => "nats",
            SinkType::Redis => "redis",
            SinkType::Sqs => "sqs",
            SinkType::GooglePubsub => "google_pubsub",
        }
    }
}

/// Where a Sink's options were read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionsFrom {
    /// The typed field named after `type` (or none: a `log` sink needs no options).
    Typed,
    /// The deprecated `options` map.
    Deprecated,
}

impl SinkSpec {
    /// A spec of type `t` with nothing else set.
    pub fn of_type(t: SinkType) -> Self {
        SinkSpec {
            type_: t,
            options: None,
            http: None,
            log: None,
            kafka: None,
            rabbitmq: None,
            nats: None,
            redis: None,
            sqs: None,
            pubsub: None,
            secret_refs: BTreeMap::new(),
            secret_headers: BTreeMap::new(),
        }
    }

    /// Every typed option field with its value, in a fixed order.
    fn typed_fields(&self) -> [(SinkType, Option<&Options>); 8] {
        [
            (SinkType::Http, self.http.as_ref()),
            (SinkType::Log, self.log.as_ref()),
            (SinkType::Kafka, self.kafka.as_ref()),
            (SinkType::Rabbitmq, self.rabbitmq.as_ref()),
            (SinkType::Nats, self.nats.as_ref()),
            (SinkType::Redis, self.redis.as_ref()),
            (SinkType::Sqs, self.sqs.as_ref()),
            (SinkType::GooglePubsub, self.pubsub.as_ref()),
        ]
    }

    /// The options of this Sink and where they came from, after the rules the CRD declares as
    /// CEL (re-checked here for servers without CEL): a typed field only for its own `type`,
    /// and not together with `options`. Errors name the field.
    pub fn resolved_options(&self) -> Result<(Options, OptionsFrom), String> {
        for (t, v) in self.typed_fields() {
            if v.is_some() && t != self.type_ {
                return Err(format!(
                    "spec.{}: is for type {}, and spec.type is {}: set spec.{} instead",
                    t.field(),
                    t.as_str(),
                    self.type_.as_str(),
                    self.type_.field()
                ));
            }
        }
        let typed = self
            .typed_fields()
            .into_iter()
            .find_map(|(t, v)| (t == self.type_).then_some(v).flatten());
        match (typed, &self.options) {
            (Some(_), Some(o)) if !o.is_empty() => Err(format!(
                "spec.options: deprecated, and spec.{} is set too: move its keys to spec.{}",
                self.type_.field(),
                self.type_.field()
            )),
            (Some(t), _) => Ok((t.clone(), OptionsFrom::Typed)),
            (None, Some(o)) if !o.is_empty() => Ok((o.clone(), OptionsFrom::Deprecated)),
            (None, _) => Ok((Options::new(), OptionsFrom::Typed)),
        }
    }
}

/// How the Gateways using the Sink rendered it, and whether deliveries to it fail.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SinkStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (rendered and programmed, or why not), `Progressing`, `Degraded` (deliveries failing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// `programmedReplicas/replicas` for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programmed: Option<String>,
    /// Gateway pods running this generation of the Sink.
    #[serde(default)]
    pub programmed_replicas: i32,
    /// Gateway pods of the Gateways whose Sources use the Sink.
    #[serde(default)]
    pub replicas: i32,
    /// Sources delivering to this sink, and `<gateway>/lifecycle` for each Gateway sending its
    /// lifecycle events to it (comma-separated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_by: Option<String>,
    /// Gateway pods whose latest delivery attempt to this sink failed (the `Degraded`
    /// condition, reason `DeliveryFailing`, says with what).
    #[serde(default)]
    pub failing_pods: i32,
}
