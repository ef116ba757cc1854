//! `kind: archive` jobs: archived hooks received in the job's window are committed again as
//! new hooks with their original ids (`hook::record`, no dedupe, no new obligation), rows only
//! for the job's sink subset whose current filters take the hook (all of them with
//! `ignore_filters`; a hook no sink takes is skipped), each row carrying the job's id as
//! `replay_id`, and the job's cursor (segment, record) in the same synced batch, so a restart
//! resumes after the last hook committed and no hook of the window is sent twice by one job.
//!
//! Segments are read whole and checked against their catalogued sha256: a segment that fails
//! (or is missing from the store) is counted in `corrupt_segments`, named in the job's reason,
//! and none of its hooks is sent.
//!
//! Imports `archive` (the segments and their catalogue), `blob` (a missing object), `hook`,
//! `live` and `metrics`.

use std::sync::Arc;

use ankusa_api::{ArchiveWindow, JobState, KIND_ARCHIVE, ReplayJob};
use ankusa_core::now_ms;
use ankusa_format::segment::{Record, SegmentRow};
use ankusa_store::{Committed, IngestRecord, Store, StoreError};

use super::job_record::to_stored;
use super::{JobRt, Replayer};
use crate::archive::{Archive, ArchiveError};
use crate::blob::BlobError;
use crate::blocking::blocking;
use crate::hook::{self, Filters, Keyed};
use crate::live::Live;
use crate::metrics::Metrics;

/// Segments a step lists at once while looking for the next one in the window.
const LIST: usize = 64;
/// Pages of segment rows one step lists at most.
const MAX_LISTS: usize = 100;

/// A segment already read, kept between steps of one job (a segment holds far more hooks than
/// one step sends).
pub struct Cached {
    first_seq: u64,
    records: Arc<Vec<Record>>,
}

/// Where a job is: the segment (its `first_seq`) and the next record's index in it.
fn parse_cursor(c: Option<&str>) -> (u64, usize) {
    c.and_then(|c| c.split_once(':'))
        .and_then(|(s, i)| Some((s.parse().ok()?, i.parse().ok()?)))
        .unwrap_or((0, 0))
}

fn cursor(seg: u64, next: usize) -> String {
    format!("{seg}:{next}")
}

/// What one step did.
#[derive(Debug, Default)]
pub struct Stepped {
    /// Records examined.
    pub looked: u64,
    pub committed: Option<Committed>,
    pub tenants: Vec<String>,
}

/// What a step reads from: the archive, the store, the sources in force.
pub struct StepCtx<'a> {
    pub archive: &'a Archive,
    pub store: &'a Arc<Store>,
    pub live: &'a Live,
    pub metrics: &'a Metrics,
}

/// Runs one step of `job` (at most `n` hooks) and returns it updated.
pub async fn step(
    ctx: StepCtx<'_>,
    job: &mut ReplayJob,
    cache: &mut Option<Cached>,
    n: usize,
    now: u64,
) -> Result<Stepped, ArchiveError> {
    let StepCtx {
        archive,
        store,
        live,
        metrics,
    } = ctx;
    let window = job.archive.clone().unwrap_or_default();
    let (mut seg_first, mut next) = parse_cursor(job.cursor.as_deref());
    // The segment to read: the cursor's, or the next one overlapping the window (a step lists
    // at most `MAX_LISTS` pages of segment rows; the next step goes on from there).
    let mut lists = 0;
    let row = loop {
        lists += 1;
        if lists > MAX_LISTS {
            job.cursor = Some(cursor(seg_first, 0));
            job.updated_at = now;
            return Ok(Stepped::default());
        }
        let s = store.clone();
        let rows = blocking(move || s.archive_segments(seg_first, LIST)).await?;
        if rows.is_empty() {
            finish(job, now);
            return Ok(Stepped::default());
        }
        let last = rows.last().map(|r| r.first_seq).unwrap_or(seg_first);
        if let Some(r) = rows
            .into_iter()
            .find(|r| r.overlaps(window.from, window.to))
        {
            if r.first_seq != seg_first {
                next = 0;
            }
            break r;
        }
        seg_first = last + 1;
        next = 0;
    };
    seg_first = row.first_seq;
    let records = match cache {
        Some(c) if c.first_seq == seg_first => c.records.clone(),
        _ => match archive.read_segment(&row).await {
            Ok(r) => {
                let r = Arc::new(r);
                *cache = Some(Cached {
                    first_seq: seg_first,
                    records: r.clone(),
                });
                r
            }
            Err(ArchiveError::Corrupt(why)) => return Ok(skip_segment(job, &row, &why, now)),
            Err(ArchiveError::Blob(BlobError::NotFound { .. })) => {
                return Ok(skip_segment(job, &row, "the object is missing", now));
            }
            Err(e) => return Err(e),
        },
    };

    let only: Vec<u16> = window.sinks.clone();
    let filters = if job.ignore_filters {
        Filters::Ignore
    } else {
        Filters::Apply
    };
    let mut batch: Vec<IngestRecord> = Vec::new();
    let mut looked = 0u64;
    let mut skipped = 0u64;
    while next < records.len() && batch.len() < n {
        let rec = &records[next];
        next += 1;
        looked += 1;
        let env = &rec.envelope;
        if !in_window(&window, job, env) {
            continue;
        }
        let Some(source) = live.sources.get(&env.source_id) else {
            skipped += 1;
            continue;
        };
        let sinks = source.sink_types.len();
        let any = only.is_empty() || only.iter().any(|&i| (i as usize) < sinks);
        if !any || sinks == 0 {
            skipped += 1;
            continue;
        }
        let headers = hook::headers::map(&env.headers);
        let routed = hook::record_routed(
            source,
            env.clone(),
            &headers,
            Keyed::Never,
            metrics,
            filters,
        );
        // Every sink the job sends to turned the hook away: nothing is committed for it.
        if rows_of(&routed, &only) == 0 {
            skipped += 1;
            continue;
        }
        batch.push(routed);
    }
    job.scanned += looked;
    job.skipped += skipped;
    job.released += batch.len() as u64;
    if next >= records.len() {
        // On to the segment after this one.
        job.cursor = Some(cursor(seg_first + 1, 0));
        *cache = None;
    } else {
        job.cursor = Some(cursor(seg_first, next));
    }
    job.updated_at = now;
    let tenants = super::tenants_of(&batch);
    let rows: u64 = batch.iter().map(|r| rows_of(r, &only)).sum();
    job.moved += rows;
    let s = store.clone();
    let j = to_stored(job);
    let only_sinks = (!only.is_empty()).then_some(only);
    let committed =
        blocking(move || s.archive_replay_commit(&j, &batch, only_sinks.as_deref(), now)).await?;
    Ok(Stepped {
        looked,
        committed: Some(committed),
        tenants,
    })
}

