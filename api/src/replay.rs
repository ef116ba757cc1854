//! Replay jobs: the request that creates one (`POST /v1/replays`), the job as stored and
//! shown, and the state change (`PATCH /v1/replays/{id}`).

use ankusa_config::ErrorClass;
use serde::{Deserialize, Serialize};

use crate::dlq::{DeadFilter, FilterError};

pub const DEFAULT_RATE: u32 = 1_000;
/// Most rows a job moves per second.
pub const MAX_RATE: u32 = 100_000;
pub const DEFAULT_MAX_LAG_MS: u64 = 2_000;
pub const DEFAULT_PAUSE_AFTER_DEAD: u32 = 20;

/// A job's `rate`: `Err` is the message of `invalid_filter` (`field: rate`).
pub fn check_rate(rate: u32) -> Result<(), String> {
    if rate == 0 || rate > MAX_RATE {
        return Err(format!("must be 1..={MAX_RATE}, got {rate}"));
    }
    Ok(())
}

/// `POST /v1/replays`. The filter is given nested (`filter`) or at the top level of the body,
/// not both; unknown keys are refused (`400 invalid_body`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateReplay {
    /// A lowercase hyphenated UUID; absent: a new UUIDv7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<DeadFilter>,
    /// The filter's keys at the top level. `error_class` is text here so that a bad value is
    /// `invalid_filter` naming it, as the API documents.
    #[serde(flatten)]
    pub top: TopLevelFilter,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lag_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_dead: Option<u32>,
    /// `archive` jobs: hooks received at or after this time (unix ms). Required there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    /// `archive` jobs: hooks received before this time (unix ms). Required there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<u64>,
    /// `archive` jobs: the sinks (indexes in the source's `sinks`) to send to; absent: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sinks: Option<Vec<u16>>,
    /// `dlq` and `archive` jobs: send to each sink whether or not its current `filter` takes
    /// the hook (a targeted replay); default false: the filters decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_filters: Option<bool>,
}

/// An `archive` job's window and sink subset, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveWindow {
    /// Received at or after (unix ms).
    pub from: u64,
    /// Received before (unix ms).
    pub to: u64,
    /// Sink indexes; empty: every sink of the source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<u16>,
}

/// Most sinks an archive job names.
pub const MAX_ARCHIVE_SINKS: usize = 64;

impl CreateReplay {
    /// The archive window of an `archive` request (`from` and `to` required, `from < to`,
    /// distinct sinks); `None` for other kinds, which must not carry one.
    pub fn archive_window(&self) -> Result<Option<ArchiveWindow>, FilterError> {
        if self.kind != KIND_ARCHIVE {
            for (set, field) in [
                (self.from.is_some(), "from"),
                (self.to.is_some(), "to"),
                (self.sinks.is_some(), "sinks"),
            ] {
                if set {
                    return Err(FilterError::new(field, "is a filter of kind archive only"));
                }
            }
            return Ok(None);
        }
        let from = self
            .from
            .ok_or_else(|| FilterError::new("from", "is required for kind archive (unix ms)"))?;
        let to = self
            .to
            .ok_or_else(|| FilterError::new("to", "is required for kind archive (unix ms)"))?;
        if from >= to {
            return Err(FilterError::new("from", "must be before to"));
        }
        let mut sinks = self.sinks.clone().unwrap_or_default();
        if sinks.len() > MAX_ARCHIVE_SINKS {
            return Err(FilterError::new(
                "sinks",
                format!("names at most {MAX_ARCHIVE_SINKS} sinks"),
            ));
        }
        sinks.sort_unstable();
        let n = sinks.len();
        sinks.dedup();
        if sinks.len() != n {
            return Err(FilterError::new("sinks", "names a sink twice"));
        }
        Ok(Some(ArchiveWindow { from, to, sinks }))
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn default_kind() -> String {
    "dlq".into()
}

/// Job kinds: dead letters back to due, or quarantined hooks that now verify into the queue.
pub const KIND_DLQ: &str = "dlq";
pub const KIND_QUARANTINE: &str = "quarantine";
/// Archived hooks received in a window, sent again (to all or some of their source's sinks).
pub const KIND_ARCHIVE: &str = "archive";
/// Lifecycle events of the audit trail over `since`/`until` (event time), re-emitted to the
/// lifecycle sinks with their original ids.
pub const KIND_LIFECYCLE: &str = "lifecycle";

/// `CreateReplay`'s filter keys given at the top level of the body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopLevelFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<uuid::Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
}

impl CreateReplay {
    /// A request for a `dlq` job with the filter nested.
    pub fn dlq(job_id: impl Into<String>, filter: DeadFilter) -> Self {
        CreateReplay {
            job_id: Some(job_id.into()),
            kind: default_kind(),
            filter: Some(filter),
            ..Default::default()
        }
    }

    /// The filter, whether given nested or at the top level (not both), checked.
    pub fn filter(&self) -> Result<DeadFilter, FilterError> {
        let t = &self.top;
        let top = DeadFilter {
            tenant: t.tenant.clone(),
            source_id: t.source_id.clone(),
            id: t.id,
            sink: t.sink,
            error_class: match &t.error_class {
                None => None,
                Some(c) => Some(ErrorClass::parse(c).ok_or_else(|| {
                    FilterError::new("error_class", "must be permanent, throttled or transient")
                })?),
            },
            since: t.since,
            until: t.until,
        };
        let f = match &self.filter {
            Some(f) if top != DeadFilter::default() => {
                return Err(FilterError::new(
                    "filter",
                    format!("give the filter nested or at the top level, not both: {f:?}"),
                ));
            }
            Some(f) => f.clone(),
            None => top,
        };
        f.check()?;
        Ok(f)
    }

