//! The batcher shared by the SQS and Pub/Sub sinks: deliveries to one destination wait here
//! and go out together, `linger` after the first arrived or at once when a batch is full
//! (`max_entries` or `max_bytes`).
//!
//! - **Per-entry settlement.** Each delivery awaits its own entry's result; a batch request
//!   answers each entry separately (the `Flush` implementation decides how).
//! - **Bounded.** The queue holds at most `queue_max` entries, `queue_max_bytes` bytes and
//!   `tenant_max` entries per tenant; a delivery past a ceiling is refused at once with
//!   `retry_after` (`batch_queue_full: entries|bytes|tenant`) and a full-jitter pause.
//! - **Fair.** A batch takes entries round-robin across tenants, so one tenant's backlog does
//!   not fill every batch.
//! - **Ordered groups.** Entries with a group (a FIFO MessageGroupId, a Pub/Sub ordering key)
//!   go out in the order they were admitted, and a group has at most one request in flight.
//! - **At most `max_inflight` requests** at once per destination.
//! - A delivery whose caller gave up (dispatch's attempt timeout dropped it) before its entry
//!   was taken is not sent; its retry will be.
//!
//! The batcher runs as one task per destination and stops when the last sink holding it is
//! dropped, after sending what is queued.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ankusa_config::BatchOptions;
use ankusa_core::{SinkError, full_jitter};
use futures::future::BoxFuture;
use tokio::sync::{Notify, Semaphore, oneshot};

/// One entry as the flusher sees it.
pub struct Item<P> {
    pub payload: P,
    /// The delivery attempt (for jitter draws).
    pub attempt: u32,
}

/// Sends one batch; answers one result per item, in order.
pub trait Flush<P>: Send + Sync + 'static {
    fn flush<'a>(&'a self, items: &'a [Item<P>]) -> BoxFuture<'a, Vec<Result<(), SinkError>>>;
}

#[derive(Debug, Clone, Copy)]
pub struct BatchConfig {
    pub linger: Duration,
    pub max_entries: usize,
    pub max_bytes: u64,
    pub queue_max: usize,
    pub queue_max_bytes: u64,
    pub tenant_max: usize,
    pub max_inflight: usize,
}

impl BatchConfig {
    /// A sink's batching options; requests in flight default to `default_inflight`.
    pub fn from_options(o: &BatchOptions, default_inflight: u32) -> Self {
        BatchConfig {
            linger: Duration::from_millis(o.linger_ms),
            max_entries: o.max_entries as usize,
            max_bytes: o.max_bytes,
            queue_max: o.queue_max as usize,
            queue_max_bytes: o.queue_max_bytes,
            tenant_max: o.queue_tenant_max as usize,
            max_inflight: o.max_inflight.unwrap_or(default_inflight) as usize,
        }
    }
}

/// The live batcher of each destination, so sinks sharing one (and the sinks a reload
/// rebuilds) share its queue. Held weakly: a batcher stops when its last sink is dropped.
pub struct Shared<P: Send + 'static> {
    batchers: Mutex<HashMap<String, Weak<Batcher<P>>>>,
}

impl<P: Send + 'static> Default for Shared<P> {
    fn default() -> Self {
        Shared {
            batchers: Mutex::new(HashMap::new()),
        }
    }
}

