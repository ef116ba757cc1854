//! A replay job between the admin API's type (`ankusa_api::ReplayJob`, what the replayer holds
//! and shows) and the store's record (`ankusa_store::StoredJob`, what is on disk). The two
//! carry the same fields today; each conversion names every field of both types, so a field
//! added to one and not the other does not compile. A leaf: imports only those two crates,
//! so `replay` and `archive::replay` both use it without a circle.

use ankusa_api::ReplayJob;
use ankusa_store::StoredJob;

/// Moves every field of one job type into the other; a missing or extra field is an error.
#[rustfmt::skip]
macro_rules! same_fields {
    ($v:expr, $from:ident => $to:ident) => {{
        let $from {
            id, kind, filter, rate, max_lag_ms, pause_after_dead, state, created_at,
            updated_at, completed_at, cursor, moved, scanned, released, skipped, archive,
            corrupt_segments, reason, ignore_filters,
        } = $v;
        $to {
            id, kind, filter, rate, max_lag_ms, pause_after_dead, state, created_at,
            updated_at, completed_at, cursor, moved, scanned, released, skipped, archive,
            corrupt_segments, reason, ignore_filters,
        }
    }};
}

/// The record the store writes for this job.
pub fn to_stored(job: &ReplayJob) -> StoredJob {
    same_fields!(job.clone(), ReplayJob => StoredJob)
}

/// The job a stored record is.
pub fn from_stored(rec: StoredJob) -> ReplayJob {
    same_fields!(rec, StoredJob => ReplayJob)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_api::{ArchiveWindow, DeadFilter, JobState};

    fn job() -> ReplayJob {
        ReplayJob {
            id: "0192f1c0-0000-7000-8000-000000000001".into(),
            kind: "archive".into(),
            filter: DeadFilter {
                tenant: Some("acme".into()),
                ..Default::default()
            },
            rate: 500,
            max_lag_ms: 2_000,
            pause_after_dead: 20,
            state: JobState::Paused,
            created_at: 1_000,
            updated_at: 2_000,
            completed_at: Some(3_000),
            cursor: Some("00ff".into()),
            moved: 7,
            scanned: 9,
            released: 3,
            skipped: 1,
            archive: Some(ArchiveWindow {
                from: 1,
                to: 5,
                sinks: vec![0, 2],
            }),
            corrupt_segments: 4,
            reason: Some("paused".into()),
            ignore_filters: true,
        }
    }

    #[test]
    fn a_job_survives_the_round_trip_and_is_stored_as_the_api_writes_it() {
        let j = job();
        let rec = to_stored(&j);
        // Records written before the store had its own type are `ReplayJob`'s JSON.
        assert_eq!(
            serde_json::to_vec(&rec).unwrap(),
            serde_json::to_vec(&j).unwrap()
        );
        assert_eq!(from_stored(rec), j);
    }
}
