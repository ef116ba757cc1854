//! A pool's connection permits, handed out round robin across tenants.
//!
//! A pool belongs to its receiver and is shared by every tenant posting there. With a plain
//! FIFO semaphore a heavy tenant whose dispatch window is larger than the pool queues dozens
//! of attempts, and a light tenant's next attempt waits behind all of them: the scheduler's
//! per-tenant windows are undone at the last step. Here every tenant with waiters has its own
//! queue, and a freed permit goes to the next tenant in turn, so a tenant waits behind its own
//! backlog only.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

pub(super) struct FairPermits {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    free: usize,
    /// Tenants with waiters, in the order they are served next.
    ring: VecDeque<String>,
    waiters: HashMap<String, VecDeque<oneshot::Sender<Permit>>>,
}

/// One connection slot; dropping it frees the slot for the next tenant in turn.
pub(super) struct Permit {
    of: Arc<FairPermits>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.of.release();
    }
}

impl FairPermits {
    pub fn new(permits: usize) -> Arc<FairPermits> {
        Arc::new(FairPermits {
            state: Mutex::new(State {
                free: permits,
                ..State::default()
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a slot. Cancel-safe: a caller that stops waiting (its timeout fired) after a
    /// slot was handed to it drops the slot with the channel, which frees it again.
    pub async fn acquire(self: &Arc<Self>, tenant: &str) -> Permit {
        loop {
            let rx = {
                let mut st = self.lock();
                if st.free > 0 {
                    st.free -= 1;
                    return Permit { of: self.clone() };
                }
                let (tx, rx) = oneshot::channel();
                let queue = st.waiters.entry(tenant.to_string()).or_default();
                let first = queue.is_empty();
                queue.push_back(tx);
                if first {
                    st.ring.push_back(tenant.to_string());
                }
                rx
            };
            // A sender is dropped unsent only if its queue was discarded, which `release` does
            // only once the queue is empty; should it happen, queue again.
            if let Ok(p) = rx.await {
                return p;
            }
        }
    }

    /// Gives a freed slot to the next waiting tenant's oldest live waiter, or keeps it free.
    fn release(self: &Arc<Self>) {
        let mut st = self.lock();
        while let Some(tenant) = st.ring.pop_front() {
            let Some(queue) = st.waiters.get_mut(&tenant) else {
                continue;
            };
            while let Some(tx) = queue.pop_front() {
                match tx.send(Permit { of: self.clone() }) {
                    Ok(()) => {
                        if queue.is_empty() {
                            st.waiters.remove(&tenant);
                        } else {
                            st.ring.push_back(tenant);
                        }
                        return;
                    }
                    // That waiter gave up; the slot is still ours to give (not released twice).
                    Err(p) => std::mem::forget(p),
                }
            }
            st.waiters.remove(&tenant);
        }
        st.free += 1;
    }

    #[cfg(test)]
    fn free(&self) -> usize {
        self.lock().free
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_light_tenant_is_served_before_a_heavy_tenants_backlog() {
        let p = FairPermits::new(2);
        let held = [p.acquire("b").await, p.acquire("b").await];
        // b queues 10 more; then a asks once.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..10 {
            let (p, tx) = (p.clone(), tx.clone());
            tokio::spawn(async move {
                let permit = p.acquire("b").await;
                let _ = tx.send(format!("b{i}"));
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(permit);
            });
            tokio::task::yield_now().await;
        }
        {
            let (p, tx) = (p.clone(), tx.clone());
            tokio::spawn(async move {
                let permit = p.acquire("a").await;
                let _ = tx.send("a".to_string());
                drop(permit);
            });
        }
        tokio::task::yield_now().await;
        drop(held);
        let mut order = Vec::new();
        for _ in 0..11 {
            order.push(rx.recv().await.unwrap());
        }
        let a_at = order.iter().position(|x| x == "a").unwrap();
        assert!(
            a_at <= 1,
            "a served within the first two freed slots: {order:?}"
        );
        // b's own order is kept.
        let bs: Vec<&String> = order.iter().filter(|x| x.starts_with('b')).collect();
        let want: Vec<String> = (0..10).map(|i| format!("b{i}")).collect();
        assert_eq!(bs, want.iter().collect::<Vec<_>>());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(p.free(), 2, "every slot back");
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_loses_no_slot() {
        let p = FairPermits::new(1);
        let held = p.acquire("a").await;
        let gave_up = tokio::time::timeout(Duration::from_millis(10), p.acquire("b")).await;
        assert!(gave_up.is_err());
        drop(held);
        assert_eq!(p.free(), 1, "the abandoned waiter's slot is free again");
        let again = tokio::time::timeout(Duration::from_millis(100), p.acquire("c")).await;
        assert!(again.is_ok());
    }
}
