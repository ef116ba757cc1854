//! The DLQ's bounds (`queue.dlq`: `retention_days`, `max_rows`, `max_bytes`). A reaper evicts
//! dead rows past a bound, oldest first, but only rows whose hook is in the archive's catalogue:
//! an acked hook is never deleted unless it can be fetched back. What cannot be evicted is
//! back-pressure instead: while the DLQ stays over a bound, new hooks are answered
//! `503 dlq_full` + `Retry-After: 60` until the archive catches up (or an operator replays or
//! deletes dead rows).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ankusa_api::{DeadFilter, DlqStatus};
use ankusa_config::DlqBounds;
use ankusa_core::now_ms;
use ankusa_store::{Store, StoreError};

use crate::live::ConfigHandle;
use crate::metrics::Metrics;

/// Rows one eviction call deletes at most (one synced batch).
const CHUNK: usize = 5_000;
/// Eviction calls one pass makes at most, so a pass stays short.
const MAX_CALLS: usize = 20;

pub struct DlqGuard {
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    full: AtomicBool,
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reaped {
    pub evicted: u64,
    pub full: bool,
}

impl DlqGuard {
    pub fn new(store: Arc<Store>, metrics: Arc<Metrics>) -> Arc<DlqGuard> {
        Arc::new(DlqGuard {
            store,
            metrics,
            full: AtomicBool::new(false),
        })
    }

    /// New hooks are refused (`503 dlq_full`).
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    /// Runs the reaper every `queue.dlq.reap_interval_ms` (read from the live config, so a
    /// reload applies new bounds at the next pass).
    pub fn start(self: &Arc<Self>, config: Arc<ConfigHandle>) {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let bounds = config.live().config.queue.dlq.clone();
                tokio::time::sleep(Duration::from_millis(bounds.reap_every_ms())).await;
                let bounds = config.live().config.queue.dlq.clone();
                let g = me.clone();
                match tokio::task::spawn_blocking(move || g.reap(&bounds, now_ms())).await {
                    Ok(Ok(r)) if r.evicted > 0 || r.full => {
                        tracing::info!(evicted = r.evicted, full = r.full, "dlq reaper pass");
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!(error = %e, "dlq reaper pass failed"),
                    Err(e) => tracing::warn!(error = %e, "dlq reaper task failed"),
                }
            }
        });
    }

    /// One pass: evicts archived dead rows past the bounds, then sets `full` if the DLQ is
    /// still over one.
    pub fn reap(&self, b: &DlqBounds, now: u64) -> Result<Reaped, StoreError> {
        if !b.is_bounded() {
            self.set_full(false);
            return Ok(Reaped::default());
        }
        let mut evicted = 0u64;
        let mut calls = 0;
        let cutoff = b
            .retention_days
            .map(|d| now.saturating_sub(d as u64 * 86_400_000));
        if let Some(cutoff) = cutoff {
            let old = DeadFilter {
                until: Some(cutoff),
                ..Default::default()
            };
            while calls < MAX_CALLS {
                calls += 1;
                let r = self.store.evict_dead(&old, CHUNK, true)?;
                self.count(r.deleted, "retention");
                evicted += r.deleted as u64;
                if r.deleted == 0 || !r.more {
                    break;
                }
            }
        }
        while calls < MAX_CALLS {
            let (rows, bytes) = self.store.dead_totals()?;
            let excess_rows = b
                .max_rows
                .map_or(0, |m| rows.max(0) as u64 - (rows.max(0) as u64).min(m));
            let over_bytes = b.max_bytes.is_some_and(|m| bytes.max(0) as u64 > m);
            if excess_rows == 0 && !over_bytes {
                break;
            }
            calls += 1;
            // Over the byte bound the excess in rows is unknown: a chunk of the oldest goes,
            // and the pass looks again.
            let n = if excess_rows > 0 {
                (excess_rows as usize).min(CHUNK)
            } else {
                CHUNK / 10
            };
            let r = self.store.evict_dead(&DeadFilter::default(), n, true)?;
            self.count(
                r.deleted,
                if excess_rows > 0 {
                    "max_rows"
                } else {
                    "max_bytes"
                },
            );
            evicted += r.deleted as u64;
            if r.deleted == 0 {
                break;
            }
        }
        let (rows, bytes) = self.store.dead_totals()?;
        let over_age = match cutoff {
            Some(c) => self.store.oldest_dead_at()?.is_some_and(|at| at < c),
            None => false,
        };
        let full = b.max_rows.is_some_and(|m| rows.max(0) as u64 > m)
            || b.max_bytes.is_some_and(|m| bytes.max(0) as u64 > m)
            || over_age;
        self.set_full(full);
        Ok(Reaped { evicted, full })
    }

    fn count(&self, n: usize, reason: &str) {
        if n > 0 {
            self.metrics
                .dlq
                .evicted
                .with_label_values(&[reason])
                .inc_by(n as u64);
        }
    }

    fn set_full(&self, full: bool) {
        let was = self.full.swap(full, Ordering::Relaxed);
        if full && !was {
            tracing::warn!(
                "the DLQ is over a queue.dlq bound and nothing archived is left to evict: new hooks get 503 dlq_full"
            );
        } else if was && !full {
            tracing::info!("the DLQ is back within its bounds: new hooks are accepted again");
        }
        self.metrics.dlq.full.set(full as i64);
    }

    /// `GET /v1/status`'s `dlq`, and the DLQ gauges.
    pub fn status(&self) -> DlqStatus {
        let (rows, bytes) = self.store.dead_totals().unwrap_or_default();
        let m = &self.metrics;
        m.dlq.rows.set(rows);
        m.dlq.bytes.set(bytes);
        let age = self
            .store
            .oldest_dead_at()
            .ok()
            .flatten()
            .map(|at| now_ms().saturating_sub(at) as f64 / 1000.0)
            .unwrap_or(0.0);
        m.dlq.oldest_age_seconds.set(age);
        DlqStatus {
            rows,
            bytes,
            full: self.is_full(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_store::ErrorClass;
    use ankusa_store::test_util::{seed_dead, temp_store};

    #[test]
    fn unarchived_rows_over_a_bound_make_it_full_and_nothing_is_deleted() {
        let (_d, s) = temp_store();
        let s = Arc::new(s);
        let g = DlqGuard::new(s.clone(), Arc::new(Metrics::new()));
        seed_dead(&s, "t", "s", 5, 100, ErrorClass::Transient);
        let b = DlqBounds {
            max_rows: Some(3),
            ..Default::default()
        };
        let r = g.reap(&b, 1_000).unwrap();
        assert_eq!(
            r,
            Reaped {
                evicted: 0,
                full: true
            }
        );
        assert!(g.is_full());
        assert_eq!(s.dead_totals().unwrap().0, 5);
        // Retention: rows older than a day, at day two, are over the bound too.
        let b = DlqBounds {
            retention_days: Some(1),
            ..Default::default()
        };
        assert!(g.reap(&b, 2 * 86_400_000).unwrap().full);
        assert!(
            !g.reap(&b, 1_000).unwrap().full,
            "young rows are within retention"
        );
        assert!(!g.reap(&DlqBounds::default(), 1_000).unwrap().full);
    }
}
