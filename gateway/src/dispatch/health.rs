//! The latest delivery failure of each configured sink (a source's sink entry), for
//! `GET /v1/status` and, through it, the operator's Sink status: the error as dispatch wrote it
//! on the row, when, how many attempts in a row failed, and whether the breaker opened.
//!
//! A success clears the sink's entry; so does a reload that removes the sink or changes its
//! config (the failure was of a config no longer in force). Entries are made only for sinks of
//! the running config, so there is at most one per configured sink. The scheduler thread
//! writes; the admin API reads.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use ankusa_api::{MAX_SINK_ERROR_BYTES, SinkFailure};

use crate::live::Live;

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    sink_type: &'static str,
    /// `LiveSource::sink_digests` of the config the failure happened under.
    digest: u64,
    error: String,
    at: u64,
    since: u64,
    failures: u64,
    breaker_open: bool,
}

/// Failing sinks by source id, then sink index.
#[derive(Default)]
pub struct SinkHealth {
    map: Mutex<HashMap<String, HashMap<u16, Entry>>>,
}

/// The sink an attempt went to, as its row names it.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub source: &'a str,
    /// The index in the source's `sinks`.
    pub sink: u16,
    /// The type the row was bound to at ack.
    pub sink_type: &'a str,
}

/// The sink entry `sink` of `source` in `live`, if it has the type the row was bound to:
/// its type name and config digest. A row of another type at that index was delivered to
/// another entry (or none: `sink_gone`), so its outcome says nothing of this one.
fn configured(
    live: &Live,
    source: &str,
    sink: u16,
    sink_type: &str,
) -> Option<(&'static str, u64)> {
    let src = live.source(source)?;
    let i = sink as usize;
    let t = *src.sink_types.get(i)?;
    (t == sink_type).then(|| (t, src.sink_digests.get(i).copied().unwrap_or(0)))
}

