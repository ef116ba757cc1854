//! `kind: lifecycle` jobs: events of the audit trail whose time is in the job's window
//! (`since`, `until`; and its tenant when it names one) committed again as hooks of the
//! lifecycle source with their original ids and bytes (`lifecycle::writer::record`), to the
//! lifecycle sinks in force, each row carrying the job's id as `replay_id`. The job's cursor
//! (the last trail key read) is written in the same synced batch as the page's hooks
//! (`Store::archive_replay_commit`), so it moves only when the page is committed and a restart
//! never sends a page twice.
//!
//! Imports `lifecycle` (the hook of an event), `live`, `blocking` and its parent.

use ankusa_api::{JobState, KIND_LIFECYCLE};
use ankusa_core::now_ms;
use ankusa_store::{AuditCursor, AuditFilter, StoreError};

use super::job_record::to_stored;
use super::{JobRt, Replayer};
use crate::blocking::blocking;
use crate::lifecycle::writer;

impl Replayer {
    /// One step of a `lifecycle` job: at most `n` events; returns the events it committed
    /// (at least 1 when it only read, so the tokens pace the reads too).
    pub(super) async fn lifecycle_step(&self, rt: &mut JobRt, n: usize) -> Result<u64, StoreError> {
        let live = self.config.live();
        let Some(source) = live.lifecycle.clone() else {
            rt.job.state = JobState::Paused;
            rt.job.reason = Some("paused: lifecycle is not configured on this node".into());
            rt.job.updated_at = now_ms();
            let store = self.store.clone();
            let job = rt.job.clone();
            return blocking(move || store.put_job(&to_stored(&job)))
                .await
                .map(|_| 0);
        };
        let f = &rt.job.filter;
        let filter = AuditFilter {
            since: f.since,
            until: f.until,
            event_type: None,
            tenants: f.tenant.clone().map(|t| vec![t]),
            after: rt
                .job
                .cursor
                .as_deref()
                .and_then(|c| c.parse::<AuditCursor>().ok()),
        };
        let store = self.store.clone();
        let page = blocking(move || store.audit_page(&filter, n)).await?;
        let records: Vec<_> = page
            .events
            .iter()
            .filter_map(|(_, e)| writer::record(&source, e))
            .collect();
        let now = now_ms();
        let mut job = rt.job.clone();
        let last = page.next.or(page.events.last().map(|(c, _)| *c));
        if let Some(c) = last {
            job.cursor = Some(c.to_string());
        }
        job.scanned += page.events.len() as u64;
        job.released += records.len() as u64;
        job.skipped += (page.events.len() - records.len()) as u64;
        job.moved += records.iter().map(|r| r.sinks.len() as u64).sum::<u64>();
        job.updated_at = now;
        if page.next.is_none() {
            job.state = JobState::Completed;
            job.completed_at = Some(now);
        }
        let tenants = super::tenants_of(&records);
        let rows = job.moved - rt.job.moved;
        let committed = {
            let store = self.store.clone();
            let stored = to_stored(&job);
            blocking(move || store.archive_replay_commit(&stored, &records, None, now)).await?
        };
        if rows > 0 {
            self.metrics
                .replay
                .moved
                .with_label_values(&[KIND_LIFECYCLE])
                .inc_by(rows);
            self.dispatcher.wake_lanes(tenants, now, committed.lanes);
        }
        if job.state == JobState::Completed {
            tracing::info!(job = %job.id, released = job.released, "lifecycle job finished its scan");
        }
        let spent = (page.events.len() as u64).max(1);
        rt.job = job;
        Ok(spent)
    }
}
