//! `kind: dlq` jobs: each step moves up to its tokens' worth of dead rows matching the job's
//! filter back to due, with the job's cursor, in one synced batch (`Store::replay_step`), and
//! wakes dispatch for exactly the time it wrote. Imports nothing of the crate besides its parent.

use ankusa_api::KIND_DLQ;
use ankusa_core::now_ms;
use ankusa_store::StoreError;

use super::job_record::{from_stored, to_stored};
use super::{JobRt, Replayer};
use crate::blocking::blocking;

impl Replayer {
    /// One step of a `dlq` job: moves at most `n` rows; returns how many it moved.
    pub(super) async fn dlq_step(&self, rt: &mut JobRt, n: usize) -> Result<u64, StoreError> {
        let store = self.store.clone();
        let mut job = to_stored(&rt.job);
        // The rows moved are due at `at`, and dispatch is told exactly that time: its scan
        // resume point may only be lowered to a key at or below the rows written.
        let at = now_ms();
        let (step, job) = blocking(move || {
            let r = store.replay_step(&mut job, n, at);
            r.map(|step| (step, from_stored(job)))
        })
        .await?;
        rt.job = job;
        if step.moved > 0 {
            self.metrics
                .replay
                .moved
                .with_label_values(&[KIND_DLQ])
                .inc_by(step.moved);
            self.dispatcher.wake_replayed(step.tenants, at, step.lanes);
        }
        if step.finished {
            tracing::info!(job = %rt.job.id, moved = rt.job.moved, "replay job finished its scan");
        }
        Ok(step.moved)
    }
}
