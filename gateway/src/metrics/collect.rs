//! What a `GET /metrics` scrape reads besides the registry: counters and sizes kept elsewhere
//! (the store's totals and health, its volume's free and total bytes, readiness as `/ready`
//! sees it, the commit queue, the pen, the DLQ's bounds, the archive, backups, the HTTP pools'
//! and batching sinks' own counters) are copied into their series, so they are current
//! whenever they are scraped. Reading a counter that fails shows 0 rather than
//! failing the scrape.
//!
//! It may import the subsystems it reads (each through its small public surface); none of
//! them imports it. The admin router's `/metrics` is its only caller.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use ankusa_store::Store;
use prometheus::IntCounter;

use super::Metrics;
use crate::archive::Archive;
use crate::archive::dlq_bounds::DlqGuard;
use crate::backup::Backup;
use crate::commit::Committer;
use crate::live::ConfigHandle;
use crate::probes::Probes;
use crate::quarantine::Pen;

/// The parts a scrape reads.
pub struct Scrape {
    pub metrics: Arc<Metrics>,
    pub store: Arc<Store>,
    pub config: Arc<ConfigHandle>,
    pub commit: Option<Arc<Committer>>,
    pub pen: Arc<Pen>,
    pub dlq: Arc<DlqGuard>,
    pub archive: Option<Arc<Archive>>,
    pub backup: Option<Arc<Backup>>,
    pub probes: Arc<Probes>,
}

/// A counter series that mirrors a count kept elsewhere: raised to it (counters never go down).
fn follow(c: &IntCounter, v: u64) {
    c.inc_by(v.saturating_sub(c.get()));
}

impl Scrape {
    /// Refreshes the series read at scrape time, then renders the registry (Prometheus text).
    pub async fn render(&self) -> String {
        self.store_series().await;
        let m = &self.metrics;
        if let Some(c) = &self.commit {
            m.commit.queued.set(c.queued() as i64);
        }
        crate::quarantine::gauges(&self.pen, m);
        if let Some(b) = &self.backup {
            b.gauges();
        }
        {
            // Both read the store.
            let (dlq, archive) = (self.dlq.clone(), self.archive.clone());
            let _ = tokio::task::spawn_blocking(move || {
                dlq.status();
                if let Some(x) = &archive {
                    x.gauges();
                }
            })
            .await;
        }
        self.sink_series();
        m.node.ready.set(i64::from(self.probes.is_ready().await));
        m.render()
    }

    /// The store's totals, size, its volume's bytes, corrupt rows, write failures and reopens.
    async fn store_series(&self) {
        let m = &self.metrics;
        let store = self.store.clone();
        let (totals, disk, corrupt, volume) = tokio::task::spawn_blocking(move || {
            (
                store.totals().unwrap_or_default(),
                store.disk_bytes(),
                store.corrupt_count().unwrap_or(0),
                super::node::volume_bytes(store.path()),
            )
        })
        .await
        .unwrap_or_default();
        if let Some((free, size)) = volume {
            m.node.volume_free_bytes.set(free as i64);
            m.node.volume_size_bytes.set(size as i64);
        }
        m.store.hooks.set(totals.hooks);
        m.store.hook_bytes.set(totals.hook_bytes);
        m.store.queue_pending.set(totals.pending);
        m.store.queue_dead.set(totals.dead);
        m.store.disk_bytes.set(disk as i64);
        follow(&m.store.corrupt_rows, corrupt.max(0) as u64);
        for (class, n) in self.store.health.failures() {
            follow(&m.store.write_failures.with_label_values(&[class]), n);
        }
        let (ok, failed) = self.store.health.reopens();
        follow(&m.store.reopen.with_label_values(&["ok"]), ok);
        follow(&m.store.reopen.with_label_values(&["error"]), failed);
    }

    /// The HTTP pools' and the batching sinks' (SQS, Pub/Sub) counters.
    fn sink_series(&self) {
        let m = &self.metrics;
        let sinks = self.config.sinks();
        let pools = sinks.pools();
        m.sinks.pools.set(pools.len() as i64);
        let ps = pools.stats();
        for (counter, label, v) in [
            (&m.sinks.pool_closed, "idle", &ps.closed_idle),
            (&m.sinks.pool_closed, "lru", &ps.closed_lru),
            (&m.sinks.pool_refused, "tenant", &ps.refused_tenant),
            (&m.sinks.pool_refused, "instance", &ps.refused_instance),
        ] {
            follow(&counter.with_label_values(&[label]), v.load(Relaxed));
        }
        for (sink, st) in [
            ("sqs", &sinks.sqs_stats),
            ("google_pubsub", &sinks.pubsub_stats),
        ] {
            for (counter, labels, v) in [
                (&m.sinks.batch_requests, &[sink][..], &st.requests),
                (&m.sinks.batch_entries, &[sink][..], &st.entries),
                (&m.sinks.batch_bisections, &[sink][..], &st.bisections),
                (
                    &m.sinks.batch_refused,
                    &[sink, "entries"][..],
                    &st.refused_entries,
                ),
                (
                    &m.sinks.batch_refused,
                    &[sink, "bytes"][..],
                    &st.refused_bytes,
                ),
                (
                    &m.sinks.batch_refused,
                    &[sink, "tenant"][..],
                    &st.refused_tenant,
                ),
            ] {
                follow(&counter.with_label_values(labels), v.load(Relaxed));
            }
        }
    }
}