impl<P: Send + 'static> Shared<P> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Weak<Batcher<P>>>> {
        self.batchers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live batcher for `key`, or a new one from `make`. Starts a task: call it inside the
    /// Tokio runtime.
    pub fn get_or_start(&self, key: String, make: impl FnOnce() -> Batcher<P>) -> Arc<Batcher<P>> {
        let mut m = self.lock();
        if let Some(b) = m.get(&key).and_then(Weak::upgrade) {
            return b;
        }
        let b = Arc::new(make());
        m.insert(key, Arc::downgrade(&b));
        b
    }

    /// The batcher of a sink with batching `options`, shared with every sink sending to the
    /// same `destination` (address, credentials, timeouts: what makes two sinks' requests
    /// interchangeable) with the same options; `None` when batching is off. Starts the
    /// batcher's task, so it must run inside the Tokio runtime.
    pub fn for_sink(
        &self,
        kind: &str,
        destination: &impl serde::Serialize,
        options: BatchOptions,
        ctx: &crate::BuildCtx,
        flush: impl FnOnce() -> Arc<dyn Flush<P>>,
        stats: Arc<BatchStats>,
    ) -> Result<Option<Arc<Batcher<P>>>, ankusa_config::ConfigError> {
        if !options.enabled {
            return Ok(None);
        }
        crate::require_runtime(ctx.field)?;
        let cfg = BatchConfig::from_options(&options, ctx.default_inflight);
        let key = crate::shared_key(kind, &(destination, options, cfg.max_inflight));
        Ok(Some(
            self.get_or_start(key, || Batcher::start(cfg, flush(), stats)),
        ))
    }

    /// Forgets batchers no sink holds any more.
    pub fn reap(&self) {
        self.lock().retain(|_, w| w.strong_count() > 0);
    }

    /// Batchers some sink holds.
    pub fn live(&self) -> usize {
        self.lock()
            .values()
            .filter(|w| w.strong_count() > 0)
            .count()
    }
}

/// Counters for the `ankusa_sink_batch_*` series.
#[derive(Debug, Default)]
pub struct BatchStats {
    pub requests: AtomicU64,
    pub entries: AtomicU64,
    pub bisections: AtomicU64,
    pub refused_entries: AtomicU64,
    pub refused_bytes: AtomicU64,
    pub refused_tenant: AtomicU64,
    pub abandoned: AtomicU64,
}

struct Pending<P> {
    payload: P,
    bytes: u64,
    group: Option<String>,
    seq: u64,
    attempt: u32,
    arrived: Instant,
    tx: oneshot::Sender<Result<(), SinkError>>,
}

struct Queue<P> {
    tenants: HashMap<String, VecDeque<Pending<P>>>,
    /// Tenants with queued entries, in round-robin order.
    order: VecDeque<String>,
    /// Per group, the admission numbers of its queued entries, oldest first.
    groups: HashMap<String, VecDeque<u64>>,
    /// Groups with a request in flight.
    busy: HashSet<String>,
    entries: usize,
    bytes: u64,
    next_seq: u64,
    closed: bool,
}

impl<P> Queue<P> {
    fn oldest(&self) -> Option<Instant> {
        self.tenants
            .values()
            .filter_map(|q| q.front().map(|p| p.arrived))
            .min()
    }

    fn forget(&mut self, p: &Pending<P>) {
        self.entries -= 1;
        self.bytes -= p.bytes;
        if let Some(g) = &p.group
            && let Some(seqs) = self.groups.get_mut(g)
        {
            if let Some(i) = seqs.iter().position(|s| *s == p.seq) {
                seqs.remove(i);
            }
            if seqs.is_empty() {
                self.groups.remove(g);
            }
        }
    }

    fn eligible(&self, p: &Pending<P>) -> bool {
        match &p.group {
            None => true,
            Some(g) => {
                !self.busy.contains(g) && self.groups.get(g).and_then(|s| s.front()) == Some(&p.seq)
            }
        }
    }

    /// Takes up to `max_entries` / `max_bytes` of eligible entries, round-robin by tenant.
    fn take(&mut self, cfg: &BatchConfig, stats: &BatchStats) -> Vec<Pending<P>> {
        let mut batch: Vec<Pending<P>> = Vec::new();
        let mut batch_bytes = 0u64;
        loop {
            let mut progress = false;
            let rounds = self.order.len();
            for _ in 0..rounds {
                if batch.len() >= cfg.max_entries {
                    break;
                }
                let Some(tenant) = self.order.pop_front() else {
                    break;
                };
                let mut q = self.tenants.remove(&tenant).unwrap_or_default();
                // Callers that gave up: not sent.
                let mut i = 0;
                while i < q.len() {
                    if q[i].tx.is_closed() {
                        if let Some(p) = q.remove(i) {
                            self.forget(&p);
                            stats.abandoned.fetch_add(1, Ordering::Relaxed);
                        }
                    } else {
                        i += 1;
                    }
                }
                let pick = q.iter().position(|p| {
                    self.eligible(p) && (batch.is_empty() || batch_bytes + p.bytes <= cfg.max_bytes)
                });
                if let Some(i) = pick
                    && let Some(p) = q.remove(i)
                {
                    self.forget(&p);
                    batch_bytes += p.bytes;
                    batch.push(p);
                    progress = true;
                }
                if !q.is_empty() {
                    self.tenants.insert(tenant.clone(), q);
                    self.order.push_back(tenant);
                }
            }
            if !progress || batch.len() >= cfg.max_entries {
                break;
            }
        }
        // The groups of this batch go busy only now, so one batch may hold several entries
        // of a group, in admission order.
        for p in &batch {
            if let Some(g) = &p.group {
                self.busy.insert(g.clone());
            }
        }
        batch
    }
}

