//! The scheduler thread's state and loop: one turn writes outcomes, claims, starts attempts
//! and publishes stats, then sleeps until an event or the earliest due row of a tenant with
//! room. Each stage's decisions live in its own module; this one keeps the state they share.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use ankusa_config::{DispatchConfig, RetryConfig};
use ankusa_core::{SinkError, now_ms};
use ankusa_store::{DeliveryRow, LaneId, Outcome, StoreError};

use super::breaker::{Breakers, Gate};
use super::fairness::{self, Round, Slots};
use super::health::{SinkHealth, Target};
use super::lanes::Lanes;
use super::schedule::Schedule;
use super::{Claim, Context, DispatchStats, Event, attempt, settle};
use crate::live::LIFECYCLE_SOURCE;

/// Longest sleep, so gauges and reloaded limits are picked up.
const MAX_SLEEP: Duration = Duration::from_millis(500);
/// How often every tenant waiting for a shared destination is scanned again, whatever woke it
/// or did not (a tenant waits on one of its destinations while another may empty; a woken
/// tenant may have had its rows deleted meanwhile). Rare: with 10 000 tenants waiting it is a
/// scan of all of them, tens of ms of the scheduler thread (every 2 s it showed in the light
/// tenant's p99 in `tenant_fairness 20 20 10000`).
const WAKE_ALL_EVERY: Duration = Duration::from_secs(30);

pub(super) struct Scheduler {
    ctx: Context,
    tx: mpsc::Sender<Event>,
    rx: mpsc::Receiver<Event>,
    pub(super) stats: Arc<DispatchStats>,
    /// Each sink's latest failure, for the admin API.
    pub(super) health: Arc<SinkHealth>,
    pub(super) schedule: Schedule,
    pub(super) slots: Slots,
    breakers: Breakers,
    pub(super) lanes: Lanes,
    /// Outcomes not yet written (kept across a failed write).
    pending: Vec<Outcome>,
    /// `hook.dead_lettered` events of `pending`'s dead rows, emitted once they are written.
    pending_events: Vec<crate::lifecycle::Event>,
    /// Rows running as a half-open breaker's probe.
    probes: HashSet<(u64, u16)>,
    /// Attempts waiting in a batching sink's batcher: they hold no slot.
    unslotted: HashSet<(u64, u16)>,
    last_gauges: Instant,
    last_wake_all: Instant,
    store_backoff_until: Option<Instant>,
}

impl Scheduler {
    /// A scheduler whose schedule is loaded from the store: each tenant with due rows and its
    /// earliest due time (one seek per tenant), the lanes with a head, and heads for lanes an
    /// interrupted hand-over left without one.
    pub(super) fn new(ctx: Context) -> Result<(Scheduler, mpsc::Sender<Event>), StoreError> {
        let (tx, rx) = mpsc::channel();
        let (lanes, orphans) = Lanes::load(ctx.store.lane_state()?);
        let breakers = Breakers::with_events(ctx.lifecycle.clone());
        let mut sched = Scheduler {
            ctx,
            tx: tx.clone(),
            rx,
            stats: Arc::new(DispatchStats::default()),
            health: Arc::new(SinkHealth::default()),
            schedule: Schedule::default(),
            slots: Slots::default(),
            breakers,
            lanes,
            pending: Vec::new(),
            pending_events: Vec::new(),
            probes: Default::default(),
            unslotted: Default::default(),
            last_gauges: Instant::now() - Duration::from_secs(10),
            last_wake_all: Instant::now(),
            store_backoff_until: None,
        };
        for (tenant, at) in sched.ctx.store.due_tenants()? {
            sched.schedule.set_due(&tenant, at);
        }
        for lane in orphans {
            sched.promote(lane, now_ms());
        }
        Ok((sched, tx))
    }

