//! The quarantine pen: where a source with `on_verify_failure: quarantine` keeps the hooks
//! that failed verification, so a bad secret rotation never silently eats real events. A
//! quarantined hook is answered `202` only once it is on disk; a `quarantine` replay job
//! (`replay::quarantine`) commits the entries that verify again, an operator purges the rest.
//!
//! A flood of forged requests is kept off everything else. The decisions are made in the
//! request's task: the source's bucket (`bucket`), the byte caps — the node's, the source's
//! share and the tenant's share (`shares`) — and the count of waiting writes; a refusal after
//! the token was taken gives the token back. Only the disk write is shared, and it is a group
//! commit on a thread of its own: every write queued meanwhile goes into one synced batch, so a
//! flood costs one fsync per group, and the ack path's commit threads (`commit.rs`) never wait
//! for the pen, nor another source's hooks for a flooding source's tokens or bytes. Entries
//! older than `quarantine.retention_hours` are removed by `expire`.

pub mod bucket;
pub mod expire;
pub mod metrics;
pub mod shares;

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ankusa_store::{PenPurged, PenWrite, Store, StoreError};
use tokio::sync::oneshot;

use crate::live::Live;

use bucket::Buckets;
use metrics::QuarantineMetrics;
use shares::InFlight;
pub use shares::{Limits, Scope};

/// Writes waiting for the pen's group commit (queued or in the group being committed) at
/// most; the next is `503 overload`.
pub const MAX_PENDING: usize = 1_000;

/// A write the pen has not answered by then is `503 store_unavailable` (it may still land, so
/// it keeps its token and its bytes).
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// Entries one group commit takes at most, and bytes: a group is one synced write.
const MAX_GROUP: usize = 256;
const MAX_GROUP_BYTES: u64 = 64 << 20;

/// Why a hook was not quarantined; each maps to an ingest answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PenError {
    /// `429 quarantine_rate_limited`: the source's bucket is empty for this many ms.
    #[error("quarantine_rate_limited: retry in {0} ms")]
    RateLimited(u64),
    /// `503 quarantine_full`: the entry would cross `quarantine.max_bytes`, its source's share
    /// or its tenant's.
    #[error("quarantine_full ({})", .0.label())]
    Full(Scope),
    /// `503 overload`: `MAX_PENDING` writes are waiting already.
    #[error("overload: {MAX_PENDING} quarantine writes are waiting")]
    Overload,
    /// `503 store_unavailable`: the write failed or was not answered in time.
    #[error("store_unavailable: {0}")]
    StoreUnavailable(String),
}

struct Job {
    write: PenWrite,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// The pen's in-memory side: the admission state and the writer's queue.
pub struct Pen {
    tx: mpsc::Sender<Job>,
    store: Arc<Store>,
    buckets: Buckets,
    /// Writes waiting or in the group being committed.
    pending: Arc<AtomicUsize>,
    /// Bytes held plus bytes of writes admitted and not yet failed: what the node cap is
    /// checked against.
    bytes: Arc<AtomicU64>,
    /// Entries held (committed).
    entries: Arc<AtomicI64>,
    /// Per source and tenant, what was admitted and not yet answered by the writer.
    inflight: Arc<InFlight>,
    /// The limits of the config generation seen last.
    limits: Mutex<Option<(u64, Limits)>>,
    pub metrics: QuarantineMetrics,
}

impl Pen {
    /// Reads the pen's counters and shares (a restart keeps its size and who holds it) and
    /// starts its writer thread.
    pub fn start(
        store: Arc<Store>,
        registry: &prometheus::Registry,
    ) -> Result<Arc<Pen>, StoreError> {
        store.pen_shares_load()?;
        let (entries, bytes) = store.pen_totals()?;
        let pending = Arc::new(AtomicUsize::new(0));
        let bytes = Arc::new(AtomicU64::new(bytes.max(0) as u64));
        let entries = Arc::new(AtomicI64::new(entries.max(0)));
        let inflight = Arc::new(InFlight::default());
        let (tx, rx) = mpsc::channel();
        let writer = Writer {
            store: store.clone(),
            pending: pending.clone(),
            bytes: bytes.clone(),
            entries: entries.clone(),
            inflight: inflight.clone(),
        };
        std::thread::Builder::new()
            .name("ankusa-quarantine".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| StoreError::Unavailable {
                class: "other",
                message: format!("cannot start the quarantine writer: {e}"),
            })?;
        Ok(Arc::new(Pen {
            tx,
            store,
            buckets: Buckets::default(),
            pending,
            bytes,
            entries,
            inflight,
            limits: Mutex::new(None),
            metrics: QuarantineMetrics::new(registry),
        }))
    }

