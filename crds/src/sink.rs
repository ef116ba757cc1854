//! `Sink`: a destination that Sources deliver to. The operator turns `type` + `options` (+ the
//! values of `secretRefs` and `secretHeaders`) into the gateway's own typed sink config.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, SecretKeyRef, conditions_schema, free_form_object};

/// A delivery destination, usable by any Source of the namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
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
#[serde(rename_all = "camelCase")]
pub struct SinkSpec {
    /// The gateway's sink type.
    #[serde(rename = "type")]
    pub type_: SinkType,
    /// The sink's settings, with the keys of the gateway config's sink entry (snake_case:
    /// `url`, `timeout_ms`, `headers`, `ordered`, ...). Credentials are refused here: give them
    /// in `secretRefs`.
    #[serde(default)]
    #[schemars(schema_with = "free_form_object")]
    pub options: serde_json::Map<String, serde_json::Value>,
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

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SinkStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// `programmedReplicas/replicas` for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programmed: Option<String>,
    #[serde(default)]
    pub programmed_replicas: i32,
    #[serde(default)]
    pub replicas: i32,
    /// Sources delivering to this sink (comma-separated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_by: Option<String>,
    /// Gateway pods whose latest delivery attempt to this sink failed (the `Degraded`
    /// condition, reason `DeliveryFailing`, says with what).
    #[serde(default)]
    pub failing_pods: i32,
}
