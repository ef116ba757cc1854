//! `ReplayJob`: a one-shot replay on every pod of a Gateway, of one kind: dead-lettered
//! deliveries (`dlq`), archived hooks received in a window (`archive`), or quarantined hooks
//! that now verify (`quarantine`). The spec is immutable; cancel by deleting the object.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, LocalRef, conditions_schema, optional_free_form_object};
pub use ankusa_config::OnFilterError;

/// A replay fanned out to every pod of a Gateway: dead letters, archived hooks or quarantined
/// hooks (`kind`).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "ankusa.dev",
    version = "v1alpha1",
    kind = "ReplayJob",
    namespaced,
    status = "ReplayJobStatus",
    shortname = "replay",
    category = "ankusa",
    doc = "A replay on every pod of a Gateway: dead letters, archived hooks or quarantined hooks (spec immutable)",
    printcolumn(
        name = "Gateway",
        type_ = "string",
        json_path = ".spec.gatewayRef.name"
    ),
    printcolumn(name = "Kind", type_ = "string", json_path = ".spec.kind"),
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
        name = "Finished",
        type_ = "date",
        json_path = ".status.completionTime",
        description = "how long ago the job finished (succeeded, failed or was cancelled)"
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
#[x_kube(
    validation = Rule::new("self == oldSelf").message("ReplayJob spec is immutable; create a new ReplayJob"),
    validation = Rule::new("!has(self.kind) || self.kind != 'archive' || has(self.archive)")
        .message("kind archive requires archive.from and archive.to"),
    validation = Rule::new("(has(self.kind) && self.kind == 'archive') || !has(self.archive)")
        .message("archive is only for kind archive"),
    validation = Rule::new("!has(self.kind) || self.kind != 'archive' || !has(self.filter) || (!has(self.filter.sink) && !has(self.filter.errorClass) && !has(self.filter.since) && !has(self.filter.until))")
        .message("kind archive filters by filter.tenant, filter.source and filter.id only (the window is archive.from and archive.to, the sinks archive.sinks)"),
    validation = Rule::new("!has(self.kind) || self.kind != 'quarantine' || !has(self.filter) || (!has(self.filter.sink) && !has(self.filter.errorClass))")
        .message("kind quarantine takes no filter.sink or filter.errorClass"),
    validation = Rule::new("!has(self.archive) || !has(self.archive.sinks) || size(self.archive.sinks) == 0 || (has(self.filter) && has(self.filter.source))")
        .message("archive.sinks needs filter.source (the sinks are that Source's)"),
    validation = Rule::new("!has(self.ignoreFilters) || !self.ignoreFilters || !has(self.kind) || self.kind != 'quarantine'")
        .message("ignoreFilters is for kind dlq and archive (a released quarantined hook is routed as the edge would route it now)"),
    validation = Rule::new("!has(self.dryRun) || !self.dryRun || (has(self.kind) && self.kind == 'archive' && has(self.filter) && has(self.filter.source) && !has(self.filter.id))")
        .message("dryRun needs kind archive and filter.source (it tries that Source's filters on its archived hooks; filter.id is not taken)"),
    validation = Rule::new("!has(self.dryRun) || !self.dryRun || ((!has(self.archive) || !has(self.archive.sinks) || size(self.archive.sinks) == 0) && (!has(self.ignoreFilters) || !self.ignoreFilters))")
        .message("dryRun reports every sink of the Source: archive.sinks and ignoreFilters are not taken"),
    validation = Rule::new("(has(self.dryRun) && self.dryRun) || ((!has(self.dryRunSinks) || size(self.dryRunSinks) == 0) && !has(self.dryRunLimit))")
        .message("dryRunSinks and dryRunLimit need dryRun: true")
)]
#[serde(rename_all = "camelCase")]
pub struct ReplayJobSpec {
    /// The Gateway whose pods replay.
    pub gateway_ref: LocalRef,
    /// What is replayed: `dlq` (dead-lettered deliveries, the default), `archive` (archived
    /// hooks received in `archive.from`..`archive.to`, sent again) or `quarantine` (hooks held
    /// in the quarantine pen, verified again and accepted when they pass).
    #[serde(default)]
    pub kind: ReplayKind,
    /// Which dead deliveries, archived hooks or quarantined hooks; set fields combine with AND.
    /// `archive` takes `tenant`, `source` and `id` only; `quarantine` takes no `sink` or
    /// `errorClass`.
    #[serde(default)]
    pub filter: ReplayFilterSpec,
    /// Kind `archive` only (and required there): the window of receive times and the sinks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveReplaySpec>,
    /// Deliveries moved back (or hooks sent again, or entries released) per second, per pod
    /// (1 to 100000; default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub rate: Option<u32>,
    /// Moves only while each pod's oldest due delivery is at most this late (ms, 1 to
    /// 3600000; default 2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3_600_000))]
    pub max_lag_ms: Option<u64>,
    /// Consecutive dead letters among its deliveries that pause the job on a pod (1 to
    /// 1000000; default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub pause_after_dead: Option<u32>,
    /// Seconds after the job finished (succeeded, failed or cancelled) when the operator
    /// deletes the ReplayJob, as a Job's `ttlSecondsAfterFinished`; 0 deletes it as soon as it
    /// finishes. Absent: the ReplayJob is kept until deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 31_536_000))]
    pub ttl_seconds_after_finished: Option<u32>,
    /// Kinds `dlq` and `archive`: send to each sink whether or not its current `filter` takes
    /// the hook (a targeted replay). Default false: the filters decide (docs/filters.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_filters: bool,
    /// Kind `archive` with `filter.source`: nothing is sent. Each pod tries the Source's sink
    /// filters and transforms (or `dryRunSinks`) on the hooks it archived in the window and the
    /// status sums how many each sink would get (`status.dryRun`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// `dryRun` only: the routing to try instead of the Source's, by Sink name (same fields as
    /// `Source.spec.sinks[]`); a Sink of the Source not named here keeps its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub dry_run_sinks: Vec<DryRunSink>,
    /// `dryRun` only: archived hooks each pod examines at most (1 to 100000; default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub dry_run_limit: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplayKind {
    /// Dead-lettered deliveries back to due.
    #[default]
    Dlq,
    /// Archived hooks received in a window, sent again to all or some of their sinks.
    Archive,
    /// Quarantined hooks verified again against the source's current secrets; those that
    /// pass are accepted (with their original id) and delivered.
    Quarantine,
}

