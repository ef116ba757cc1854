//! What is due: one entry per tenant (its earliest due row), where each tenant's next claim
//! scan resumes, and which tenants wait for a full destination (`destinations.rs`) instead of
//! being scanned.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use ankusa_store::DueCursor;

/// What is due: each tenant's earliest due row, and where its next claim scan starts.
#[derive(Default)]
pub struct Schedule {
    /// (due_at, tenant) of each scanned tenant's earliest due row in the store.
    by_time: BTreeSet<(u64, String)>,
    /// The same for tenants waiting for a destination: not scanned until woken.
    blocked_by_time: BTreeSet<(u64, String)>,
    /// Every tenant with rows due, blocked or not.
    pub(super) due: HashMap<String, u64>,
    /// Tenant → the destination it waits for.
    blocked: HashMap<String, Arc<str>>,
    /// Destination → its waiting tenants, first blocked first. A tenant is in exactly the queue
    /// `blocked` names.
    waiting: HashMap<Arc<str>, VecDeque<String>>,
    /// Tenants a scan did not reach: they go first next scan.
    pub(super) unreached: Vec<String>,
    /// Per tenant, where its next scan starts (every due key below it is deleted). Rewound by
    /// every hint of a row due earlier.
    pub(super) cursors: HashMap<String, DueCursor>,
}

impl Schedule {
    /// Rows of `tenant` are due at `at` (a hint from a commit, a retry or a lane): the tenant's
    /// scan cursor goes back to that time, since the row may lie below it.
    pub fn set_due(&mut self, tenant: &str, at: u64) {
        if let Some(cursor) = self.cursors.get_mut(tenant) {
            cursor.rewind(at);
        }
        self.note_due(tenant, at);
    }

    fn times(&mut self, tenant: &str) -> &mut BTreeSet<(u64, String)> {
        if self.blocked.contains_key(tenant) {
            &mut self.blocked_by_time
        } else {
            &mut self.by_time
        }
    }

    /// The tenant's earliest due time is at most `at`; its cursor stays where it is.
    pub(super) fn note_due(&mut self, tenant: &str, at: u64) {
        match self.due.get(tenant).copied() {
            Some(cur) if cur <= at => {}
            Some(cur) => {
                let times = self.times(tenant);
                times.remove(&(cur, tenant.to_string()));
                times.insert((at, tenant.to_string()));
                self.due.insert(tenant.to_string(), at);
            }
            None => {
                self.times(tenant).insert((at, tenant.to_string()));
                self.due.insert(tenant.to_string(), at);
            }
        }
    }

    /// After a scan of `tenant`: its earliest row left is due at `next` (`None`: it has none).
    /// The scan's own resume point stands: rewinding it to the start of `next` would make every
    /// following scan step again over the keys this one deleted at that time (10 000 rows of
    /// one commit share a due time), which is what a scan cost before.
    pub(super) fn replace_due(&mut self, tenant: &str, next: Option<u64>) {
        if let Some(cur) = self.due.remove(tenant) {
            self.times(tenant).remove(&(cur, tenant.to_string()));
        }
        if let Some(at) = next {
            self.note_due(tenant, at);
        }
    }

    /// The due time of the earliest row of all, blocked tenants' included.
    pub fn oldest(&self) -> Option<u64> {
        let first = |s: &BTreeSet<(u64, String)>| s.iter().next().map(|(at, _)| *at);
        match (first(&self.by_time), first(&self.blocked_by_time)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// (due_at, tenant) of the tenants a scan may read, in due order.
    pub fn iter(&self) -> impl Iterator<Item = &(u64, String)> {
        self.by_time.iter()
    }

    /// Tenants with rows due at `now` that a scan may read: those the last scan did not reach
    /// first.
    pub(super) fn due_now(&mut self, now: u64) -> Vec<String> {
        let mut due: Vec<String> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        for t in std::mem::take(&mut self.unreached) {
            if self.due.get(&t).is_some_and(|&at| at <= now)
                && !self.blocked.contains_key(&t)
                && seen.insert(t.clone())
            {
                due.push(t);
            }
        }
        for (at, t) in self.by_time.iter() {
            if *at > now {
                break;
            }
            if seen.insert(t.clone()) {
                due.push(t.clone());
            }
        }
        due
    }

    /// `tenant` waits for `dest` to free rows: it is not scanned until `wake` or `wake_all`.
    pub(super) fn block(&mut self, tenant: &str, dest: Arc<str>) {
        if self.blocked.contains_key(tenant) {
            return;
        }
        if let Some(&at) = self.due.get(tenant) {
            self.by_time.remove(&(at, tenant.to_string()));
            self.blocked_by_time.insert((at, tenant.to_string()));
        }
        self.blocked.insert(tenant.to_string(), dest.clone());
        self.waiting
            .entry(dest)
            .or_default()
            .push_back(tenant.to_string());
    }

    fn unblock(&mut self, tenant: &str) {
        if self.blocked.remove(tenant).is_none() {
            return;
        }
        if let Some(&at) = self.due.get(tenant) {
            self.blocked_by_time.remove(&(at, tenant.to_string()));
            self.by_time.insert((at, tenant.to_string()));
        }
    }

    /// `dest` freed rows: up to `n` of its waiting tenants, first blocked first, are scanned
    /// again.
    pub(super) fn wake(&mut self, dest: &str, n: usize) {
        let Some(q) = self.waiting.get_mut(dest) else {
            return;
        };
        let woken: Vec<String> = q.drain(..n.min(q.len())).collect();
        if q.is_empty() {
            self.waiting.remove(dest);
        }
        for t in woken {
            self.unblock(&t);
        }
    }

    /// Every waiting tenant is scanned again (the config changed, or the periodic check that
    /// no tenant waits on a destination that will not wake it).
    pub(super) fn wake_all(&mut self) {
        self.waiting.clear();
        let tenants: Vec<String> = self.blocked.keys().cloned().collect();
        for t in tenants {
            self.unblock(&t);
        }
    }

    /// Tenants waiting for a destination.
    pub fn blocked_count(&self) -> usize {
        self.blocked.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_tenant_is_not_scanned_until_its_destination_wakes_it() {
        let mut s = Schedule::default();
        let slow: Arc<str> = Arc::from("slow");
        for (t, at) in [("a", 10), ("b", 20), ("c", 30)] {
            s.set_due(t, at);
        }
        s.block("a", slow.clone());
        s.block("b", slow.clone());
        assert_eq!(s.due_now(100), vec!["c".to_string()]);
        assert_eq!(
            s.oldest(),
            Some(10),
            "a blocked tenant's rows still count as due"
        );
        // A hint for a blocked tenant keeps it blocked, with the earlier due time.
        s.set_due("b", 5);
        assert_eq!(s.oldest(), Some(5));
        assert_eq!(s.due_now(100), vec!["c".to_string()]);
        s.unreached.push("a".into());
        assert_eq!(
            s.due_now(100),
            vec!["c".to_string()],
            "unreached but blocked"
        );
        s.wake("slow", 1);
        assert_eq!(s.due_now(100), vec!["a".to_string(), "c".to_string()]);
        assert_eq!(s.blocked_count(), 1);
        s.wake_all();
        assert_eq!(s.blocked_count(), 0);
        assert_eq!(s.due_now(100).len(), 3);
        s.replace_due("b", None);
        assert_eq!(s.due_now(100).len(), 2);
        assert!(s.waiting.is_empty());
    }
}
