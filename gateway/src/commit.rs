//! Group commit: the writer in front of the store. Requests hand their record to a partition
//! and wait; each
//! partition commits everything that queued meanwhile in one synced store write and answers
//! every caller only after that write is durable. One commit is in flight per partition; the
//! queue keeps accepting while it runs, up to `max_queue` records per partition and
//! `max_queue_bytes` overall, past which callers get `Overload` at once.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use std::sync::mpsc;

use ankusa_config::CommitConfig;
use ankusa_core::now_ms;
use ankusa_store::{IngestRecord, IngestResult, LaneId, Store, StoreError};
use tokio::sync::oneshot;

use crate::intake::{Answer, Intake};
use crate::metrics::Metrics;

/// Why a record was not committed. Each maps to a `503` at the edge.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CommitError {
    #[error("overload: the commit queue is full")]
    Overload,
    #[error("store unavailable: {0}")]
    StoreUnavailable(String),
    #[error("the record waited too long for its commit")]
    Expired,
    /// `wal.type: dual`: the intake log did not confirm the record (or its breaker is open).
    #[error("intake log unavailable")]
    IntakeUnavailable,
    /// `wal.type: dual`: a retry of a hook whose intake record is not confirmed yet.
    #[error("the original hook's intake record is not confirmed yet")]
    IntakePending,
}

/// Told about every commit, so dispatch wakes at once for the new rows.
pub trait CommitListener: Send + Sync {
    /// `lanes`: ordering lanes that got rows (dispatch makes a lane's head due).
    fn committed(&self, tenants: &[String], due_at: u64, lanes: &[LaneId]);
}

struct Job {
    rec: IngestRecord,
    /// The envelope as stored, encoded in the caller's task rather than on the commit thread.
    encoded: Vec<u8>,
    size: u64,
    enqueued: Instant,
    reply: oneshot::Sender<Result<IngestResult, CommitError>>,
}

struct Partition {
    tx: mpsc::Sender<Job>,
    queued: Arc<AtomicUsize>,
}

pub struct Committer {
    parts: Vec<Partition>,
    queued_bytes: Arc<AtomicU64>,
    max_queue: usize,
    max_queue_bytes: u64,
    rr: AtomicUsize,
}

struct Worker {
    store: Arc<Store>,
    cfg: CommitConfig,
    metrics: Arc<Metrics>,
    listener: Arc<dyn CommitListener>,
    queued: Arc<AtomicUsize>,
    queued_bytes: Arc<AtomicU64>,
    /// `wal.type: dual`: the intake log, and the runtime its publishes run on.
    intake: Option<(Arc<Intake>, tokio::runtime::Handle)>,
}

type Reply = oneshot::Sender<Result<IngestResult, CommitError>>;

impl Committer {
    /// Starts one commit task per partition on the current runtime.
    pub fn start(
        store: Arc<Store>,
        cfg: &CommitConfig,
        metrics: Arc<Metrics>,
        listener: Arc<dyn CommitListener>,
        intake: Option<Arc<Intake>>,
    ) -> Arc<Committer> {
        let intake = intake.map(|i| (i, tokio::runtime::Handle::current()));
        let queued_bytes = Arc::new(AtomicU64::new(0));
        let mut parts = Vec::new();
        for _ in 0..cfg.partitions.max(1) {
            let (tx, rx) = mpsc::channel();
            let queued = Arc::new(AtomicUsize::new(0));
            let worker = Worker {
                store: store.clone(),
                cfg: cfg.clone(),
                metrics: metrics.clone(),
                listener: listener.clone(),
                queued: queued.clone(),
                queued_bytes: queued_bytes.clone(),
                intake: intake.clone(),
            };
            // One thread per partition: a commit blocks on the fsync, and a dedicated thread
            // saves the hand-over to a blocking pool on every batch.
            std::thread::Builder::new()
                .name(format!("ankusa-commit-{}", parts.len()))
                .spawn(move || worker.run(rx))
                .expect("spawn a commit thread");
            parts.push(Partition { tx, queued });
        }
        Arc::new(Committer {
            parts,
            queued_bytes,
            max_queue: cfg.max_queue as usize,
            max_queue_bytes: cfg.max_queue_bytes,
            rr: AtomicUsize::new(0),
        })
    }

