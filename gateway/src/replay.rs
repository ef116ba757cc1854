//! Replay jobs: durable, paced moves of dead rows back into the delivery queue (`kind: dlq`),
//! releases of quarantined hooks that verify now (`kind: quarantine`: each pen entry is
//! judged by its source's current verifier; a pass is committed as a hook with its original id
//! in one synced batch with the pen delete and the job's cursor, see `store::pen`), and
//! re-sends of archived hooks received in a window (`kind: archive`, see `archive::replay`).
//!
//! The replayer is the only writer of job records. Each tick it gives every running job
//! tokens at its `rate` and moves that many rows, but only while dispatch's oldest due row is
//! at most `max_lag_ms` late and its claim window is not full, so a job uses only the capacity
//! live traffic leaves free. A job whose deliveries keep dead-lettering pauses itself: dispatch
//! reports how replayed rows settle over a bounded channel (`feedback`), and the replayer owns
//! the counts. The request and job types are the admin API's (`ankusa-api`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ankusa_api::{
    CreateReplay, DEFAULT_MAX_LAG_MS, DEFAULT_PAUSE_AFTER_DEAD, DEFAULT_RATE, FilterError,
    JobState, JobView, KIND_ARCHIVE, KIND_DLQ, KIND_QUARANTINE, ReplayJob,
};
use ankusa_core::now_ms;
use tokio::sync::{Mutex, mpsc};

use crate::archive::Archive;
use crate::archive::replay::Cached;
use crate::dispatch::Dispatcher;
use crate::live::ConfigHandle;
use crate::metrics::Metrics;
use crate::quarantine::Pen;
use crate::quarantine::release::judge;
use crate::store::{JobSettled, PenFilter, Store, StoreError};

const TICK: Duration = Duration::from_millis(100);

/// Runs a store call on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Unavailable {
            class: "other",
            message: e.to_string(),
        })?
}

/// Jobs running or paused at once on a node: each holds a scan cursor and a pacing task, and a
/// caller looping on create must not be able to grow that without bound.
pub const MAX_LIVE_JOBS: usize = 64;

/// Why a request about jobs was refused; each maps to an admin API error code.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("invalid_filter ({field}): {message}")]
    InvalidFilter {
        field: &'static str,
        message: String,
    },
    #[error("replay_not_found")]
    NotFound,
    #[error("invalid_state: {0}")]
    InvalidState(String),
    /// `MAX_LIVE_JOBS` jobs are running or paused already.
    #[error("too_many_jobs")]
    TooManyJobs,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<FilterError> for ReplayError {
    fn from(e: FilterError) -> Self {
        ReplayError::InvalidFilter {
            field: e.field,
            message: e.message,
        }
    }
}

fn invalid(field: &'static str, message: impl Into<String>) -> ReplayError {
    ReplayError::InvalidFilter {
        field,
        message: message.into(),
    }
}

/// How a job's deliveries settle: what its auto-pause reads.
#[derive(Debug, Clone, Copy, Default)]
struct Settled {
    /// Dead letters since the last delivery.
    consecutive_dead: u32,
}

impl Settled {
    fn add(&mut self, t: Tally) {
        self.consecutive_dead = if t.delivered {
            t.trailing_dead
        } else {
            self.consecutive_dead.saturating_add(t.trailing_dead)
        };
    }
}

/// How one job's deliveries settled since the last report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// At least one was delivered.
    delivered: bool,
    /// Dead letters after the last delivery in this report.
    trailing_dead: u32,
}

/// Reports sent at most; the sender adds up what it cannot send yet.
const FEEDBACK_QUEUE: usize = 64;

/// The dispatch side of the feedback channel: counts the settled deliveries of replayed rows
/// per job, and sends what it counted when it `flush`es (once per scheduler turn). A full
/// channel never blocks dispatch: the counts wait for the next flush.
pub struct FeedbackTx {
    tx: mpsc::Sender<Vec<(String, Tally)>>,
    pending: HashMap<String, Tally>,
}

impl FeedbackTx {
    /// A delivery of a row `job` replayed settled: delivered, or dead-lettered (or parked)
    /// again.
    pub fn record(&mut self, job: &str, delivered: bool) {
        let t = self.pending.entry(job.to_string()).or_default();
        if delivered {
            t.delivered = true;
            t.trailing_dead = 0;
        } else {
            t.trailing_dead = t.trailing_dead.saturating_add(1);
        }
    }

