//! Dispatch: a scheduler over delivery rows, not a poller.
//!
//! One thread (`scheduler.rs`) owns the queue side of the store. A commit wakes it
//! (`CommitListener`); otherwise it sleeps until the earliest due row of a tenant that has
//! room. Each turn of its loop runs the stages in order:
//!
//! 1. write the outcomes of finished attempts (`store::Outcome`, in one batch; lanes hand over);
//! 2. claim due rows (`fairness::scan`: deficit round-robin over the tenants with work due,
//!    within the global and per-tenant windows);
//! 3. hand free slots to claimed rows (`fairness::Slots::next`: round-robin across tenants and
//!    their sink keys, gated by the keys' circuit breakers, `breaker`) and start each as a
//!    tokio task (`attempt`: bind to the sink, check in, deliver under the deadline);
//! 4. turn each finished attempt into an outcome (`settle`: delivered, retry, dead-letter).
//!
//! Ordering lanes are `lanes`; how a replay job's deliveries settle goes to the replayer over
//! `feedback`'s bounded channel (dispatch owns it: the replayer depends on dispatch, never the
//! other way). Each sink's latest failure is kept for the admin API (`health`). Outcomes are
//! written by this thread only, so the "last obligation" check of a hook and lane hand-overs
//! never race.
//!
//! Imports `store`, `live`, `metrics`, `commit` (the `CommitListener` it implements),
//! `hook::NOT_STORED` (`forward`) and `lifecycle::Emitter` (dead letters and breaker
//! transitions as events, once their outcome is written); nothing that imports it back.

pub mod attempt;
#[cfg(any(test, feature = "bench"))]
mod bench;
pub mod breaker;
mod destinations;
mod fairness;
pub mod feedback;
pub mod forward;
pub mod health;
mod lanes;
pub mod retry;
mod schedule;
mod scheduler;
mod settle;
pub mod transform;

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ankusa_core::{ClaimCheck, Envelope, SinkError};
use ankusa_store::{Claimed, DeliveryRow, LaneId, Store, StoreError};

use crate::commit::CommitListener;
use crate::lifecycle::Emitter;
use crate::live::ConfigHandle;
use crate::metrics::Metrics;
use feedback::FeedbackTx;
use scheduler::Scheduler;

#[cfg(any(test, feature = "bench"))]
pub use bench::{ScanStat, measure_scans};

/// Shared with the replayer and the admin API.
#[derive(Default)]
pub struct DispatchStats {
    /// How late the oldest due row is (0 when nothing is late).
    pub oldest_due_lag_ms: AtomicU64,
    /// Whether the global claim window is full.
    pub window_full: AtomicBool,
    pub claimed: AtomicU64,
    pub running: AtomicU64,
}

enum Event {
    Due {
        tenants: Vec<String>,
        at: u64,
        lanes: Vec<LaneId>,
        /// The lanes got back older rows (a replay): read them from their start again.
        replayed: bool,
    },
    Done {
        claim: Arc<Claim>,
        result: Result<(), SinkError>,
        elapsed: Duration,
    },
    Shutdown(mpsc::Sender<()>),
}

/// The breaker and fairness unit: a sink entry of a source, for one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SinkKey {
    pub tenant: String,
    pub source: String,
    pub sink: u16,
    pub sink_type: String,
}

/// A claimed row held in memory until its outcome is written.
pub struct Claim {
    pub seq: u64,
    pub sink: u16,
    pub row: DeliveryRow,
    pub hook: Arc<Envelope>,
    pub key: SinkKey,
    pub lane: Option<LaneId>,
    /// The shared destination it counts against (`destinations.rs`), set when it is queued.
    pub dest: Option<Arc<str>>,
}

impl From<Claimed> for Claim {
    fn from(c: Claimed) -> Claim {
        Claim {
            key: SinkKey {
                tenant: c.row.tenant.clone(),
                source: c.row.source_id.clone(),
                sink: c.sink,
                sink_type: c.row.sink_type.clone(),
            },
            seq: c.seq,
            sink: c.sink,
            row: c.row,
            hook: Arc::new(c.hook),
            lane: c.lane,
            dest: None,
        }
    }
}

/// What dispatch works with.
pub struct Context {
    pub store: Arc<Store>,
    pub config: Arc<ConfigHandle>,
    pub metrics: Arc<Metrics>,
    /// Where attempts run.
    pub tokio: tokio::runtime::Handle,
    /// Where large bodies are checked in, when the claim check is on.
    pub claim_check: Option<Arc<dyn ClaimCheck>>,
    /// Where the outcomes of replayed rows go (the replayer's auto-pause).
    pub feedback: Option<FeedbackTx>,
    /// Lifecycle events: a row dead-lettered, a breaker opened or closed (never for the
    /// lifecycle source's own rows).
    pub lifecycle: Option<Emitter>,
}

pub struct Dispatcher {
    tx: Mutex<mpsc::Sender<Event>>,
    pub stats: Arc<DispatchStats>,
    /// The latest failure of each failing sink (`GET /v1/status`, `failing_sinks`).
    pub health: Arc<health::SinkHealth>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl CommitListener for Dispatcher {
    fn committed(&self, tenants: &[String], due_at: u64, lanes: &[LaneId]) {
        self.wake_lanes(tenants.to_vec(), due_at, lanes.to_vec());
    }
}

impl Dispatcher {
    /// Starts the scheduler thread.
    pub fn start(ctx: Context) -> Result<Arc<Dispatcher>, StoreError> {
        let (sched, tx) = Scheduler::new(ctx)?;
        let stats = sched.stats.clone();
        let health = sched.health.clone();
        let thread = std::thread::Builder::new()
            .name("ankusa-dispatch".into())
            .spawn(move || sched.run())
            .map_err(|e| StoreError::Unavailable {
                class: "other",
                message: e.to_string(),
            })?;
        Ok(Arc::new(Dispatcher {
            tx: Mutex::new(tx),
            stats,
            health,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// New rows of these tenants are due at `at`.
    pub fn wake(&self, tenants: Vec<String>, at: u64) {
        self.wake_lanes(tenants, at, Vec::new());
    }

    /// As `wake`, and these ordering lanes got rows that may need a head.
    pub fn wake_lanes(&self, tenants: Vec<String>, at: u64, lanes: Vec<LaneId>) {
        self.send_due(tenants, at, lanes, false);
    }

    /// A replay moved dead rows back: due at `at` (exactly the time it wrote), and older rows
    /// re-entered these lanes.
    pub fn wake_replayed(&self, tenants: Vec<String>, at: u64, lanes: Vec<LaneId>) {
        self.send_due(tenants, at, lanes, true);
    }

    fn send_due(&self, tenants: Vec<String>, at: u64, lanes: Vec<LaneId>, replayed: bool) {
        self.send(Event::Due {
            tenants,
            at,
            lanes,
            replayed,
        });
    }

    fn send(&self, ev: Event) {
        let _ = self.tx.lock().unwrap_or_else(|p| p.into_inner()).send(ev);
    }

    /// Stops claiming, waits up to `grace` for running attempts, records their outcomes.
    /// Rows still claimed after that are recovered as due at the next start.
    pub fn shutdown(&self, grace: Duration) {
        let (done_tx, done_rx) = mpsc::channel();
        self.send(Event::Shutdown(done_tx));
        let _ = done_rx.recv_timeout(grace + Duration::from_secs(1));
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take()
            && t.is_finished()
        {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests;