    /// The limits of `live` (its shares are computed once per config generation).
    pub fn limits(&self, live: &Live) -> Limits {
        let mut cached = self.limits.lock().unwrap_or_else(|p| p.into_inner());
        match *cached {
            Some((generation, l)) if generation == live.generation => l,
            _ => {
                let l = Limits::of(&live.config);
                *cached = Some((live.generation, l));
                l
            }
        }
    }

    /// Holds one entry: answers `Ok` only once it is on disk. `now_us` is the request's time.
    pub async fn hold(
        &self,
        write: PenWrite,
        limits: &Limits,
        now_us: u64,
    ) -> Result<(), PenError> {
        self.take_token(&write.summary.source_id, limits, now_us)?;
        self.hold_with_token(write, limits, now_us).await
    }

    /// Takes a token of `source`'s bucket, before the request's entry is even encoded: a flood
    /// over its rate is refused from memory.
    pub fn take_token(&self, source: &str, limits: &Limits, now_us: u64) -> Result<(), PenError> {
        self.buckets
            .take(source, limits.rate, limits.burst, now_us)
            .map_err(PenError::RateLimited)
    }

    /// `hold` after `take_token` succeeded for the entry's source: a refusal gives the token
    /// back.
    pub async fn hold_with_token(
        &self,
        write: PenWrite,
        limits: &Limits,
        now_us: u64,
    ) -> Result<(), PenError> {
        let source = write.summary.source_id.clone();
        let tenant = write.summary.tenant.clone();
        let size = write.summary.size;
        let give_back = || self.buckets.give_back(&source, limits.rate, now_us);
        if let Err(scope) =
            self.inflight
                .admit(&self.store, &self.bytes, &source, &tenant, size, limits)
        {
            self.metrics.full.with_label_values(&[scope.label()]).inc();
            give_back();
            return Err(PenError::Full(scope));
        }
        // Undoes the admission of a write the writer never saw.
        let unadmit = || {
            self.inflight.settle(&source, &tenant, size);
            self.bytes.fetch_sub(size, Ordering::SeqCst);
            give_back();
        };
        if self.pending.fetch_add(1, Ordering::SeqCst) >= MAX_PENDING {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            unadmit();
            return Err(PenError::Overload);
        }
        let (reply, rx) = oneshot::channel();
        if let Err(mpsc::SendError(_)) = self.tx.send(Job { write, reply }) {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            unadmit();
            return Err(PenError::StoreUnavailable(
                "the quarantine writer stopped".into(),
            ));
        }
        match tokio::time::timeout(ANSWER_WITHIN, rx).await {
            Ok(Ok(Ok(()))) => Ok(()),
            // The writer freed the bytes of a failed write (and its admission); the token
            // comes back here.
            Ok(Ok(Err(e))) => {
                give_back();
                Err(PenError::StoreUnavailable(e.to_string()))
            }
            Ok(Err(_)) => {
                give_back();
                Err(PenError::StoreUnavailable(
                    "the quarantine writer stopped".into(),
                ))
            }
            Err(_) => Err(PenError::StoreUnavailable(format!(
                "no answer from the quarantine writer within {} s",
                ANSWER_WITHIN.as_secs()
            ))),
        }
    }

    /// Entries left the pen (purged or released): their bytes are free again.
    pub fn removed(&self, p: PenPurged) {
        self.entries.fetch_sub(p.deleted as i64, Ordering::SeqCst);
        self.bytes.fetch_sub(
            p.bytes.min(self.bytes.load(Ordering::SeqCst)),
            Ordering::SeqCst,
        );
    }