    /// Sends what was counted; when the channel is full it stays counted for the next flush.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let report: Vec<(String, Tally)> = self.pending.drain().collect();
        if let Err(mpsc::error::TrySendError::Full(report)) = self.tx.try_send(report) {
            self.pending = report.into_iter().collect();
        }
    }
}

/// The replayer's side of the feedback channel.
pub struct FeedbackRx(mpsc::Receiver<Vec<(String, Tally)>>);

/// The channel over which dispatch tells the replayer how replayed rows settle.
pub fn feedback() -> (FeedbackTx, FeedbackRx) {
    let (tx, rx) = mpsc::channel(FEEDBACK_QUEUE);
    (
        FeedbackTx {
            tx,
            pending: HashMap::new(),
        },
        FeedbackRx(rx),
    )
}

struct JobRt {
    job: ReplayJob,
    tokens: f64,
    last: Instant,
    settled: Settled,
    /// `archive` jobs: the segment being sent.
    segment: Option<Cached>,
}

impl JobRt {
    fn new(job: ReplayJob) -> JobRt {
        JobRt {
            job,
            tokens: 0.0,
            last: Instant::now(),
            settled: Settled::default(),
            segment: None,
        }
    }
}

/// The jobs, and the reports of how their deliveries settle (read under the same lock).
struct Jobs {
    map: HashMap<String, JobRt>,
    feedback: FeedbackRx,
}

impl Jobs {
    /// Takes in every report dispatch has sent.
    fn take_feedback(&mut self) {
        while let Ok(report) = self.feedback.0.try_recv() {
            for (job, t) in report {
                if let Some(rt) = self.map.get_mut(&job) {
                    rt.settled.add(t);
                }
            }
        }
    }
}

pub struct Replayer {
    store: Arc<Store>,
    dispatcher: Arc<Dispatcher>,
    metrics: Arc<Metrics>,
    /// The sources' current verifiers, for `quarantine` jobs.
    config: Arc<ConfigHandle>,
    pen: Arc<Pen>,
    /// The archive, for `archive` jobs.
    archive: Option<Arc<Archive>>,
    jobs: Mutex<Jobs>,
    wake: tokio::sync::Notify,
}

impl Replayer {
    /// Loads stored jobs (running ones resume from their cursors) and starts ticking.
    pub async fn start(
        store: Arc<Store>,
        dispatcher: Arc<Dispatcher>,
        feedback: FeedbackRx,
        metrics: Arc<Metrics>,
        config: Arc<ConfigHandle>,
        pen: Arc<Pen>,
        archive: Option<Arc<Archive>>,
    ) -> Result<Arc<Replayer>, StoreError> {
        let s = store.clone();
        let stored = blocking(move || s.list_jobs()).await?;
        let mut jobs = HashMap::new();
        for job in stored {
            if job.state == JobState::Running {
                tracing::info!(job = %job.id, moved = job.moved, "replay job resumes");
            }
            jobs.insert(job.id.clone(), JobRt::new(job));
        }
        let r = Arc::new(Replayer {
            store,
            dispatcher,
            metrics,
            config,
            pen,
            archive,
            jobs: Mutex::new(Jobs {
                map: jobs,
                feedback,
            }),
            wake: tokio::sync::Notify::new(),
        });
        tokio::spawn(r.clone().run());
        Ok(r)
    }

