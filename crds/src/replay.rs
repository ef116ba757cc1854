//! `ReplayJob`: a one-shot replay of dead-lettered deliveries on every pod of a Gateway.
//! The spec is immutable; cancel by deleting the object.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, LocalRef, conditions_schema, optional_free_form_object};

/// A replay of dead-lettered deliveries, fanned out to every pod of a Gateway.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "ankusa.dev",
    version = "v1alpha1",
    kind = "ReplayJob",
    namespaced,
    status = "ReplayJobStatus",
    shortname = "replay",
    category = "ankusa",
    doc = "A replay of dead-lettered deliveries on every pod of a Gateway (spec immutable)",
    printcolumn(
        name = "Gateway",
        type_ = "string",
        json_path = ".spec.gatewayRef.name"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Progress",
        type_ = "string",
        json_path = ".status.progress",
        description = "pods done / pods"
    ),
    printcolumn(name = "Moved", type_ = "integer", json_path = ".status.moved"),
    printcolumn(name = "Delivered", type_ = "integer", json_path = ".status.delivered"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Source",
        type_ = "string",
        priority = 1,
        json_path = ".spec.filter.source"
    ),
    printcolumn(
        name = "Failed",
        type_ = "integer",
        priority = 1,
        json_path = ".status.failed"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        json_path = ".status.message"
    )
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("ReplayJob spec is immutable; create a new ReplayJob"))]
#[serde(rename_all = "camelCase")]
pub struct ReplayJobSpec {
    /// The Gateway whose pods replay.
    pub gateway_ref: LocalRef,
    /// What is replayed: `dlq` (dead-lettered deliveries).
    #[serde(default)]
    pub kind: ReplayKind,
    /// Which dead deliveries; set fields combine with AND.
    #[serde(default)]
    pub filter: ReplayFilterSpec,
    /// Deliveries moved back per second, per pod (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
    /// Moves only while each pod's oldest due delivery is at most this late (default 2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lag_ms: Option<u64>,
    /// Consecutive dead letters among its deliveries that pause the job on a pod (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_dead: Option<u32>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplayKind {
    #[default]
    Dlq,
}

/// Error classes of dead deliveries (the gateway's own type).
pub use ankusa_config::ErrorClass;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayFilterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// A Source object's name (its source id is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A Sink object's name; needs `source` (the sink's position in that source is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
    /// Dead-lettered at or after this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Dead-lettered at or before this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ReplayPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl ReplayPhase {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ReplayPhase::Succeeded | ReplayPhase::Failed | ReplayPhase::Cancelled
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReplayPhase::Pending => "Pending",
            ReplayPhase::Running => "Running",
            ReplayPhase::Succeeded => "Succeeded",
            ReplayPhase::Failed => "Failed",
            ReplayPhase::Cancelled => "Cancelled",
        }
    }
}

/// The job on one pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayPodStatus {
    pub pod: String,
    /// UID of the pod the job was last created on; a new UID means the pod was recreated and
    /// the job is asked for again (same job id, so an existing job is found, not duplicated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    pub job_id: String,
    /// The gateway's job state: `running`, `paused`, `cancelled`, `completed`; `unknown` until
    /// the pod answered.
    pub state: String,
    #[serde(default)]
    pub moved: i64,
    #[serde(default)]
    pub scanned: i64,
    #[serde(default)]
    pub delivered: i64,
    /// Replayed deliveries that dead-lettered again.
    #[serde(default)]
    pub failed: i64,
    #[serde(default)]
    pub outstanding: i64,
    /// The scan is over and every moved delivery settled.
    #[serde(default)]
    pub done: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayJobStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ReplayPhase>,
    /// `pods done/pods` for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// The job id on every pod (derived from the object's UID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The request sent to every pod, fixed when the job started (the spec is immutable; a
    /// changed spec is reported and ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_free_form_object")]
    pub request: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    #[serde(default)]
    pub moved: i64,
    #[serde(default)]
    pub delivered: i64,
    #[serde(default)]
    pub failed: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<ReplayPodStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
