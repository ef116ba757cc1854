//! Replay jobs, every kind in one place: durable, paced moves of dead rows back into the
//! delivery queue (`dlq`), releases of quarantined hooks that verify now (`quarantine`: each
//! pen entry judged by its source's current verifier, a pass committed as a hook with its
//! original id in one synced batch with the pen delete and the job's cursor), and re-sends of
//! archived hooks received in a window (`archive`), and re-emits of lifecycle events from the
//! audit trail with their original ids (`lifecycle`). A hook a replay commits is built by
//! `hook::record`, as the edge builds it (a lifecycle event's by `lifecycle::writer::record`).
//! A job that completes, fails (completes with segments it could not read) or pauses is a
//! lifecycle event (`io.ankusa.replay.*`).
//!
//! A create request is checked into its job by `request`. The replayer is the only writer of
//! job records (`job_record`: the API's job to and from the store's record). Each tick it
//! gives every running job tokens at its `rate` and moves that many rows, but only while
//! dispatch's oldest due row is at most `max_lag_ms` late and its claim window is not full, so
//! a job uses only the capacity live traffic leaves free. A job whose deliveries keep
//! dead-lettering pauses itself: dispatch reports how replayed rows
//! settle over its bounded channel (`dispatch::feedback`), and the replayer owns the counts.
//! The request and job types are the admin API's (`ankusa-api`).
//!
//! Imports `dispatch` (to wake it, read its lag, take its reports), `archive`, `quarantine`
//! (the pen's counters), `hook`, `lifecycle` (events, the trail's hooks), `live`, `metrics`,
//! `telemetry` (its span target); none of them imports it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ankusa_api::{
    CreateReplay, FilterError, JobState, JobView, KIND_ARCHIVE, KIND_LIFECYCLE, KIND_QUARANTINE,
    ReplayJob,
};
use ankusa_core::now_ms;
use ankusa_store::{IngestRecord, JobSettled, Store, StoreError};
use tokio::sync::Mutex;

use crate::archive::Archive;
use crate::blocking::blocking;
use crate::dispatch::Dispatcher;
use crate::dispatch::feedback::{FeedbackRx, Tally};
use crate::lifecycle::{Emitter, Event, EventType};
use crate::live::ConfigHandle;
use crate::metrics::Metrics;
use crate::quarantine::Pen;
use archive::Cached;
use job_record::{from_stored, to_stored};

pub mod archive;
mod dlq;
mod job_record;
mod lifecycle;
pub mod quarantine;
mod request;

const TICK: Duration = Duration::from_millis(100);

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
        let map = &mut self.map;
        self.feedback.drain(|job, t| {
            if let Some(rt) = map.get_mut(job) {
                rt.settled.add(t);
            }
        });
    }
}

/// What the replayer reports to: the metrics, and the lifecycle events of its jobs.
pub struct Reports {
    pub metrics: Arc<Metrics>,
    pub events: Option<Emitter>,
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
    /// Jobs finished, failed or paused, as lifecycle events.
    events: Option<Emitter>,
}