    /// Records waiting or committing, over all partitions.
    pub fn queued(&self) -> usize {
        self.parts
            .iter()
            .map(|p| p.queued.load(Ordering::Relaxed))
            .sum()
    }

    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes.load(Ordering::Relaxed)
    }

    /// Commits one record and waits until it is durable (or refused). Records with the same
    /// dedupe key always share a partition, so their dedupe decision is serialised.
    pub async fn commit(&self, rec: IngestRecord) -> Result<IngestResult, CommitError> {
        // A source with ordered sinks commits through one partition, so seq order is commit
        // order within its lanes; a dedupe key always meets its earlier copies.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let idx = if !rec.lanes.is_empty() {
            (&rec.envelope.tenant, &rec.envelope.source_id).hash(&mut h);
            (h.finish() % self.parts.len() as u64) as usize
        } else if let Some(d) = &rec.dedupe {
            (&rec.envelope.tenant, &rec.envelope.source_id, &d.key).hash(&mut h);
            (h.finish() % self.parts.len() as u64) as usize
        } else {
            self.rr.fetch_add(1, Ordering::Relaxed) % self.parts.len()
        };
        let part = &self.parts[idx];
        let size = rec.envelope.body.len() as u64 + 512;
        if part.queued.fetch_add(1, Ordering::SeqCst) >= self.max_queue {
            part.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(CommitError::Overload);
        }
        if self.queued_bytes.fetch_add(size, Ordering::SeqCst) + size > self.max_queue_bytes {
            self.queued_bytes.fetch_sub(size, Ordering::SeqCst);
            part.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(CommitError::Overload);
        }
        let (reply, rx) = oneshot::channel();
        let job = Job {
            encoded: ankusa_store::encode_envelope(&rec.envelope),
            rec,
            size,
            enqueued: Instant::now(),
            reply,
        };
        if let Err(mpsc::SendError(job)) = part.tx.send(job) {
            self.queued_bytes.fetch_sub(job.size, Ordering::SeqCst);
            part.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(CommitError::StoreUnavailable(
                "the commit task stopped".into(),
            ));
        }
        rx.await.unwrap_or_else(|_| {
            Err(CommitError::StoreUnavailable(
                "the commit task stopped".into(),
            ))
        })
    }
}

