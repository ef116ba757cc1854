//! Shared destinations (`Sink::destination`): sinks that post to one receiver through one
//! bounded pool share its capacity, so dispatch accounts for them together.
//!
//! Without this, 10 000 tenants whose sinks all post to one slow receiver claim rows up to the
//! global window and start attempts up to `dispatch.concurrency`, each waiting for one of the
//! receiver's few pool connections; every other tenant then waits for a window row and a slot
//! however fast its own receiver is (measured: a light tenant's p99 605× its solo p99). Here:
//! - an attempt starts only while its destination runs fewer than its concurrency (the rest of
//!   its rows wait in the key queue and hold no attempt slot);
//! - a destination holds claimed rows up to `SOFT` × its concurrency for anyone, and up to
//!   `HARD` × for a tenant holding less than its share of it (the soft room over the
//!   destination's tenants); a tenant whose every destination is full is not scanned until one
//!   of them frees rows (`Schedule::block` / `wake`).
//!
//! The table is built from the live config (which tenant's rows can reach which destination)
//! once per config generation; the loads are counted as rows are claimed, started and released.

use std::collections::HashMap;
use std::sync::Arc;

use crate::live::{LIFECYCLE_SOURCE, LIFECYCLE_TENANT, Live};

/// Claimed rows a destination holds for anyone, in units of its concurrency.
pub const SOFT: u32 = 4;
/// Claimed rows a destination holds at most, for tenants under their share.
pub const HARD: u32 = 8;

/// A destination as dispatch counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dest {
    pub id: Arc<str>,
    pub concurrency: u32,
}

/// Which destinations each sink and tenant reaches, as the config in force says.
#[derive(Default)]
pub struct DestTable {
    generation: Option<u64>,
    /// Source → per sink index its destination; `None`: not held back.
    by_sink: HashMap<String, Vec<Option<Dest>>>,
    /// Tenant → every destination its rows can go to; `None` when one of its sinks is not held
    /// back (such a tenant is always scanned).
    by_tenant: HashMap<String, Option<Vec<Dest>>>,
    /// For a tenant with no source of its own: the sinks of the shared sources (which post
    /// under any tenant the URL names); `None` when there are none or one is not held back.
    unknown: Option<Vec<Dest>>,
}

impl DestTable {
    /// Rebuilds the table when the config generation changed; `true` when it did.
    pub fn refresh(&mut self, live: &Live) -> bool {
        if self.generation == Some(live.generation) {
            return false;
        }
        *self = DestTable::build(live);
        true
    }

    fn build(live: &Live) -> DestTable {
        let mut by_sink = HashMap::new();
        let mut by_tenant: HashMap<String, Option<Vec<Dest>>> = HashMap::new();
        // Shared sources' sinks; `None` once one is not held back.
        let mut shared: Option<Vec<Dest>> = Some(Vec::new());
        let mut any_shared = false;
        let sources = live
            .sources
            .values()
            .map(|s| (s.id.as_str(), s, s.tenant()));
        let lifecycle = live
            .lifecycle
            .iter()
            .map(|s| (LIFECYCLE_SOURCE, s, LIFECYCLE_TENANT));
        for (id, src, tenant) in sources.chain(lifecycle) {
            let is_shared = id != LIFECYCLE_SOURCE && src.shared();
            let entry = if is_shared {
                any_shared = true;
                &mut shared
            } else {
                by_tenant
                    .entry(tenant.to_string())
                    .or_insert_with(|| Some(Vec::new()))
            };
            let mut of_source = Vec::with_capacity(src.sinks.len());
            for sink in &src.sinks {
                match sink.destination() {
                    Some(d) => {
                        let dest = Dest {
                            id: Arc::from(d.id),
                            concurrency: d.concurrency.max(1),
                        };
                        if let Some(list) = entry
                            && !list.contains(&dest)
                        {
                            list.push(dest.clone());
                        }
                        of_source.push(Some(dest));
                    }
                    None => {
                        *entry = None;
                        of_source.push(None);
                    }
                }
            }
            by_sink.insert(id.to_string(), of_source);
        }
        let unknown = if any_shared { shared } else { None };
        if any_shared {
            for list in by_tenant.values_mut() {
                *list = match (list.take(), &unknown) {
                    (Some(mut own), Some(more)) => {
                        for d in more {
                            if !own.contains(d) {
                                own.push(d.clone());
                            }
                        }
                        Some(own)
                    }
                    _ => None,
                };
            }
        }
        DestTable {
            generation: Some(live.generation),
            by_sink,
            by_tenant,
            unknown,
        }
    }