impl Replayer {
    /// Loads stored jobs (running ones resume from their cursors) and starts ticking.
    pub async fn start(
        store: Arc<Store>,
        dispatcher: Arc<Dispatcher>,
        feedback: FeedbackRx,
        reports: Reports,
        config: Arc<ConfigHandle>,
        pen: Arc<Pen>,
        archive: Option<Arc<Archive>>,
    ) -> Result<Arc<Replayer>, StoreError> {
        let Reports { metrics, events } = reports;
        let s = store.clone();
        let stored = blocking(move || s.list_jobs()).await?;
        let mut jobs = HashMap::new();
        for job in stored.into_iter().map(from_stored) {
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
            events,
        });
        tokio::spawn(r.clone().run());
        Ok(r)
    }

    /// Creates a job, or returns the existing one for the same `job_id`, kind and filter.
    /// Returns (view, created).
    pub async fn create(&self, req: CreateReplay) -> Result<(JobView, bool), ReplayError> {
        let lifecycle_on = self.config.live().lifecycle.is_some();
        let new = request::check(req, self.archive.is_some(), lifecycle_on)?;
        let mut jobs = self.jobs.lock().await;
        if let Some(existing) = jobs.map.get(&new.id) {
            if new.same_as(&existing.job) {
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
        let job = new.into_job(now_ms());
        let store = self.store.clone();
        let to_store = job.clone();
        blocking(move || store.put_job(&to_stored(&to_store))).await?;
        jobs.map.insert(job.id.clone(), JobRt::new(job.clone()));
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
            if target == JobState::Paused {
                self.job_event(&rt.job, EventType::ReplayPaused);
            }
            let store = self.store.clone();
            let job = rt.job.clone();
            blocking(move || store.put_job(&to_stored(&job))).await?;
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
                self.job_event(&rt.job, EventType::ReplayPaused);
                let store = self.store.clone();
                let job = rt.job.clone();
                blocking(move || store.put_job(&to_stored(&job))).await?;
                continue;
            }
            if lag > rt.job.max_lag_ms {
                self.metrics
                    .replay
                    .throttled
                    .with_label_values(&["lag"])
                    .inc();
                continue;
            }
            if full {
                self.metrics
                    .replay
                    .throttled
                    .with_label_values(&["window"])
                    .inc();
                continue;
            }
            let n = rt.tokens.floor() as usize;
            if n == 0 {
                continue;
            }
            // Tokens are spent on what a step looked at; a step that found nothing to do
            // drops the rest until the next tick.
            // One `replay_page` span per step (with `telemetry.otlp`); the deliveries it
            // schedules are `deliver` spans in each hook's own trace.
            let span = tracing::info_span!(
                target: crate::telemetry::TARGET,
                "replay_page",
                job = %rt.job.id,
                kind = %rt.job.kind,
                budget = n,
                spent = tracing::field::Empty,
            );
            let kind = rt.job.kind.clone();
            let before = rt.job.state;
            let step = async {
                match kind.as_str() {
                    KIND_ARCHIVE => self.archive_step(rt, n).await,
                    KIND_QUARANTINE => self.release_step(rt, n).await,
                    KIND_LIFECYCLE => self.lifecycle_step(rt, n).await,
                    _ => self.dlq_step(rt, n).await,
                }
            };
            let spent = tracing::Instrument::instrument(step, span.clone()).await?;
            span.record("spent", spent);
            match (before, rt.job.state) {
                (JobState::Running, JobState::Completed) => {
                    // An archive job that could not read some segments did not send them.
                    let kind = if rt.job.corrupt_segments > 0 {
                        EventType::ReplayFailed
                    } else {
                        EventType::ReplaySucceeded
                    };
                    self.job_event(&rt.job, kind);
                }
                (JobState::Running, JobState::Paused) => {
                    self.job_event(&rt.job, EventType::ReplayPaused)
                }
                _ => {}
            }
            rt.tokens -= spent as f64;
            if spent == 0 {
                rt.tokens = 0.0;
            }
        }
        Ok(())
    }
}

impl Replayer {
    /// A job's state change as a lifecycle event: the job's tenant filter is its tenant.
    fn job_event(&self, job: &ReplayJob, kind: EventType) {
        let Some(events) = &self.events else {
            return;
        };
        events.emit(Event::new(
            kind,
            job.id.clone(),
            job.filter.tenant.clone(),
            serde_json::json!({
                "job": job.id,
                "kind": job.kind,
                "state": job.state.as_str(),
                "moved": job.moved,
                "released": job.released,
                "skipped": job.skipped,
                "reason": job.reason,
            }),
        ));
    }
}

/// The tenants of these records, each once (dispatch is woken for them).
fn tenants_of(records: &[IngestRecord]) -> Vec<String> {
    records.iter().fold(Vec::new(), |mut v, r| {
        if !v.contains(&r.envelope.tenant) {
            v.push(r.envelope.tenant.clone());
        }
        v
    })
}
