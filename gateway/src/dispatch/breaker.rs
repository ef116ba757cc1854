//! Circuit breakers, one per sink key, in the scheduler's memory (a restart closes them all).
//!
//! `breaker_failures` consecutive failures that are not permanent open a breaker; while it is
//! open the key's rows are parked (due again when the period ends, attempts unchanged). The
//! period starts at `breaker_open_ms` and doubles per consecutive open up to
//! `breaker_max_open_ms`; then one attempt runs as a probe: success (or a permanent answer)
//! closes the breaker, failure reopens it for longer. An opening and a closing are also
//! lifecycle events (`io.ankusa.sink.breaker_opened|closed`), except the lifecycle source's own.

use std::collections::HashMap;

use ankusa_config::DispatchConfig;
use ankusa_core::SinkError;

use super::SinkKey;
use crate::lifecycle::{Emitter, Event, EventType};
use crate::live::LIFECYCLE_SOURCE;
use crate::metrics::Metrics;

/// What the scheduler may do with a key's next row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Run it.
    Run,
    /// Run it as the half-open probe; no other attempt of the key runs meanwhile.
    Probe,
    /// A probe is in flight: keep the row queued.
    Wait,
    /// Open: park the row until `until` (unix ms).
    Park { until: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Closed,
    Open { until: u64 },
    HalfOpen { probing: bool },
}

/// A state change, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Opened { period_ms: u64 },
    HalfOpened,
    Closed,
}

#[derive(Debug, Clone)]
pub struct Breaker {
    pub state: State,
    failures: u32,
    /// Opens since the breaker was last closed by a success.
    opens: u32,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            state: State::Closed,
            failures: 0,
            opens: 0,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// 0 disables breakers.
    pub failures: u32,
    pub open_ms: u64,
    pub max_open_ms: u64,
}

impl Breaker {
    /// Whether the key's next row may run now, with `running` attempts of the key in flight.
    /// A closed breaker with failures counted lets at most as many attempts run as could still
    /// be failures before it opens (`threshold` - failures): attempts started before the
    /// failure that opens it would otherwise all reach a receiver that is already failing.
    pub fn gate(&mut self, now: u64, running: u32, threshold: u32) -> (Gate, Option<Transition>) {
        match self.state {
            State::Closed
                if threshold > 0
                    && self.failures > 0
                    && self.failures.saturating_add(running) >= threshold =>
            {
                (Gate::Wait, None)
            }
            State::Closed => (Gate::Run, None),
            State::Open { until } if now < until => (Gate::Park { until }, None),
            State::Open { .. } => {
                self.state = State::HalfOpen { probing: true };
                (Gate::Probe, Some(Transition::HalfOpened))
            }
            State::HalfOpen { probing: true } => (Gate::Wait, None),
            State::HalfOpen { probing: false } => {
                self.state = State::HalfOpen { probing: true };
                (Gate::Probe, None)
            }
        }
    }

    /// Records an attempt's result. `permanent` failures do not count towards opening.
    pub fn record(
        &mut self,
        s: Settings,
        ok: bool,
        permanent: bool,
        was_probe: bool,
        now: u64,
    ) -> Option<Transition> {
        if s.failures == 0 {
            self.state = State::Closed;
            return None;
        }
        if ok || (permanent && was_probe) {
            let was_closed = self.state == State::Closed;
            self.state = State::Closed;
            self.failures = 0;
            self.opens = 0;
            return (!was_closed).then_some(Transition::Closed);
        }
        if permanent {
            return None;
        }
        match self.state {
            State::HalfOpen { .. } if was_probe => Some(self.open(s, now)),
            State::Closed => {
                self.failures += 1;
                (self.failures >= s.failures).then(|| self.open(s, now))
            }
            // A failure of an attempt that started before the breaker opened.
            _ => None,
        }
    }

    fn open(&mut self, s: Settings, now: u64) -> Transition {
        self.opens += 1;
        let period = s
            .open_ms
            .saturating_mul(1u64 << (self.opens - 1).min(30))
            .min(s.max_open_ms.max(s.open_ms));
        self.state = State::Open {
            until: now + period,
        };
        self.failures = 0;
        Transition::Opened { period_ms: period }
    }