    /// A table of sources with one sink each: (source, tenant, destination).
    #[cfg(test)]
    pub fn of_sources(sources: &[(&str, &str, Dest)]) -> DestTable {
        let mut t = DestTable::default();
        for (source, tenant, dest) in sources {
            t.by_sink
                .insert(source.to_string(), vec![Some(dest.clone())]);
            t.by_tenant
                .entry(tenant.to_string())
                .or_insert_with(|| Some(Vec::new()))
                .get_or_insert_with(Vec::new)
                .push(dest.clone());
        }
        t
    }

    /// The destination of a source's sink, if it is held back.
    pub fn of_sink(&self, source: &str, sink: u16) -> Option<&Dest> {
        self.by_sink.get(source)?.get(usize::from(sink))?.as_ref()
    }

    /// Every destination a tenant's rows can go to; `None`: some are not held back.
    pub fn of_tenant(&self, tenant: &str) -> Option<&[Dest]> {
        match self.by_tenant.get(tenant) {
            Some(list) => list.as_deref(),
            None => self.unknown.as_deref(),
        }
    }
}

/// What one destination holds and runs.
#[derive(Default)]
struct Load {
    concurrency: u32,
    held: u32,
    running: u32,
    /// Claimed rows per tenant (entries at zero are removed).
    by_tenant: HashMap<String, u32>,
}

/// Every destination's load.
#[derive(Default)]
pub struct Loads {
    map: HashMap<Arc<str>, Load>,
}

impl Loads {
    /// A row of `tenant` for `dest` was claimed.
    pub fn hold(&mut self, dest: &Dest, tenant: &str) {
        let l = self.map.entry(dest.id.clone()).or_default();
        l.concurrency = dest.concurrency;
        l.held += 1;
        match l.by_tenant.get_mut(tenant) {
            Some(n) => *n += 1,
            None => {
                l.by_tenant.insert(tenant.to_string(), 1);
            }
        }
    }