/// `s` cut to at most `max` bytes on a character boundary, `…` marking the cut.
pub fn capped(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mark = "…";
    let mut cut = max.saturating_sub(mark.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{mark}", &s[..cut])
}

impl SinkHealth {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, HashMap<u16, Entry>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A delivery to `t` succeeded: its failure, if any, is over.
    pub fn delivered(&self, live: &Live, t: Target) {
        let mut map = self.lock();
        // The common case, on every delivery: nothing is failing.
        if map.is_empty() || configured(live, t.source, t.sink, t.sink_type).is_none() {
            return;
        }
        if let Some(of_source) = map.get_mut(t.source) {
            of_source.remove(&t.sink);
            if of_source.is_empty() {
                map.remove(t.source);
            }
        }
    }

    /// An attempt to deliver to `t` failed with `error` (the row's `last_error`) at `now`;
    /// `breaker_open` is the state of the attempt's breaker after it.
    pub fn failed(&self, live: &Live, t: Target, error: &str, breaker_open: bool, now: u64) {
        let Some((sink_type, digest)) = configured(live, t.source, t.sink, t.sink_type) else {
            return;
        };
        let mut map = self.lock();
        let of_source = map.entry(t.source.to_string()).or_default();
        let e = of_source.entry(t.sink).or_insert_with(|| Entry {
            sink_type,
            digest,
            error: String::new(),
            at: now,
            since: now,
            failures: 0,
            breaker_open: false,
        });
        if e.digest != digest || e.sink_type != sink_type {
            // The sink's config changed since its last failure: a new streak.
            e.digest = digest;
            e.sink_type = sink_type;
            e.since = now;
            e.failures = 0;
        }
        e.failures += 1;
        e.at = now;
        e.error = capped(error, MAX_SINK_ERROR_BYTES);
        e.breaker_open = breaker_open;
    }

    /// Drops the entries of sinks `live` no longer has, or has with another config.
    pub fn retain_configured(&self, live: &Live) {
        let mut map = self.lock();
        map.retain(|source, of_source| {
            of_source.retain(|sink, e| {
                configured(live, source, *sink, e.sink_type) == Some((e.sink_type, e.digest))
            });
            !of_source.is_empty()
        });
    }

    /// The failing sinks of `live`, by source id and sink index.
    pub fn snapshot(&self, live: &Live) -> Vec<SinkFailure> {
        let map = self.lock();
        let mut out = Vec::new();
        for (source, of_source) in map.iter() {
            for (sink, e) in of_source {
                if configured(live, source, *sink, e.sink_type) != Some((e.sink_type, e.digest)) {
                    // Removed or changed by a reload the scheduler has not swept after yet.
                    continue;
                }
                let name = live
                    .source(source)
                    .and_then(|s| s.cfg.sink_names.get(*sink as usize).cloned());
                out.push(SinkFailure {
                    source: source.clone(),
                    sink: *sink,
                    name,
                    sink_type: e.sink_type.to_string(),
                    error: e.error.clone(),
                    at: e.at,
                    since: e.since,
                    failures: e.failures,
                    breaker_open: e.breaker_open,
                });
            }
        }
        out.sort_by(|a, b| (&a.source, a.sink).cmp(&(&b.source, b.sink)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_config::{Config, LogSinkConfig, SinkConfig, SourceConfig};
    use ankusa_sinks::SinkBuilder;

    fn target(source: &str, sink: u16) -> Target<'_> {
        Target {
            source,
            sink,
            sink_type: "log",
        }
    }

    fn live(sources: &[(&str, usize)]) -> Live {
        live_with(sources, |_| {})
    }

    fn live_with(sources: &[(&str, usize)], edit: impl Fn(&mut SourceConfig)) -> Live {
        let mut c = Config::default();
        for (id, n) in sources {
            let mut s =
                SourceConfig::with_sinks(vec![SinkConfig::Log(LogSinkConfig::default()); *n]);
            s.sink_names = (0..*n).map(|i| format!("{id}-sink-{i}")).collect();
            edit(&mut s);
            c.sources.insert(id.to_string(), s);
        }
        Live::build(c, "h".into(), 1, &SinkBuilder::new()).expect("log sinks build")
    }

    #[test]
    fn a_failure_is_recorded_counted_and_named() {
        let l = live(&[("orders", 2)]);
        let h = SinkHealth::default();
        let t = target("orders", 1);
        h.failed(
            &l,
            t,
            "log: not_connected: tcp_connect: refused",
            false,
            1_000,
        );
        h.failed(&l, t, "log: not_connected: auth: denied", true, 2_000);
        let s = h.snapshot(&l);
        assert_eq!(
            s,
            vec![SinkFailure {
                source: "orders".into(),
                sink: 1,
                name: Some("orders-sink-1".into()),
                sink_type: "log".into(),
                error: "log: not_connected: auth: denied".into(),
                at: 2_000,
                since: 1_000,
                failures: 2,
                breaker_open: true,
            }]
        );
    }

    #[test]
    fn a_success_clears_only_its_own_sink() {
        let l = live(&[("a", 2), ("b", 1)]);
        let h = SinkHealth::default();
        h.failed(&l, target("a", 0), "log: x", false, 1);
        h.failed(&l, target("a", 1), "log: y", false, 1);
        h.failed(&l, target("b", 0), "log: z", false, 1);
        h.delivered(&l, target("a", 0));
        let left: Vec<(String, u16)> = h
            .snapshot(&l)
            .into_iter()
            .map(|f| (f.source, f.sink))
            .collect();
        assert_eq!(left, vec![("a".into(), 1), ("b".into(), 0)]);
        h.delivered(&l, target("a", 1));
        h.delivered(&l, target("b", 0));
        assert!(h.snapshot(&l).is_empty());
        assert!(h.lock().is_empty(), "no empty per-source maps left behind");
        // A failure after the success starts a new streak.
        h.failed(&l, target("b", 0), "log: again", false, 9);
        let f = &h.snapshot(&l)[0];
        assert_eq!((f.failures, f.since), (1, 9));
    }

    #[test]
    fn only_configured_sinks_get_an_entry() {
        let l = live(&[("a", 1)]);
        let h = SinkHealth::default();
        h.failed(&l, target("gone", 0), "source_gone: gone", false, 1);
        h.failed(&l, target("a", 3), "sink_gone: 3 log", false, 1);
        let http = Target {
            sink_type: "http",
            ..target("a", 0)
        };
        h.failed(&l, http, "sink_gone: 0 http", false, 1);
        assert!(h.lock().is_empty());
        // Nor does a row of another type clear the sink at its index: it went elsewhere.
        h.failed(&l, target("a", 0), "log: down", false, 1);
        h.delivered(&l, http);
        assert_eq!(h.snapshot(&l).len(), 1);
    }

    #[test]
    fn a_reload_drops_removed_and_changed_sinks() {
        let before = live(&[("a", 2), ("b", 1)]);
        let h = SinkHealth::default();
        for (s, i) in [("a", 0), ("a", 1), ("b", 0)] {
            h.failed(&before, target(s, i), "log: down", false, 1);
        }
        // `b` removed, `a` down to one sink whose config is unchanged.
        let after = live(&[("a", 1)]);
        let shown: Vec<(String, u16)> = h
            .snapshot(&after)
            .into_iter()
            .map(|f| (f.source, f.sink))
            .collect();
        assert_eq!(shown, vec![("a".into(), 0)], "hidden before the sweep");
        h.retain_configured(&after);
        assert_eq!(h.lock().len(), 1);
        assert_eq!(h.lock()["a"].len(), 1);
        // The same sink with another config: the failure was of the old one.
        let changed = live_with(&[("a", 1)], |s| {
            s.sinks = vec![SinkConfig::Log(LogSinkConfig {
                ordered: true,
                ..LogSinkConfig::default()
            })]
        });
        assert!(h.snapshot(&changed).is_empty());
        h.retain_configured(&changed);
        assert!(h.lock().is_empty());
    }

    #[test]
    fn the_error_is_capped_on_a_character_boundary() {
        let l = live(&[("a", 1)]);
        let h = SinkHealth::default();
        let long = format!("log: {}", "é".repeat(600));
        h.failed(&l, target("a", 0), &long, false, 1);
        let e = &h.snapshot(&l)[0].error;
        assert!(e.len() <= MAX_SINK_ERROR_BYTES, "{}", e.len());
        assert!(e.len() > MAX_SINK_ERROR_BYTES - 4);
        assert!(e.starts_with("log: éé") && e.ends_with('…'));
        assert_eq!(capped("short", 512), "short");
        assert_eq!(capped("abcdef", 5), "ab…");
    }
}