    pub fn is_open(&self) -> bool {
        !matches!(self.state, State::Closed)
    }

    /// Closed but with failures counted towards opening.
    pub fn failing(&self) -> bool {
        self.failures > 0
    }
}

/// The breakers of every sink key that has one open or failures counted.
#[derive(Default)]
pub struct Breakers {
    map: HashMap<SinkKey, Breaker>,
    /// Where openings and closings go as lifecycle events.
    events: Option<Emitter>,
}

impl Breakers {
    pub fn with_events(events: Option<Emitter>) -> Breakers {
        Breakers {
            map: HashMap::new(),
            events,
        }
    }

    /// Whether `key`'s next row may run now, `running` of its attempts in flight; a state
    /// change is logged and counted.
    pub fn gate(
        &mut self,
        key: &SinkKey,
        now: u64,
        running: u32,
        d: &DispatchConfig,
        m: &Metrics,
    ) -> Gate {
        let (gate, transition) =
            self.map
                .entry(key.clone())
                .or_default()
                .gate(now, running, d.breaker_failures);
        if let Some(tr) = transition {
            note(m, self.events.as_ref(), key, tr);
        }
        gate
    }

    /// Records an attempt's result against `key`'s breaker.
    pub fn record(
        &mut self,
        key: &SinkKey,
        d: &DispatchConfig,
        result: &Result<(), SinkError>,
        was_probe: bool,
        now: u64,
        m: &Metrics,
    ) {
        let ok = result.is_ok();
        let permanent = result.as_ref().err().is_some_and(SinkError::is_permanent);
        let settings = Settings {
            failures: d.breaker_failures,
            open_ms: d.breaker_open_ms,
            max_open_ms: d.breaker_max_open_ms,
        };
        let transition = self
            .map
            .entry(key.clone())
            .or_default()
            .record(settings, ok, permanent, was_probe, now);
        if let Some(tr) = transition {
            note(m, self.events.as_ref(), key, tr);
        }
    }

    /// When `key`'s breaker lets no attempt start now, the unix ms it may again: the end of
    /// the open period, or a second from now while a probe is in flight.
    pub fn blocked(&self, key: &SinkKey, now: u64) -> Option<u64> {
        match self.map.get(key)?.state {
            State::Open { until } if now < until => Some(until),
            State::HalfOpen { probing: true } => Some(now.saturating_add(1_000)),
            _ => None,
        }
    }

    /// Whether `key`'s breaker is open or half-open.
    pub fn is_open(&self, key: &SinkKey) -> bool {
        self.map.get(key).is_some_and(Breaker::is_open)
    }

    /// Forgets closed breakers with nothing counted; returns how many are open.
    pub fn sweep(&mut self) -> usize {
        self.map.retain(|_, b| b.is_open() || b.failing());
        self.map.values().filter(|b| b.is_open()).count()
    }
}

