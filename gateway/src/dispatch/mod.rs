//! Dispatch: a scheduler over delivery rows, not a poller.
//!
//! One thread owns the queue side of the store. A commit wakes it (`CommitListener`);
//! otherwise it sleeps until the earliest due row of a tenant that has room. Each scan splits
//! `dispatch.batch` rows among the tenants with work due (deficit round-robin; a tenant the
//! page did not reach goes first next scan), within the global and per-tenant windows.
//! Claimed rows wait in one queue per sink key (tenant, source, sink index, sink type); free
//! slots go round-robin across tenants and, within a tenant, across its keys, capped per key
//! by `dispatch.sink_concurrency`. Each attempt runs as a tokio task under
//! `attempt_timeout_ms`; a panic or a timeout is a failed attempt. Outcomes are written to the
//! store in batches by this thread, so the "last obligation" check of a hook never races.

pub mod breaker;
mod forward;
pub mod retry;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ankusa_config::{DispatchConfig, RetryConfig};
use futures::FutureExt;
use serde::Serialize;

use crate::commit::CommitListener;
use crate::live::ConfigHandle;
use crate::metrics::Metrics;
use ankusa_core::{Envelope, now_ms};

use crate::store::{Claimed, DeliveryRow, DueCursor, ErrorClass, LaneId, Outcome, Store};
use ankusa_core::{ClaimCheck, DeliveryCtx, Sink, SinkError};
use breaker::{Breaker, Gate, Transition};

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

/// How a replay job's deliveries are settling, for its auto-pause.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct JobFeedback {
    pub delivered: u64,
    pub dead: u64,
    pub consecutive_dead: u32,
}

pub type Feedback = Arc<Mutex<HashMap<String, JobFeedback>>>;

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

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SinkKey {
    tenant: String,
    source: String,
    sink: u16,
    sink_type: String,
}

struct Claim {
    seq: u64,
    sink: u16,
    row: DeliveryRow,
    hook: Arc<Envelope>,
    key: SinkKey,
    lane: Option<LaneId>,
}

#[derive(Default)]
struct KeyQueue {
    rows: VecDeque<Arc<Claim>>,
    running: u32,
}

#[derive(Default)]
struct TenantState {
    inflight_rows: u32,
    inflight_bytes: u64,
    running: u32,
    /// Keys with queued rows, served round-robin.
    keys: VecDeque<SinkKey>,
}

/// The effective per-tenant window.
#[derive(Debug, Clone, Copy)]
struct Window {
    rows: u32,
    bytes: u64,
    concurrency: u32,
}

fn tenant_window(d: &DispatchConfig, tenant: &str) -> Window {
    let def = &d.tenants.default;
    let o = d.tenants.overrides.get(tenant);
    let pick_u32 = |f: fn(&ankusa_config::TenantWindow) -> Option<u32>, fallback: u32| {
        o.and_then(f).or(f(def)).unwrap_or(fallback).max(1)
    };
    Window {
        rows: pick_u32(|w| w.max_inflight, (d.max_inflight / 4).max(1)),
        bytes: o
            .and_then(|w| w.max_inflight_bytes)
            .or(def.max_inflight_bytes)
            .unwrap_or((d.max_inflight_bytes / 4).max(1)),
        concurrency: pick_u32(|w| w.concurrency, (d.concurrency / 2).max(1)),
    }
}