struct Inner<P> {
    cfg: BatchConfig,
    queue: Mutex<Queue<P>>,
    wake: Notify,
    inflight: Arc<Semaphore>,
    flusher: Arc<dyn Flush<P>>,
    stats: Arc<BatchStats>,
}

/// A handle on one destination's batcher. The task stops when the last handle is dropped.
pub struct Batcher<P: Send + 'static> {
    inner: Arc<Inner<P>>,
}

impl<P: Send + 'static> Drop for Batcher<P> {
    fn drop(&mut self) {
        self.inner.lock().closed = true;
        self.inner.wake.notify_one();
    }
}

impl<P: Send + 'static> Inner<P> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue<P>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<P: Send + 'static> Batcher<P> {
    /// Starts the batcher task on the current runtime.
    pub fn start(cfg: BatchConfig, flusher: Arc<dyn Flush<P>>, stats: Arc<BatchStats>) -> Self {
        let cfg = BatchConfig {
            max_entries: cfg.max_entries.max(1),
            max_inflight: cfg.max_inflight.max(1),
            ..cfg
        };
        let inner = Arc::new(Inner {
            cfg,
            queue: Mutex::new(Queue {
                tenants: HashMap::new(),
                order: VecDeque::new(),
                groups: HashMap::new(),
                busy: HashSet::new(),
                entries: 0,
                bytes: 0,
                next_seq: 0,
                closed: false,
            }),
            wake: Notify::new(),
            inflight: Arc::new(Semaphore::new(cfg.max_inflight)),
            flusher,
            stats,
        });
        tokio::spawn(run(inner.clone()));
        Batcher { inner }
    }

    pub fn stats(&self) -> &Arc<BatchStats> {
        &self.inner.stats
    }

    /// `(entries, bytes)` waiting.
    pub fn queued(&self) -> (usize, u64) {
        let q = self.inner.lock();
        (q.entries, q.bytes)
    }

    /// Queues one entry and waits for its own result.
    pub async fn submit(
        &self,
        payload: P,
        bytes: u64,
        tenant: &str,
        group: Option<String>,
        attempt: u32,
    ) -> Result<(), SinkError> {
        let rx = {
            let mut q = self.inner.lock();
            let cfg = &self.inner.cfg;
            let refuse = |reason: &str| SinkError::RetryAfter {
                ms: full_jitter(attempt),
                reason: format!("batch_queue_full: {reason}"),
            };
            if q.entries >= cfg.queue_max {
                self.inner
                    .stats
                    .refused_entries
                    .fetch_add(1, Ordering::Relaxed);
                return Err(refuse("entries"));
            }
            if q.bytes + bytes > cfg.queue_max_bytes {
                self.inner
                    .stats
                    .refused_bytes
                    .fetch_add(1, Ordering::Relaxed);
                return Err(refuse("bytes"));
            }
            if q.tenants.get(tenant).map_or(0, VecDeque::len) >= cfg.tenant_max {
                self.inner
                    .stats
                    .refused_tenant
                    .fetch_add(1, Ordering::Relaxed);
                return Err(refuse("tenant"));
            }
            let (tx, rx) = oneshot::channel();
            let seq = q.next_seq;
            q.next_seq += 1;
            if let Some(g) = &group {
                q.groups.entry(g.clone()).or_default().push_back(seq);
            }
            q.entries += 1;
            q.bytes += bytes;
            if !q.tenants.contains_key(tenant) {
                q.order.push_back(tenant.to_string());
            }
            q.tenants
                .entry(tenant.to_string())
                .or_default()
                .push_back(Pending {
                    payload,
                    bytes,
                    group,
                    seq,
                    attempt,
                    arrived: Instant::now(),
                    tx,
                });
            rx
        };
        self.inner.wake.notify_one();
        rx.await.unwrap_or_else(|_| {
            Err(SinkError::Transient(
                "batcher stopped before answering".into(),
            ))
        })
    }
}