fn note(m: &Metrics, events: Option<&Emitter>, key: &SinkKey, tr: Transition) {
    if let Some(ev) = events
        && key.source != LIFECYCLE_SOURCE
    {
        let kind = match tr {
            Transition::Opened { .. } => Some(EventType::BreakerOpened),
            Transition::Closed => Some(EventType::BreakerClosed),
            Transition::HalfOpened => None,
        };
        if let Some(kind) = kind {
            let period_ms = match tr {
                Transition::Opened { period_ms } => Some(period_ms),
                _ => None,
            };
            ev.emit(Event::new(
                kind,
                format!("{}/sinks[{}]", key.source, key.sink),
                Some(key.tenant.clone()),
                serde_json::json!({
                    "tenant": key.tenant,
                    "source": key.source,
                    "sink": key.sink,
                    "sink_type": key.sink_type,
                    "period_ms": period_ms,
                }),
            ));
        }
    }
    let to = match tr {
        Transition::Opened { period_ms } => {
            tracing::warn!(
                tenant = %key.tenant, source = %key.source, sink = key.sink, sink_type = %key.sink_type,
                period_ms, "circuit breaker opened: parking this sink's deliveries"
            );
            "open"
        }
        Transition::HalfOpened => {
            tracing::info!(tenant = %key.tenant, source = %key.source, sink = key.sink, "circuit breaker half-open: probing");
            "half_open"
        }
        Transition::Closed => {
            tracing::info!(tenant = %key.tenant, source = %key.source, sink = key.sink, "circuit breaker closed");
            "closed"
        }
    };
    m.dispatch
        .breaker_transitions
        .with_label_values(&[to])
        .inc();
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Settings = Settings {
        failures: 3,
        open_ms: 1_000,
        max_open_ms: 3_000,
    };

    #[test]
    fn opens_after_n_failures_then_probes_and_closes() {
        let mut b = Breaker::default();
        assert_eq!(b.record(S, false, false, false, 0), None);
        assert_eq!(b.record(S, false, false, false, 0), None);
        assert_eq!(
            b.record(S, false, false, false, 10),
            Some(Transition::Opened { period_ms: 1_000 })
        );
        assert_eq!(b.gate(500, 0, 3).0, Gate::Park { until: 1_010 });
        assert_eq!(
            b.gate(1_010, 0, 3),
            (Gate::Probe, Some(Transition::HalfOpened))
        );
        assert_eq!(b.gate(1_011, 0, 3).0, Gate::Wait, "one probe at a time");
        assert_eq!(
            b.record(S, true, false, true, 1_020),
            Some(Transition::Closed)
        );
        assert_eq!(b.gate(1_021, 0, 3).0, Gate::Run);
    }

    #[test]
    fn a_failing_key_runs_no_more_attempts_than_could_still_fail_before_it_opens() {
        let mut b = Breaker::default();
        assert_eq!(
            b.gate(0, 7, 3).0,
            Gate::Run,
            "no failure counted: the window decides"
        );
        b.record(S, false, false, false, 0);
        assert_eq!(b.gate(1, 1, 3).0, Gate::Run);
        assert_eq!(
            b.gate(1, 2, 3).0,
            Gate::Wait,
            "1 failure + 2 in flight can open it"
        );
        b.record(S, false, false, false, 2);
        assert_eq!(b.gate(3, 0, 3).0, Gate::Run);
        assert_eq!(b.gate(3, 1, 3).0, Gate::Wait);
        assert_eq!(b.gate(3, 5, 0).0, Gate::Run, "breakers off: no limit");
        b.record(S, true, false, false, 4);
        assert_eq!(b.gate(5, 9, 3).0, Gate::Run, "a success clears the count");
    }

    #[test]
    fn a_failed_probe_reopens_for_longer_up_to_the_cap() {
        let mut b = Breaker::default();
        for _ in 0..3 {
            b.record(S, false, false, false, 0);
        }
        let mut now = 1_000;
        let mut periods = Vec::new();
        for _ in 0..4 {
            assert_eq!(b.gate(now, 0, 3).0, Gate::Probe);
            match b.record(S, false, false, true, now) {
                Some(Transition::Opened { period_ms }) => periods.push(period_ms),
                other => panic!("{other:?}"),
            }
            now += 10_000;
        }
        assert_eq!(periods, vec![2_000, 3_000, 3_000, 3_000]);
    }

    #[test]
    fn permanent_failures_do_not_count_and_a_permanent_probe_closes() {
        let mut b = Breaker::default();
        for _ in 0..10 {
            assert_eq!(b.record(S, false, true, false, 0), None);
        }
        assert_eq!(b.state, State::Closed);
        for _ in 0..3 {
            b.record(S, false, false, false, 0);
        }
        assert_eq!(b.gate(2_000, 0, 3).0, Gate::Probe);
        assert_eq!(
            b.record(S, false, true, true, 2_000),
            Some(Transition::Closed)
        );
    }

    #[test]
    fn zero_disables() {
        let s = Settings { failures: 0, ..S };
        let mut b = Breaker::default();
        for _ in 0..100 {
            assert_eq!(b.record(s, false, false, false, 0), None);
        }
        assert_eq!(b.gate(0, 0, 3).0, Gate::Run);
    }
}
