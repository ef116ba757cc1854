//! The emitter every producer of events holds (the config reload, dispatch's dead letters and
//! breakers, the replayer, the pen): `emit` is synchronous and never blocks or fails its
//! caller. It drops an event when `lifecycle` is off, when its type is over
//! `lifecycle.max_per_minute` in the current minute (the ceiling that keeps an outage from
//! becoming an event storm), or when the writer's queue is full, counting each in
//! `ankusa_lifecycle_dropped_total{reason}`. Counts (`count`) are summed per interval and
//! emitted by `flush_counts` as one event per key and interval, only when non-zero.
//!
//! Imports `live` (whether `lifecycle` is on, its ceiling), `metrics` and `event`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use ankusa_core::now_ms;
use serde_json::json;
use tokio::sync::mpsc;

use super::event::{Event, EventType};
use crate::live::{ConfigHandle, Live};
use crate::metrics::Metrics;

/// Events waiting for the writer at most; past it they are dropped (`queue_full`).
pub const QUEUE: usize = 10_000;

/// What is summed per interval instead of emitted one by one: (type, tenant, source).
type CountKey = (EventType, String, String);

struct Inner {
    tx: mpsc::Sender<Event>,
    config: Arc<ConfigHandle>,
    metrics: Arc<Metrics>,
    /// Per type: the minute (unix ms / 60 000) and the events built in it.
    window: Mutex<HashMap<EventType, (u64, u32)>>,
    counts: Mutex<BTreeMap<CountKey, u64>>,
}

/// A cheap handle (clone it freely) onto the lifecycle writer's queue.
#[derive(Clone)]
pub struct Emitter {
    inner: Arc<Inner>,
}

impl Emitter {
    /// An emitter and the queue its writer reads (`writer::spawn`).
    pub fn channel(
        config: Arc<ConfigHandle>,
        metrics: Arc<Metrics>,
    ) -> (Emitter, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let inner = Inner {
            tx,
            config,
            metrics,
            window: Mutex::new(HashMap::new()),
            counts: Mutex::new(BTreeMap::new()),
        };
        (
            Emitter {
                inner: Arc::new(inner),
            },
            rx,
        )
    }

    /// Whether `lifecycle` is on in the config in force.
    pub fn enabled(&self) -> bool {
        self.inner.config.live().config.lifecycle.is_some()
    }

    /// Queues `e` for the trail and delivery; `false` when it was dropped (and counted).
    pub fn emit(&self, e: Event) -> bool {
        self.emit_in(&self.inner.config.live(), e)
    }

    /// `emit` under the config of `live` (a reload emits under the config it installs, before
    /// that config is in force).
    pub fn emit_in(&self, live: &Live, e: Event) -> bool {
        let Some(l) = &live.config.lifecycle else {
            return false;
        };
        if !self.admit(e.kind, l.max_per_minute, now_ms()) {
            self.dropped("rate");
            return false;
        }
        match self.inner.tx.try_send(e) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.dropped("queue_full");
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.dropped("stopped");
                false
            }
        }
    }

    /// Adds `n` to the count of `kind` for (`tenant`, `source`) in the current interval.
    pub fn count(&self, kind: EventType, tenant: &str, source: &str, n: u64) {
        if n == 0 || !self.enabled() {
            return;
        }
        let mut c = self.inner.counts.lock().unwrap_or_else(|p| p.into_inner());
        *c.entry((kind, tenant.to_string(), source.to_string()))
            .or_default() += n;
    }

    /// Emits one event per non-zero count of the interval just ended (`interval_s` long) and
    /// starts the next.
    pub fn flush_counts(&self, interval_s: u64) {
        let taken =
            std::mem::take(&mut *self.inner.counts.lock().unwrap_or_else(|p| p.into_inner()));
        for ((kind, tenant, source), count) in taken {
            self.emit(Event::new(
                kind,
                source.clone(),
                Some(tenant.clone()),
                json!({"tenant": tenant, "source": source, "count": count, "interval_s": interval_s}),
            ));
        }
    }

    /// The per-type ceiling: a fixed one-minute window per type.
    fn admit(&self, kind: EventType, max_per_minute: u32, now: u64) -> bool {
        let minute = now / 60_000;
        let mut w = self.inner.window.lock().unwrap_or_else(|p| p.into_inner());
        let slot = w.entry(kind).or_insert((minute, 0));
        if slot.0 != minute {
            *slot = (minute, 0);
        }
        if slot.1 >= max_per_minute {
            return false;
        }
        slot.1 += 1;
        true
    }

    fn dropped(&self, reason: &str) {
        self.inner
            .metrics
            .lifecycle
            .dropped
            .with_label_values(&[reason])
            .inc();
    }
}
