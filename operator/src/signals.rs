//! What the operator remembers between two polls of a Gateway's pods to turn their reports into
//! a few aggregated Kubernetes Events instead of one per hook, per pod or per poll:
//!
//! - [`DlqWatch`]: the pods' dead-letter queues. A `DeadLetterBurst` when, summed over the
//!   pods, at least [`DLQ_BURST_ROWS`] rows were added within one [`DLQ_BURST_WINDOW`]
//!   (tumbling windows), and then at most one per window: growth while the window after an
//!   Event is open accumulates into the next one. Each pod is measured against its own
//!   baseline, so a pod that does not answer, or comes back, or is replaced (new uid: a
//!   restored volume) never looks like a burst; a DLQ that shrank (replayed, purged) lowers
//!   the baseline.
//! - [`BreakerWatch`]: each Sink's circuit breakers across the pods. One change per transition
//!   of the whole Gateway: open on no pod → open on some (`Opened`, with how many of how
//!   many), open on some → on none (`Closed`). A pod that did not answer keeps what it said
//!   last, so a missed poll is no transition.
//!
//! The memory is the operator's own (a restart forgets it: a breaker still open is announced
//! once more, a burst under way is measured from the first poll after the restart) and
//! bounded: one entry per Gateway, per pod and per Sink that exists. Pure: time is passed in.
//!
//! May import: `std` only. `context` holds the [`Memory`]; the Gateway controller feeds it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Rows added to a Gateway's DLQs (all pods together) within a window that make a burst.
pub const DLQ_BURST_ROWS: i64 = 100;
/// The window of [`DLQ_BURST_ROWS`], and the least time between two `DeadLetterBurst` Events
/// of one Gateway.
pub const DLQ_BURST_WINDOW: Duration = Duration::from_secs(300);

/// One pod's DLQ as one poll saw it.
#[derive(Debug, Clone, Copy)]
pub struct PodDlq<'a> {
    pub pod: &'a str,
    pub uid: Option<&'a str>,
    /// Dead rows it reported; `None`: it did not answer (or reports no DLQ).
    pub rows: Option<i64>,
}

/// A burst of dead letters on a Gateway's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Burst {
    /// Rows added since the window opened (or since the last Event).
    pub added: i64,
    /// Over how long.
    pub over: Duration,
    /// The pods that added rows, most first: (pod, rows added).
    pub pods: Vec<(String, i64)>,
    /// Dead rows on the pods that answered, now.
    pub total: i64,
}

/// The DLQ side of a Gateway's memory.
#[derive(Debug, Default)]
pub struct DlqWatch {
    /// Pod → (uid, rows at the window's start).
    baseline: BTreeMap<String, (Option<String>, i64)>,
    /// When the current window opened.
    since: Option<Instant>,
    /// When the last burst was announced.
    last_event: Option<Instant>,
}

impl DlqWatch {
    /// One poll of every pod of the Gateway: the burst to announce, if any.
    pub fn observe(&mut self, pods: &[PodDlq], now: Instant) -> Option<Burst> {
        let since = *self.since.get_or_insert(now);
        self.baseline
            .retain(|name, _| pods.iter().any(|p| p.pod == name.as_str()));
        let mut grown: Vec<(String, i64)> = Vec::new();
        for p in pods {
            let Some(rows) = p.rows else {
                continue;
            };
            match self.baseline.get_mut(p.pod) {
                Some((uid, base)) if uid.as_deref() == p.uid => {
                    if rows < *base {
                        *base = rows;
                    } else if rows > *base {
                        grown.push((p.pod.to_string(), rows - *base));
                    }
                }
                _ => {
                    self.baseline
                        .insert(p.pod.to_string(), (p.uid.map(String::from), rows));
                }
            }
        }
        let quiet = self
            .last_event
            .is_some_and(|t| now.saturating_duration_since(t) < DLQ_BURST_WINDOW);
        if quiet {
            return None;
        }
        let added: i64 = grown.iter().map(|(_, n)| n).sum();
        if added >= DLQ_BURST_ROWS {
            self.rebase(pods, now);
            self.last_event = Some(now);
            grown.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            return Some(Burst {
                added,
                over: now.saturating_duration_since(since),
                pods: grown,
                total: pods.iter().filter_map(|p| p.rows).sum(),
            });
        }
        if now.saturating_duration_since(since) >= DLQ_BURST_WINDOW {
            // Slower than a burst: the next window measures from here.
            self.rebase(pods, now);
        }
        None
    }

    fn rebase(&mut self, pods: &[PodDlq], now: Instant) {
        for p in pods {
            if let Some(rows) = p.rows {
                self.baseline
                    .insert(p.pod.to_string(), (p.uid.map(String::from), rows));
            }
        }
        self.since = Some(now);
    }
}

