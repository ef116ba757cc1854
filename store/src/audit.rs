//! The lifecycle events' audit trail (`audit` family): every event the gateway builds is
//! appended here, synced, before it is delivered, so what was emitted can be listed
//! (`GET /v1/lifecycle`) and re-emitted (`kind: lifecycle` replays) after a crash. Keys are
//! `<time_ms><seq>` (`keys::audit`): a time window is one range scan, retention deletes from
//! the front. Bounded by age and count (`sweep`), and every scan examines at most
//! `AUDIT_MAX_EXAMINED` keys.
//!
//! The stored value is this module's own record (`AuditEvent`, JSON): the gateway's event
//! types are not the store's to know. Imports `keys` and the store's write path only.

use std::sync::Mutex;

use rocksdb::{Direction, IteratorMode, ReadOptions, WriteBatch};
use serde::{Deserialize, Serialize};

use crate::{Store, StoreError, classify, keys};

/// Keys one page or sweep pass reads at most.
pub const AUDIT_MAX_EXAMINED: usize = 10_000;

/// One event of the trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEvent {
    /// The CloudEvent's `id` (a UUIDv7): also the id of the hook that delivers it.
    pub id: String,
    /// The CloudEvent's `type`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The tenant the event concerns; `None`: node-wide (a config change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Unix milliseconds of the event's `time`.
    pub time_ms: u64,
    /// The whole CloudEvent as delivered (structured mode).
    pub event: serde_json::Value,
}

/// Where a page stopped: the last key it returned. Printed as `<time_ms>.<seq>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditCursor {
    pub time_ms: u64,
    pub seq: u64,
}

impl std::fmt::Display for AuditCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.time_ms, self.seq)
    }
}

impl std::str::FromStr for AuditCursor {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        let (t, q) = s.split_once('.').ok_or(())?;
        Ok(AuditCursor {
            time_ms: t.parse().map_err(|_| ())?,
            seq: q.parse().map_err(|_| ())?,
        })
    }
}

/// What a page selects; every bound optional, combined as AND.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Events at or after this unix ms.
    pub since: Option<u64>,
    /// Events at or before this unix ms.
    pub until: Option<u64>,
    pub event_type: Option<String>,
    /// `Some`: only events of these tenants (node-wide events excluded); `None`: all.
    pub tenants: Option<Vec<String>>,
    /// Resume after this key (a previous page's `next`).
    pub after: Option<AuditCursor>,
}

impl AuditFilter {
    fn matches(&self, e: &AuditEvent) -> bool {
        self.event_type.as_ref().is_none_or(|t| *t == e.event_type)
            && self
                .tenants
                .as_ref()
                .is_none_or(|ts| e.tenant.as_ref().is_some_and(|t| ts.iter().any(|x| x == t)))
    }
}

/// Events in key order (oldest first), and where the next page starts (`None`: the window is
/// read to its end).
#[derive(Debug, Clone, Default)]
pub struct AuditPage {
    pub events: Vec<(AuditCursor, AuditEvent)>,
    pub next: Option<AuditCursor>,
}

/// What one sweep removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditSwept {
    pub expired: u64,
    pub over_count: u64,
}

/// The next audit seq, read from `m:audit_seq` at the first append; appends are serialised
/// by the lock so each seq is used once.
#[derive(Default)]
pub(crate) struct AuditSeq(Mutex<Option<u64>>);