    /// This request with `filter` nested and nothing at the top level.
    pub fn with_filter(mut self, filter: DeadFilter) -> Self {
        self.filter = Some(filter);
        self.top = TopLevelFilter::default();
        self
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    #[default]
    Running,
    Paused,
    Cancelled,
    /// Every matching row has been moved (their deliveries may still be under way).
    Completed,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Paused => "paused",
            JobState::Cancelled => "cancelled",
            JobState::Completed => "completed",
        }
    }
}

/// A replay job as the gateway stores it and shows it. `id` and `state` are always there;
/// the rest reads as its default when a peer leaves it out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayJob {
    pub id: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub filter: DeadFilter,
    /// Rows moved per second at most.
    #[serde(default)]
    pub rate: u32,
    /// Moves only while dispatch's oldest due row is at most this late.
    #[serde(default)]
    pub max_lag_ms: u64,
    /// Consecutive dead letters among its deliveries that pause the job.
    #[serde(default)]
    pub pause_after_dead: u32,
    pub state: JobState,
    #[serde(default)]
    pub created_at: u64,
    #[serde(default)]
    pub updated_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<u64>,
    /// Opaque scan position (the last dead key examined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    #[serde(default)]
    pub moved: u64,
    #[serde(default)]
    pub scanned: u64,
    /// `quarantine` jobs: entries that verified and were committed as hooks.
    #[serde(default)]
    pub released: u64,
    /// `quarantine` jobs: entries that still fail verification (they stay in the pen) or
    /// duplicate a hook already accepted (they leave it). `archive` jobs: archived hooks in
    /// the window whose source is gone or that matched no sink (or no sink's filter). `dlq`
    /// jobs: dead rows whose sink's current filter turns the hook away (they stay dead).
    #[serde(default)]
    pub skipped: u64,
    /// `archive` jobs: the window and sink subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveWindow>,
    /// `archive` jobs: segments whose sha256 or index did not check out (reported, their
    /// hooks not sent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub corrupt_segments: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The sinks' current filters are not evaluated: every delivery the job selects is sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_filters: bool,
}

/// A job with its progress: `GET /v1/replays/{id}`, and the answer to a create or a patch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    #[serde(flatten)]
    pub job: ReplayJob,
    #[serde(default)]
    pub delivered: i64,
    #[serde(default)]
    pub failed: i64,
    /// Moved rows not yet delivered or dead again.
    #[serde(default)]
    pub outstanding: i64,
    /// The scan is over and every moved row has settled.
    #[serde(default)]
    pub done: bool,
}

/// `GET /v1/replays`, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobList {
    pub jobs: Vec<JobView>,
}

/// `PATCH /v1/replays/{id}`: `running`, `paused` or `cancelled` (text, so that another value
/// is `invalid_state` naming it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchReplay {
    pub state: String,
}

impl PatchReplay {
    pub fn to(state: JobState) -> Self {
        PatchReplay {
            state: state.as_str().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_is_nested_or_top_level() {
        let r: CreateReplay =
            serde_json::from_str(r#"{"tenant":"acme","sink":1,"error_class":"transient"}"#)
                .unwrap();
        let f = r.filter().unwrap();
        assert_eq!(f.tenant.as_deref(), Some("acme"));
        assert_eq!(f.error_class, Some(ErrorClass::Transient));
        let r: CreateReplay = serde_json::from_str(r#"{"error_class":"nope"}"#).unwrap();
        assert_eq!(r.filter().unwrap_err().field, "error_class");
        let r: CreateReplay =
            serde_json::from_str(r#"{"tenant":"a","filter":{"tenant":"b"}}"#).unwrap();
        assert_eq!(r.filter().unwrap_err().field, "filter");
        assert!(serde_json::from_str::<CreateReplay>(r#"{"zzz":1}"#).is_err());
        assert!(serde_json::from_str::<CreateReplay>(r#"{"filter":{"zzz":1}}"#).is_err());
        let r: CreateReplay = serde_json::from_str(r#"{"since":5,"until":4}"#).unwrap();
        assert_eq!(r.filter().unwrap_err().field, "since");
    }

    #[test]
    fn a_nested_request_serialises_without_top_level_keys() {
        let r = CreateReplay::dlq(
            "j",
            DeadFilter {
                tenant: Some("t".into()),
                ..Default::default()
            },
        );
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"job_id":"j","kind":"dlq","filter":{"tenant":"t"}}"#
        );
        assert_eq!(check_rate(0).unwrap_err(), "must be 1..=100000, got 0");
    }

    #[test]
    fn a_partial_view_reads_with_defaults() {
        let v: JobView = serde_json::from_str(r#"{"id":"j","state":"cancelled"}"#).unwrap();
        assert_eq!(v.job.state, JobState::Cancelled);
        assert_eq!(v.job.moved, 0);
    }
}