/// A Sink's breakers changed state across the Gateway's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakerChange {
    /// Open on no pod before, on `open_on` of the Gateway's `pods` now.
    Opened {
        sink: String,
        open_on: usize,
        pods: usize,
    },
    /// Open on some pod before, on none now.
    Closed { sink: String },
}

/// The breaker side of a Gateway's memory: Sink → the pods its breaker is open on.
#[derive(Debug, Default)]
pub struct BreakerWatch {
    open: BTreeMap<String, BTreeSet<String>>,
}

impl BreakerWatch {
    /// One poll of every pod of the Gateway: each pod with the Sinks whose breaker it reports
    /// open, `None` when it did not answer. The transitions, in Sink order.
    pub fn observe(&mut self, pods: &[(&str, Option<BTreeSet<String>>)]) -> Vec<BreakerChange> {
        let mut now_open: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (pod, report) in pods {
            match report {
                Some(sinks) => {
                    for s in sinks {
                        now_open
                            .entry(s.clone())
                            .or_default()
                            .insert(pod.to_string());
                    }
                }
                None => {
                    for (s, on) in &self.open {
                        if on.contains(*pod) {
                            now_open
                                .entry(s.clone())
                                .or_default()
                                .insert(pod.to_string());
                        }
                    }
                }
            }
        }
        let mut changes: Vec<BreakerChange> = now_open
            .iter()
            .filter(|(s, _)| !self.open.contains_key(*s))
            .map(|(s, on)| BreakerChange::Opened {
                sink: s.clone(),
                open_on: on.len(),
                pods: pods.len(),
            })
            .collect();
        changes.extend(
            self.open
                .keys()
                .filter(|s| !now_open.contains_key(*s))
                .map(|s| BreakerChange::Closed { sink: s.clone() }),
        );
        changes.sort_by(|a, b| change_sink(a).cmp(change_sink(b)));
        self.open = now_open;
        changes
    }
}

fn change_sink(c: &BreakerChange) -> &str {
    match c {
        BreakerChange::Opened { sink, .. } | BreakerChange::Closed { sink } => sink,
    }
}

/// What the operator remembers of one Gateway.
#[derive(Debug, Default)]
pub struct GatewaySignals {
    pub dlq: DlqWatch,
    pub breakers: BreakerWatch,
}

/// The memory of every Gateway, by `namespace/name`.
#[derive(Debug, Default)]
pub struct Memory {
    gateways: HashMap<String, GatewaySignals>,
}

impl Memory {
    /// The memory of one Gateway (new if it had none).
    pub fn gateway(&mut self, key: &str) -> &mut GatewaySignals {
        self.gateways.entry(key.to_string()).or_default()
    }

