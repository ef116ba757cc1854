//! The admin API's wire types this client uses, mirrored from the gateway's own definitions
//! (`api/src/dlq.rs`, `api/src/replay.rs`, `api/src/store.rs`) so that this crate links none of
//! the gateway. Answers are read leniently (unknown keys ignored, missing counters as 0, an
//! unknown enum value as `Unknown`), so a newer gateway does not break an older client.

use serde::{Deserialize, Serialize};

/// How a delivery failed for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    Permanent,
    Throttled,
    Transient,
    /// A class this SDK does not know (a newer gateway); never sent.
    #[serde(other)]
    Unknown,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Permanent => "permanent",
            ErrorClass::Throttled => "throttled",
            ErrorClass::Transient => "transient",
            ErrorClass::Unknown => "unknown",
        }
    }
}

/// `GET /v1/dlq` parameters. Set fields combine with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqQuery {
    /// Only this tenant (a tenant-limited token holding one tenant defaults to it).
    pub tenant: Option<String>,
    pub source_id: Option<String>,
    /// A sink index of the source.
    pub sink: Option<u16>,
    pub error_class: Option<ErrorClass>,
    /// Dead-lettered at or after / at or before (unix ms).
    pub since: Option<u64>,
    pub until: Option<u64>,
    /// Entries per page, 1 to 1000 (the API's default: 100).
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page (with the same filters).
    pub cursor: Option<String>,
}

impl DlqQuery {
    pub(crate) fn params(&self) -> Vec<(&'static str, String)> {
        let mut p = Vec::new();
        push(&mut p, "tenant", &self.tenant);
        push(&mut p, "source_id", &self.source_id);
        push(&mut p, "sink", &self.sink);
        push(
            &mut p,
            "error_class",
            &self.error_class.map(ErrorClass::as_str),
        );
        push(&mut p, "since", &self.since);
        push(&mut p, "until", &self.until);
        push(&mut p, "limit", &self.limit);
        push(&mut p, "cursor", &self.cursor);
        p
    }
}

fn push<T: ToString>(p: &mut Vec<(&'static str, String)>, name: &'static str, v: &Option<T>) {
    if let Some(v) = v {
        p.push((name, v.to_string()));
    }
}

/// One dead letter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadEntry {
    /// The hook's id (a UUID).
    pub id: String,
    pub seq: u64,
    pub tenant: String,
    pub source_id: String,
    pub sink: u16,
    pub sink_type: String,
    pub error_class: ErrorClass,
    /// The last error, `<sink type>: <error>`.
    #[serde(default)]
    pub reason: Option<String>,
    pub attempts: u32,
    /// Unix ms.
    pub dead_at: u64,
    #[serde(default)]
    pub first_attempt_at: Option<u64>,
    #[serde(default)]
    pub received_at: Option<u64>,
    pub size: u64,
    /// The replay job whose delivery died again.
    #[serde(default)]
    pub replay_id: Option<String>,
}

/// `GET /v1/dlq`: a page, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadPage {
    pub entries: Vec<DeadEntry>,
    /// Pass back as [`DlqQuery::cursor`]; `None` when the scan reached the end.
    #[serde(default)]
    pub next_cursor: Option<String>,
    /// Exact where it is free (no filter or only a tenant, or a first page that reached the
    /// end).
    #[serde(default)]
    pub total: Option<u64>,
    /// Keys this request examined.
    #[serde(default)]
    pub examined: u64,
}

/// Which dead letters (or pen entries, or archived hooks) a replay job means. Every field is
/// optional; set fields combine with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// One hook (a UUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
    /// At or after / at or before (unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
}

/// Replay job kinds.
pub const KIND_DLQ: &str = "dlq";
pub const KIND_QUARANTINE: &str = "quarantine";
pub const KIND_ARCHIVE: &str = "archive";
pub const KIND_LIFECYCLE: &str = "lifecycle";

/// `POST /v1/replays`: a durable, paced move of dead letters (or pen entries, archived hooks,
/// lifecycle events) back into delivery. The API checks the rules of each kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayRequest {
    /// A lowercase hyphenated UUID; absent: the gateway makes a UUIDv7. Creating the same id
    /// with the same kind and filter again returns the existing job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// `dlq` (absent), `quarantine`, `archive` or `lifecycle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<ReplayFilter>,
    /// Rows moved per second at most, 1 to 100000 (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
    /// Moves only while dispatch's oldest due row is at most this late (default 2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lag_ms: Option<u64>,
    /// Consecutive dead letters among its deliveries that pause the job (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_dead: Option<u32>,
    /// `archive` jobs: received at or after / before (unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<u64>,
    /// `archive` jobs: the sink indexes to send to; absent: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sinks: Option<Vec<u16>>,
    /// `dlq` and `archive` jobs: send whether or not each sink's current filter takes the
    /// hook (a targeted replay); absent: the filters decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_filters: Option<bool>,
}