    pub(super) fn run(mut self) {
        let mut shutdown: Option<(mpsc::Sender<()>, Instant)> = None;
        loop {
            let live = self.ctx.config.live();
            let d = live.config.dispatch.clone();
            if self.slots.dests.refresh(&live) || self.last_wake_all.elapsed() >= WAKE_ALL_EVERY {
                self.schedule.wake_all();
                self.last_wake_all = Instant::now();
            }
            drop(live);
            self.flush_outcomes();
            if shutdown.is_none() {
                self.claim(&d);
            }
            self.start_attempts(&d);
            self.publish(&d);
            if let Some((_, deadline)) = &shutdown
                && (self.slots.running == 0 || Instant::now() >= *deadline)
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
        if let Some(f) = &mut self.ctx.feedback {
            f.flush();
        }
        tracing::info!(still_running = self.slots.running, "dispatch stopped");
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
                    self.schedule.set_due(&t, at);
                }
                for lane in self.lanes.need_head(lanes, replayed) {
                    self.promote(lane, at);
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
        if let Some((tenant, at)) = self.lanes.promote(&self.ctx.store, lane, now) {
            self.schedule.set_due(&tenant, at);
        }
    }

    /// Stage 2: one claim scan, unless the store failed within the last second.
    fn claim(&mut self, d: &DispatchConfig) {
        if let Some(until) = self.store_backoff_until {
            if Instant::now() < until {
                return;
            }
            self.store_backoff_until = None;
        }
        let scanned = fairness::scan(
            &self.ctx.store,
            &mut self.schedule,
            &mut self.slots,
            d,
            now_ms(),
        );
        if let Err(e) = scanned {
            tracing::error!(error = %e, "claiming due rows failed; retrying in 1 s");
            self.store_backoff_until = Some(Instant::now() + Duration::from_secs(1));
        }
    }

    /// Stage 3: starts attempts while slots are free; parks the rows of open breakers.
    fn start_attempts(&mut self, d: &DispatchConfig) {
        let mut round = Round::default();
        let mut parked = Vec::new();
        while let Some((claim, gate)) = self.slots.next(
            &mut round,
            d,
            &mut self.breakers,
            &self.ctx.metrics,
            &mut parked,
        ) {
            if gate == Gate::Probe {
                self.probes.insert((claim.seq, claim.sink));
            }
            self.spawn(claim, d);
        }
        for (claim, until) in parked {
            self.park(claim, until, d);
        }
    }

    /// Binds the row to a sink of its source as the source is now and runs one attempt.
    fn spawn(&mut self, claim: Arc<Claim>, d: &DispatchConfig) {
        let live = self.ctx.config.live();
        let timeout = Duration::from_millis(d.attempt_timeout_ms);
        let bound = attempt::bind(
            &claim,
            &live,
            self.ctx.claim_check.as_ref(),
            &self.ctx.metrics,
            timeout,
        );
        let prepared = match bound {
            Ok(a) => a,
            Err(reason) => {
                let _ = self.tx.send(Event::Done {
                    claim,
                    result: Err(SinkError::Permanent(reason)),
                    elapsed: Duration::ZERO,
                });
                return;
            }
        };
        if prepared.sink.batching() {
            self.slots.unslot(&claim);
            self.unslotted.insert((claim.seq, claim.sink));
        }
        let tx = self.tx.clone();
        self.ctx.tokio.spawn(async move {
            let started = Instant::now();
            let result = attempt::run(prepared).await;
            let _ = tx.send(Event::Done {
                claim,
                result,
                elapsed: started.elapsed(),
            });
        });
    }

    /// Stage 4: turns an attempt's result into an outcome and frees its slot and window.
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
        self.breakers
            .record(&claim.key, d, &result, was_probe, now, &self.ctx.metrics);
        self.note_health(&claim, &result, now);
        let policy = self.retry_policy(&claim.row.source_id, d);
        let outcome =
            settle::attempt_outcome(&claim, result, elapsed, &policy, d, now, &self.ctx.metrics);
        match &outcome {
            Outcome::Delivered { row, .. } => {
                if row.source_id == LIFECYCLE_SOURCE {
                    self.ctx
                        .metrics
                        .lifecycle
                        .delivered
                        .with_label_values(&[row.sink_type.as_str()])
                        .inc();
                }
                self.job_feedback(row, true)
            }
            Outcome::Dead { row, .. } => self.job_feedback(row, false),
            Outcome::Retry { .. } => {}
        }
        self.record(&claim, outcome);
    }

    /// Records the attempt against its sink's health: a success ends the sink's failure, a
    /// failure becomes its latest (with the breaker's state after it).
    fn note_health(&self, claim: &Claim, result: &Result<(), SinkError>, now: u64) {
        let live = self.ctx.config.live();
        let target = Target {
            source: &claim.key.source,
            sink: claim.sink,
            sink_type: &claim.key.sink_type,
        };
        match result {
            Ok(()) => self.health.delivered(&live, target),
            Err(e) => self.health.failed(
                &live,
                target,
                &settle::error_text(target.sink_type, e),
                self.breakers.is_open(&claim.key),
                now,
            ),
        }
    }

    /// Frees the row's windows; tenants waiting for the rows its destination frees are woken.
    fn release(&mut self, claim: &Claim, ran: bool) {
        if let Some((dest, n)) = self.slots.release(claim, ran) {
            self.schedule.wake(&dest, n);
        }
    }

    /// Parks a row behind an open breaker (see `settle::parked_outcome`).
    fn park(&mut self, claim: Arc<Claim>, until: u64, d: &DispatchConfig) {
        self.release(&claim, false);
        let policy = self.retry_policy(&claim.row.source_id, d);
        self.job_feedback(&claim.row, false);
        let outcome = settle::parked_outcome(&claim, until, &policy, now_ms(), &self.ctx.metrics);
        self.record(&claim, outcome);
    }

    /// Queues an outcome for the next write; a retried row blocks its lane and is due again.
    fn record(&mut self, claim: &Claim, outcome: Outcome) {
        if let Outcome::Retry { row, .. } = &outcome {
            if let Some(lane) = &claim.lane {
                self.lanes.block(lane);
            }
            self.schedule.set_due(&row.tenant, row.due_at);
        }
        if let Outcome::Dead { row, .. } = &outcome
            && self.ctx.lifecycle.is_some()
            && row.source_id != LIFECYCLE_SOURCE
        {
            self.pending_events.push(self.dead_lettered(claim, row));
        }
        self.pending.push(outcome);
    }