impl Worker {
    fn run(self, rx: mpsc::Receiver<Job>) {
        let max_batch = self.cfg.max_batch.max(1) as usize;
        let max_wait = Duration::from_millis(self.cfg.max_wait_ms);
        let mut last_sweep = Instant::now();
        while let Ok(first) = rx.recv() {
            let mut jobs = vec![first];
            while jobs.len() < max_batch {
                match rx.try_recv() {
                    Ok(j) => jobs.push(j),
                    Err(_) => break,
                }
            }
            if self.cfg.max_delay_ms > 0 && jobs.len() < max_batch {
                let deadline = Instant::now() + Duration::from_millis(self.cfg.max_delay_ms);
                while jobs.len() < max_batch {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(left) {
                        Ok(j) => jobs.push(j),
                        Err(_) => break,
                    }
                }
            }
            // A record that waited past max_wait is refused unstored: its caller may be gone
            // and the provider will retry.
            let (live, expired): (Vec<Job>, Vec<Job>) = jobs
                .into_iter()
                .partition(|j| j.enqueued.elapsed() <= max_wait);
            for j in expired {
                self.release(j.size);
                self.metrics.commit.expired.inc();
                let _ = j.reply.send(Err(CommitError::Expired));
            }
            if live.is_empty() {
                continue;
            }
            let mut recs = Vec::with_capacity(live.len());
            let mut encoded = Vec::with_capacity(live.len());
            let mut replies = Vec::with_capacity(live.len());
            let mut bytes = 0;
            for j in live {
                bytes += j.size;
                recs.push(j.rec);
                encoded.push(j.encoded);
                replies.push(j.reply);
            }
            let sweep = last_sweep.elapsed() >= Duration::from_secs(1);
            if sweep {
                last_sweep = Instant::now();
            }
            let started = Instant::now();
            let now = now_ms();
            let n = recs.len();
            if let Some((intake, _)) = &self.intake
                && !intake.admits()
            {
                // Nothing is written: a hook is acked in both places or in neither.
                for reply in replies {
                    let _ = reply.send(Err(CommitError::IntakeUnavailable));
                }
                self.queued.fetch_sub(n, Ordering::SeqCst);
                self.queued_bytes.fetch_sub(bytes, Ordering::SeqCst);
                continue;
            }
            let mut publish = None;
            let result = match &self.intake {
                Some((intake, rt)) => self.store.commit_encoded_with(
                    &recs,
                    &encoded,
                    now,
                    sweep,
                    |committed, batch| {
                        publish = Some(intake.begin(&recs, &encoded, committed, batch, rt));
                    },
                ),
                None => self.store.commit_encoded(&recs, &encoded, now, sweep),
            };
            if result.as_ref().is_err_and(StoreError::is_io) {
                self.store.maybe_reopen();
            }
            self.metrics
                .commit
                .wal_sync_seconds
                .observe(started.elapsed().as_secs_f64());
            self.metrics.commit.batch_records.observe(n as f64);
            match result {
                Ok(committed) => {
                    let mut tenants: Vec<String> = Vec::new();
                    for r in &recs {
                        if !tenants.contains(&r.envelope.tenant) {
                            tenants.push(r.envelope.tenant.clone());
                        }
                    }
                    self.listener.committed(&tenants, now, &committed.lanes);
                    match (&self.intake, publish) {
                        (Some((intake, rt)), Some(publish)) => {
                            // The next batch's write need not wait for this one's broker
                            // round trip: the answers go out from a task.
                            let intake = intake.clone();
                            rt.spawn(async move {
                                let answers = intake.finish(publish, &committed.results).await;
                                answer_dual(replies, answers);
                            });
                        }
                        _ => {
                            for (reply, res) in replies.into_iter().zip(committed.results) {
                                let _ = reply.send(Ok(res));
                            }
                        }
                    }
                }
                Err(e) => {
                    if let (Some((intake, _)), Some(publish)) = (&self.intake, publish) {
                        intake.abandon(publish);
                    }
                    self.fail_all(replies, &e)
                }
            }
            self.queued.fetch_sub(n, Ordering::SeqCst);
            self.queued_bytes.fetch_sub(bytes, Ordering::SeqCst);
        }
    }

    fn release(&self, size: u64) {
        self.queued.fetch_sub(1, Ordering::SeqCst);
        self.queued_bytes.fetch_sub(size, Ordering::SeqCst);
    }

    fn fail_all(
        &self,
        replies: Vec<oneshot::Sender<Result<IngestResult, CommitError>>>,
        e: &StoreError,
    ) {
        tracing::warn!(records = replies.len(), error = %e, "commit failed; answering 503");
        for reply in replies {
            let _ = reply.send(Err(CommitError::StoreUnavailable(e.to_string())));
        }
    }
}

fn answer_dual(replies: Vec<Reply>, answers: Vec<Answer>) {
    for (reply, a) in replies.into_iter().zip(answers) {
        let _ = reply.send(match a {
            Answer::Ok(r) => Ok(r),
            Answer::Unavailable => Err(CommitError::IntakeUnavailable),
            Answer::Pending => Err(CommitError::IntakePending),
        });
    }
}
