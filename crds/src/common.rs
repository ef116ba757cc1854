//! Types shared by every kind: references, conditions, schema helpers.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of every Ankusa resource.
pub const GROUP: &str = "ankusa.dev";
/// The served and stored version.
pub const VERSION: &str = "v1alpha1";

/// A reference to an object of a known kind in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct LocalRef {
    /// Name of the object (same namespace).
    pub name: String,
}

/// One key of a `Secret` in the same namespace.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub struct SecretKeyRef {
    /// Name of the Secret (same namespace).
    pub name: String,
    /// Key within the Secret's `data`.
    pub key: String,
}

/// Condition types every Ankusa resource reports.
pub mod condition {
    /// The summary: the object is accepted and fully in effect.
    pub const READY: &str = "Ready";
    /// Work is under way (a roll-out, a config push, a replay running).
    pub const PROGRESSING: &str = "Progressing";
    /// Something is wrong and needs attention (partial failure, refused config, ...).
    pub const DEGRADED: &str = "Degraded";
    /// On a Source with `onVerifyFailure: quarantine`: a pod's quarantine pen holds 80% or
    /// more of its `max_bytes` (at the cap, new quarantined hooks get `503 quarantine_full`).
    pub const QUARANTINE_NEAR_FULL: &str = "QuarantineNearFull";
}

/// A status condition (the shape of `metav1.Condition`, with optional reason and message).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Ready`, `Progressing` or `Degraded` (and `QuarantineNearFull` on a Source).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When `status` last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// The `metadata.generation` this condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    pub fn new(type_: &str, status: bool, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            type_: type_.into(),
            status: if status { "True" } else { "False" }.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_transition_time: None,
            observed_generation: None,
        }
    }

    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Finds a condition by type.
pub fn find_condition<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == type_)
}

/// Schema of a list of conditions: a list-map keyed by `type`, so server-side apply merges
/// entries by type.
pub(crate) fn conditions_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut s = <Vec<Condition>>::json_schema(g);
    s.insert("x-kubernetes-list-type".into(), "map".into());
    s.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    s
}

/// Schema of an optional free-form object.
pub(crate) fn optional_free_form_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Removes every `default` (and `additionalProperties: false`) from an embedded gateway
/// config schema: the gateway's defaults live in `ankusa-config` alone, so the apiserver must
/// not bake today's defaults into stored objects.
pub(crate) fn strip_defaults(s: &mut schemars::Schema) {
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("default");
                if m.get("additionalProperties") == Some(&serde_json::Value::Bool(false)) {
                    m.remove("additionalProperties");
                }
                m.values_mut().for_each(walk);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    if let Some(obj) = s.as_object_mut() {
        let mut v = serde_json::Value::Object(std::mem::take(obj));
        walk(&mut v);
        if let serde_json::Value::Object(m) = v {
            *obj = m;
        }
    }
}

/// Labels and annotations as a sorted map.
pub type StringMap = BTreeMap<String, String>;
