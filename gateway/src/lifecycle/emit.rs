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
use std::time::Duration;

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

    /// `lifecycle.count_interval_s` in force; `None` when `lifecycle` is off.
    pub fn count_interval(&self) -> Option<Duration> {
        let live = self.inner.config.live();
        let l = live.config.lifecycle.as_ref()?;
        Some(Duration::from_secs(l.count_interval_s.into()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_config::{Config, LifecycleConfig, LogSinkConfig, SinkConfig};
    use ankusa_sinks::SinkBuilder;

    fn emitter(max_per_minute: Option<u32>) -> (Emitter, mpsc::Receiver<Event>, Arc<Metrics>) {
        let c = Config {
            lifecycle: max_per_minute.map(|m| {
                let mut l =
                    LifecycleConfig::with_sinks(vec![SinkConfig::Log(LogSinkConfig::default())]);
                l.max_per_minute = m;
                l
            }),
            ..Default::default()
        };
        let sinks = Arc::new(SinkBuilder::new());
        let live = Live::build(c, String::new(), 1, &sinks).expect("builds");
        let handle = ConfigHandle::new(live, None, sinks);
        let metrics = Arc::new(Metrics::new());
        let (e, rx) = Emitter::channel(handle, metrics.clone());
        (e, rx, metrics)
    }

    fn ev(kind: EventType) -> Event {
        Event::new(kind, "s", None, json!({}))
    }

    #[test]
    fn the_ceiling_is_per_type_and_per_minute() {
        let (e, mut rx, m) = emitter(Some(2));
        assert!(e.emit(ev(EventType::HookDeadLettered)));
        assert!(e.emit(ev(EventType::HookDeadLettered)));
        assert!(
            !e.emit(ev(EventType::HookDeadLettered)),
            "third of the minute"
        );
        assert!(
            e.emit(ev(EventType::BreakerOpened)),
            "another type has its own"
        );
        assert_eq!(m.lifecycle.dropped.with_label_values(&["rate"]).get(), 1);
        assert!(
            e.admit(EventType::HookDeadLettered, 2, now_ms() + 60_000),
            "next minute"
        );
        let mut n = 0;
        while rx.try_recv().is_ok() {
            n += 1;
        }
        assert_eq!(n, 3);
    }

    #[test]
    fn off_emits_nothing() {
        let (e, mut rx, _) = emitter(None);
        assert!(!e.emit(ev(EventType::SourceCreated)));
        e.count(EventType::QuarantineHeld, "t", "s", 3);
        e.flush_counts(60);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn counts_are_summed_per_interval_and_only_non_zero_ones_emitted() {
        let (e, mut rx, _) = emitter(Some(60));
        e.count(EventType::QuarantineHeld, "acme", "gh", 2);
        e.count(EventType::QuarantineHeld, "acme", "gh", 3);
        e.count(EventType::QuarantineReleased, "acme", "gh", 0);
        e.flush_counts(60);
        let got = rx.try_recv().expect("one event");
        assert_eq!(got.kind, EventType::QuarantineHeld);
        assert_eq!(got.tenant.as_deref(), Some("acme"));
        assert_eq!(got.data["count"], 5);
        assert!(rx.try_recv().is_err(), "nothing for a zero count");
        e.flush_counts(60);
        assert!(rx.try_recv().is_err(), "a new interval starts empty");
    }
}
