//! `Source`: one ingest endpoint (`POST /webhooks/<id>`) of a Gateway, its verification and
//! its sinks (references to `Sink` objects, in delivery-index order).

use ankusa_config::{DedupePreset, HmacHash, OnVerifyFailure, SecretDecode, SigEncoding, SigParse};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, LocalRef, SecretKeyRef, conditions_schema};

/// A webhook source of a Gateway.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "ankusa.dev",
    version = "v1alpha1",
    kind = "Source",
    namespaced,
    status = "SourceStatus",
    shortname = "asrc",
    category = "ankusa",
    doc = "A webhook source: POST <prefix>/<id> on every pod of its Gateway",
    printcolumn(
        name = "Gateway",
        type_ = "string",
        json_path = ".spec.gatewayRef.name"
    ),
    printcolumn(name = "Verify", type_ = "string", json_path = ".spec.verify.type"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Programmed",
        type_ = "string",
        json_path = ".status.programmed",
        description = "gateway pods running this generation / pods"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Path",
        type_ = "string",
        priority = 1,
        json_path = ".status.path"
    ),
    printcolumn(
        name = "Quarantined",
        type_ = "integer",
        priority = 1,
        json_path = ".status.quarantine.entries",
        description = "hooks of this source held in the gateway pods' quarantine pens"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type==\"Ready\")].message"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SourceSpec {
    /// The Gateway serving this source.
    pub gateway_ref: LocalRef,
    /// Source id in the ingest URL (`[A-Za-z0-9_-]{1,64}`); default: the object's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tenant of this source's hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Accept the URL's tenant on a shared source without verification (`tenant_path` only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trust_url_tenant: bool,
    /// How the provider's signature is verified.
    #[serde(default)]
    pub verify: VerifySpec,
    /// `reject` (401, nothing stored; default), `accept_flag` (stored, delivered flagged) or
    /// `quarantine` (202, held in the pod's quarantine pen until a ReplayJob of kind
    /// `quarantine` releases what then verifies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_verify_failure: Option<OnVerifyFailure>,
    /// Where the provider's event id is found, to collapse repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe: Option<DedupeSpec>,
    /// Request headers forwarded to sinks (default: all but auth, framing, hop-by-hop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_headers: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_headers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_headers_max_bytes: Option<u32>,
    /// Overrides of the gateway's retry policy for this source's deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetrySpec>,
    /// The Sink objects this source delivers to. The position is the delivery's sink index:
    /// append new sinks at the end; reordering rebinds queued deliveries.
    pub sinks: Vec<LocalRef>,
}

/// Verification schemes (the gateway's `verify.type`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerifyType {
    #[default]
    None,
    Stripe,
    Github,
    Shopify,
    Slack,
    StandardWebhooks,
    Hmac,
}

impl VerifyType {
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyType::None => "none",
            VerifyType::Stripe => "stripe",
            VerifyType::Github => "github",
            VerifyType::Shopify => "shopify",
            VerifyType::Slack => "slack",
            VerifyType::StandardWebhooks => "standard_webhooks",
            VerifyType::Hmac => "hmac",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifySpec {
    #[serde(rename = "type", default)]
    pub type_: VerifyType,
    /// The signing secrets, newest first (1 to 8). Every one verifies, so a rotation adds
    /// the new secret in front, waits until the Source is programmed, then drops the old one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_refs: Vec<SecretKeyRef>,
    /// Largest accepted distance between the signed timestamp and now (timed schemes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance_seconds: Option<u64>,
    /// The custom scheme (`type: hmac`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac: Option<HmacSpec>,
}

/// A custom body HMAC (the gateway's `verify: {type: hmac}` keys).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HmacSpec {
    pub signature_header: String,
    /// The signed string: `{body}`, `{ts}`, `{header:<name>}` tokens and literal text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<HmacHash>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<SigEncoding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse: Option<SigParse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_decode: Option<SecretDecode>,
}

/// Exactly one of `preset`, `header`, `json`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DedupeSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<DedupePreset>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// A dot path into the JSON body (`data.object.id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetrySpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_elapsed_ms: Option<u64>,
}

/// Queued deliveries of a Source being deleted, on one pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueuedOnPod {
    pub pod: String,
    /// Deliveries still queued (pending or retrying).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<i64>,
    /// Deliveries of this source in the pod's DLQ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Progress of a deletion: the finalizer holds the Source until its queued deliveries drained,
/// or were dead-lettered after the annotation `ankusa.dev/deliveries: dead_letter`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainStatus {
    /// `Draining` or `DeadLettering`.
    pub phase: String,
    /// Total deliveries still queued.
    pub pending: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<QueuedOnPod>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
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
    /// The source id in the gateway's config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// The ingest path on each pod (`/webhooks/<id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Set while a deletion waits for queued deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainStatus>,
    /// This source's hooks in the pods' quarantine pens: with `onVerifyFailure: quarantine`,
    /// or while entries are left (counts refreshed at most every 20 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine: Option<SourceQuarantine>,
}

/// A source's quarantined hooks on every pod of its Gateway.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceQuarantine {
    /// Entries of this source, all pods together.
    pub entries: i64,
    /// Their stored bytes.
    pub bytes: i64,
    /// When the oldest was received (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest: Option<String>,
    /// Pods holding entries of this source.
    #[serde(default)]
    pub pods_with_entries: i32,
    /// Those pods (at most 10, the fullest first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<QuarantineOnPod>,
}

/// A source's entries in one pod's pen, and how full that pen is (all sources).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuarantineOnPod {
    pub pod: String,
    pub entries: i64,
    pub bytes: i64,
    /// When its oldest entry of this source was received (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest: Option<String>,
    /// Bytes the pod's whole pen holds (every source).
    pub pen_bytes: i64,
    /// The pen's cap (`quarantine.max_bytes`).
    pub pen_max_bytes: i64,
}
