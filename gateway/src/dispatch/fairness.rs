//! Who goes next: which tenants a claim scan reads (deficit round-robin over the tenants with
//! work due, within the global and per-tenant windows), and which claimed row takes a free
//! attempt slot (round-robin across tenants, and within a tenant across its sink keys, capped
//! per key by `dispatch.sink_concurrency` and by its shared destination's concurrency, and
//! gated by the key's circuit breaker).
//!
//! `Schedule` (`schedule.rs`) is what is due; `Slots` is what is claimed: per-key queues of
//! claimed rows and the rows, bytes and attempts each tenant, each shared destination
//! (`destinations.rs`) and the node hold.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use ankusa_config::{DispatchConfig, TenantWindow};
use ankusa_core::now_ms;
use ankusa_store::{Store, StoreError};

use super::breaker::{Breakers, Gate};
use super::destinations::{DestTable, Loads};
use super::schedule::Schedule;
use super::{Claim, SinkKey};
use crate::metrics::Metrics;

/// The effective per-tenant window.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub rows: u32,
    pub bytes: u64,
    pub concurrency: u32,
}

/// A tenant's window: its override, else the default entry, else a quarter of the global
/// rows and bytes and half of the global concurrency.
pub fn tenant_window(d: &DispatchConfig, tenant: &str) -> Window {
    let def = &d.tenants.default;
    let o = d.tenants.overrides.get(tenant);
    let pick_u32 = |f: fn(&TenantWindow) -> Option<u32>, fallback: u32| {
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

/// Claimed rows and what they hold: per sink key a queue of rows waiting for a slot, per
/// tenant and for the node the rows, bytes and attempts in flight.
#[derive(Default)]
pub struct Slots {
    tenants: HashMap<String, TenantState>,
    queues: HashMap<SinkKey, KeyQueue>,
    /// Tenants with queued rows, served round-robin.
    runnable: VecDeque<String>,
    pub running: u32,
    pub inflight_rows: u32,
    pub inflight_bytes: u64,
    /// Which destination each sink and tenant reaches (refreshed per config generation).
    pub dests: DestTable,
    /// What each shared destination holds and runs.
    pub loads: Loads,
}

/// One pass of handing out slots (`Slots::next`): tenants passed over in a row.
#[derive(Default)]
pub struct Round {
    idle: usize,
}

impl Slots {
    pub fn tenant_has_room(&self, d: &DispatchConfig, tenant: &str) -> bool {
        let w = tenant_window(d, tenant);
        self.tenants
            .get(tenant)
            .is_none_or(|t| t.inflight_rows < w.rows && t.inflight_bytes < w.bytes)
    }

    pub fn global_room(&self, d: &DispatchConfig) -> bool {
        self.inflight_rows < d.max_inflight && self.inflight_bytes < d.max_inflight_bytes
    }

    /// Rows `tenant` may claim for its shared destinations (`None`: not held back).
    fn dest_room(&self, tenant: &str) -> Option<u32> {
        self.loads.tenant_room(&self.dests, tenant)
    }

    /// The destination a tenant with no room waits for (every one of its destinations is full;
    /// it waits on its first).
    fn waits_for(&self, tenant: &str) -> Option<Arc<str>> {
        match self.dest_room(tenant) {
            Some(0) => self.dests.of_tenant(tenant)?.first().map(|d| d.id.clone()),
            _ => None,
        }
    }

    /// Queues a claimed row behind its sink key; it holds its place in the windows (and its
    /// destination's) from now.
    pub fn enqueue(&mut self, mut claim: Claim) {
        if let Some(dest) = self.dests.of_sink(&claim.key.source, claim.sink) {
            self.loads.hold(dest, &claim.key.tenant);
            claim.dest = Some(dest.id.clone());
        }
        let claim = Arc::new(claim);
        let key = claim.key.clone();
        let size = claim.row.size;
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

    /// The next row to run: round-robin across tenants with a free slot, and within a tenant
    /// across its keys. Rows of a key whose breaker is open go to `parked` with the time the
    /// breaker's period ends. `None` when no slot is free or no row may run.
    pub fn next(
        &mut self,
        round: &mut Round,
        d: &DispatchConfig,
        breakers: &mut Breakers,
        metrics: &Metrics,
        parked: &mut Vec<(Arc<Claim>, u64)>,
    ) -> Option<(Arc<Claim>, Gate)> {
        let sink_cap = d.sink_concurrency.unwrap_or(u32::MAX);
        while self.running < d.concurrency && round.idle < self.runnable.len() {
            let tenant = self.runnable.pop_front()?;
            let w = tenant_window(d, &tenant);
            let Some(t) = self.tenants.get_mut(&tenant) else {
                continue;
            };
            if t.running >= w.concurrency {
                self.runnable.push_back(tenant);
                round.idle += 1;
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
                let dest_busy = q.rows.front().and_then(|c| c.dest.as_deref());
                if q.running >= sink_cap || dest_busy.is_some_and(|d| !self.loads.can_start(d)) {
                    t.keys.push_back(key);
                    continue;
                }
                let gate = breakers.gate(&key, now_ms(), q.running, d, metrics);
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
                let Some(claim) = q.rows.pop_front() else {
                    continue;
                };
                q.running += 1;
                if let Some(d) = &claim.dest {
                    self.loads.start(d);
                }
                if !q.rows.is_empty() {
                    t.keys.push_back(key);
                }
                picked = Some((claim, gate));
                break;
            }
            let has_more = !t.keys.is_empty();
            match picked {
                Some(p) => {
                    t.running += 1;
                    self.running += 1;
                    round.idle = 0;
                    if has_more {
                        self.runnable.push_back(tenant);
                    }
                    return Some(p);
                }
                None => {
                    if has_more {
                        self.runnable.push_back(tenant);
                    }
                    round.idle += 1;
                }
            }
        }
        None
    }

    /// Gives back the slot of a running attempt that waits in a batching sink's batcher: its
    /// batcher bounds its requests, and counting it here would cap every batch at the slots.
    pub fn unslot(&mut self, claim: &Claim) {
        self.running = self.running.saturating_sub(1);
        if let Some(d) = &claim.dest {
            self.loads.stop(d);
        }
        if let Some(t) = self.tenants.get_mut(&claim.key.tenant) {
            t.running = t.running.saturating_sub(1);
        }
        if let Some(q) = self.queues.get_mut(&claim.key) {
            q.running = q.running.saturating_sub(1);
        }
    }

    /// Frees a claimed row's place in its windows (and its slot, if it ran holding one).
    /// Returns the row's destination and how many of the tenants waiting for it to wake.
    pub fn release(&mut self, claim: &Claim, ran: bool) -> Option<(Arc<str>, usize)> {
        if ran && let Some(q) = self.queues.get_mut(&claim.key) {
            q.running = q.running.saturating_sub(1);
        }
        let woken = claim.dest.as_ref().map(|d| {
            if ran {
                self.loads.stop(d);
            }
            (d.clone(), self.loads.unhold(d, &claim.key.tenant))
        });
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
        woken
    }

    /// Whether some queued row could take a slot now.
    pub fn has_startable(&self, d: &DispatchConfig) -> bool {
        let sink_cap = d.sink_concurrency.unwrap_or(u32::MAX);
        self.running < d.concurrency
            && self.runnable.iter().any(|t| {
                let w = tenant_window(d, t);
                self.tenants.get(t).is_some_and(|s| {
                    s.running < w.concurrency
                        && s.keys.iter().any(|k| {
                            self.queues.get(k).is_some_and(|q| {
                                q.running < sink_cap
                                    && q.rows.front().is_some_and(|c| {
                                        c.dest.as_deref().is_none_or(|d| self.loads.can_start(d))
                                    })
                            })
                        })
                })
            })
    }

    /// The tenants holding the most claimed rows, most first.
    pub fn top_tenants(&self, n: usize) -> Vec<(&str, u32)> {
        let mut top: Vec<(&str, u32)> = self
            .tenants
            .iter()
            .filter(|(_, t)| t.inflight_rows > 0)
            .map(|(k, t)| (k.as_str(), t.inflight_rows))
            .collect();
        top.sort_by_key(|t| std::cmp::Reverse(t.1));
        top.truncate(n);
        top
    }

    /// Forgets tenants and keys that hold nothing.
    pub fn sweep(&mut self) {
        self.tenants
            .retain(|_, t| t.inflight_rows > 0 || !t.keys.is_empty());
        self.queues
            .retain(|_, q| q.running > 0 || !q.rows.is_empty());
    }

    /// Takes every queued row out (the scan benchmark records them delivered unrun).
    #[cfg(any(test, feature = "bench"))]
    pub fn drain(&mut self) -> Vec<Arc<Claim>> {
        let claimed: Vec<Arc<Claim>> = self
            .queues
            .values_mut()
            .flat_map(|q| q.rows.drain(..))
            .collect();
        for c in &claimed {
            self.release(c, false);
        }
        for t in self.tenants.values_mut() {
            t.keys.clear();
        }
        self.runnable.clear();
        claimed
    }
}

/// One claim scan: up to `dispatch.batch` due rows, split among the tenants with work due
/// and room in their windows (deficit round-robin: each gets an equal share of what is left
/// until the batch or the global window is used up; a tenant the scan did not reach goes first
/// next time). Claimed rows are queued in `slots` at once, so they count against the windows
/// for the rest of the scan. A tenant whose shared destinations have no room for it is not
/// read: it waits for one of them (`Schedule::block`). Returns how many tenants' rows were read.
pub fn scan(
    store: &Store,
    schedule: &mut Schedule,
    slots: &mut Slots,
    d: &DispatchConfig,
    now: u64,
) -> Result<u64, StoreError> {
    let mut visits = 0;
    if !slots.global_room(d) {
        return Ok(visits);
    }
    let mut due = schedule.due_now(now);
    due.retain(|t| {
        if !slots.tenant_has_room(d, t) {
            return false;
        }
        match slots.waits_for(t) {
            Some(dest) => {
                schedule.block(t, dest);
                false
            }
            None => true,
        }
    });
    if due.is_empty() {
        return Ok(visits);
    }
    let mut budget = (d.batch as usize).min((d.max_inflight - slots.inflight_rows) as usize);
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
            let st = slots.tenants.get(t);
            let rows_room = w.rows.saturating_sub(st.map_or(0, |s| s.inflight_rows)) as usize;
            let bytes_room = w
                .bytes
                .saturating_sub(st.map_or(0, |s| s.inflight_bytes))
                .min(d.max_inflight_bytes.saturating_sub(slots.inflight_bytes));
            let dest_room = slots.dest_room(t).map_or(usize::MAX, |r| r as usize);
            let quota = share.min(budget).min(rows_room).min(dest_room);
            if quota == 0 || bytes_room == 0 {
                continue;
            }
            visits += 1;
            let page = store.claim_due_from(t, schedule.cursors.get(t), now, quota, bytes_room)?;
            schedule.cursors.insert(t.clone(), page.resume);
            let got = page.claimed.len();
            schedule.replace_due(t, page.next_due);
            budget -= got.min(budget);
            for c in page.claimed {
                slots.enqueue(Claim::from(c));
            }
            if got == quota
                && page.next_due.is_some_and(|n| n <= now)
                && slots.tenant_has_room(d, t)
                && slots.dest_room(t) != Some(0)
            {
                still.push(t.clone());
            }
        }
        if reached < active.len() {
            schedule.unreached.extend(active[reached..].iter().cloned());
        }
        active = still;
        if !slots.global_room(d) {
            schedule.unreached.append(&mut active);
            break;
        }
    }
    Ok(visits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_window_defaults_to_a_quarter_and_half() {
        let d = DispatchConfig::default();
        let w = tenant_window(&d, "any");
        assert_eq!((w.rows, w.bytes, w.concurrency), (1024, 33_554_432, 16));
        let mut d = DispatchConfig::default();
        d.tenants.overrides.insert(
            "big".into(),
            TenantWindow {
                max_inflight: Some(4096),
                max_inflight_bytes: None,
                concurrency: Some(32),
            },
        );
        let w = tenant_window(&d, "big");
        assert_eq!((w.rows, w.concurrency), (4096, 32));
    }

    /// 50 tenants post to one slow destination (concurrency 2), tenant `a` to its own: scans
    /// hold at most `HARD` × 2 rows for the slow one, the tenants left out wait for it unscanned, and
    /// `a`'s row is claimed and started although the global window is far smaller than 50.
    #[test]
    fn tenants_of_a_full_destination_wait_and_leave_the_window_to_others() {
        use super::super::destinations::{Dest, DestTable, HARD};
        let (_d, store) = ankusa_store::test_util::temp_store();
        let at = now_ms() - 1_000;
        let slow = Dest {
            id: Arc::from("slow"),
            concurrency: 2,
        };
        let fast = Dest {
            id: Arc::from("fast"),
            concurrency: 32,
        };
        let mut sources = vec![("sa".to_string(), "a".to_string(), fast)];
        for i in 0..50 {
            sources.push((format!("s{i}"), format!("t{i}"), slow.clone()));
        }
        let rows: Vec<_> = sources
            .iter()
            .map(|(s, t, _)| ankusa_store::test_util::ingest_test_record(t, s))
            .collect();
        store.commit_ingest(&rows, at, false).unwrap();
        let mut schedule = Schedule::default();
        for (_, t, _) in &sources {
            schedule.set_due(t, at);
        }
        let refs: Vec<(&str, &str, Dest)> = sources
            .iter()
            .map(|(s, t, d)| (s.as_str(), t.as_str(), d.clone()))
            .collect();
        let mut slots = Slots {
            dests: DestTable::of_sources(&refs),
            ..Default::default()
        };
        let d = DispatchConfig {
            max_inflight: 16,
            concurrency: 8,
            ..Default::default()
        };
        for _ in 0..5 {
            scan(&store, &mut schedule, &mut slots, &d, now_ms()).unwrap();
        }
        assert!(
            slots.loads.held("slow") <= HARD * 2,
            "{}",
            slots.loads.held("slow")
        );
        assert_eq!(slots.loads.held("fast"), 1, "a's row was claimed");
        assert!(slots.global_room(&d), "the window is not full");
        assert!(
            schedule.blocked_count() >= 40,
            "{}",
            schedule.blocked_count()
        );
        // Attempts: both slow ones run, a's runs, the rest of the slow rows hold no slot.
        let metrics = Metrics::new();
        let mut breakers = Breakers::default();
        let (mut round, mut parked) = (Round::default(), Vec::new());
        let mut started = Vec::new();
        while let Some((c, _)) = slots.next(&mut round, &d, &mut breakers, &metrics, &mut parked) {
            started.push(c);
        }
        let tenants: Vec<&str> = started.iter().map(|c| c.key.tenant.as_str()).collect();
        assert_eq!(started.len(), 3, "{tenants:?}");
        assert!(tenants.contains(&"a"));
        assert_eq!(slots.running, 3);
        // A slow row finishing wakes the first tenant waiting for the slow destination.
        let before = schedule.blocked_count();
        let slow_row = started.iter().find(|c| c.key.tenant != "a").unwrap();
        let (dest, n) = slots.release(slow_row, true).unwrap();
        assert_eq!(&*dest, "slow");
        schedule.wake(&dest, n);
        assert_eq!(schedule.blocked_count(), before - n);
        assert_eq!(slots.running, 2);
    }

    /// Rows committed together share a due time; a scan that claimed some of them resumes
    /// after them, not at the start of that time (where every key it deleted would be stepped
    /// over again), while a hint of a row due then still moves the cursor back.
    #[test]
    fn a_scan_resumes_after_what_it_claimed_within_one_due_time() {
        let (_d, store) = ankusa_store::test_util::temp_store();
        let at = now_ms() - 1_000;
        let rows: Vec<_> = (0..50)
            .map(|_| ankusa_store::test_util::ingest_test_record("t", "s"))
            .collect();
        store.commit_ingest(&rows, at, false).unwrap();
        let mut schedule = Schedule::default();
        schedule.set_due("t", at);
        let mut slots = Slots::default();
        let d = DispatchConfig {
            batch: 10,
            ..Default::default()
        };
        let mut seen = std::collections::HashSet::new();
        for round in 0..3 {
            scan(&store, &mut schedule, &mut slots, &d, now_ms()).unwrap();
            for c in slots.drain() {
                assert!(seen.insert(c.seq), "row {} claimed twice", c.seq);
            }
            assert_eq!(seen.len(), 10 * (round + 1));
            let cursor = schedule.cursors.get("t").cloned().unwrap();
            let mut rewound = cursor.clone();
            rewound.rewind(at);
            assert_ne!(
                cursor, rewound,
                "the scan's cursor went back to its due time"
            );
            assert_eq!(schedule.due.get("t"), Some(&at), "rows are still due");
        }
        schedule.set_due("t", at);
        let mut rewound = schedule.cursors.get("t").cloned().unwrap();
        rewound.rewind(at);
        assert_eq!(schedule.cursors.get("t"), Some(&rewound), "a hint rewinds");
    }
}
