//! The replay job record as stored under `j:<id>` (JSON): the store's own type, so the admin
//! API's `ReplayJob` can change shape without changing what is on disk. The record's fields,
//! names, defaults and omissions are fixed here; the filter, state and archive window inside
//! it are the shared value types of `ankusa-api` (the same types the store's DLQ scans take).
//! Records written before this type existed (by serialising `ankusa_api::ReplayJob`) decode
//! and re-encode to the same bytes (tests below). Imports nothing else of the store.

use ankusa_api::{ArchiveWindow, DeadFilter, JobState};
use serde::{Deserialize, Serialize};

/// A replay job as the store keeps it. `id` and `state` are required; every other field
/// reads as its default when absent (records written by older releases).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredJob {
    pub id: String,
    /// `dlq`, `quarantine` or `archive`.
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
    /// Opaque scan position: a dead-index cursor (`dlq`), a pen key in hex (`quarantine`),
    /// an archive position (`archive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    #[serde(default)]
    pub moved: u64,
    #[serde(default)]
    pub scanned: u64,
    /// `quarantine` jobs: entries committed as hooks.
    #[serde(default)]
    pub released: u64,
    /// `quarantine` jobs: entries that stay or were duplicates; `archive` jobs: hooks not sent;
    /// `dlq` jobs: dead rows their sink's filter turned away.
    #[serde(default)]
    pub skipped: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveWindow>,
    /// `archive` jobs: segments that did not check out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub corrupt_segments: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The sinks' filters are not evaluated (absent: false, as before the field existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_filters: bool,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl StoredJob {
    /// The record's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a job record serialises")
    }

    /// A record from its bytes; `None` when they do not decode.
    pub(crate) fn decode(bytes: &[u8]) -> Option<StoredJob> {
        serde_json::from_slice(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_api::ReplayJob;
    use ankusa_config::ErrorClass;

    /// Bytes as a release before `StoredJob` wrote them (`serde_json::to_vec(&ReplayJob)`),
    /// every optional field present.
    const OLD_FULL: &str = concat!(
        r#"{"id":"0192f1c0-0000-7000-8000-000000000001","kind":"archive","#,
        r#""filter":{"tenant":"acme","source_id":"gh","sink":2,"error_class":"transient","#,
        r#""since":10,"until":20},"rate":500,"max_lag_ms":2000,"pause_after_dead":20,"#,
        r#""state":"completed","created_at":1000,"updated_at":2000,"completed_at":2000,"#,
        r#""cursor":"00ff","moved":7,"scanned":9,"released":3,"skipped":1,"#,
        r#""archive":{"from":1,"to":5,"sinks":[0,2]},"corrupt_segments":4,"#,
        r#""reason":"paused: storage is not configured on this node"}"#
    );

    /// The same, with every omitted-when-empty field left out.
    const OLD_SPARSE: &str = concat!(
        r#"{"id":"j2","kind":"dlq","filter":{},"rate":1000,"max_lag_ms":2000,"#,
        r#""pause_after_dead":20,"state":"running","created_at":5,"updated_at":5,"#,
        r#""moved":0,"scanned":0,"released":0,"skipped":0}"#
    );

    #[test]
    fn a_record_written_by_the_old_type_reads_back_and_writes_the_same_bytes() {
        for old in [OLD_FULL, OLD_SPARSE] {
            let job = StoredJob::decode(old.as_bytes()).expect("decodes");
            assert_eq!(String::from_utf8(job.encode()).unwrap(), old);
        }
        let full = StoredJob::decode(OLD_FULL.as_bytes()).unwrap();
        assert_eq!(full.state, JobState::Completed);
        assert_eq!(full.filter.error_class, Some(ErrorClass::Transient));
        assert_eq!(
            full.archive.as_ref().map(|w| w.sinks.clone()),
            Some(vec![0, 2])
        );
        assert_eq!((full.corrupt_segments, full.moved), (4, 7));
    }

    #[test]
    fn the_api_job_and_the_record_encode_alike() {
        // Each way: what the API type writes, the record reads and writes byte for byte.
        for old in [OLD_FULL, OLD_SPARSE] {
            let api: ReplayJob = serde_json::from_str(old).unwrap();
            let api_bytes = serde_json::to_vec(&api).unwrap();
            assert_eq!(StoredJob::decode(&api_bytes).unwrap().encode(), api_bytes);
        }
    }

    #[test]
    fn a_minimal_record_takes_defaults_and_id_and_state_are_required() {
        let job = StoredJob::decode(br#"{"id":"x","state":"paused"}"#).unwrap();
        assert_eq!(job.state, JobState::Paused);
        assert_eq!((job.rate, job.moved, job.kind.as_str()), (0, 0, ""));
        assert!(StoredJob::decode(br#"{"state":"paused"}"#).is_none());
        assert!(StoredJob::decode(br#"{"id":"x"}"#).is_none());
        assert!(StoredJob::decode(b"not json").is_none());
    }
}