impl ReplayKind {
    /// The gateway's name of the kind (`POST /v1/replays`, `kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayKind::Dlq => "dlq",
            ReplayKind::Archive => "archive",
            ReplayKind::Quarantine => "quarantine",
        }
    }
}

/// What a `kind: archive` replay sends again.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveReplaySpec {
    /// Hooks received at or after this time (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub from: String,
    /// Hooks received before this time (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub to: String,
    /// Sink object names to send to, among `filter.source`'s sinks (resolved to their
    /// positions there); empty: every sink of each hook's source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<String>,
}

/// One sink's routing to try in a dry run (as `Source.spec.sinks[]`, with the expressions'
/// size bounded as the gateway bounds them).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRunSink {
    /// Name of a Sink of the Source `filter.source` names.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The CEL filter to try (absent: the sink takes every hook).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub filter: Option<String>,
    /// What a filter that cannot be evaluated does: `deliver` (default) or `skip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_filter_error: Option<OnFilterError>,
    /// The transform to try.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<DryRunTransform>,
}

/// CEL expressions for the body and the extra headers a sink would send.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DryRunTransform {
    /// The outgoing body's expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub body: Option<String>,
    /// The extra headers' expression (a map of names to strings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub headers: Option<String>,
}

/// Error classes of dead deliveries (the gateway's own type).
pub use ankusa_config::ErrorClass;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayFilterSpec {
    /// Only hooks of this tenant.
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
    /// One hook, by its id (a UUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `dlq`: dead-lettered at or after this time; `quarantine`: received at or after it
    /// (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub since: Option<String>,
    /// `dlq`: dead-lettered at or before this time; `quarantine`: received at or before it
    /// (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
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
    /// The pod's name.
    pub pod: String,
    /// UID of the pod the job was last created on; a new UID means the pod was recreated and
    /// the job is asked for again (same job id, so an existing job is found, not duplicated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    /// The job's id on the pod (`/v1/replays/<id>`).
    pub job_id: String,
    /// The gateway's job state: `running`, `paused`, `cancelled`, `completed`; `unknown` until
    /// the pod answered.
    pub state: String,
    /// `dlq`: dead deliveries moved back; `archive` and `quarantine`: the deliveries queued
    /// for the hooks sent again or released (one per sink).
    #[serde(default)]
    pub moved: i64,
    /// Rows the job looked at.
    #[serde(default)]
    pub scanned: i64,
    /// `archive`: hooks sent again; `quarantine`: entries that verified and were accepted as
    /// hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<i64>,
    /// `quarantine`: entries that still fail verification (they stay in the pen) or repeat a
    /// hook already accepted; `archive`: archived hooks whose source is gone or that matched
    /// no sink (or no sink's filter); `dlq`: dead rows whose sink's filter turns the hook away
    /// (they stay dead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<i64>,
    /// `archive`: segments whose checksum or index did not check out; their hooks were not
    /// sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt_segments: Option<i64>,
    /// Replayed deliveries that reached their sink.
    #[serde(default)]
    pub delivered: i64,
    /// Replayed deliveries that dead-lettered again.
    #[serde(default)]
    pub failed: i64,
    /// Replayed deliveries not settled yet (queued or retrying).
    #[serde(default)]
    pub outstanding: i64,
    /// The scan is over and every moved delivery settled.
    #[serde(default)]
    pub done: bool,
    /// The last error the operator got from the pod about this job (never a credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the operator last read the job on the pod (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// The job's progress on every pod of its Gateway.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayJobStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing`, `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Cancelled`.
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
    /// When the job was first sent to the pods (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// When the job reached a final phase (RFC 3339); `ttlSecondsAfterFinished` counts from
    /// here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// Deliveries moved back (or queued for hooks sent again), every pod together.
    #[serde(default)]
    pub moved: i64,
    /// Replayed deliveries that reached their sink, every pod together.
    #[serde(default)]
    pub delivered: i64,
    /// Replayed deliveries that dead-lettered again, every pod together.
    #[serde(default)]
    pub failed: i64,
    /// `archive`: hooks sent again, `quarantine`: entries released, on every pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<i64>,
    /// What every pod skipped (see the pods' `skipped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<i64>,
    /// `archive`: corrupt segments on every pod (their hooks were not sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt_segments: Option<i64>,
    /// The job on each pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<ReplayPodStatus>,
    /// Why the job is where it is (a refusal, a pause, the pods still running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `dryRun` jobs: what every pod's archived hooks in the window would give, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<DryRunStatus>,
}

/// A dry run's counts, every pod together.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRunStatus {
    /// Archived hooks the expressions ran on.
    pub examined: i64,
    /// Some pod held more hooks in the window than `dryRunLimit` (or more segments than one run
    /// reads): the counts cover the first ones.
    #[serde(default)]
    pub truncated: bool,
    /// Archived segments that failed their check and were not read.
    #[serde(default)]
    pub corrupt_segments: i64,
    /// Each sink of the Source, in its order.
    #[serde(default)]
    pub sinks: Vec<DryRunSinkStatus>,
}

/// What one sink would get.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRunSinkStatus {
    /// The Sink object's name.
    pub name: String,
    /// Hooks it would get (the filter matched, or failed with `onFilterError: deliver`).
    pub matched: i64,
    /// Hooks its filter turns away (or failed with `onFilterError: skip`).
    pub filtered: i64,
    /// Filter failures by error class (counted in `matched` or `filtered` as the policy says).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub filter_errors: std::collections::BTreeMap<String, i64>,
    /// Transform failures by error class (such a delivery would be dead-lettered).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub transform_errors: std::collections::BTreeMap<String, i64>,
}
