//! Replay jobs as stored state: the job record (`j:<id>`) and one paced step that moves a
//! page of dead rows back to due. The job's cursor and counters are written in the same batch
//! as the rows they moved, so a restart resumes exactly where the last step ended.

use ankusa_api::JobState;
use rocksdb::{ColumnFamily, DB, IteratorMode, ReadOptions, WriteBatch};
use serde::Serialize;

use super::codec::{self, DeadSummary, Envelope, RowState};
use super::index::{self, DeadCursor, LaneId};
use super::job::StoredJob;
use super::{Store, StoreError, classify, keys};

/// Delivered and dead-again counts of a job's deliveries, from counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JobSettled {
    pub delivered: i64,
    pub failed: i64,
}

/// Result of one step of a job.
#[derive(Debug, Clone, Default)]
pub struct StepResult {
    pub moved: u64,
    pub scanned: u64,
    /// Tenants whose rows became due, with their due time.
    pub tenants: Vec<String>,
    /// Ordering lanes that got rows back (they wait for dispatch to make them the head).
    pub lanes: Vec<LaneId>,
    /// Dead rows left dead because their sink's filter turns the hook away.
    pub filtered: u64,
    pub finished: bool,
}

/// What a `dlq` step asks before it moves a dead row back: whether the row's sink's current
/// filter takes its hook (the filters live in the gateway's config, not in the store). The
/// hook is read only for a sink that has a filter.
pub trait ReplayGate {
    /// Whether sink `sink` of source `source_id` has a filter now.
    fn filters(&self, source_id: &str, sink: u16) -> bool;
    /// Whether that filter takes `hook`.
    fn admits(&self, hook: &Envelope, sink: u16) -> bool;
}

/// Consults no filter: every matching dead row moves.
pub struct NoGate;

impl ReplayGate for NoGate {
    fn filters(&self, _: &str, _: u16) -> bool {
        false
    }

    fn admits(&self, _: &Envelope, _: u16) -> bool {
        true
    }
}

/// Keys one step examines at most.
const STEP_MAX_EXAMINED: usize = 10_000;

impl Store {
    pub fn put_job(&self, job: &StoredJob) -> Result<(), StoreError> {
        let db = self.db()?;
        let mut b = WriteBatch::default();
        b.put(keys::job(&job.id), job.encode());
        self.write(&db, b, true)
    }

    pub fn get_job(&self, id: &str) -> Result<Option<StoredJob>, StoreError> {
        let db = self.db()?;
        match db.get(keys::job(id)).map_err(|e| classify(&e))? {
            Some(v) => StoredJob::decode(&v)
                .map(Some)
                .ok_or_else(|| StoreError::Corrupt("replay job: does not decode".into())),
            None => Ok(None),
        }
    }

    pub fn list_jobs(&self) -> Result<Vec<StoredJob>, StoreError> {
        let db = self.db()?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(keys::prefix_end(keys::JOB_PREFIX));
        let mut out = Vec::new();
        let mut damaged = Vec::new();
        for item in db.iterator_opt(
            IteratorMode::From(keys::JOB_PREFIX, rocksdb::Direction::Forward),
            ro,
        ) {
            let (k, v) = item.map_err(|e| classify(&e))?;
            match StoredJob::decode(&v) {
                Some(job) => out.push(job),
                None => damaged.push((k.to_vec(), v.to_vec())),
            }
        }
        // Boot lists the jobs: a damaged one is set aside, the others resume.
        for (k, v) in damaged {
            let e = StoreError::Corrupt("replay job: does not decode".into());
            self.set_aside_now(super::corrupt::DEFAULT_FAMILY, &k, &v, &e)?;
        }
        Ok(out)
    }

    pub fn job_settled(&self, id: &str) -> Result<JobSettled, StoreError> {
        Ok(JobSettled {
            delivered: self.counter(&keys::c_job_delivered(id))?,
            failed: self.counter(&keys::c_job_failed(id))?,
        })
    }

