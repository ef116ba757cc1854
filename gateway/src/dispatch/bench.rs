//! The scan benchmark's harness (`measure_scans`), built for tests and with the `bench`
//! feature only: it drives the real scheduler's claim scan without running attempts.

use std::sync::Arc;
use std::time::Instant;

use ankusa_config::DispatchConfig;
use ankusa_sinks::SinkBuilder;
use ankusa_store::{Outcome, Store, StoreError};
use serde::Serialize;

use super::scheduler::Scheduler;
use super::{Context, fairness};
use crate::live::{ConfigHandle, Live};
use crate::metrics::Metrics;

/// One claim scan, as measured by `measure_scans`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ScanStat {
    /// Tenants whose due rows the scan read.
    pub visited: u64,
    pub claimed: usize,
    pub micros: u64,
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable {
        class: "other",
        message: e.to_string(),
    }
}

/// Runs `scans` claim scans of the real scheduler over `store` (for the scan-cost test and the
/// `dispatch_tick` benchmark): loads the schedule, then scans; rows each scan claimed are
/// recorded as delivered before the next one, outside the timing.
pub fn measure_scans(
    store: Arc<Store>,
    d: &DispatchConfig,
    scans: usize,
) -> Result<Vec<ScanStat>, StoreError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(unavailable)?;
    let metrics = Arc::new(Metrics::new());
    let config = ankusa_config::Config {
        dispatch: d.clone(),
        ..Default::default()
    };
    let sinks = Arc::new(SinkBuilder::new());
    let live = Live::build(config, String::new(), 1, &sinks).map_err(unavailable)?;
    let handle = ConfigHandle::new(live, None, sinks);
    let (mut sched, _tx) = Scheduler::new(Context {
        store: store.clone(),
        config: handle,
        metrics,
        tokio: rt.handle().clone(),
        claim_check: None,
        feedback: None,
        lifecycle: None,
    })?;
    let mut out = Vec::with_capacity(scans);
    for _ in 0..scans {
        let started = Instant::now();
        let visited = fairness::scan(
            &store,
            &mut sched.schedule,
            &mut sched.slots,
            d,
            ankusa_core::now_ms(),
        )?;
        let micros = started.elapsed().as_micros() as u64;
        let claimed = sched.slots.drain();
        let outcomes: Vec<Outcome> = claimed
            .iter()
            .map(|c| Outcome::Delivered {
                seq: c.seq,
                sink: c.sink,
                row: c.row.clone(),
            })
            .collect();
        store.apply_outcomes(&outcomes, sched.lanes.floors())?;
        out.push(ScanStat {
            visited,
            claimed: claimed.len(),
            micros,
        });
    }
    Ok(out)
}