    /// The `hook.dead_lettered` event of a row: what a consumer needs to find and replay it
    /// (hook id, source, tenant, sink, error class, attempts), carrying the hook's trace.
    fn dead_lettered(&self, claim: &Claim, row: &DeliveryRow) -> crate::lifecycle::Event {
        let live = self.ctx.config.live();
        let sink_name = live
            .source(&row.source_id)
            .and_then(|s| s.cfg.sink_names.get(claim.sink as usize).cloned())
            .unwrap_or_else(|| format!("sinks[{}]", claim.sink));
        let mut e = crate::lifecycle::Event::new(
            crate::lifecycle::EventType::HookDeadLettered,
            row.hook_id.to_string(),
            Some(row.tenant.clone()),
            serde_json::json!({
                "hook_id": row.hook_id.to_string(),
                "source": row.source_id,
                "tenant": row.tenant,
                "sink": claim.sink,
                "sink_name": sink_name,
                "sink_type": row.sink_type,
                "error_class": row.error_class.map(|c| c.as_str()),
                "attempts": row.attempts,
                "replay_id": row.replay_id,
            }),
        );
        e.traceparent = claim.hook.traceparent.clone();
        e
    }

    fn retry_policy(&self, source_id: &str, d: &DispatchConfig) -> RetryConfig {
        let live = self.ctx.config.live();
        d.retry
            .with_override(live.source(source_id).and_then(|s| s.cfg.retry.as_ref()))
    }

    fn job_feedback(&mut self, row: &DeliveryRow, delivered: bool) {
        if let (Some(job), Some(f)) = (&row.replay_id, &mut self.ctx.feedback) {
            f.record(job, delivered);
        }
    }

    /// Stage 1: writes the outcomes waiting; lanes whose head cleared hand over.
    fn flush_outcomes(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        match self
            .ctx
            .store
            .apply_outcomes(&self.pending, self.lanes.floors())
        {
            Ok(advances) => {
                self.pending.clear();
                if let Some(l) = &self.ctx.lifecycle {
                    for e in self.pending_events.drain(..) {
                        l.emit(e);
                    }
                }
                for (tenant, at) in self.lanes.advanced(advances) {
                    self.schedule.set_due(&tenant, at);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, outcomes = self.pending.len(), "recording outcomes failed; will retry");
                if e.is_io() {
                    self.ctx.store.maybe_reopen();
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    /// Until the earliest due row of a tenant with room (or `MAX_SLEEP`).
    fn sleep_for(&self, d: &DispatchConfig) -> Duration {
        if !self.pending.is_empty() || self.slots.has_startable(d) {
            return Duration::from_millis(if self.pending.is_empty() { 0 } else { 50 });
        }
        if !self.slots.global_room(d) {
            return MAX_SLEEP;
        }
        let now = now_ms();
        for (at, t) in self.schedule.iter() {
            if self.slots.tenant_has_room(d, t) {
                return Duration::from_millis(at.saturating_sub(now)).min(MAX_SLEEP);
            }
        }
        MAX_SLEEP
    }

    /// Stats for the replayer every turn; gauges at most once a second.
    fn publish(&mut self, d: &DispatchConfig) {
        if let Some(f) = &mut self.ctx.feedback {
            f.flush();
        }
        let now = now_ms();
        let lag = self
            .schedule
            .oldest()
            .map_or(0, |at| now.saturating_sub(at));
        let s = &self.stats;
        s.oldest_due_lag_ms.store(lag, Ordering::Relaxed);
        s.window_full
            .store(!self.slots.global_room(d), Ordering::Relaxed);
        s.claimed
            .store(self.slots.inflight_rows as u64, Ordering::Relaxed);
        s.running
            .store(self.slots.running as u64, Ordering::Relaxed);
        if self.last_gauges.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last_gauges = Instant::now();
        let m = &self.ctx.metrics;
        m.dispatch.running.set(self.slots.running as i64);
        m.dispatch.claimed.set(self.slots.inflight_rows as i64);
        m.dispatch
            .claimed_bytes
            .set(self.slots.inflight_bytes as i64);
        m.store
            .queue_oldest_due_age_seconds
            .set(lag as f64 / 1000.0);
        m.dispatch.tenant_inflight.reset();
        for (t, n) in self.slots.top_tenants(100) {
            m.dispatch
                .tenant_inflight
                .with_label_values(&[t])
                .set(n as i64);
        }
        self.slots.sweep();
        m.dispatch.breakers_open.set(self.breakers.sweep() as i64);
        // After a reload, the failures of sinks it removed or changed go.
        self.health.retain_configured(&self.ctx.config.live());
        let (active, blocked) = self.lanes.counts();
        m.dispatch.lanes.set(active as i64);
        m.dispatch.lanes_blocked.set(blocked as i64);
        m.dispatch
            .tenants_waiting
            .set(self.schedule.blocked_count() as i64);
    }
}
