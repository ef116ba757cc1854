//! `kind: dlq` jobs: each step moves up to its tokens' worth of dead rows matching the job's
//! filter back to due, with the job's cursor, in one synced batch (`Store::replay_step`), and
//! wakes dispatch for exactly the time it wrote. A row whose sink's current filter turns its
//! hook away stays dead (`skipped`), unless the job has `ignore_filters`. Imports its parent,
//! `hook::route` (the filter a commit runs) and `live`.

use std::sync::Arc;

use ankusa_api::KIND_DLQ;
use ankusa_core::now_ms;
use ankusa_store::{Envelope, ReplayGate, StoreError};

use super::job_record::{from_stored, to_stored};
use super::{JobRt, Replayer};
use crate::blocking::blocking;
use crate::hook::route;
use crate::live::Live;

/// The sinks' filters in the config in force when the step runs.
struct LiveFilters(Arc<Live>);

impl ReplayGate for LiveFilters {
    fn filters(&self, source_id: &str, sink: u16) -> bool {
        self.0
            .sources
            .get(source_id)
            .and_then(|s| s.routes.get(sink as usize))
            .is_some_and(|r| r.filter.is_some())
    }

    fn admits(&self, hook: &Envelope, sink: u16) -> bool {
        match self.0.sources.get(&hook.source_id) {
            Some(source) => route::admits(source, sink, hook),
            None => true,
        }
    }
}

impl Replayer {
    /// One step of a `dlq` job: moves at most `n` rows; returns how many it moved.
    pub(super) async fn dlq_step(&self, rt: &mut JobRt, n: usize) -> Result<u64, StoreError> {
        let store = self.store.clone();
        let mut job = to_stored(&rt.job);
        // The rows moved are due at `at`, and dispatch is told exactly that time: its scan
        // resume point may only be lowered to a key at or below the rows written.
        let at = now_ms();
        let gate = LiveFilters(self.config.live());
        let (step, job) = blocking(move || {
            let r = store.replay_step(&mut job, n, at, &gate);
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