pub struct Dispatcher {
    tx: Mutex<mpsc::Sender<Event>>,
    pub stats: Arc<DispatchStats>,
    pub feedback: Feedback,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl CommitListener for Dispatcher {
    fn committed(&self, tenants: &[String], due_at: u64, lanes: &[LaneId]) {
        self.wake_lanes(tenants.to_vec(), due_at, lanes.to_vec());
    }
}

impl Dispatcher {
    /// Starts the scheduler thread; attempts run on the given tokio runtime.
    pub fn start(
        store: Arc<Store>,
        config: Arc<ConfigHandle>,
        metrics: Arc<Metrics>,
        rt: tokio::runtime::Handle,
        claims: Option<Arc<dyn ClaimCheck>>,
    ) -> Result<Arc<Dispatcher>, crate::store::StoreError> {
        let (sched, tx) = Scheduler::new(store, config, metrics, rt, claims)?;
        let (stats, feedback) = (sched.stats.clone(), sched.feedback.clone());
        let thread = std::thread::Builder::new()
            .name("ankusa-dispatch".into())
            .spawn(move || sched.run())
            .map_err(|e| crate::store::StoreError::Unavailable {
                class: "other",
                message: e.to_string(),
            })?;
        Ok(Arc::new(Dispatcher {
            tx: Mutex::new(tx),
            stats,
            feedback,
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
        let _ = self
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Event::Due {
                tenants,
                at,
                lanes,
                replayed,
            });
    }

    /// Stops claiming, waits up to `grace` for running attempts, records their outcomes.
    /// Rows still claimed after that are recovered as due at the next start.
    pub fn shutdown(&self, grace: Duration) {
        let (done_tx, done_rx) = mpsc::channel();
        let _ = self
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Event::Shutdown(done_tx));
        let _ = done_rx.recv_timeout(grace + Duration::from_secs(1));
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take()
            && t.is_finished()
        {
            let _ = t.join();
        }
    }
}

struct Scheduler {
    store: Arc<Store>,
    config: Arc<ConfigHandle>,
    metrics: Arc<Metrics>,
    rt: tokio::runtime::Handle,
    claims: Option<Arc<dyn ClaimCheck>>,
    tx: mpsc::Sender<Event>,
    rx: mpsc::Receiver<Event>,
    stats: Arc<DispatchStats>,
    feedback: Feedback,
    /// (due_at, tenant) of each tenant's earliest due row in the store.
    schedule: BTreeSet<(u64, String)>,
    tenant_due: HashMap<String, u64>,
    /// Tenants a page did not reach: they go first next scan.
    unreached: Vec<String>,
    tenants: HashMap<String, TenantState>,
    queues: HashMap<SinkKey, KeyQueue>,
    /// Tenants with queued rows, served round-robin.
    runnable: VecDeque<String>,
    running: u32,
    inflight_rows: u32,
    inflight_bytes: u64,
    /// Outcomes not yet written (kept across a failed write).
    pending: Vec<Outcome>,
    breakers: HashMap<SinkKey, Breaker>,
    /// Ordering lanes with a head (due, claimed or waiting for a retry).
    lanes_active: std::collections::HashSet<LaneId>,
    /// Lanes whose head is waiting for a retry or parked.
    lanes_blocked: std::collections::HashSet<LaneId>,
    /// Per lane, a seq below which it has no waiting row.
    lane_floor: HashMap<LaneId, u64>,
    /// Per tenant, the due key its next scan starts from: every due key of the tenant below it
    /// is deleted. Lowered by every hint of a row due earlier.
    tenant_resume: HashMap<String, DueCursor>,
    /// Rows running as a half-open breaker's probe.
    probes: std::collections::HashSet<(u64, u16)>,
    /// Attempts waiting in a batching sink's batcher: they hold no slot.
    unslotted: std::collections::HashSet<(u64, u16)>,
    last_gauges: Instant,
    store_backoff_until: Option<Instant>,
    /// Tenants whose rows a scan read, since start (for the scan-cost test and bench).
    scan_visits: u64,
}

/// Longest sleep, so gauges and reloaded limits are picked up.
const MAX_SLEEP: Duration = Duration::from_millis(500);

impl Scheduler {
    /// A scheduler whose schedule is loaded from the store: each tenant with due rows and its
    /// earliest due time (one seek per tenant), the lanes with a head, and heads for lanes an
    /// interrupted hand-over left without one.
    fn new(
        store: Arc<Store>,
        config: Arc<ConfigHandle>,
        metrics: Arc<Metrics>,
        rt: tokio::runtime::Handle,
        claims: Option<Arc<dyn ClaimCheck>>,
    ) -> Result<(Scheduler, mpsc::Sender<Event>), crate::store::StoreError> {
        let (tx, rx) = mpsc::channel();
        let stats = Arc::new(DispatchStats::default());
        let feedback: Feedback = Arc::default();
        let mut sched = Scheduler {
            store,
            config,
            metrics,
            rt,
            claims,
            tx: tx.clone(),
            rx,
            stats: stats.clone(),
            feedback: feedback.clone(),
            schedule: BTreeSet::new(),
            tenant_due: HashMap::new(),
            unreached: Vec::new(),
            tenants: HashMap::new(),
            queues: HashMap::new(),
            runnable: VecDeque::new(),
            running: 0,
            inflight_rows: 0,
            inflight_bytes: 0,
            pending: Vec::new(),
            breakers: HashMap::new(),
            lanes_active: Default::default(),
            lanes_blocked: Default::default(),
            lane_floor: HashMap::new(),
            tenant_resume: HashMap::new(),
            probes: Default::default(),
            unslotted: Default::default(),
            last_gauges: Instant::now() - Duration::from_secs(10),
            store_backoff_until: None,
            scan_visits: 0,
        };
        for (tenant, at) in sched.store.due_tenants()? {
            sched.set_due(&tenant, at);
        }
        let lanes = sched.store.lane_state()?;
        sched.lanes_active.extend(lanes.heads);
        for lane in lanes.orphans {
            sched.promote(lane, now_ms());
        }
        Ok((sched, tx))
    }