    /// Writes waiting for (or in) a group commit.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Bytes held, counting writes admitted and not yet answered.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }

    pub fn entries(&self) -> i64 {
        self.entries.load(Ordering::SeqCst)
    }
}

/// `GET /v1/status`'s `quarantine`: totals from the pen's counters, and per source its
/// entries, bytes and oldest entry (from a bounded scan).
pub fn status(
    store: &Store,
    pen: &Pen,
    max_bytes: u64,
) -> Result<ankusa_api::PenStatus, StoreError> {
    let (sources, _complete) = store.pen_by_source()?;
    let oldest = sources.iter().filter_map(|s| s.oldest_received_at).min();
    Ok(ankusa_api::PenStatus {
        entries: pen.entries(),
        bytes: i64::try_from(pen.bytes()).unwrap_or(i64::MAX),
        max_bytes,
        oldest_received_at: oldest,
        sources,
    })
}

/// Copies the pen's state into its gauges (on scrape and every few seconds).
pub fn gauges(pen: &Pen, m: &crate::metrics::Metrics) {
    m.quarantine.pending.set(pen.pending() as i64);
    m.quarantine
        .bytes
        .set(i64::try_from(pen.bytes()).unwrap_or(i64::MAX));
    m.quarantine.entries.set(pen.entries());
}

struct Writer {
    store: Arc<Store>,
    pending: Arc<AtomicUsize>,
    bytes: Arc<AtomicU64>,
    entries: Arc<AtomicI64>,
    inflight: Arc<InFlight>,
}

impl Writer {
    fn run(self, rx: mpsc::Receiver<Job>) {
        while let Ok(first) = rx.recv() {
            let mut group_bytes = first.write.summary.size;
            let mut jobs = vec![first];
            while jobs.len() < MAX_GROUP && group_bytes < MAX_GROUP_BYTES {
                match rx.try_recv() {
                    Ok(j) => {
                        group_bytes += j.write.summary.size;
                        jobs.push(j);
                    }
                    Err(_) => break,
                }
            }
            let n = jobs.len();
            let (writes, replies): (Vec<PenWrite>, Vec<_>) =
                jobs.into_iter().map(|j| (j.write, j.reply)).unzip();
            let result = self.store.pen_put(&writes);
            match &result {
                Ok(()) => {
                    self.entries.fetch_add(n as i64, Ordering::SeqCst);
                }
                Err(e) => {
                    tracing::warn!(entries = n, error = %e, "quarantine write failed; answering 503");
                    // Not on disk: the bytes are free again, whether or not the caller still
                    // waits.
                    self.bytes.fetch_sub(group_bytes, Ordering::SeqCst);
                    if e.is_io() {
                        self.store.maybe_reopen();
                    }
                }
            }
            // A write leaves the admitted and waiting counts as it is answered (written, its
            // bytes are the store's share counters' now).
            for w in &writes {
                self.inflight
                    .settle(&w.summary.source_id, &w.summary.tenant, w.summary.size);
            }
            self.pending.fetch_sub(n, Ordering::SeqCst);
            for reply in replies {
                let _ = reply.send(result.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_store::PenSummary;
    use ankusa_store::test_util::temp_store;

    fn write(source: &str, size: u64) -> PenWrite {
        let id = uuid::Uuid::now_v7();
        PenWrite {
            summary: PenSummary {
                id,
                source_id: source.into(),
                tenant: "default".into(),
                received_at: 1,
                reason: "no_match".into(),
                size,
                method: "POST".into(),
                path: "/webhooks/s".into(),
                url_tenant: false,
            },
            envelope: vec![0; size as usize],
        }
    }

    fn limits(burst: u32, max_bytes: u64) -> Limits {
        Limits {
            burst,
            rate: 1.0,
            max_bytes,
            per_source: u64::MAX,
            per_tenant: u64::MAX,
            max_body_bytes: max_bytes,
        }
    }

    fn registry() -> prometheus::Registry {
        prometheus::Registry::new()
    }

    const NOW: u64 = 1_000_000_000_000;

    #[tokio::test]
    async fn caps_refuse_without_spending_and_a_restart_keeps_the_size() {
        let (d, store) = temp_store();
        let store = Arc::new(store);
        let pen = Pen::start(store.clone(), &registry()).unwrap();
        let l = limits(3, 250);
        pen.hold(write("a", 100), &l, NOW).await.unwrap();
        pen.hold(write("a", 100), &l, NOW).await.unwrap();
        // Would cross 250 bytes: refused, and the token comes back.
        assert_eq!(
            pen.hold(write("a", 100), &l, NOW).await,
            Err(PenError::Full(Scope::Node))
        );
        assert_eq!(pen.bytes(), 200);
        pen.hold(write("a", 50), &l, NOW).await.unwrap();
        // Three tokens spent: the fourth write is rate limited, whatever its size.
        assert!(matches!(
            pen.hold(write("a", 1), &l, NOW).await,
            Err(PenError::RateLimited(1000))
        ));
        // Another source has its own bucket, but shares the byte cap.
        assert_eq!(
            pen.hold(write("b", 1), &l, NOW).await,
            Err(PenError::Full(Scope::Node))
        );
        assert_eq!(
            pen.metrics.full.with_label_values(&["node"]).get(),
            2,
            "counted by scope"
        );
        assert_eq!((pen.entries(), pen.bytes(), pen.pending()), (3, 250, 0));
        pen.removed(PenPurged {
            deleted: 1,
            bytes: 100,
        });
        pen.hold(write("b", 1), &l, NOW).await.unwrap();
        drop(pen);
        // The writer thread lets go of the store once its queue is closed.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while Arc::strong_count(&store) > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(store);
        let store = Arc::new(Store::open(&d.path().join("store")).unwrap());
        let pen = Pen::start(store, &registry()).unwrap();
        // Only the counters were told about the removal: the store still holds 4 entries.
        assert_eq!((pen.entries(), pen.bytes()), (4, 251));
    }

    /// Waits for the writer thread of a dropped pen to let go of the store, and reopens it.
    fn reopen(d: &tempfile::TempDir, store: Arc<Store>) -> Arc<Store> {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while Arc::strong_count(&store) > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(store);
        Arc::new(Store::open(&d.path().join("store")).unwrap())
    }

    #[tokio::test]
    async fn a_source_over_its_share_is_refused_and_a_restart_remembers_it() {
        let (d, store) = temp_store();
        let store = Arc::new(store);
        let pen = Pen::start(store.clone(), &registry()).unwrap();
        let l = Limits {
            per_source: 300,
            ..limits(100, 1000)
        };
        pen.hold(write("a", 200), &l, NOW).await.unwrap();
        pen.hold(write("a", 100), &l, NOW).await.unwrap();
        assert_eq!(
            pen.hold(write("a", 1), &l, NOW).await,
            Err(PenError::Full(Scope::Source))
        );
        pen.hold(write("b", 300), &l, NOW).await.unwrap();
        assert_eq!(
            (pen.entries(), pen.bytes()),
            (3, 600),
            "a refusal takes nothing"
        );
        assert_eq!(pen.inflight.entries(), 0, "every answered write settled");
        drop(pen);
        let store = reopen(&d, store);
        let pen = Pen::start(store, &registry()).unwrap();
        assert_eq!(
            pen.hold(write("a", 1), &l, NOW).await,
            Err(PenError::Full(Scope::Source))
        );
        pen.hold(write("c", 1), &l, NOW).await.unwrap();
        assert_eq!(pen.metrics.full.with_label_values(&["source"]).get(), 1);
    }

    #[tokio::test]
    async fn the_waiting_cap_refuses_with_overload_and_spends_nothing() {
        let (_d, store) = temp_store();
        let pen = Pen::start(Arc::new(store), &registry()).unwrap();
        pen.pending.store(MAX_PENDING, Ordering::SeqCst);
        let l = limits(1, 1000);
        assert_eq!(
            pen.hold(write("a", 10), &l, NOW).await,
            Err(PenError::Overload)
        );
        assert_eq!(pen.bytes(), 0, "no bytes spent");
        pen.pending.store(0, Ordering::SeqCst);
        pen.hold(write("a", 10), &l, NOW)
            .await
            .expect("the token was given back");
    }
}