    /// Moves up to `max_rows` matching dead rows back to due (fresh horizon, attempts 0,
    /// `replay_id` = the job), and commits them with the job's new cursor and counters.
    /// Only rows dead at or before the job's creation are touched, and a row this job already
    /// replayed that died again is skipped, so no row is picked up twice by one job. Unless
    /// the job has `ignore_filters`, a row whose sink's current filter turns its hook away
    /// (`gate`) stays dead and is counted in `skipped`.
    pub fn replay_step(
        &self,
        job: &mut StoredJob,
        max_rows: usize,
        now: u64,
        gate: &dyn ReplayGate,
    ) -> Result<StepResult, StoreError> {
        let _rows = self.rows_guard();
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let hooks = Self::cf(&db, keys::CF_HOOKS)?;
        let filter = &job.filter;
        let tenant = filter.tenant.as_deref();
        let until = filter.until.unwrap_or(u64::MAX).min(job.created_at);
        let (lower, upper) = index::dead_range(tenant, filter.since.unwrap_or(0), Some(until));
        let start = match job.cursor.as_deref().and_then(DeadCursor::decode) {
            Some(c) => {
                let mut after = c.key(tenant);
                after.push(0);
                after.max(lower)
            }
            None => lower,
        };
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(upper);
        let it = db.iterator_cf_opt(
            ix,
            ro,
            IteratorMode::From(&start, rocksdb::Direction::Forward),
        );

        let mut batch = WriteBatch::default();
        let mut res = StepResult {
            finished: true,
            ..Default::default()
        };
        let mut examined = 0;
        let mut last: Option<DeadCursor> = None;
        let job_id = job.id.clone();
        for item in it {
            if res.moved as usize >= max_rows || examined >= STEP_MAX_EXAMINED {
                res.finished = false;
                break;
            }
            let (k, v) = item.map_err(|e| classify(&e))?;
            examined += 1;
            let Some(at) = index::parse_dead(&k) else {
                continue;
            };
            last = Some(at);
            let (seq, sink) = (at.seq(), at.sink());
            let summary = match DeadSummary::decode(&v) {
                Ok(s) => s,
                Err(e) => {
                    self.set_aside(&db, &mut batch, keys::CF_INDEX, &k, &v, &e)?;
                    continue;
                }
            };
            if !index::matches(filter, &summary) {
                continue;
            }
            let Some(rv) = db
                .get_pinned_cf(&deliveries, keys::delivery(seq, sink))
                .map_err(|e| classify(&e))?
            else {
                continue;
            };
            let Some(mut row) = self.row_or_set_aside(&db, &mut batch, seq, sink, &rv)? else {
                continue;
            };
            if row.state != RowState::Dead || row.replay_id.as_deref() == Some(job_id.as_str()) {
                continue;
            }
            if !job.ignore_filters
                && gate.filters(&row.source_id, sink)
                && !self.gate_admits(&db, hooks, seq, sink, gate)?
            {
                res.filtered += 1;
                continue;
            }
            index::delete_dead(&mut batch, ix, seq, sink, &row);
            row.state = RowState::Pending;
            row.attempts = 0;
            row.first_attempt_at = None;
            row.due_at = now;
            row.dead_at = None;
            row.error_class = None;
            row.replay_id = Some(job_id.clone());
            batch.put_cf(deliveries, keys::delivery(seq, sink), row.encode());
            match LaneId::of(&row, sink) {
                // A replayed member of an ordering lane re-enters the lane.
                Some(lane) => {
                    batch.put_cf(ix, keys::lane_pending(lane.bytes(), seq), []);
                    if !res.lanes.contains(&lane) {
                        res.lanes.push(lane);
                    }
                }
                None => batch.put_cf(ix, keys::due(&row.tenant, now, seq, sink), []),
            }
            index::count(&mut batch, &row, 1, -1);
            if !res.tenants.contains(&row.tenant) {
                res.tenants.push(row.tenant.clone());
            }
            res.moved += 1;
        }
        res.scanned = examined as u64;
        job.moved += res.moved;
        job.scanned += res.scanned;
        job.skipped += res.filtered;
        if let Some(c) = last {
            job.cursor = Some(c.encode());
        }
        job.updated_at = now;
        if res.finished {
            job.state = JobState::Completed;
            job.completed_at = Some(now);
        }
        batch.put(keys::job(&job.id), job.encode());
        self.write(&db, batch, true)?;
        Ok(res)
    }