    /// Creates a job, or returns the existing one for the same `job_id`, kind and filter.
    /// Returns (view, created).
    pub async fn create(&self, req: CreateReplay) -> Result<(JobView, bool), ReplayError> {
        if ![KIND_DLQ, KIND_QUARANTINE, KIND_ARCHIVE].contains(&req.kind.as_str()) {
            return Err(invalid(
                "kind",
                "unsupported kind; this release replays kind dlq, archive or quarantine",
            ));
        }
        let filter = req.filter()?;
        let window = req.archive_window()?;
        // An archived hook is chosen by its source, tenant, id and receive time (`from`, `to`):
        // it has no dead time, sink or error class of its own.
        if req.kind == KIND_ARCHIVE {
            if self.archive.is_none() {
                return Err(invalid(
                    "kind",
                    "kind archive needs an archive (storage is not configured on this node)",
                ));
            }
            for (set, field) in [
                (filter.sink.is_some(), "sink"),
                (filter.error_class.is_some(), "error_class"),
                (filter.since.is_some(), "since"),
                (filter.until.is_some(), "until"),
            ] {
                if set {
                    return Err(invalid(
                        field,
                        "is not a filter of kind archive (use from, to and sinks)",
                    ));
                }
            }
        }
        // A pen entry has no sink and no error class yet.
        if req.kind == KIND_QUARANTINE {
            if filter.sink.is_some() {
                return Err(invalid("sink", "is not a filter of kind quarantine"));
            }
            if filter.error_class.is_some() {
                return Err(invalid("error_class", "is not a filter of kind quarantine"));
            }
        }
        let rate = req.rate.unwrap_or(DEFAULT_RATE);
        ankusa_api::check_rate(rate).map_err(|m| invalid("rate", m))?;
        let id = match &req.job_id {
            Some(id) => {
                let parsed = uuid::Uuid::parse_str(id)
                    .map_err(|_| invalid("job_id", "must be a lowercase UUID"))?;
                if parsed.hyphenated().to_string() != *id {
                    return Err(invalid("job_id", "must be a lowercase hyphenated UUID"));
                }
                id.clone()
            }
            None => uuid::Uuid::now_v7().to_string(),
        };
        let mut jobs = self.jobs.lock().await;
        if let Some(existing) = jobs.map.get(&id) {
            if existing.job.kind == req.kind
                && existing.job.filter == filter
                && existing.job.archive == window
            {
                let job = existing.job.clone();
                drop(jobs);
                return Ok((self.view(job).await?, false));
            }
            return Err(invalid(
                "job_id",
                "a job with this job_id exists with another kind or filter",
            ));
        }
        let live = jobs
            .map
            .values()
            .filter(|j| matches!(j.job.state, JobState::Running | JobState::Paused))
            .count();
        if live >= MAX_LIVE_JOBS {
            return Err(ReplayError::TooManyJobs);
        }
        let now = now_ms();
        let job = ReplayJob {
            id: id.clone(),
            kind: req.kind,
            filter,
            rate,
            max_lag_ms: req.max_lag_ms.unwrap_or(DEFAULT_MAX_LAG_MS),
            pause_after_dead: req
                .pause_after_dead
                .unwrap_or(DEFAULT_PAUSE_AFTER_DEAD)
                .max(1),
            state: JobState::Running,
            created_at: now,
            updated_at: now,
            completed_at: None,
            cursor: None,
            moved: 0,
            scanned: 0,
            released: 0,
            skipped: 0,
            archive: window,
            corrupt_segments: 0,
            reason: None,
        };
        let store = self.store.clone();
        let to_store = job.clone();
        blocking(move || store.put_job(&to_store)).await?;
        jobs.map.insert(id, JobRt::new(job.clone()));
        drop(jobs);
        self.wake.notify_one();
        tracing::info!(job = %job.id, filter = ?job.filter, rate = job.rate, "replay job created");
        Ok((self.view(job).await?, true))
    }

    pub async fn get(&self, id: &str) -> Result<JobView, ReplayError> {
        let job = self
            .jobs
            .lock()
            .await
            .map
            .get(id)
            .map(|j| j.job.clone())
            .ok_or(ReplayError::NotFound)?;
        self.view(job).await
    }

    pub async fn list(&self) -> Result<Vec<JobView>, ReplayError> {
        let mut jobs: Vec<ReplayJob> = self
            .jobs
            .lock()
            .await
            .map
            .values()
            .map(|j| j.job.clone())
            .collect();
        jobs.sort_by_key(|j| std::cmp::Reverse(j.created_at));
        let mut out = Vec::with_capacity(jobs.len());
        for j in jobs {
            out.push(self.view(j).await?);
        }
        Ok(out)
    }

    /// Sets a job's state: `running`, `paused` or `cancelled`. A completed or cancelled job
    /// stays as it is.
    pub async fn set_state(&self, id: &str, state: &str) -> Result<JobView, ReplayError> {
        let target = match state {
            "running" => JobState::Running,
            "paused" => JobState::Paused,
            "cancelled" => JobState::Cancelled,
            other => {
                return Err(ReplayError::InvalidState(format!(
                    "state must be running, paused or cancelled, got {other:?}"
                )));
            }
        };
        let mut jobs = self.jobs.lock().await;
        // Reports already sent count before a resume resets the run of dead letters.
        jobs.take_feedback();
        let rt = jobs.map.get_mut(id).ok_or(ReplayError::NotFound)?;
        let cur = rt.job.state;
        if cur != target {
            if matches!(cur, JobState::Completed | JobState::Cancelled) {
                return Err(ReplayError::InvalidState(format!(
                    "job is {}",
                    cur.as_str()
                )));
            }
            rt.job.state = target;
            rt.job.updated_at = now_ms();
            if target == JobState::Running {
                rt.job.reason = None;
                rt.settled.consecutive_dead = 0;
            }
            let store = self.store.clone();
            let job = rt.job.clone();
            blocking(move || store.put_job(&job)).await?;
        }
        let job = rt.job.clone();
        drop(jobs);
        self.wake.notify_one();
        self.view(job).await
    }