    /// A row of `tenant` for `id` was released. Returns how many waiting tenants to wake: as
    /// many as the soft room now free, or one (whose share may have grown).
    pub fn unhold(&mut self, id: &str, tenant: &str) -> usize {
        let Some(l) = self.map.get_mut(id) else {
            return 0;
        };
        l.held = l.held.saturating_sub(1);
        if let Some(n) = l.by_tenant.get_mut(tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                l.by_tenant.remove(tenant);
            }
        }
        let soft = SOFT * l.concurrency;
        let wake = soft.saturating_sub(l.held).max(1) as usize;
        if l.held == 0 && l.running == 0 {
            self.map.remove(id);
        }
        wake
    }

    pub fn can_start(&self, id: &str) -> bool {
        self.map.get(id).is_none_or(|l| l.running < l.concurrency)
    }

    pub fn start(&mut self, id: &str) {
        if let Some(l) = self.map.get_mut(id) {
            l.running += 1;
        }
    }

    pub fn stop(&mut self, id: &str) {
        if let Some(l) = self.map.get_mut(id) {
            l.running = l.running.saturating_sub(1);
        }
    }

    /// How many more rows `tenant` may claim for `dest` now (0: none).
    pub fn room(&self, dest: &Dest, tenant: &str) -> u32 {
        let Some(l) = self.map.get(&dest.id) else {
            return SOFT * dest.concurrency;
        };
        let soft = SOFT * dest.concurrency;
        let hard = HARD * dest.concurrency;
        if l.held < soft {
            return soft - l.held;
        }
        if l.held >= hard {
            return 0;
        }
        let mine = l.by_tenant.get(tenant).copied().unwrap_or(0);
        let others = l.by_tenant.len() as u32 - u32::from(mine > 0);
        let share = soft / (others + 1);
        share.saturating_sub(mine).min(hard - l.held)
    }

    /// How many more rows `tenant` may claim: the most any of its destinations takes; `None`
    /// when one of them is not held back.
    pub fn tenant_room(&self, table: &DestTable, tenant: &str) -> Option<u32> {
        let dests = table.of_tenant(tenant)?;
        if dests.is_empty() {
            return None;
        }
        dests.iter().map(|d| self.room(d, tenant)).max()
    }

    /// Rows held for `id`.
    #[cfg(test)]
    pub fn held(&self, id: &str) -> u32 {
        self.map.get(id).map_or(0, |l| l.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(id: &str, concurrency: u32) -> Dest {
        Dest {
            id: Arc::from(id),
            concurrency,
        }
    }

    #[test]
    fn a_full_destination_takes_rows_only_from_tenants_under_their_share() {
        let slow = dest("slow", 2);
        let (soft, hard) = (SOFT * 2, HARD * 2);
        let mut loads = Loads::default();
        assert_eq!(loads.room(&slow, "a"), soft);
        for _ in 0..soft {
            loads.hold(&slow, "a");
        }
        assert_eq!(loads.room(&slow, "a"), 0, "a holds the whole soft room");
        // b holds nothing: its share is half the soft room, within the hard room.
        assert_eq!(loads.room(&slow, "b"), soft / 2);
        for _ in 0..soft / 2 {
            loads.hold(&slow, "b");
        }
        assert_eq!(loads.room(&slow, "b"), 0);
        // A third tenant's share is a third, within what is left of the hard room.
        let c_room = (soft / 3).min(hard - loads.held("slow"));
        assert_eq!(loads.room(&slow, "c"), c_room);
        for _ in 0..c_room {
            loads.hold(&slow, "c");
        }
        assert_eq!(loads.room(&slow, "c"), 0);
        assert_eq!(loads.held("slow"), soft + soft / 2 + c_room);
        assert!(loads.held("slow") <= hard);
        // Releasing one of a's rows wakes one waiter (the soft room is still used up).
        assert_eq!(loads.unhold("slow", "a"), 1);
        for _ in 1..soft {
            loads.unhold("slow", "a");
        }
        for _ in 0..soft / 2 {
            loads.unhold("slow", "b");
        }
        for _ in 0..c_room {
            loads.unhold("slow", "c");
        }
        assert_eq!(loads.held("slow"), 0);
        assert!(loads.map.is_empty(), "an idle destination is forgotten");
    }

    #[test]
    fn the_hard_room_bounds_a_destination_however_many_tenants_it_has() {
        let slow = dest("slow", 1);
        let mut loads = Loads::default();
        let mut held = 0;
        for t in 0..1000 {
            let tenant = format!("t{t}");
            for _ in 0..loads.room(&slow, &tenant) {
                loads.hold(&slow, &tenant);
                held += 1;
            }
        }
        assert!(
            held <= HARD,
            "{held} rows held for a destination of concurrency 1"
        );
        assert_eq!(loads.held("slow"), held);
    }

    #[test]
    fn attempts_start_only_within_the_destination_concurrency() {
        let d = dest("d", 2);
        let mut loads = Loads::default();
        for _ in 0..3 {
            loads.hold(&d, "a");
        }
        assert!(loads.can_start("d"));
        loads.start("d");
        loads.start("d");
        assert!(!loads.can_start("d"));
        loads.stop("d");
        assert!(loads.can_start("d"));
        assert!(
            loads.can_start("unknown"),
            "a destination holding nothing runs"
        );
    }
}