impl ReplayRequest {
    /// A `dlq` job over `filter`.
    pub fn dlq(filter: ReplayFilter) -> ReplayRequest {
        ReplayRequest {
            kind: Some(KIND_DLQ.to_string()),
            filter: Some(filter),
            ..Default::default()
        }
    }
}

/// A replay job's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayState {
    #[default]
    Running,
    Paused,
    Cancelled,
    /// Every matching row has been moved (their deliveries may still be under way).
    Completed,
    /// A state this SDK does not know (a newer gateway).
    #[serde(other)]
    Unknown,
}

/// An `archive` job's window and sink subset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveWindow {
    pub from: u64,
    pub to: u64,
    #[serde(default)]
    pub sinks: Vec<u16>,
}

/// A replay job with its progress: `GET /v1/replays/{id}`, and the answer to a create or a
/// patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayJob {
    pub id: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub filter: ReplayFilter,
    #[serde(default)]
    pub rate: u32,
    #[serde(default)]
    pub max_lag_ms: u64,
    #[serde(default)]
    pub pause_after_dead: u32,
    pub state: ReplayState,
    #[serde(default)]
    pub created_at: u64,
    #[serde(default)]
    pub updated_at: u64,
    #[serde(default)]
    pub completed_at: Option<u64>,
    /// Opaque scan position.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Rows moved back.
    #[serde(default)]
    pub moved: u64,
    /// Keys examined.
    #[serde(default)]
    pub scanned: u64,
    /// `quarantine`/`archive` jobs: hooks released.
    #[serde(default)]
    pub released: u64,
    #[serde(default)]
    pub skipped: u64,
    #[serde(default)]
    pub archive: Option<ArchiveWindow>,
    #[serde(default)]
    pub corrupt_segments: u64,
    /// Why it paused itself.
    #[serde(default)]
    pub reason: Option<String>,
    /// The sinks' filters are not evaluated.
    #[serde(default)]
    pub ignore_filters: bool,
    /// Moved rows since delivered / dead again / not yet settled.
    #[serde(default)]
    pub delivered: i64,
    #[serde(default)]
    pub failed: i64,
    #[serde(default)]
    pub outstanding: i64,
    /// Completed and nothing outstanding.
    #[serde(default)]
    pub done: bool,
}

/// `PATCH /v1/replays/{id}`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PatchReplay {
    pub state: ReplayState,
}

/// `GET /v1/quarantine` parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuarantineQuery {
    pub tenant: Option<String>,
    pub source_id: Option<String>,
    /// Only this entry (a UUID).
    pub id: Option<String>,
    /// Received at or after / at or before (unix ms).
    pub since: Option<u64>,
    pub until: Option<u64>,
    /// Entries, 1 to 1000 (default 100).
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

impl QuarantineQuery {
    pub(crate) fn params(&self) -> Vec<(&'static str, String)> {
        let mut p = Vec::new();
        push(&mut p, "tenant", &self.tenant);
        push(&mut p, "source_id", &self.source_id);
        push(&mut p, "id", &self.id);
        push(&mut p, "since", &self.since);
        push(&mut p, "until", &self.until);
        push(&mut p, "limit", &self.limit);
        push(&mut p, "cursor", &self.cursor);
        p
    }
}

/// One entry of the quarantine pen, without its body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PenEntry {
    /// A UUID.
    pub id: String,
    pub source_id: String,
    pub tenant: String,
    /// Unix ms.
    pub received_at: u64,
    /// Why verification failed (`no_matching_signature`, ...).
    pub reason: String,
    /// What the entry counts against `quarantine.max_bytes`.
    pub size: u64,
    #[serde(default)]
    pub method: String,
    #[serde(default)]
    pub path: String,
    /// The tenant came from the URL (`routing: tenant_path`).
    #[serde(default)]
    pub url_tenant: bool,
}

/// `GET /v1/quarantine`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantinePage {
    pub entries: Vec<PenEntry>,
    /// The whole pen's entries and bytes, only without a filter (and not to a tenant-limited
    /// token).
    #[serde(default)]
    pub total: Option<i64>,
    #[serde(default)]
    pub bytes: Option<i64>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_serialises_only_what_is_set() {
        let r = ReplayRequest::dlq(ReplayFilter {
            tenant: Some("acme".into()),
            error_class: Some(ErrorClass::Permanent),
            ..Default::default()
        });
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"kind":"dlq","filter":{"tenant":"acme","error_class":"permanent"}}"#
        );
    }

    #[test]
    fn answers_read_leniently() {
        let j: ReplayJob =
            serde_json::from_str(r#"{"id":"j","state":"exploded","new_field":1}"#).unwrap();
        assert_eq!(j.state, ReplayState::Unknown);
        assert_eq!(j.moved, 0);
        let e: ErrorClass = serde_json::from_str(r#""cosmic""#).unwrap();
        assert_eq!(e, ErrorClass::Unknown);
    }
}
