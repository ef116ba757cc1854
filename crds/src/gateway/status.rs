//! A Gateway's status: what the operator last saw of each pod, the Sinks as it rendered them,
//! and the record of the Secrets it wrote itself.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, conditions_schema};

/// What the operator last saw of one pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayPodStatus {
    /// The pod's name (`<gateway>-<n>`).
    pub name: String,
    /// The pod's UID when last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The pod's IP, where the operator reaches its admin API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    /// The pod's Ready condition.
    pub ready: bool,
    /// The pod runs the config rendered for it.
    pub programmed: bool,
    /// `config_hash` the pod reports (`GET /v1/status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// The hash of the config rendered for this pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_hash: Option<String>,
    /// Settings the pod changed on reload but can only apply after a restart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart_required: Vec<String>,
    /// The last error reaching the pod or pushing its config (never a credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The pod's archive, when `spec.archive` is set (counts refreshed at most every 20 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<PodArchiveStatus>,
    /// The pod's dead-letter queue (counts refreshed at most every 20 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlq: Option<PodDlqStatus>,
    /// Seconds since the pod's last successful backup (since it started, before the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_age_seconds: Option<i64>,
    /// When the pod's last backup completed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup_at: Option<String>,
    /// Failed backups in a row (0 once one succeeds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_failures: Option<i64>,
    /// The last backup's error (never a credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_last_error: Option<String>,
    /// The backup this pod restored when it started on an empty volume (manifest id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<String>,
    /// The intake log under `mode: dual`: `recovering` (replaying at start), `ready`, or
    /// `down` (publishes keep failing: new hooks get `503 intake_unavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intake_state: Option<String>,
    /// Age of the oldest hook committed on the pod whose publish the log has not confirmed
    /// (whole seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intake_lag_seconds: Option<i64>,
    /// Hooks committed on the pod whose publish the log has not confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intake_pending: Option<i64>,
}

/// A pod's archive (`archive` of its `GET /v1/status`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodArchiveStatus {
    /// Hooks accepted and not yet in an uploaded segment.
    pub pending: i64,
    /// Hooks archived on this pod.
    #[serde(default)]
    pub archived: i64,
    /// When the last segment was uploaded (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_upload_at: Option<String>,
    /// Failed uploads in a row (0 once one succeeds).
    #[serde(default)]
    pub failures: i64,
    /// The last upload's error (never a credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A pod's dead-letter queue (`dlq` of its `GET /v1/status`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodDlqStatus {
    /// Dead-lettered deliveries on the pod.
    pub rows: i64,
    /// Their stored bytes.
    pub bytes: i64,
    /// Over a `queue.dlq` bound with nothing archived to evict: the pod answers new hooks
    /// `503 dlq_full` until the archive catches up.
    #[serde(default)]
    pub full: bool,
}

/// What the operator observes of the Gateway's pods and the config rendered for them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing`, `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Pods that exist (scale subresource).
    #[serde(default)]
    pub replicas: i32,
    /// Pods whose Ready condition is true.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Pods whose loaded config hash equals the one rendered for them.
    #[serde(default)]
    pub programmed_replicas: i32,
    /// `programmedReplicas/replicas` for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programmed: Option<String>,
    /// Label selector of the pods (scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Sources rendered into the config.
    #[serde(default)]
    pub sources: i32,
    /// Sinks rendered into the config (read by the Sink controller for their status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<RenderedSink>,
    /// What the operator last saw of each pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<GatewayPodStatus>,
    /// The Secrets the operator itself wrote under this Gateway's names, and what it wrote
    /// there. Only an object matching its record is used; anything else under those names is
    /// `ForeignObject`, whatever its owner references say. Written by the operator alone
    /// (the status subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<OwnershipRecord>,
}

/// What the operator wrote into the Secrets it reads back: the generated admin token, the
/// admin CA, the per-pod config and the scrape Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnershipRecord {
    /// `<gateway>-admin-token` (absent with `adminTokenSecretRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_token: Option<OwnedSecret>,
    /// `<gateway>-admin-ca`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_ca: Option<OwnedSecret>,
    /// `<gateway>-config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<OwnedSecret>,
    /// `<gateway>-scrape` (the scrape token and the admin CA bundle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape: Option<OwnedSecret>,
}

/// One Secret the operator wrote: its uid and the sha256 of its `data`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnedSecret {
    /// The uid of the object the operator created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// sha256 of the `data` the operator wrote last (hex, over the sorted keys and values).
    pub sha256: String,
    /// sha256 of the `data` it held before that write, while the write may not have landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_sha256: Option<String>,
}

/// A Sink as this Gateway rendered it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenderedSink {
    /// The Sink object's name.
    pub name: String,
    /// The Sink's `metadata.generation` that was rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Why it could not be rendered (its Sources keep their previous version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Pods whose latest delivery attempt to this Sink failed (`failing_sinks` of their
    /// `GET /v1/status`), by pod name; at most 5, `failingPods` counts them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivery_errors: Vec<SinkDeliveryError>,
    /// Pods whose latest delivery attempt to this Sink failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failing_pods: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// A pod's latest failed delivery to a Sink. The error is the gateway's own text, which names
/// the failing step (`not_connected: tls_handshake: ...`) and never a credential.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SinkDeliveryError {
    /// The pod reporting it.
    pub pod: String,
    /// The source id whose delivery failed (of several, the one with the most failures).
    pub source: String,
    /// `<sink type>: <error>`, as the delivery row records it (at most 512 bytes).
    pub error: String,
    /// When the failures began: the first failed attempt since the last success (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Failed attempts in a row.
    pub failures: i64,
    /// The pod's circuit breaker for the sink is open: its deliveries are parked.
    #[serde(default)]
    pub breaker_open: bool,
}