    /// Forgets a Gateway (deleted).
    pub fn forget(&mut self, key: &str) {
        self.gateways.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dlq<'a>(rows: &[(&'a str, Option<i64>)]) -> Vec<PodDlq<'a>> {
        rows.iter()
            .map(|(pod, rows)| PodDlq {
                pod,
                uid: Some("u"),
                rows: *rows,
            })
            .collect()
    }

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn a_burst_is_announced_once_per_window_with_its_count() {
        let t0 = Instant::now();
        let mut w = DlqWatch::default();
        assert_eq!(
            w.observe(&dlq(&[("gw-0", Some(10)), ("gw-1", Some(5))]), t0),
            None
        );
        // 60 + 30 rows in a minute: not yet.
        assert_eq!(
            w.observe(&dlq(&[("gw-0", Some(70)), ("gw-1", Some(35))]), t0 + MIN),
            None
        );
        // 10 more: 100 over both pods, one Event.
        let b = w
            .observe(
                &dlq(&[("gw-0", Some(80)), ("gw-1", Some(35))]),
                t0 + 2 * MIN,
            )
            .expect("a burst");
        assert_eq!(b.added, 100);
        assert_eq!(b.over, 2 * MIN);
        assert_eq!(b.pods, vec![("gw-0".into(), 70), ("gw-1".into(), 30)]);
        assert_eq!(b.total, 115);
        // A thousand more in the same window: counted, not announced.
        for i in 3..7 {
            assert_eq!(
                w.observe(
                    &dlq(&[("gw-0", Some(80 + 250 * (i - 2))), ("gw-1", Some(35))]),
                    t0 + MIN * i as u32
                ),
                None
            );
        }
        // The window after the Event closed: one Event with all of it.
        let b = w
            .observe(
                &dlq(&[("gw-0", Some(1080)), ("gw-1", Some(35))]),
                t0 + 7 * MIN,
            )
            .expect("the next window's burst");
        assert_eq!(b.added, 1000);
        assert_eq!(b.over, 5 * MIN);
        // Nothing more: no Event, ever.
        for i in 8..30 {
            assert_eq!(
                w.observe(
                    &dlq(&[("gw-0", Some(1080)), ("gw-1", Some(35))]),
                    t0 + MIN * i
                ),
                None
            );
        }
    }

    #[test]
    fn slow_growth_a_silent_pod_and_a_replaced_pod_are_no_burst() {
        let t0 = Instant::now();
        let mut w = DlqWatch::default();
        w.observe(&dlq(&[("gw-0", Some(0)), ("gw-1", Some(500))]), t0);
        // 60 rows every window: never 100 within one.
        for i in 1..=4u32 {
            let rows = i64::from(i) * 60;
            assert_eq!(
                w.observe(
                    &dlq(&[("gw-0", Some(rows)), ("gw-1", Some(500))]),
                    t0 + 5 * MIN * i
                ),
                None,
                "window {i}"
            );
        }
        // gw-1 does not answer, then answers with what it had: no growth.
        let t = t0 + 21 * MIN;
        assert_eq!(
            w.observe(&dlq(&[("gw-0", Some(240)), ("gw-1", None)]), t),
            None
        );
        assert_eq!(
            w.observe(&dlq(&[("gw-0", Some(240)), ("gw-1", Some(500))]), t + MIN),
            None
        );
        // gw-1 replaced (new uid, restored with more rows): a new baseline, no burst.
        let mut pods = dlq(&[("gw-0", Some(240)), ("gw-1", Some(5000))]);
        pods[1].uid = Some("v");
        assert_eq!(w.observe(&pods, t + 2 * MIN), None);
        // A replay drains gw-0, then it dead-letters 100 again: measured from the low.
        assert_eq!(w.observe(&pods_at(0, 5000), t + 3 * MIN), None);
        let b = w.observe(&pods_at(100, 5000), t + 4 * MIN).expect("burst");
        assert_eq!((b.added, b.pods.len()), (100, 1));
    }

    fn pods_at(gw0: i64, gw1: i64) -> Vec<PodDlq<'static>> {
        vec![
            PodDlq {
                pod: "gw-0",
                uid: Some("u"),
                rows: Some(gw0),
            },
            PodDlq {
                pod: "gw-1",
                uid: Some("v"),
                rows: Some(gw1),
            },
        ]
    }

    fn open(sinks: &[&str]) -> Option<BTreeSet<String>> {
        Some(sinks.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn breakers_across_pods_make_one_open_and_one_close() {
        let mut w = BreakerWatch::default();
        assert!(
            w.observe(&[
                ("gw-0", open(&[])),
                ("gw-1", open(&[])),
                ("gw-2", open(&[]))
            ])
            .is_empty()
        );
        // Opens on two pods at once: one change, with the spread.
        assert_eq!(
            w.observe(&[
                ("gw-0", open(&["k"])),
                ("gw-1", open(&["k"])),
                ("gw-2", open(&[]))
            ]),
            vec![BreakerChange::Opened {
                sink: "k".into(),
                open_on: 2,
                pods: 3
            }]
        );
        // Spreads to the third, one closes, one pod does not answer: no change.
        assert!(
            w.observe(&[("gw-0", open(&[])), ("gw-1", None), ("gw-2", open(&["k"]))])
                .is_empty()
        );
        // gw-1 answers: still open on gw-2.
        assert!(
            w.observe(&[
                ("gw-0", open(&[])),
                ("gw-1", open(&[])),
                ("gw-2", open(&["k"]))
            ])
            .is_empty()
        );
        // Closed everywhere: one change; another sink opens in the same poll.
        assert_eq!(
            w.observe(&[
                ("gw-0", open(&["a"])),
                ("gw-1", open(&[])),
                ("gw-2", open(&[]))
            ]),
            vec![
                BreakerChange::Opened {
                    sink: "a".into(),
                    open_on: 1,
                    pods: 3
                },
                BreakerChange::Closed { sink: "k".into() },
            ]
        );
        // The pod holding `a` open is scaled away: closed.
        assert_eq!(
            w.observe(&[("gw-1", open(&[])), ("gw-2", open(&[]))]),
            vec![BreakerChange::Closed { sink: "a".into() }]
        );
    }

    #[test]
    fn memory_is_per_gateway() {
        let mut m = Memory::default();
        let t0 = Instant::now();
        m.gateway("ns/a").dlq.observe(&dlq(&[("a-0", Some(0))]), t0);
        m.gateway("ns/b").dlq.observe(&dlq(&[("b-0", Some(0))]), t0);
        assert!(
            m.gateway("ns/a")
                .dlq
                .observe(&dlq(&[("a-0", Some(100))]), t0 + MIN)
                .is_some()
        );
        assert!(
            m.gateway("ns/b")
                .dlq
                .observe(&dlq(&[("b-0", Some(99))]), t0 + MIN)
                .is_none()
        );
        m.forget("ns/a");
        assert!(
            m.gateway("ns/a")
                .dlq
                .observe(&dlq(&[("a-0", Some(500))]), t0 + 2 * MIN)
                .is_none()
        );
    }
}
