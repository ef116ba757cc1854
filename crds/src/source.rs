//! `Source`: one ingest endpoint (`POST /webhooks/<id>`) of a Gateway, its verification and
//! its sinks (references to `Sink` objects, in delivery-index order).

use ankusa_config::{
    DedupePreset, HmacHash, OnFilterError, OnVerifyFailure, SecretDecode, SigEncoding, SigParse,
    Transform,
};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, LocalRef, SecretKeyRef, conditions_schema};

/// A webhook source of a Gateway.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
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
#[x_kube(
    validation = Rule::new("self.sinks.map(s, s.name) == oldSelf.sinks.map(s, s.name) + self.sinks.map(s, s.name).filter(n, !(n in oldSelf.sinks.map(s, s.name))) || oldSelf.sinks.map(s, s.name) == self.sinks.map(s, s.name) + oldSelf.sinks.map(s, s.name).filter(n, !(n in self.sinks.map(s, s.name)))")
        .message("spec.sinks: a sink's position is its delivery index: append new sinks at the end and remove them from the end only (moving one would rebind queued deliveries to another sink)")
)]
#[serde(rename_all = "camelCase")]
pub struct SourceSpec {
    /// The Gateway serving this source.
    pub gateway_ref: LocalRef,
    /// Source id in the ingest URL (`[A-Za-z0-9_-]{1,64}`); default: the object's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{1,64}$"))]
    pub id: Option<String>,
    /// The tenant of this source's hooks (`[A-Za-z0-9_-]{1,64}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{1,64}$"))]
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
    /// Most request headers a hook may carry (the gateway's default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_headers: Option<u32>,
    /// Most bytes of forwarded headers stored with a hook (the gateway's default 16384).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_048_576))]
    pub forward_headers_max_bytes: Option<u32>,
    /// Overrides of the gateway's retry policy for this source's deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetrySpec>,
    /// The Sink objects this source delivers to (1 to 32). The position is the delivery's
    /// sink index: new sinks are appended at the end and removed from the end only (a
    /// transition rule refuses a move, which would rebind queued deliveries to another sink).
    #[schemars(length(min = 1, max = 32))]
    pub sinks: Vec<SourceSink>,
}

/// One sink of a Source: the `Sink` object, and which of the source's hooks it gets and how
/// they look (CEL; docs/filters.md). The operator compiles the expressions with the gateway's
/// own rules before any pod sees them: a bad one is the Source's `Ready=False` condition,
/// naming `sinks[<i>].filter` and the position.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceSink {
    /// Name of the Sink object (same namespace).
    pub name: String,
    /// A CEL expression over the hook (`body`, `headers`, `source`, `tenant`, `verification`,
    /// `received_at`, `size`); false: this sink gets no delivery of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub filter: Option<String>,
    /// What a filter that cannot be evaluated does: `deliver` (default) or `skip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_filter_error: Option<OnFilterError>,
    /// CEL expressions for the body (`body`) and extra headers (`headers`) this sink sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<Transform>,
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
    /// The scheme: `none` (default), `stripe`, `github`, `shopify`, `slack`,
    /// `standard_webhooks` or `hmac`.
    #[serde(rename = "type", default)]
    pub type_: VerifyType,
    /// The signing secrets, newest first (1 to 8). Every one verifies, so a rotation adds
    /// the new secret in front, waits until the Source is programmed, then drops the old one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub secret_refs: Vec<SecretKeyRef>,
    /// Largest accepted distance between the signed timestamp and now (timed schemes; 1 to
    /// 3600 seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub tolerance_seconds: Option<u64>,
    /// The custom scheme (`type: hmac`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmac: Option<HmacSpec>,
}

/// A custom body HMAC (the gateway's `verify: {type: hmac}` keys).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HmacSpec {
    /// The request header carrying the signature.
    pub signature_header: String,
    /// The signed string: `{body}`, `{ts}`, `{header:<name>}` tokens and literal text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<String>,
    /// The HMAC's hash: `sha256` (default), `sha512` or `sha1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<HmacHash>,
    /// How the signature is written: `hex` (default) or `base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<SigEncoding>,
    /// Text before the signature in the header (`sha256=`), stripped before comparing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig_prefix: Option<String>,
    /// How the header is read: `whole` (the value after `sigPrefix`, default), `csv_pairs`
    /// (`k=v,k=v`; `sigKey` names the signature) or `space_versions` (`version,signature`
    /// entries; `version` selects them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse: Option<SigParse>,
    /// With `parse: csv_pairs`, the key holding the signature (`v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig_key: Option<String>,
    /// With `parse: space_versions`, the version whose signatures are compared (`v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The header carrying the signed timestamp (`{ts}` in `signed`), checked against
    /// `toleranceSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_header: Option<String>,
    /// How the Secret's value is turned into the key: `raw` (its bytes, default) or
    /// `whsec_base64` (`whsec_` followed by base64 of the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_decode: Option<SecretDecode>,
}

/// Exactly one of `preset`, `header`, `json` (a schema `oneOf`, enforced by every server).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("oneOf" = [
    {"required": ["preset"]},
    {"required": ["header"]},
    {"required": ["json"]},
]))]
pub struct DedupeSpec {
    /// A provider's event id location by name (`stripe`, `github`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<DedupePreset>,
    /// A request header carrying the event id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// A dot path into the JSON body (`data.object.id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
    /// How long an event id is remembered (seconds; the gateway's default 259200, 3 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2_592_000))]
    pub ttl_seconds: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetrySpec {
    /// The first retry's delay (ms); each next one doubles, up to `maxMs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub base_ms: Option<u64>,
    /// The longest delay between two attempts (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_ms: Option<u64>,
    /// Attempts before the delivery is dead-lettered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_attempts: Option<u32>,
    /// Spread each delay randomly (full jitter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<bool>,
    /// The retry horizon: a delivery still failing this long after its first attempt is
    /// dead-lettered (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_elapsed_ms: Option<u64>,
}

/// Queued deliveries of a Source being deleted, on one pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueuedOnPod {
    /// The pod's name.
    pub pod: String,
    /// Deliveries still queued (pending or retrying).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<i64>,
    /// Deliveries of this source in the pod's DLQ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead: Option<i64>,
    /// Why the pod could not be asked (never a credential).
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
    /// The pods still holding deliveries of the Source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<QueuedOnPod>,
    /// What the deletion waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where the Source is programmed, its ingest path, and a deletion's progress.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (programmed on every pod, or why not), `Progressing`, `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// `programmedReplicas/replicas` for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programmed: Option<String>,
    /// Gateway pods running this generation of the Source.
    #[serde(default)]
    pub programmed_replicas: i32,
    /// Pods of the Source's Gateway.
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
    /// The pod's name.
    pub pod: String,
    /// Entries of this source in the pod's pen.
    pub entries: i64,
    /// Their stored bytes.
    pub bytes: i64,
    /// When its oldest entry of this source was received (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest: Option<String>,
    /// Bytes the pod's whole pen holds (every source).
    pub pen_bytes: i64,
    /// The pen's cap (`quarantine.max_bytes`).
    pub pen_max_bytes: i64,
}