async fn run<P: Send + 'static>(inner: Arc<Inner<P>>) {
    loop {
        let (due, closed, empty) = {
            let q = inner.lock();
            let full = q.entries >= inner.cfg.max_entries || q.bytes >= inner.cfg.max_bytes;
            let due = match q.oldest() {
                None => None,
                Some(_) if full || q.closed => Some(Instant::now()),
                Some(t) => Some(t + inner.cfg.linger),
            };
            (due, q.closed, q.entries == 0)
        };
        if closed && empty {
            return;
        }
        match due {
            None => {
                inner.wake.notified().await;
                continue;
            }
            Some(at) if at > Instant::now() => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at.into()) => {}
                    _ = inner.wake.notified() => {}
                }
                continue;
            }
            Some(_) => {}
        }
        let Ok(permit) = inner.inflight.clone().acquire_owned().await else {
            return;
        };
        let batch = inner.lock().take(&inner.cfg, &inner.stats);
        if batch.is_empty() {
            // Everything queued belongs to busy groups (or was abandoned): wait for a request
            // to finish.
            drop(permit);
            inner.wake.notified().await;
            continue;
        }
        let inner2 = inner.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut items = Vec::with_capacity(batch.len());
            let mut settle = Vec::with_capacity(batch.len());
            for p in batch {
                items.push(Item {
                    payload: p.payload,
                    attempt: p.attempt,
                });
                settle.push((p.tx, p.group));
            }
            inner2.stats.requests.fetch_add(1, Ordering::Relaxed);
            inner2
                .stats
                .entries
                .fetch_add(items.len() as u64, Ordering::Relaxed);
            let mut results = inner2.flusher.flush(&items).await;
            results.resize_with(items.len(), || {
                Err(SinkError::Transient(
                    "unexpected_reply: no result for entry".into(),
                ))
            });
            {
                let mut q = inner2.lock();
                for (_, g) in &settle {
                    if let Some(g) = g {
                        q.busy.remove(g);
                    }
                }
            }
            for ((tx, _), r) in settle.into_iter().zip(results) {
                let _ = tx.send(r);
            }
            inner2.wake.notify_one();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Recorder {
        batches: Mutex<Vec<Vec<(String, u32)>>>,
        delay: Duration,
        calls: AtomicUsize,
    }

    impl Flush<(String, u32)> for Recorder {
        fn flush<'a>(
            &'a self,
            items: &'a [Item<(String, u32)>],
        ) -> BoxFuture<'a, Vec<Result<(), SinkError>>> {
            Box::pin(async move {
                self.calls.fetch_add(1, Ordering::SeqCst);
                self.batches
                    .lock()
                    .unwrap()
                    .push(items.iter().map(|i| i.payload.clone()).collect());
                tokio::time::sleep(self.delay).await;
                items
                    .iter()
                    .map(|i| {
                        if i.payload.1 == 13 {
                            Err(SinkError::Permanent("bad".into()))
                        } else {
                            Ok(())
                        }
                    })
                    .collect()
            })
        }
    }

    fn cfg() -> BatchConfig {
        BatchConfig {
            linger: Duration::from_millis(20),
            max_entries: 4,
            max_bytes: 1000,
            queue_max: 100,
            queue_max_bytes: 10_000,
            tenant_max: 50,
            max_inflight: 1,
        }
    }

    fn recorder(delay: u64) -> Arc<Recorder> {
        Arc::new(Recorder {
            batches: Mutex::new(vec![]),
            delay: Duration::from_millis(delay),
            calls: AtomicUsize::new(0),
        })
    }

    #[tokio::test]
    async fn settles_each_entry_and_round_robins_tenants() {
        let rec = recorder(30);
        let b = Arc::new(Batcher::start(cfg(), rec.clone(), Arc::default()));
        let mut tasks = Vec::new();
        for i in 0..3u32 {
            let b = b.clone();
            tasks.push(tokio::spawn(async move {
                b.submit(("a".into(), i), 10, "a", None, 1).await
            }));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        for i in [11u32, 12, 13] {
            let b = b.clone();
            tasks.push(tokio::spawn(async move {
                b.submit(("b".into(), i), 10, "b", None, 1).await
            }));
        }
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        assert!(results[..5].iter().all(Result::is_ok));
        assert!(matches!(results[5], Err(SinkError::Permanent(_))));
        let batches = rec.batches.lock().unwrap().clone();
        assert!(batches.iter().all(|b| b.len() <= 4));
        // The first batch interleaves both tenants instead of four of a's.
        let first: Vec<&str> = batches[0].iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(first, ["a", "b", "a", "b"], "{batches:?}");
    }

    #[tokio::test]
    async fn full_queue_is_refused_with_retry_after() {
        let rec = recorder(200);
        let mut c = cfg();
        c.tenant_max = 2;
        c.queue_max = 3;
        let b = Arc::new(Batcher::start(c, rec.clone(), Arc::default()));
        let mut tasks = Vec::new();
        for i in 0..2u32 {
            let b = b.clone();
            tasks.push(tokio::spawn(async move {
                b.submit(("t".into(), i), 10, "t", None, 1).await
            }));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        let e = b
            .submit(("t".into(), 9), 10, "t", None, 1)
            .await
            .unwrap_err();
        assert!(
            matches!(e, SinkError::RetryAfter { ref reason, .. } if reason == "batch_queue_full: tenant")
        );
        let b2 = b.clone();
        tasks.push(tokio::spawn(async move {
            b2.submit(("u".into(), 1), 10, "u", None, 1).await
        }));
        tokio::time::sleep(Duration::from_millis(2)).await;
        let e = b
            .submit(("v".into(), 1), 10, "v", None, 1)
            .await
            .unwrap_err();
        assert!(
            matches!(e, SinkError::RetryAfter { ref reason, .. } if reason == "batch_queue_full: entries")
        );
        let e = b
            .submit(("w".into(), 1), 20_000, "w", None, 1)
            .await
            .unwrap_err();
        assert!(matches!(e, SinkError::RetryAfter { .. }));
        for t in tasks {
            t.await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn a_group_has_one_request_in_flight_and_keeps_order() {
        let rec = recorder(30);
        let mut c = cfg();
        c.max_inflight = 4;
        c.max_entries = 2;
        let b = Arc::new(Batcher::start(c, rec.clone(), Arc::default()));
        let mut tasks = Vec::new();
        for i in 0..6u32 {
            let b = b.clone();
            let tenant = if i % 2 == 0 { "x" } else { "y" };
            tasks.push(tokio::spawn(async move {
                b.submit((tenant.into(), i), 10, tenant, Some("g".into()), 1)
                    .await
            }));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        let batches = rec.batches.lock().unwrap().clone();
        let flat: Vec<u32> = batches.iter().flatten().map(|(_, i)| *i).collect();
        assert_eq!(flat, [0, 1, 2, 3, 4, 5], "{batches:?}");
    }

    #[tokio::test]
    async fn abandoned_entries_are_not_sent() {
        let rec = recorder(1);
        let mut c = cfg();
        c.linger = Duration::from_millis(50);
        let b = Arc::new(Batcher::start(c, rec.clone(), Arc::default()));
        let b2 = b.clone();
        let gone = tokio::spawn(async move { b2.submit(("t".into(), 1), 10, "t", None, 1).await });
        tokio::time::sleep(Duration::from_millis(5)).await;
        gone.abort();
        b.submit(("t".into(), 2), 10, "t", None, 1).await.unwrap();
        let batches = rec.batches.lock().unwrap().clone();
        assert_eq!(batches, vec![vec![("t".to_string(), 2)]]);
        assert_eq!(b.stats().abandoned.load(Ordering::Relaxed), 1);
    }
}
