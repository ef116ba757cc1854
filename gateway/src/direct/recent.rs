//! Direct mode's dedupe: the keys this pod confirmed recently, in memory.
//!
//! Under `wal.type: none` no hook is stored, so a dedupe key lives in this pod's memory for its
//! source's `dedupe.ttl_ms`, up to `MAX_KEYS` keys (the oldest go first). A repeat of a key
//! whose hook every sink confirmed answers `201` with the first id and publishes nothing; a
//! repeat while the first is still being published waits for it (within the deadline) and then
//! answers as it did, or publishes itself when the first failed. A restart, another pod, or a
//! key past the cap forgets: the repeat is published again, with the same idempotency key
//! (`tenant:source:key`), which is what consumers dedupe on.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use uuid::Uuid;

/// Keys kept at most (about 150 bytes each).
pub const MAX_KEYS: usize = 500_000;

enum Slot {
    Done { id: Uuid, expires: u64 },
    Pending(watch::Receiver<Option<Uuid>>),
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, Slot>,
    /// Confirmed keys in the order they were confirmed, with their expiry.
    order: VecDeque<(u64, String)>,
}

#[derive(Default)]
pub struct Recent {
    inner: Mutex<Inner>,
    max: usize,
}

/// What a request with a dedupe key does.
pub enum Begin {
    /// Every sink confirmed this key's hook: its id.
    Seen(Uuid),
    /// Another request publishes the key now: wait for its outcome, then begin again.
    Wait(watch::Receiver<Option<Uuid>>),
    /// This request publishes: `Lead::confirmed` when every sink confirmed; dropped, it lets
    /// a waiting repeat publish instead.
    Lead(Lead),
}

pub struct Lead {
    recent: Arc<Recent>,
    key: String,
    tx: watch::Sender<Option<Uuid>>,
    confirmed: bool,
}

impl Recent {
    pub fn new(max: usize) -> Arc<Recent> {
        Arc::new(Recent {
            inner: Mutex::default(),
            max: max.max(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn begin(self: &Arc<Self>, key: String, now: u64) -> Begin {
        let mut inner = self.lock();
        match inner.map.get(&key) {
            Some(Slot::Done { id, expires }) if *expires > now => return Begin::Seen(*id),
            Some(Slot::Pending(rx)) => return Begin::Wait(rx.clone()),
            _ => {}
        }
        let (tx, rx) = watch::channel(None);
        inner.map.insert(key.clone(), Slot::Pending(rx));
        Begin::Lead(Lead {
            recent: self.clone(),
            key,
            tx,
            confirmed: false,
        })
    }

    /// Keys held (confirmed or pending).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Lead {
    /// Every sink confirmed `id`: repeats of the key until `expires` (unix ms) answer it.
    pub fn confirmed(mut self, id: Uuid, now: u64, expires: u64) {
        self.confirmed = true;
        {
            let mut inner = self.recent.lock();
            inner
                .map
                .insert(self.key.clone(), Slot::Done { id, expires });
            inner.order.push_back((expires, self.key.clone()));
            let max = self.recent.max;
            while let Some((exp, _)) = inner.order.front() {
                if *exp > now && inner.order.len() <= max {
                    break;
                }
                let Some((exp, k)) = inner.order.pop_front() else {
                    break;
                };
                // Only the entry this position stands for: the key may have been confirmed
                // again since (a later position) or be pending again.
                if matches!(inner.map.get(&k), Some(Slot::Done { expires: e, .. }) if *e == exp) {
                    inner.map.remove(&k);
                }
            }
        }
        let _ = self.tx.send(Some(id));
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        if self.confirmed {
            return;
        }
        let mut inner = self.recent.lock();
        if matches!(inner.map.get(&self.key), Some(Slot::Pending(_))) {
            inner.map.remove(&self.key);
        }
        // The sender drops with `self`: waiters see the channel close and begin again.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn a_confirmed_key_answers_its_id_until_it_expires() {
        let r = Recent::new(10);
        let Begin::Lead(l) = r.begin("k".into(), 0) else {
            panic!("first begin leads")
        };
        assert!(matches!(r.begin("k".into(), 1), Begin::Wait(_)));
        l.confirmed(id(1), 1, 100);
        assert!(matches!(r.begin("k".into(), 50), Begin::Seen(x) if x == id(1)));
        assert!(matches!(r.begin("k".into(), 100), Begin::Lead(_)));
    }

    #[test]
    fn a_failed_lead_lets_the_next_request_publish() {
        let r = Recent::new(10);
        let Begin::Lead(l) = r.begin("k".into(), 0) else {
            panic!("leads")
        };
        let Begin::Wait(rx) = r.begin("k".into(), 0) else {
            panic!("waits")
        };
        drop(l);
        assert!(rx.has_changed().is_err(), "the waiter sees the lead gone");
        assert!(matches!(r.begin("k".into(), 0), Begin::Lead(_)));
        assert!(r.is_empty() || r.len() == 1);
    }

    #[test]
    fn the_cap_forgets_the_oldest_keys() {
        let r = Recent::new(3);
        for n in 0..5u128 {
            let Begin::Lead(l) = r.begin(format!("k{n}"), 0) else {
                panic!("leads")
            };
            l.confirmed(id(n), 0, 1_000);
        }
        assert_eq!(r.len(), 3);
        assert!(matches!(r.begin("k0".into(), 1), Begin::Lead(_)));
        assert!(matches!(r.begin("k4".into(), 1), Begin::Seen(x) if x == id(4)));
    }
}