    fn run(mut self) {
        let mut shutdown: Option<(mpsc::Sender<()>, Instant)> = None;
        loop {
            let d = self.config.live().config.dispatch.clone();
            self.flush_outcomes();
            if shutdown.is_none() {
                self.claim(&d);
            }
            self.start_attempts(&d);
            self.publish(&d);
            if let Some((_, deadline)) = &shutdown
                && (self.running == 0 || Instant::now() >= *deadline)
            {
                break;
            }
            let sleep = if shutdown.is_some() {
                Duration::from_millis(50)
            } else {
                self.sleep_for(&d)
            };
            match self.rx.recv_timeout(sleep) {
                Ok(ev) => {
                    if let Some(s) = self.handle(ev, &d) {
                        let grace = Duration::from_millis(d.attempt_timeout_ms.min(10_000));
                        shutdown = Some((s, Instant::now() + grace));
                    }
                    while let Ok(ev) = self.rx.try_recv() {
                        if let Some(s) = self.handle(ev, &d) {
                            shutdown = Some((s, Instant::now() + Duration::from_secs(10)));
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        self.flush_outcomes();
        tracing::info!(still_running = self.running, "dispatch stopped");
        if let Some((s, _)) = shutdown {
            let _ = s.send(());
        }
    }

    fn handle(&mut self, ev: Event, d: &DispatchConfig) -> Option<mpsc::Sender<()>> {
        match ev {
            Event::Due {
                tenants,
                at,
                lanes,
                replayed,
            } => {
                for t in tenants {
                    self.set_due(&t, at);
                }
                for lane in lanes {
                    if replayed {
                        self.lane_floor.remove(&lane);
                    }
                    if !self.lanes_active.contains(&lane) {
                        self.promote(lane, at);
                    }
                }
                None
            }
            Event::Done {
                claim,
                result,
                elapsed,
            } => {
                self.settle(claim, result, elapsed, d);
                None
            }
            Event::Shutdown(s) => Some(s),
        }
    }

    /// Gives a lane without a head its head.
    fn promote(&mut self, lane: LaneId, now: u64) {
        let floor = self.lane_floor.get(&lane).copied().unwrap_or(0);
        match self.store.promote_lane(&lane, now, floor) {
            Ok(Some((tenant, at, seq))) => {
                self.lane_floor.insert(lane.clone(), seq + 1);
                self.lanes_active.insert(lane);
                self.set_due(&tenant, at);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(error = %e, "promoting an ordering lane's head failed; it is retried at the next start")
            }
        }
    }

    fn set_due(&mut self, tenant: &str, at: u64) {
        if let Some(resume) = self.tenant_resume.get_mut(tenant) {
            resume.rewind(at);
        }
        match self.tenant_due.get(tenant) {
            Some(&cur) if cur <= at => {}
            Some(&cur) => {
                self.schedule.remove(&(cur, tenant.to_string()));
                self.schedule.insert((at, tenant.to_string()));
                self.tenant_due.insert(tenant.to_string(), at);
            }
            None => {
                self.schedule.insert((at, tenant.to_string()));
                self.tenant_due.insert(tenant.to_string(), at);
            }
        }
    }

    fn replace_due(&mut self, tenant: &str, next: Option<u64>) {
        if let Some(cur) = self.tenant_due.remove(tenant) {
            self.schedule.remove(&(cur, tenant.to_string()));
        }
        if let Some(at) = next {
            self.set_due(tenant, at);
        }
    }

    fn tenant_has_room(&self, d: &DispatchConfig, tenant: &str) -> bool {
        let w = tenant_window(d, tenant);
        self.tenants
            .get(tenant)
            .is_none_or(|t| t.inflight_rows < w.rows && t.inflight_bytes < w.bytes)
    }

    fn global_room(&self, d: &DispatchConfig) -> bool {
        self.inflight_rows < d.max_inflight && self.inflight_bytes < d.max_inflight_bytes
    }

    /// One scan: claims up to `batch` due rows split among the due tenants.
    fn claim(&mut self, d: &DispatchConfig) {
        if let Some(until) = self.store_backoff_until {
            if Instant::now() < until {
                return;
            }
            self.store_backoff_until = None;
        }
        if !self.global_room(d) {
            return;
        }
        let now = now_ms();
        let mut due: Vec<String> = Vec::new();
        for t in std::mem::take(&mut self.unreached) {
            if self.tenant_due.get(&t).is_some_and(|&at| at <= now) && !due.contains(&t) {
                due.push(t);
            }
        }
        for (at, t) in self.schedule.iter() {
            if *at > now {
                break;
            }
            if !due.contains(t) {
                due.push(t.clone());
            }
        }
        due.retain(|t| self.tenant_has_room(d, t));
        if due.is_empty() {
            return;
        }
        let mut budget = (d.batch as usize).min((d.max_inflight - self.inflight_rows) as usize);
        let mut active = due;
        while budget > 0 && !active.is_empty() {
            let share = (budget / active.len()).max(1);
            let mut still = Vec::new();
            let mut reached = 0;
            for t in &active {
                if budget == 0 {
                    break;
                }
                reached += 1;
                let w = tenant_window(d, t);
                let st = self.tenants.get(t);
                let rows_room = w.rows.saturating_sub(st.map_or(0, |s| s.inflight_rows)) as usize;
                let bytes_room = w
                    .bytes
                    .saturating_sub(st.map_or(0, |s| s.inflight_bytes))
                    .min(d.max_inflight_bytes.saturating_sub(self.inflight_bytes));
                let quota = share.min(budget).min(rows_room);
                if quota == 0 || bytes_room == 0 {
                    continue;
                }
                self.scan_visits += 1;
                let from = self.tenant_resume.get(t);
                match self.store.claim_due_from(t, from, now, quota, bytes_room) {
                    Ok(page) => {
                        self.tenant_resume.insert(t.clone(), page.resume);
                        let (claimed, next) = (page.claimed, page.next_due);
                        let got = claimed.len();
                        self.replace_due(t, next);
                        budget -= got.min(budget);
                        for c in claimed {
                            self.enqueue(c, d);
                        }
                        if got == quota
                            && next.is_some_and(|n| n <= now)
                            && self.tenant_has_room(d, t)
                        {
                            still.push(t.clone());
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "claiming due rows failed; retrying in 1 s");
                        self.store_backoff_until = Some(Instant::now() + Duration::from_secs(1));
                        return;
                    }
                }
            }
            if reached < active.len() {
                self.unreached.extend(active[reached..].iter().cloned());
            }
            active = still;
            if !self.global_room(d) {
                self.unreached.append(&mut active);
                break;
            }
        }
    }

    fn enqueue(&mut self, c: Claimed, d: &DispatchConfig) {
        let _ = d;
        let key = SinkKey {
            tenant: c.row.tenant.clone(),
            source: c.row.source_id.clone(),
            sink: c.sink,
            sink_type: c.row.sink_type.clone(),
        };
        let size = c.row.size;
        let claim = Arc::new(Claim {
            seq: c.seq,
            sink: c.sink,
            row: c.row,
            hook: Arc::new(c.hook),
            key: key.clone(),
            lane: c.lane,
        });
        let q = self.queues.entry(key.clone()).or_default();
        let was_empty = q.rows.is_empty();
        q.rows.push_back(claim);
        let t = self.tenants.entry(key.tenant.clone()).or_default();
        t.inflight_rows += 1;
        t.inflight_bytes += size;
        self.inflight_rows += 1;
        self.inflight_bytes += size;
        if was_empty {
            let had_keys = !t.keys.is_empty();
            t.keys.push_back(key.clone());
            if !had_keys {
                self.runnable.push_back(key.tenant);
            }
        }
    }

    /// Hands free slots round-robin across tenants, and within a tenant across its keys.
    fn start_attempts(&mut self, d: &DispatchConfig) {
        let sink_cap = d.sink_concurrency.unwrap_or(u32::MAX);
        let mut idle = 0;
        let mut parked: Vec<(Arc<Claim>, u64)> = Vec::new();
        while self.running < d.concurrency && idle < self.runnable.len() {
            let Some(tenant) = self.runnable.pop_front() else {
                break;
            };
            let w = tenant_window(d, &tenant);
            let Some(t) = self.tenants.get_mut(&tenant) else {
                continue;
            };
            if t.running >= w.concurrency {
                self.runnable.push_back(tenant);
                idle += 1;
                continue;
            }
            let mut picked = None;
            for _ in 0..t.keys.len() {
                let Some(key) = t.keys.pop_front() else { break };
                let Some(q) = self.queues.get_mut(&key) else {
                    continue;
                };
                if q.rows.is_empty() {
                    continue;
                }
                if q.running >= sink_cap {
                    t.keys.push_back(key);
                    continue;
                }
                let (gate, transition) =
                    self.breakers.entry(key.clone()).or_default().gate(now_ms());
                if let Some(tr) = transition {
                    note_transition(&self.metrics, &key, tr);
                }
                match gate {
                    Gate::Wait => {
                        t.keys.push_back(key);
                        continue;
                    }
                    Gate::Park { until } => {
                        // Open: every queued row of the key goes back to the store, due when
                        // the period ends, attempts unchanged.
                        parked.extend(q.rows.drain(..).map(|c| (c, until)));
                        continue;
                    }
                    Gate::Run | Gate::Probe => {}
                }
                let claim = q.rows.pop_front().expect("non-empty queue");
                q.running += 1;
                if gate == Gate::Probe {
                    self.probes.insert((claim.seq, claim.sink));
                }
                if !q.rows.is_empty() {
                    t.keys.push_back(key);
                }
                picked = Some(claim);
                break;
            }
            let has_more = !t.keys.is_empty();
            match picked {
                Some(claim) => {
                    t.running += 1;
                    self.running += 1;
                    idle = 0;
                    if has_more {
                        self.runnable.push_back(tenant);
                    }
                    self.spawn(claim, d);
                }
                None => {
                    if has_more {
                        self.runnable.push_back(tenant);
                    }
                    idle += 1;
                }
            }
        }
        for (claim, until) in parked {
            self.park(claim, until, d);
        }
    }

    /// Binds the row to a sink of its source as the source is now and runs one attempt.
    fn spawn(&mut self, claim: Arc<Claim>, d: &DispatchConfig) {
        let rt = self.config.live();
        let bound = match rt.sources.get(&claim.row.source_id) {
            None => Err(format!("source_gone: {}", claim.row.source_id)),
            Some(src) => {
                let idx = claim.sink as usize;
                let direct = src
                    .sinks
                    .get(idx)
                    .filter(|s| s.type_name() == claim.row.sink_type);
                let fallback = || {
                    let same: Vec<_> = src
                        .sinks
                        .iter()
                        .filter(|s| s.type_name() == claim.row.sink_type)
                        .collect();
                    (same.len() == 1).then(|| same[0].clone())
                };
                match direct.cloned().or_else(fallback) {
                    Some(sink) => Ok((sink, src.clone())),
                    None => Err(format!("sink_gone: {} {}", claim.sink, claim.row.sink_type)),
                }
            }
        };
        let (sink, src): (Arc<dyn Sink>, _) = match bound {
            Ok(b) => b,
            Err(reason) => {
                let _ = self.tx.send(Event::Done {
                    claim,
                    result: Err(SinkError::Permanent(reason)),
                    elapsed: Duration::ZERO,
                });
                return;
            }
        };
        if sink.batching() {
            // The attempt waits in the sink's batcher, whose own cap bounds requests in
            // flight; counting it here would cap every batch at the slot count.
            self.running = self.running.saturating_sub(1);
            if let Some(t) = self.tenants.get_mut(&claim.key.tenant) {
                t.running = t.running.saturating_sub(1);
            }
            if let Some(q) = self.queues.get_mut(&claim.key) {
                q.running = q.running.saturating_sub(1);
            }
            self.unslotted.insert((claim.seq, claim.sink));
        }
        // A body larger than the smallest inline limit of the source's sinks is checked in
        // once per hook (inside the attempt's deadline) and every sink gets the claim.
        let inline_limit = src.sinks.iter().filter_map(|s| s.inline_max_bytes()).min();
        let needs_claim = inline_limit.is_some_and(|l| claim.hook.body.len() as u64 > l);
        let claims = if needs_claim {
            self.claims.clone()
        } else {
            None
        };
        let mut ctx = DeliveryCtx {
            instance: rt.config.node.instance.clone(),
            region: rt.config.node.region.clone(),
            attempt: claim.row.attempts + 1,
            replay_id: claim.row.replay_id.clone(),
            forward_headers: forward::forwarded(&claim.hook.headers, &src.cfg, Some(&self.metrics)),
            tenant_for_pools: claim.row.tenant.clone(),
            claim_check: None,
            ordering_key: claim.row.lane.clone(),
        };
        let timeout = Duration::from_millis(d.attempt_timeout_ms);
        let tx = self.tx.clone();
        self.rt.spawn(async move {
            let started = Instant::now();
            let attempt = async {
                if let Some(store) = claims {
                    ctx.claim_check = Some(
                        store
                            .check_in(&claim.hook)
                            .await
                            .map_err(SinkError::Transient)?,
                    );
                }
                sink.deliver(&claim.hook, &ctx).await
            };
            let fut = AssertUnwindSafe(attempt).catch_unwind();
            let result = match tokio::time::timeout(timeout, fut).await {
                Err(_) => Err(SinkError::Transient(format!(
                    "attempt_timeout: {} ms",
                    timeout.as_millis()
                ))),
                Ok(Err(panic)) => {
                    let msg = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown".into());
                    Err(SinkError::Transient(format!("sink panicked: {msg}")))
                }
                Ok(Ok(r)) => r,
            };
            let _ = tx.send(Event::Done {
                claim,
                result,
                elapsed: started.elapsed(),
            });
        });
    }

    /// Turns an attempt's result into an outcome and frees its slot and window.
    fn settle(
        &mut self,
        claim: Arc<Claim>,
        result: Result<(), SinkError>,
        elapsed: Duration,
        d: &DispatchConfig,
    ) {
        let held_slot = !self.unslotted.remove(&(claim.seq, claim.sink));
        self.release(&claim, held_slot);
        let now = now_ms();
        let was_probe = self.probes.remove(&(claim.seq, claim.sink));
        let settings = breaker::Settings {
            failures: d.breaker_failures,
            open_ms: d.breaker_open_ms,
            max_open_ms: d.breaker_max_open_ms,
        };
        let transition = self.breakers.entry(claim.key.clone()).or_default().record(
            settings,
            result.is_ok(),
            result.as_ref().err().is_some_and(SinkError::is_permanent),
            was_probe,
            now,
        );
        if let Some(tr) = transition {
            note_transition(&self.metrics, &claim.key, tr);
        }
        let mut row = claim.row.clone();
        row.attempts += 1;
        let sink_type = claim.key.sink_type.as_str();
        let label = match &result {
            Ok(()) => "ok",
            Err(SinkError::Permanent(_)) | Err(SinkError::PermanentConfig(_)) => "permanent",
            Err(SinkError::RetryAfter { .. }) => "retry_after",
            Err(SinkError::Transient(_)) => "transient",
        };
        self.metrics
            .dispatch_attempt_duration_seconds
            .with_label_values(&[sink_type, label])
            .observe(elapsed.as_secs_f64());
        let outcome = match result {
            Ok(()) => {
                self.job_feedback(&row, true);
                Outcome::Delivered {
                    seq: claim.seq,
                    sink: claim.sink,
                    row,
                }
            }
            Err(e) => {
                if let SinkError::Transient(m) = &e
                    && m.starts_with("attempt_timeout")
                {
                    self.metrics
                        .dispatch_attempt_timeouts
                        .with_label_values(&[sink_type])
                        .inc();
                }
                if matches!(e, SinkError::PermanentConfig(_)) {
                    self.metrics
                        .dispatch_config_errors
                        .with_label_values(&[sink_type])
                        .inc();
                }
                row.last_error = Some(format!("{sink_type}: {e}"));
                let policy = self.retry_policy(&row.source_id, d);
                let retry_after = match &e {
                    SinkError::RetryAfter { ms, .. } => Some((*ms).min(d.max_retry_after_ms)),
                    _ => None,
                };
                let first = row.first_attempt_at.unwrap_or(now);
                let decision = if e.is_permanent() {
                    retry::Decision::GiveUp
                } else {
                    retry::decide(
                        &policy,
                        row.attempts,
                        first,
                        now,
                        retry_after,
                        fastrand::f64(),
                    )
                };
                match decision {
                    retry::Decision::RetryAt(at) => {
                        if let Some(lane) = &claim.lane {
                            self.lanes_blocked.insert(lane.clone());
                        }
                        row.due_at = at;
                        self.set_due(&row.tenant.clone(), at);
                        Outcome::Retry {
                            seq: claim.seq,
                            sink: claim.sink,
                            row,
                        }
                    }
                    retry::Decision::GiveUp => {
                        row.dead_at = Some(now);
                        row.error_class = Some(match e {
                            SinkError::Permanent(_) | SinkError::PermanentConfig(_) => {
                                ErrorClass::Permanent
                            }
                            SinkError::RetryAfter { .. } => ErrorClass::Throttled,
                            SinkError::Transient(_) => ErrorClass::Transient,
                        });
                        self.metrics
                            .dispatch_dead_lettered
                            .with_label_values(&[sink_type])
                            .inc();
                        tracing::warn!(
                            id = %row.hook_id, sink = claim.sink, sink_type, attempts = row.attempts,
                            reason = row.last_error.as_deref().unwrap_or(""), "delivery dead-lettered"
                        );
                        self.job_feedback(&row, false);
                        Outcome::Dead {
                            seq: claim.seq,
                            sink: claim.sink,
                            row,
                        }
                    }
                }
            }
        };
        self.pending.push(outcome);
    }

    /// Frees a claimed row's place in its windows (and its slot, if it ran).
    fn release(&mut self, claim: &Claim, ran: bool) {
        if ran && let Some(q) = self.queues.get_mut(&claim.key) {
            q.running = q.running.saturating_sub(1);
        }
        if let Some(t) = self.tenants.get_mut(&claim.key.tenant) {
            if ran {
                t.running = t.running.saturating_sub(1);
            }
            t.inflight_rows = t.inflight_rows.saturating_sub(1);
            t.inflight_bytes = t.inflight_bytes.saturating_sub(claim.row.size);
        }
        if ran {
            self.running = self.running.saturating_sub(1);
        }
        self.inflight_rows = self.inflight_rows.saturating_sub(1);
        self.inflight_bytes = self.inflight_bytes.saturating_sub(claim.row.size);
    }

    /// Parks a row behind an open breaker: due again at `until` with its attempts unchanged,
    /// but never past its retry horizon, where it is dead-lettered without another attempt.
    fn park(&mut self, claim: Arc<Claim>, until: u64, d: &DispatchConfig) {
        self.release(&claim, false);
        let now = now_ms();
        let mut row = claim.row.clone();
        let policy = self.retry_policy(&row.source_id, d);
        let horizon = row
            .first_attempt_at
            .unwrap_or(now)
            .saturating_add(policy.max_elapsed_ms);
        self.job_feedback(&row, false);
        let outcome = if now >= horizon {
            row.dead_at = Some(now);
            row.error_class = Some(ErrorClass::Transient);
            row.last_error = Some(format!(
                "retry_horizon: {} (parked behind an open circuit breaker; last error: {})",
                claim.key.sink_type,
                row.last_error.as_deref().unwrap_or("none")
            ));
            self.metrics
                .dispatch_dead_lettered
                .with_label_values(&[claim.key.sink_type.as_str()])
                .inc();
            Outcome::Dead {
                seq: claim.seq,
                sink: claim.sink,
                row,
            }
        } else {
            if let Some(lane) = &claim.lane {
                self.lanes_blocked.insert(lane.clone());
            }
            row.due_at = until.min(horizon);
            self.set_due(&row.tenant.clone(), row.due_at);
            Outcome::Retry {
                seq: claim.seq,
                sink: claim.sink,
                row,
            }
        };
        self.pending.push(outcome);
    }

    fn retry_policy(&self, source_id: &str, d: &DispatchConfig) -> RetryConfig {
        let rt = self.config.live();
        d.retry
            .with_override(rt.sources.get(source_id).and_then(|s| s.cfg.retry.as_ref()))
    }

    fn job_feedback(&self, row: &DeliveryRow, delivered: bool) {
        let Some(job) = &row.replay_id else { return };
        let mut fb = self.feedback.lock().unwrap_or_else(|p| p.into_inner());
        let e = fb.entry(job.clone()).or_default();
        if delivered {
            e.delivered += 1;
            e.consecutive_dead = 0;
        } else {
            e.dead += 1;
            e.consecutive_dead += 1;
        }
    }

    fn flush_outcomes(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        match self.store.apply_outcomes(&self.pending, &self.lane_floor) {
            Ok(advances) => {
                self.pending.clear();
                for a in advances {
                    self.lanes_blocked.remove(&a.lane);
                    match a.promoted {
                        Some((at, seq)) => {
                            self.lane_floor.insert(a.lane.clone(), seq + 1);
                            self.set_due(&a.tenant, at);
                        }
                        None => {
                            self.lanes_active.remove(&a.lane);
                        }
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, outcomes = self.pending.len(), "recording outcomes failed; will retry");
                let store = self.store.clone();
                store.maybe_reopen();
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    /// Until the earliest due row of a tenant with room (or `MAX_SLEEP`).
    fn sleep_for(&self, d: &DispatchConfig) -> Duration {
        if !self.pending.is_empty()
            || (self.running < d.concurrency && !self.runnable.is_empty() && self.has_startable(d))
        {
            return Duration::from_millis(if self.pending.is_empty() { 0 } else { 50 });
        }
        if !self.global_room(d) {
            return MAX_SLEEP;
        }
        let now = now_ms();
        for (at, t) in &self.schedule {
            if self.tenant_has_room(d, t) {
                return Duration::from_millis(at.saturating_sub(now)).min(MAX_SLEEP);
            }
        }
        MAX_SLEEP
    }

    fn has_startable(&self, d: &DispatchConfig) -> bool {
        let sink_cap = d.sink_concurrency.unwrap_or(u32::MAX);
        self.runnable.iter().any(|t| {
            let w = tenant_window(d, t);
            self.tenants.get(t).is_some_and(|s| {
                s.running < w.concurrency
                    && s.keys.iter().any(|k| {
                        self.queues
                            .get(k)
                            .is_some_and(|q| q.running < sink_cap && !q.rows.is_empty())
                    })
            })
        })
    }

    fn publish(&mut self, d: &DispatchConfig) {
        let now = now_ms();
        let oldest = self.schedule.iter().next().map(|(at, _)| *at);
        let lag = oldest.map_or(0, |at| now.saturating_sub(at));
        self.stats.oldest_due_lag_ms.store(lag, Ordering::Relaxed);
        self.stats
            .window_full
            .store(!self.global_room(d), Ordering::Relaxed);
        self.stats
            .claimed
            .store(self.inflight_rows as u64, Ordering::Relaxed);
        self.stats
            .running
            .store(self.running as u64, Ordering::Relaxed);
        if self.last_gauges.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last_gauges = Instant::now();
        let m = &self.metrics;
        m.dispatch_running.set(self.running as i64);
        m.dispatch_claimed.set(self.inflight_rows as i64);
        m.dispatch_claimed_bytes.set(self.inflight_bytes as i64);
        m.queue_oldest_due_age_seconds.set(lag as f64 / 1000.0);
        let mut top: Vec<(&String, u32)> = self
            .tenants
            .iter()
            .filter(|(_, t)| t.inflight_rows > 0)
            .map(|(k, t)| (k, t.inflight_rows))
            .collect();
        top.sort_by_key(|t| std::cmp::Reverse(t.1));
        m.dispatch_tenant_inflight.reset();
        for (t, n) in top.into_iter().take(100) {
            m.dispatch_tenant_inflight
                .with_label_values(&[t.as_str()])
                .set(n as i64);
        }
        self.tenants
            .retain(|_, t| t.inflight_rows > 0 || !t.keys.is_empty());
        self.queues
            .retain(|_, q| q.running > 0 || !q.rows.is_empty());
        self.breakers.retain(|_, b| b.is_open() || b.failing());
        m.dispatch_breakers_open
            .set(self.breakers.values().filter(|b| b.is_open()).count() as i64);
        m.dispatch_lanes.set(self.lanes_active.len() as i64);
        m.dispatch_lanes_blocked
            .set(self.lanes_blocked.len() as i64);
    }
}

/// One claim scan, as measured by `measure_scans`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ScanStat {
    /// Tenants whose due rows the scan read.
    pub visited: u64,
    pub claimed: usize,
    pub micros: u64,
}

/// Runs `scans` claim scans of the real scheduler over `store` (for the scan-cost test and the
/// `dispatch_tick` benchmark): loads the schedule, then scans; rows each scan claimed are
/// recorded as delivered before the next one, outside the timing.
pub fn measure_scans(
    store: Arc<Store>,
    d: &DispatchConfig,
    scans: usize,
) -> Result<Vec<ScanStat>, crate::store::StoreError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| crate::store::StoreError::Unavailable {
            class: "other",
            message: e.to_string(),
        })?;
    let metrics = Arc::new(Metrics::new());
    let config = ankusa_config::Config {
        dispatch: d.clone(),
        ..Default::default()
    };
    let factory = Arc::new(ankusa_sinks::SinkBuilder::new());
    let runtime = crate::live::Live::build(config, String::new(), 1, &factory).map_err(|e| {
        crate::store::StoreError::Unavailable {
            class: "other",
            message: e.to_string(),
        }
    })?;
    let handle = ConfigHandle::new(runtime, None, factory);
    let (mut sched, _tx) =
        Scheduler::new(store.clone(), handle, metrics, rt.handle().clone(), None)?;
    let mut out = Vec::with_capacity(scans);
    for _ in 0..scans {
        let before = sched.scan_visits;
        let started = Instant::now();
        sched.claim(d);
        let micros = started.elapsed().as_micros() as u64;
        let claimed: Vec<Arc<Claim>> = sched
            .queues
            .values_mut()
            .flat_map(|q| q.rows.drain(..))
            .collect();
        let outcomes: Vec<Outcome> = claimed
            .iter()
            .map(|c| Outcome::Delivered {
                seq: c.seq,
                sink: c.sink,
                row: c.row.clone(),
            })
            .collect();
        for c in &claimed {
            sched.release(c, false);
        }
        for t in sched.tenants.values_mut() {
            t.keys.clear();
        }
        sched.runnable.clear();
        store.apply_outcomes(&outcomes, &sched.lane_floor)?;
        out.push(ScanStat {
            visited: sched.scan_visits - before,
            claimed: claimed.len(),
            micros,
        });
    }
    Ok(out)
}

fn note_transition(m: &Metrics, key: &SinkKey, tr: Transition) {
    let to = match tr {
        Transition::Opened { period_ms } => {
            tracing::warn!(
                tenant = %key.tenant, source = %key.source, sink = key.sink, sink_type = %key.sink_type,
                period_ms, "circuit breaker opened: parking this sink's deliveries"
            );
            "open"
        }
        Transition::HalfOpened => {
            tracing::info!(tenant = %key.tenant, source = %key.source, sink = key.sink, "circuit breaker half-open: probing");
            "half_open"
        }
        Transition::Closed => {
            tracing::info!(tenant = %key.tenant, source = %key.source, sink = key.sink, "circuit breaker closed");
            "closed"
        }
    };
    m.dispatch_breaker_transitions
        .with_label_values(&[to])
        .inc();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::{Live, LiveSource};
    use crate::store::{IngestRecord, IngestResult};
    use ankusa_config::{Config, LogSinkConfig, SinkConfig, SourceConfig};
    use futures::future::BoxFuture;
    use std::sync::atomic::AtomicUsize;

    struct PanicSink;
    impl Sink for PanicSink {
        fn deliver<'a>(
            &'a self,
            _: &'a Envelope,
            _: &'a DeliveryCtx,
        ) -> BoxFuture<'a, Result<(), SinkError>> {
            Box::pin(async { panic!("boom in a sink") })
        }
        fn type_name(&self) -> &'static str {
            "log"
        }
    }

    struct CountSink(Arc<AtomicUsize>);
    impl Sink for CountSink {
        fn deliver<'a>(
            &'a self,
            _: &'a Envelope,
            _: &'a DeliveryCtx,
        ) -> BoxFuture<'a, Result<(), SinkError>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        }
        fn type_name(&self) -> &'static str {
            "log"
        }
    }

    fn source(id: &str, sink: Arc<dyn Sink>) -> (String, Arc<LiveSource>) {
        let cfg = SourceConfig::with_sinks(vec![SinkConfig::Log(LogSinkConfig::default())]);
        (
            id.into(),
            Arc::new(LiveSource {
                id: id.into(),
                cfg,
                verifier: None,
                sinks: vec![sink],
                sink_types: vec!["log"],
            }),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_sink_is_a_failed_attempt_and_dispatch_keeps_running() {
        let (_d, store) = crate::store::test_util::temp_store();
        let store = Arc::new(store);
        let delivered = Arc::new(AtomicUsize::new(0));
        let mut config = Config::default();
        config.dispatch.retry.base_ms = 10;
        config.dispatch.retry.max_ms = 20;
        config.dispatch.breaker_failures = 0;
        let sources = [
            source("bad", Arc::new(PanicSink)),
            source("good", Arc::new(CountSink(delivered.clone()))),
        ]
        .into_iter()
        .collect();
        let rt = Live {
            config,
            file_hash: "h".into(),
            generation: 1,
            loaded_at: 0,
            sources,
        };
        let metrics = Arc::new(Metrics::new());
        let factory = Arc::new(ankusa_sinks::SinkBuilder::new());
        let handle = ConfigHandle::new(rt, None, factory);
        let d = Dispatcher::start(
            store.clone(),
            handle,
            metrics,
            tokio::runtime::Handle::current(),
            None,
        )
        .unwrap();
        let recs: Vec<IngestRecord> = (0..20)
            .map(|i| IngestRecord {
                envelope: crate::store::ingest_test_envelope(
                    "t",
                    if i % 2 == 0 { "bad" } else { "good" },
                ),
                sinks: vec!["log"],
                lanes: vec![],
                dedupe: None,
            })
            .collect();
        let results = store.commit_ingest(&recs, now_ms(), false).unwrap();
        d.wake(vec!["t".into()], now_ms());
        let deadline = Instant::now() + Duration::from_secs(10);
        while delivered.load(Ordering::SeqCst) < 10 {
            assert!(
                Instant::now() < deadline,
                "good deliveries stalled behind a panicking sink"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The panicking source's rows are retried, with the panic recorded as the failure.
        let IngestResult::Accepted { seq, .. } = results[0] else {
            panic!()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let rows = store.rows_of(seq).unwrap();
            if rows[0].1.attempts >= 2 {
                assert!(
                    rows[0]
                        .1
                        .last_error
                        .as_deref()
                        .unwrap()
                        .contains("sink panicked: boom in a sink")
                );
                break;
            }
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let d2 = d.clone();
        tokio::task::spawn_blocking(move || d2.shutdown(Duration::from_secs(2)))
            .await
            .unwrap();
    }

    /// A scan costs the tenants with work due, not the tenants there are: one tenant with
    /// many due rows beside a thousand tenants due next week visits one tenant per scan.
    #[test]
    fn a_scan_visits_only_tenants_with_due_work() {
        let (_d, store) = crate::store::test_util::temp_store();
        let store = Arc::new(store);
        let now = now_ms();
        let week = 7 * 24 * 3_600_000;
        let idle: Vec<IngestRecord> = (0..1000)
            .map(|i| IngestRecord {
                envelope: crate::store::ingest_test_envelope(&format!("idle-{i}"), "s"),
                sinks: vec!["log"],
                lanes: vec![],
                dedupe: None,
            })
            .collect();
        store.commit_ingest(&idle, now + week, false).unwrap();
        for _ in 0..4 {
            let hot: Vec<IngestRecord> = (0..2500)
                .map(|_| IngestRecord {
                    envelope: crate::store::ingest_test_envelope("hot", "s"),
                    sinks: vec!["log"],
                    lanes: vec![],
                    dedupe: None,
                })
                .collect();
            store.commit_ingest(&hot, now, false).unwrap();
        }
        let d = DispatchConfig::default();
        let scans = measure_scans(store, &d, 5).unwrap();
        for s in &scans {
            assert_eq!(
                s.visited, 1,
                "only the tenant with due work is read: {scans:?}"
            );
            assert_eq!(s.claimed, d.batch as usize);
        }
    }

    #[test]
    fn tenant_window_defaults_to_a_quarter_and_half() {
        let d = DispatchConfig::default();
        let w = tenant_window(&d, "any");
        assert_eq!((w.rows, w.bytes, w.concurrency), (1024, 33_554_432, 16));
        let mut d = DispatchConfig::default();
        d.tenants.overrides.insert(
            "big".into(),
            ankusa_config::TenantWindow {
                max_inflight: Some(4096),
                max_inflight_bytes: None,
                concurrency: Some(32),
            },
        );
        let w = tenant_window(&d, "big");
        assert_eq!((w.rows, w.concurrency), (4096, 32));
    }
}