    /// Whether `gate` takes the hook of row (`seq`, `sink`). A hook that is gone or does not
    /// decode is let through: the delivery attempt reports it as it would without a filter.
    fn gate_admits(
        &self,
        db: &DB,
        hooks: &ColumnFamily,
        seq: u64,
        sink: u16,
        gate: &dyn ReplayGate,
    ) -> Result<bool, StoreError> {
        let Some(v) = db
            .get_pinned_cf(hooks, keys::hook(seq))
            .map_err(|e| classify(&e))?
        else {
            return Ok(true);
        };
        Ok(match codec::decode_envelope(seq, &v) {
            Ok(env) => gate.admits(&env, sink),
            Err(_) => true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{seed_dead, temp_store};
    use ankusa_api::DeadFilter;
    use ankusa_config::ErrorClass;

    fn job(filter: DeadFilter, created_at: u64) -> StoredJob {
        StoredJob {
            id: "0192f1c0-0000-7000-8000-000000000001".into(),
            kind: "dlq".into(),
            filter,
            rate: 1000,
            max_lag_ms: 2000,
            pause_after_dead: 20,
            state: JobState::Running,
            created_at,
            updated_at: created_at,
            completed_at: None,
            cursor: None,
            moved: 0,
            scanned: 0,
            released: 0,
            skipped: 0,
            archive: None,
            corrupt_segments: 0,
            reason: None,
            ignore_filters: false,
        }
    }

    /// A filter on every sink of source `src` that takes hooks of even seq only, counting the
    /// hooks it was asked about.
    struct EvenSeqs(std::cell::Cell<u32>);

    impl ReplayGate for EvenSeqs {
        fn filters(&self, source_id: &str, _: u16) -> bool {
            source_id == "src"
        }

        fn admits(&self, hook: &Envelope, _: u16) -> bool {
            self.0.set(self.0.get() + 1);
            hook.seq.is_multiple_of(2)
        }
    }

    #[test]
    fn rows_their_sinks_filter_turns_away_stay_dead_unless_filters_are_ignored() {
        let (_d, s) = temp_store();
        seed_dead(&s, "a", "src", 6, 100, ErrorClass::Transient);
        seed_dead(&s, "a", "other", 2, 200, ErrorClass::Transient);
        let gate = EvenSeqs(Default::default());
        let mut j = job(DeadFilter::default(), 1_000);
        let r = s.replay_step(&mut j, 100, 2_000, &gate).unwrap();
        assert_eq!((r.moved, r.filtered, r.finished), (5, 3, true));
        assert_eq!(
            gate.0.get(),
            6,
            "only rows of a filtered sink read their hook"
        );
        assert_eq!((j.moved, j.skipped), (5, 3));
        assert_eq!(s.counter(&keys::c_dead_tenant("a")).unwrap(), 3);
        // A targeted job sends the rest.
        let mut j2 = job(DeadFilter::default(), 1_000);
        j2.id = "0192f1c0-0000-7000-8000-000000000002".into();
        j2.ignore_filters = true;
        let r = s.replay_step(&mut j2, 100, 3_000, &gate).unwrap();
        assert_eq!((r.moved, r.filtered), (3, 0));
        assert_eq!(gate.0.get(), 6, "no filter asked");
        assert_eq!(s.counter(&keys::c_dead_tenant("a")).unwrap(), 0);
    }

    #[test]
    fn moves_pages_and_resumes_from_the_cursor() {
        let (_d, s) = temp_store();
        seed_dead(&s, "a", "src", 5, 100, ErrorClass::Transient);
        seed_dead(&s, "b", "src", 2, 110, ErrorClass::Permanent);
        let mut j = job(
            DeadFilter {
                tenant: Some("a".into()),
                ..Default::default()
            },
            1_000,
        );
        s.put_job(&j).unwrap();
        let r = s.replay_step(&mut j, 3, 2_000, &NoGate).unwrap();
        assert_eq!((r.moved, r.finished), (3, false));
        // A restart reads the job back with its cursor.
        let mut j = s.get_job(&j.id).unwrap().unwrap();
        let r = s.replay_step(&mut j, 10, 2_000, &NoGate).unwrap();
        assert_eq!((r.moved, r.finished), (2, true));
        assert_eq!(j.state, JobState::Completed);
        assert_eq!(j.moved, 5);
        assert_eq!(s.counter(&keys::c_dead_tenant("a")).unwrap(), 0);
        assert_eq!(s.counter(&keys::c_dead_tenant("b")).unwrap(), 2);
        let (claimed, _) = s.claim_due("a", 2_000, 10, u64::MAX).unwrap();
        assert_eq!(claimed.len(), 5);
        assert!(
            claimed
                .iter()
                .all(|c| c.row.replay_id.as_deref() == Some(j.id.as_str()) && c.row.attempts == 0)
        );
    }

    #[test]
    fn only_rows_dead_before_creation_and_matching_filters() {
        let (_d, s) = temp_store();
        seed_dead(&s, "a", "src", 3, 100, ErrorClass::Transient);
        seed_dead(&s, "a", "src", 2, 5_000, ErrorClass::Transient);
        let mut j = job(
            DeadFilter {
                error_class: Some(ErrorClass::Transient),
                ..Default::default()
            },
            1_000,
        );
        let r = s.replay_step(&mut j, 100, 6_000, &NoGate).unwrap();
        assert_eq!(r.moved, 3, "rows dead after the job was created stay dead");
        let mut j = job(
            DeadFilter {
                error_class: Some(ErrorClass::Permanent),
                ..Default::default()
            },
            10_000,
        );
        assert_eq!(s.replay_step(&mut j, 100, 6_000, &NoGate).unwrap().moved, 0);
    }
}
