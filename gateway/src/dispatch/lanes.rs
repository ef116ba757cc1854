//! Ordering lanes as dispatch sees them. An ordered sink entry's rows of one lane (tenant,
//! source, sink, key) are delivered one at a time: only the lane's head is due; the store makes
//! the next row the head when the head is delivered or dead-lettered (in the same batch as the
//! outcome), and this module keeps what dispatch needs between those writes: which lanes have
//! a head, which heads wait for a retry, and per lane a seq below which it has no waiting row
//! (a scan for the next head starts there, past the tombstones of earlier heads).

use std::collections::{HashMap, HashSet};

use ankusa_store::{LaneAdvance, LaneId, LaneState, Store};

#[derive(Default)]
pub struct Lanes {
    /// Lanes with a head (due, claimed or waiting for a retry).
    active: HashSet<LaneId>,
    /// Lanes whose head is waiting for a retry or parked.
    blocked: HashSet<LaneId>,
    /// Per lane, a seq below which it has no waiting row.
    floor: HashMap<LaneId, u64>,
}

impl Lanes {
    /// The lanes the store holds at start; those without a head (an ingest whose hand-over to
    /// dispatch was cut by a restart) are given one by `promote`.
    pub fn load(state: LaneState) -> (Lanes, Vec<LaneId>) {
        let lanes = Lanes {
            active: state.heads.into_iter().collect(),
            ..Default::default()
        };
        (lanes, state.orphans)
    }

    /// Lanes that got rows: those without a head need one. A replay put older rows back, so
    /// their floors no longer hold.
    pub fn need_head(&mut self, lanes: Vec<LaneId>, replayed: bool) -> Vec<LaneId> {
        lanes
            .into_iter()
            .filter(|lane| {
                if replayed {
                    self.floor.remove(lane);
                }
                !self.active.contains(lane)
            })
            .collect()
    }

    /// Gives a lane without a head its head. Returns the tenant and due time when it did.
    pub fn promote(&mut self, store: &Store, lane: LaneId, now: u64) -> Option<(String, u64)> {
        let floor = self.floor.get(&lane).copied().unwrap_or(0);
        match store.promote_lane(&lane, now, floor) {
            Ok(Some((tenant, at, seq))) => {
                self.floor.insert(lane.clone(), seq + 1);
                self.active.insert(lane);
                Some((tenant, at))
            }
            Ok(None) => None,
            Err(e) => {
                tracing::error!(error = %e, "promoting an ordering lane's head failed; it is retried at the next start");
                None
            }
        }
    }

    /// The lane's head waits for a retry (or behind an open breaker).
    pub fn block(&mut self, lane: &LaneId) {
        self.blocked.insert(lane.clone());
    }

    /// What the floors tell the store's hand-overs.
    pub fn floors(&self) -> &HashMap<LaneId, u64> {
        &self.floor
    }

    /// Takes in the hand-overs an outcome batch made; returns the (tenant, due time) of each
    /// new head.
    pub fn advanced(&mut self, advances: Vec<LaneAdvance>) -> Vec<(String, u64)> {
        let mut due = Vec::new();
        for a in advances {
            self.blocked.remove(&a.lane);
            match a.promoted {
                Some((at, seq)) => {
                    self.floor.insert(a.lane, seq + 1);
                    due.push((a.tenant, at));
                }
                None => {
                    self.active.remove(&a.lane);
                }
            }
        }
        due
    }

    /// (lanes with a head, lanes blocked) for the gauges.
    pub fn counts(&self) -> (usize, usize) {
        (self.active.len(), self.blocked.len())
    }
}