/// The delivery rows a replayed hook gets: its sinks among the job's (`only`, empty: all)
/// that its filters did not turn away.
fn rows_of(rec: &IngestRecord, only: &[u16]) -> u64 {
    (0..rec.sinks.len() as u16)
        .filter(|i| (only.is_empty() || only.contains(i)) && !rec.skip_sinks.contains(i))
        .count() as u64
}

/// Whether an archived hook is one the job sends: received in the window, and of the job's
/// tenant, source and id when it names them.
fn in_window(w: &ArchiveWindow, job: &ReplayJob, env: &ankusa_store::Envelope) -> bool {
    let f = &job.filter;
    env.received_at >= w.from
        && env.received_at < w.to
        && f.tenant.as_ref().is_none_or(|t| *t == env.tenant)
        && f.source_id.as_ref().is_none_or(|s| *s == env.source_id)
        && f.id.is_none_or(|id| id == env.id)
}

fn finish(job: &mut ReplayJob, now: u64) {
    job.state = JobState::Completed;
    job.completed_at = Some(now);
    job.updated_at = now;
}

/// Reports a segment that failed its check and moves the job past it (the caller stores the
/// job at the next step's commit, or now when it was the last).
fn skip_segment(job: &mut ReplayJob, row: &SegmentRow, why: &str, now: u64) -> Stepped {
    tracing::error!(job = %job.id, segment = %row.key, error = %why, "archived segment failed its check; its hooks are not sent");
    job.corrupt_segments += 1;
    job.reason = Some(format!(
        "{} segment(s) failed their sha256 check and were not sent; the last: {}",
        job.corrupt_segments, row.key
    ));
    job.cursor = Some(cursor(row.first_seq + 1, 0));
    job.updated_at = now;
    Stepped::default()
}

impl Replayer {
    /// One step of an `archive` job (`step`); returns the records it examined.
    pub(super) async fn archive_step(&self, rt: &mut JobRt, n: usize) -> Result<u64, StoreError> {
        let Some(archive) = &self.archive else {
            // The archive was configured when the job was made, and is not now.
            rt.job.state = JobState::Paused;
            rt.job.reason = Some("paused: storage is not configured on this node".into());
            let store = self.store.clone();
            let job = rt.job.clone();
            return blocking(move || store.put_job(&to_stored(&job)))
                .await
                .map(|_| 0);
        };
        let mut job = rt.job.clone();
        let at = now_ms();
        let live = self.config.live();
        let ctx = StepCtx {
            archive,
            store: &self.store,
            live: &live,
            metrics: &self.metrics,
        };
        let stepped = match step(ctx, &mut job, &mut rt.segment, n, at).await {
            Ok(s) => s,
            Err(ArchiveError::Store(e)) => return Err(e),
            Err(e) => {
                // The blob store is unreachable: the job waits (its cursor has not moved).
                tracing::warn!(job = %job.id, error = %e, "archive replay step failed; retrying");
                return Ok(0);
            }
        };
        match &stepped.committed {
            Some(c) => {
                let rows = job.moved - rt.job.moved;
                if rows > 0 {
                    self.metrics
                        .replay
                        .moved
                        .with_label_values(&[KIND_ARCHIVE])
                        .inc_by(rows);
                    self.dispatcher
                        .wake_lanes(stepped.tenants.clone(), at, c.lanes.clone());
                }
            }
            // Nothing committed (finished, or a segment skipped): the job alone is stored.
            None => {
                let store = self.store.clone();
                let to_store = job.clone();
                blocking(move || store.put_job(&to_stored(&to_store))).await?;
            }
        }
        if job.state == JobState::Completed && rt.job.state != JobState::Completed {
            tracing::info!(job = %job.id, released = job.released, skipped = job.skipped, corrupt_segments = job.corrupt_segments, "archive job finished its scan");
        }
        rt.job = job;
        // A step that only moved past segments still made progress: count it as one look.
        Ok(stepped.looked.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_restart() {
        assert_eq!(parse_cursor(Some(&cursor(7, 3))), (7, 3));
        assert_eq!(parse_cursor(Some("junk")), (0, 0));
        assert_eq!(parse_cursor(None), (0, 0));
    }
}