impl Store {
    /// Appends events in one synced write: when it returns they survive a crash.
    pub fn audit_append(&self, events: &[AuditEvent]) -> Result<Vec<AuditCursor>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_AUDIT)?;
        let mut seq = self.audit_seq.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = match *seq {
            Some(n) => n,
            None => db
                .get(keys::META_AUDIT_SEQ)
                .map_err(|e| classify(&e))?
                .and_then(|v| keys::be64(&v))
                .map_or(1, |last| last + 1),
        };
        let mut b = WriteBatch::default();
        let mut at = Vec::with_capacity(events.len());
        for e in events {
            let value = serde_json::to_vec(e).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            b.put_cf(cf, keys::audit(e.time_ms, next), value);
            at.push(AuditCursor {
                time_ms: e.time_ms,
                seq: next,
            });
            next += 1;
        }
        b.put(keys::META_AUDIT_SEQ, (next - 1).to_be_bytes());
        b.merge(keys::C_AUDIT_EVENTS, (events.len() as i64).to_le_bytes());
        self.write(&db, b, true)?;
        *seq = Some(next);
        Ok(at)
    }

    /// Events the trail holds (its counter).
    pub fn audit_count(&self) -> Result<i64, StoreError> {
        self.counter(keys::C_AUDIT_EVENTS)
    }

    /// Up to `limit` events of the window, oldest first, examining at most
    /// `AUDIT_MAX_EXAMINED` keys (a page cut short by that still has a `next`).
    pub fn audit_page(&self, f: &AuditFilter, limit: usize) -> Result<AuditPage, StoreError> {
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_AUDIT)?;
        let start = match f.after {
            Some(c) => keys::audit(c.time_ms, c.seq.saturating_add(1)).to_vec(),
            None => keys::audit(f.since.unwrap_or(0), 0).to_vec(),
        };
        let mut ro = ReadOptions::default();
        if let Some(until) = f.until {
            ro.set_iterate_upper_bound(keys::audit(until.saturating_add(1), 0).to_vec());
        }
        let mut page = AuditPage::default();
        let mut last = None;
        for (examined, item) in db
            .iterator_cf_opt(cf, ro, IteratorMode::From(&start, Direction::Forward))
            .enumerate()
        {
            let (k, v) = item.map_err(|e| classify(&e))?;
            let Some((time_ms, seq)) = keys::parse_audit(&k) else {
                continue;
            };
            let here = AuditCursor { time_ms, seq };
            if examined >= AUDIT_MAX_EXAMINED || page.events.len() >= limit {
                page.next = last;
                return Ok(page);
            }
            last = Some(here);
            // An unreadable record is skipped, not fatal: the trail is a record, not the
            // obligation (the hook that delivers the event is stored on its own).
            let Ok(e) = serde_json::from_slice::<AuditEvent>(&v) else {
                tracing::warn!(
                    time_ms,
                    seq,
                    "an audit trail record does not decode; skipped"
                );
                continue;
            };
            if f.matches(&e) {
                page.events.push((here, e));
            }
        }
        Ok(page)
    }

    /// Deletes events older than `before_ms`, then the oldest beyond `max_events`, at most
    /// `AUDIT_MAX_EXAMINED` keys per call (the sweeper calls again while a pass was full).
    pub fn audit_sweep(&self, before_ms: u64, max_events: u64) -> Result<AuditSwept, StoreError> {
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_AUDIT)?;
        let held = self.audit_count()?.max(0) as u64;
        let over = held.saturating_sub(max_events);
        let mut b = WriteBatch::default();
        let mut swept = AuditSwept::default();
        for item in db
            .iterator_cf(cf, IteratorMode::Start)
            .take(AUDIT_MAX_EXAMINED)
        {
            let (k, _) = item.map_err(|e| classify(&e))?;
            let time_ms = keys::parse_audit(&k).map_or(0, |(t, _)| t);
            if time_ms < before_ms {
                swept.expired += 1;
            } else if swept.expired + swept.over_count < over {
                swept.over_count += 1;
            } else {
                break;
            }
            b.delete_cf(cf, k);
        }
        let removed = swept.expired + swept.over_count;
        if removed > 0 {
            b.merge(keys::C_AUDIT_EVENTS, (-(removed as i64)).to_le_bytes());
            self.write(&db, b, true)?;
        }
        Ok(swept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::temp_store;

    fn ev(id: &str, t: &str, tenant: Option<&str>, time_ms: u64) -> AuditEvent {
        AuditEvent {
            id: id.into(),
            event_type: t.into(),
            tenant: tenant.map(str::to_string),
            time_ms,
            event: serde_json::json!({"id": id}),
        }
    }

    #[test]
    fn appends_pages_filters_and_sweeps() {
        let (_d, s) = temp_store();
        s.audit_append(&[
            ev("a", "io.ankusa.source.created", None, 1_000),
            ev("b", "io.ankusa.hook.dead_lettered", Some("acme"), 2_000),
            ev("c", "io.ankusa.hook.dead_lettered", Some("beta"), 3_000),
        ])
        .unwrap();
        s.audit_append(&[ev("d", "io.ankusa.source.updated", None, 3_000)])
            .unwrap();
        assert_eq!(s.audit_count().unwrap(), 4);

        let all = s.audit_page(&AuditFilter::default(), 100).unwrap();
        let ids: Vec<_> = all.events.iter().map(|(_, e)| e.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d"]);
        assert!(all.next.is_none());

        let p1 = s.audit_page(&AuditFilter::default(), 2).unwrap();
        assert_eq!(p1.events.len(), 2);
        let p2 = s
            .audit_page(
                &AuditFilter {
                    after: p1.next,
                    ..Default::default()
                },
                2,
            )
            .unwrap();
        let ids: Vec<_> = p2.events.iter().map(|(_, e)| e.id.as_str()).collect();
        assert_eq!(ids, ["c", "d"]);

        let window = AuditFilter {
            since: Some(2_000),
            until: Some(2_999),
            ..Default::default()
        };
        let ids: Vec<_> = s
            .audit_page(&window, 10)
            .unwrap()
            .events
            .into_iter()
            .map(|(_, e)| e.id)
            .collect();
        assert_eq!(ids, ["b"]);
        let acme = AuditFilter {
            tenants: Some(vec!["acme".into()]),
            ..Default::default()
        };
        let ids: Vec<_> = s
            .audit_page(&acme, 10)
            .unwrap()
            .events
            .into_iter()
            .map(|(_, e)| e.id)
            .collect();
        assert_eq!(ids, ["b"], "node-wide events are not a tenant's");

        let swept = s.audit_sweep(1_500, 100_000).unwrap();
        assert_eq!(
            swept,
            AuditSwept {
                expired: 1,
                over_count: 0
            }
        );
        let swept = s.audit_sweep(0, 2).unwrap();
        assert_eq!(
            swept,
            AuditSwept {
                expired: 0,
                over_count: 1
            }
        );
        let ids: Vec<_> = s
            .audit_page(&AuditFilter::default(), 10)
            .unwrap()
            .events
            .into_iter()
            .map(|(_, e)| e.id)
            .collect();
        assert_eq!(ids, ["c", "d"]);
        assert_eq!(s.audit_count().unwrap(), 2);
        let c: AuditCursor = "3000.4".parse().unwrap();
        assert_eq!(c.to_string(), "3000.4");
    }

    #[test]
    fn a_store_made_before_the_trail_gains_it_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        {
            let db = rocksdb::DB::open_cf_descriptors(
                &crate::db_options(),
                &path,
                crate::cf_descriptors(true, false),
            )
            .unwrap();
            assert!(db.cf_handle(keys::CF_AUDIT).is_none());
        }
        // Read-only, it opens without the family (and without creating it).
        drop(Store::open_read_only(&path).unwrap());
        let s = Store::open(&path).unwrap();
        s.audit_append(&[ev("a", "t", None, 5)]).unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        assert_eq!(
            s.audit_page(&AuditFilter::default(), 10)
                .unwrap()
                .events
                .len(),
            1
        );
        // Seqs resume above the last one used.
        let at = s.audit_append(&[ev("b", "t", None, 5)]).unwrap();
        assert_eq!(at[0].seq, 2);
    }
}