    async fn view(&self, job: ReplayJob) -> Result<JobView, ReplayError> {
        let store = self.store.clone();
        let id = job.id.clone();
        let settled: JobSettled = blocking(move || store.job_settled(&id)).await?;
        let outstanding = (job.moved as i64 - settled.delivered - settled.failed).max(0);
        let done = job.state == JobState::Completed && outstanding == 0;
        Ok(JobView {
            job,
            delivered: settled.delivered,
            failed: settled.failed,
            outstanding,
            done,
        })
    }

    async fn run(self: Arc<Self>) {
        loop {
            let _ = tokio::time::timeout(TICK, self.wake.notified()).await;
            if let Err(e) = self.tick().await {
                tracing::error!(error = %e, "replay tick failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }

    /// One step of a `quarantine` job: judges up to `n` pen entries (received at or before
    /// the job's creation) against their sources' current verifiers, and commits the passes
    /// with the pen deletes and the job's cursor in one synced batch. Returns how many entries
    /// it looked at.
    async fn release_step(&self, rt: &mut JobRt, n: usize) -> Result<u64, StoreError> {
        let f = &rt.job.filter;
        let filter = PenFilter {
            tenant: f.tenant.clone(),
            source_id: f.source_id.clone(),
            id: f.id,
            since: f.since,
            until: Some(f.until.unwrap_or(u64::MAX).min(rt.job.created_at)),
        };
        // A cursor that does not decode starts the scan over: entries already released are
        // gone, and the ones that stayed are judged again.
        let after = rt.job.cursor.as_deref().and_then(|c| hex::decode(c).ok());
        let store = self.store.clone();
        let page = blocking(move || store.pen_page(&filter, after.as_deref(), n)).await?;
        let looked = page.entries.len() as u64;
        let live = self.config.live();
        let mut passed = Vec::new();
        let mut records = Vec::new();
        let mut encoded = Vec::new();
        let mut job = rt.job.clone();
        for held in &page.entries {
            let source = live
                .sources
                .get(&held.summary.source_id)
                .map(|s| s.as_ref());
            match judge(source, held, &self.metrics) {
                Ok(rec) => {
                    encoded.push(crate::store::encode_envelope(&rec.envelope));
                    records.push(rec);
                    passed.push(held.summary.clone());
                }
                Err(why) => {
                    tracing::debug!(job = %job.id, id = %held.summary.id, ?why, "quarantined hook stays");
                    job.skipped += 1;
                }
            }
        }
        job.scanned += page.examined;
        if let Some(k) = &page.last_key {
            job.cursor = Some(hex::encode(k));
        }
        if page.finished {
            job.state = JobState::Completed;
        }
        let tenants: Vec<String> = records.iter().fold(Vec::new(), |mut v, r| {
            if !v.contains(&r.envelope.tenant) {
                v.push(r.envelope.tenant.clone());
            }
            v
        });
        let store = self.store.clone();
        let at = now_ms();
        let (released, job) = blocking(move || {
            store
                .pen_release(&mut job, &passed, &records, &encoded, at)
                .map(|r| (r, job))
        })
        .await?;
        self.pen.removed(released.removed);
        if released.accepted > 0 {
            self.metrics
                .replay_moved
                .with_label_values(&[KIND_QUARANTINE])
                .inc_by(released.accepted);
            self.dispatcher
                .wake_lanes(tenants, at, released.committed.lanes.clone());
        }
        if job.state == JobState::Completed {
            tracing::info!(job = %job.id, released = job.released, skipped = job.skipped, "quarantine job finished its scan");
        }
        rt.job = job;
        Ok(looked)
    }

    /// One step of an `archive` job (see `archive::replay`); returns the records it examined.
    async fn archive_step(&self, rt: &mut JobRt, n: usize) -> Result<u64, StoreError> {
        let Some(archive) = &self.archive else {
            // The archive was configured when the job was made, and is not now.
            rt.job.state = JobState::Paused;
            rt.job.reason = Some("paused: storage is not configured on this node".into());
            let store = self.store.clone();
            let job = rt.job.clone();
            return blocking(move || store.put_job(&job)).await.map(|_| 0);
        };
        let mut job = rt.job.clone();
        let at = now_ms();
        let live = self.config.live();
        let ctx = crate::archive::replay::StepCtx {
            archive,
            store: &self.store,
            live: &live,
            metrics: &self.metrics,
        };
        let stepped = match crate::archive::replay::step(ctx, &mut job, &mut rt.segment, n, at)
            .await
        {
            Ok(s) => s,
            Err(crate::archive::ArchiveError::Store(e)) => return Err(e),
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
                        .replay_moved
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
                blocking(move || store.put_job(&to_store)).await?;
            }
        }
        if job.state == JobState::Completed && rt.job.state != JobState::Completed {
            tracing::info!(job = %job.id, released = job.released, skipped = job.skipped, corrupt_segments = job.corrupt_segments, "archive job finished its scan");
        }
        rt.job = job;
        // A step that only moved past segments still made progress: count it as one look.
        Ok(stepped.looked.max(1))
    }

    async fn tick(&self) -> Result<(), StoreError> {
        let lag = self
            .dispatcher
            .stats
            .oldest_due_lag_ms
            .load(Ordering::Relaxed);
        let full = self.dispatcher.stats.window_full.load(Ordering::Relaxed);
        let mut jobs = self.jobs.lock().await;
        jobs.take_feedback();
        for rt in jobs.map.values_mut() {
            if rt.job.state != JobState::Running {
                continue;
            }
            let elapsed = rt.last.elapsed().as_secs_f64();
            rt.last = Instant::now();
            rt.tokens = (rt.tokens + elapsed * rt.job.rate as f64).min(rt.job.rate as f64);
            let fb = rt.settled;
            if fb.consecutive_dead >= rt.job.pause_after_dead {
                rt.job.state = JobState::Paused;
                rt.job.reason = Some(format!(
                    "paused itself: {} deliveries in a row dead-lettered again",
                    fb.consecutive_dead
                ));
                rt.job.updated_at = now_ms();
                tracing::warn!(job = %rt.job.id, "replay job paused itself: its deliveries keep dead-lettering");
                let store = self.store.clone();
                let job = rt.job.clone();
                blocking(move || store.put_job(&job)).await?;
                continue;
            }
            if lag > rt.job.max_lag_ms {
                self.metrics
                    .replay_throttled
                    .with_label_values(&["lag"])
                    .inc();
                continue;
            }
            if full {
                self.metrics
                    .replay_throttled
                    .with_label_values(&["window"])
                    .inc();
                continue;
            }
            let n = rt.tokens.floor() as usize;
            if n == 0 {
                continue;
            }
            if rt.job.kind == KIND_ARCHIVE {
                let looked = self.archive_step(rt, n).await?;
                rt.tokens -= looked as f64;
                if looked == 0 {
                    rt.tokens = 0.0;
                }
                continue;
            }
            if rt.job.kind == KIND_QUARANTINE {
                let looked = self.release_step(rt, n).await?;
                rt.tokens -= looked as f64;
                if looked == 0 {
                    rt.tokens = 0.0;
                }
                continue;
            }
            let store = self.store.clone();
            let mut job = rt.job.clone();
            // The rows moved are due at `at`, and dispatch is told exactly that time: its scan
            // resume point may only be lowered to a key at or below the rows written.
            let at = now_ms();
            let (step, job) = blocking(move || {
                let r = store.replay_step(&mut job, n, at);
                r.map(|step| (step, job))
            })
            .await?;
            rt.job = job;
            rt.tokens -= step.moved as f64;
            if step.moved == 0 {
                rt.tokens = 0.0;
            }
            if step.moved > 0 {
                self.metrics
                    .replay_moved
                    .with_label_values(&[KIND_DLQ])
                    .inc_by(step.moved);
                self.dispatcher.wake_replayed(step.tenants, at, step.lanes);
            }
            if step.finished {
                tracing::info!(job = %rt.job.id, moved = rt.job.moved, "replay job finished its scan");
            }
        }
        Ok(())
    }
}
