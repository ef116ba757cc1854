//! The dead-letter queue: bounded, newest-first pages over the dead index, and eviction.
//!
//! A page is one reverse range scan: over `x` for all tenants or over `X<tenant>\0` for one,
//! so a tenant page never reads another tenant's keys. No scan examines more than
//! `MAX_EXAMINED` keys; a sparse filter returns a short page with a cursor.

use std::collections::HashSet;

use base64::Engine;
use rocksdb::{IteratorMode, ReadOptions, WriteBatch};
use serde::Serialize;
use uuid::Uuid;

use super::codec::{DeadSummary, DeliveryRow, ErrorClass, RowState};
use super::queue::{count, delete_dead_index};
use super::{Store, StoreError, classify, keys};

/// Most dead keys one scan examines.
pub const MAX_EXAMINED: usize = 10_000;

#[derive(Debug, Clone, Default)]
pub struct DeadFilter {
    pub tenant: Option<String>,
    pub source_id: Option<String>,
    pub sink: Option<u16>,
    pub error_class: Option<ErrorClass>,
    /// Dead-lettered at or after (unix ms).
    pub since: Option<u64>,
    /// Dead-lettered at or before (unix ms).
    pub until: Option<u64>,
    pub hook_id: Option<Uuid>,
}

impl DeadFilter {
    fn matches(&self, s: &DeadSummary) -> bool {
        self.source_id.as_deref().is_none_or(|x| x == s.source_id)
            && self.sink.is_none_or(|x| x == s.sink)
            && self.error_class.is_none_or(|x| x == s.error_class)
            && self.hook_id.is_none_or(|x| x == s.hook_id)
            && self.tenant.as_deref().is_none_or(|x| x == s.tenant)
    }

    fn only_tenant(&self) -> bool {
        self.source_id.is_none()
            && self.sink.is_none()
            && self.error_class.is_none()
            && self.since.is_none()
            && self.until.is_none()
            && self.hook_id.is_none()
    }
}

/// A position in the dead index: (dead_at, seq, sink) of the last key seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadCursor {
    pub dead_at: u64,
    pub seq: u64,
    pub sink: u16,
}

impl DeadCursor {
    pub fn encode(&self) -> String {
        let mut b = [0u8; 18];
        b[..8].copy_from_slice(&self.dead_at.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..].copy_from_slice(&self.sink.to_be_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
    }

    pub fn decode(s: &str) -> Option<DeadCursor> {
        let b = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .ok()?;
        if b.len() != 18 {
            return None;
        }
        Some(DeadCursor {
            dead_at: keys::be64(&b[..8]),
            seq: keys::be64(&b[8..16]),
            sink: u16::from_be_bytes([b[16], b[17]]),
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DeadEntry {
    pub id: Uuid,
    pub seq: u64,
    pub tenant: String,
    pub source_id: String,
    pub sink: u16,
    pub sink_type: String,
    pub error_class: ErrorClass,
    pub reason: Option<String>,
    pub attempts: u32,
    pub dead_at: u64,
    pub first_attempt_at: Option<u64>,
    pub received_at: Option<u64>,
    pub size: u64,
    pub replay_id: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeadPage {
    pub entries: Vec<DeadEntry>,
    pub next_cursor: Option<String>,
    /// Exact where it is free (a counter, or a filtered first page that reached the end).
    pub total: Option<u64>,
    pub examined: usize,
}

/// Bounds of the scan in index keys for a filter: [lower, upper).
fn scan_bounds(f: &DeadFilter, cursor: Option<DeadCursor>) -> (Vec<u8>, Vec<u8>) {
    let since = f.since.unwrap_or(0);
    match &f.tenant {
        Some(t) => {
            let prefix = keys::dead_tenant_prefix(t);
            let lower = keys::dead_tenant(t, since, 0, 0);
            let mut upper = match f.until {
                Some(u) if u < u64::MAX => keys::dead_tenant(t, u + 1, 0, 0),
                _ => keys::prefix_end(&prefix),
            };
            if let Some(c) = cursor {
                upper = upper.min(keys::dead_tenant(t, c.dead_at, c.seq, c.sink));
            }
            (lower, upper)
        }
        None => {
            let lower = keys::dead(since, 0, 0);
            let mut upper = match f.until {
                Some(u) if u < u64::MAX => keys::dead(u + 1, 0, 0),
                _ => vec![keys::IX_DEAD + 1],
            };
            if let Some(c) = cursor {
                upper = upper.min(keys::dead(c.dead_at, c.seq, c.sink));
            }
            (lower, upper)
        }
    }
}

fn parse_any_dead(k: &[u8]) -> Option<(u64, u64, u16)> {
    keys::parse_dead(k).or_else(|| keys::parse_dead_tenant(k).map(|(_, a, s, k)| (a, s, k)))
}

impl Store {
    /// One page of dead rows, newest first.
    pub fn list_dead(
        &self,
        f: &DeadFilter,
        cursor: Option<DeadCursor>,
        limit: usize,
    ) -> Result<DeadPage, StoreError> {
        let db = self.db()?;
        let index = Self::cf(&db, keys::CF_INDEX)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let hooks = Self::cf(&db, keys::CF_HOOKS)?;
        let (lower, upper) = scan_bounds(f, cursor);
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(lower);
        ro.set_iterate_upper_bound(upper);
        let it = db.iterator_cf_opt(&index, ro, IteratorMode::End);

        let mut entries = Vec::new();
        let mut examined = 0;
        let mut last_key: Option<(u64, u64, u16)> = None;
        let mut reached_end = true;
        let mut matched = 0u64;
        for item in it {
            if entries.len() >= limit || examined >= MAX_EXAMINED {
                reached_end = false;
                break;
            }
            let (k, v) = item.map_err(|e| classify(&e))?;
            examined += 1;
            let Some((dead_at, seq, sink)) = parse_any_dead(&k) else {
                continue;
            };
            last_key = Some((dead_at, seq, sink));
            let summary = DeadSummary::decode(&v)?;
            if !f.matches(&summary) {
                continue;
            }
            let row = match db
                .get_pinned_cf(&deliveries, keys::delivery(seq, sink))
                .map_err(|e| classify(&e))?
            {
                Some(v) => DeliveryRow::decode(&v)?,
                None => continue,
            };
            if row.state != RowState::Dead {
                continue;
            }
            matched += 1;
            let received_at = match db
                .get_pinned_cf(&hooks, keys::hook(seq))
                .map_err(|e| classify(&e))?
            {
                Some(v) => super::codec::decode_envelope(seq, &v)
                    .ok()
                    .map(|h| h.received_at),
                None => None,
            };
            entries.push(DeadEntry {
                id: summary.hook_id,
                seq,
                tenant: summary.tenant,
                source_id: summary.source_id,
                sink,
                sink_type: summary.sink_type,
                error_class: summary.error_class,
                reason: row.last_error.clone(),
                attempts: row.attempts,
                dead_at,
                first_attempt_at: row.first_attempt_at,
                received_at,
                size: row.size,
                replay_id: row.replay_id.clone(),
            });
        }
        let next_cursor = if reached_end {
            None
        } else {
            last_key.map(|(dead_at, seq, sink)| DeadCursor { dead_at, seq, sink }.encode())
        };
        let total = if f.only_tenant() {
            let key = match &f.tenant {
                Some(t) => keys::c_dead_tenant(t),
                None => keys::C_DEAD.to_vec(),
            };
            Some(self.counter(&key)?.max(0) as u64)
        } else if cursor.is_none() && reached_end {
            Some(matched)
        } else {
            None
        };
        Ok(DeadPage {
            entries,
            next_cursor,
            total,
            examined,
        })
    }

    /// Deletes up to `limit` dead rows matching the filter, oldest first; their hooks go with
    /// their last row. Returns (deleted, bytes, more).
    pub fn delete_dead(
        &self,
        f: &DeadFilter,
        limit: usize,
    ) -> Result<(usize, u64, bool), StoreError> {
        let _rows = self.rows_guard();
        let db = self.db()?;
        let index = Self::cf(&db, keys::CF_INDEX)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let (lower, upper) = scan_bounds(f, None);
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(lower.clone());
        ro.set_iterate_upper_bound(upper);
        let it = db.iterator_cf_opt(
            &index,
            ro,
            IteratorMode::From(&lower, rocksdb::Direction::Forward),
        );
        let mut batch = WriteBatch::default();
        let mut deleted_keys = HashSet::new();
        let mut victims = Vec::new();
        let mut stale = 0usize;
        let mut bytes = 0u64;
        let mut more = false;
        let mut examined = 0;
        for item in it {
            let (k, v) = item.map_err(|e| classify(&e))?;
            examined += 1;
            if victims.len() >= limit || examined > MAX_EXAMINED {
                more = true;
                break;
            }
            let Some((_, seq, sink)) = parse_any_dead(&k) else {
                continue;
            };
            let summary = DeadSummary::decode(&v)?;
            if !f.matches(&summary) {
                continue;
            }
            let row = db
                .get_pinned_cf(&deliveries, keys::delivery(seq, sink))
                .map_err(|e| classify(&e))?
                .map(|rv| DeliveryRow::decode(&rv))
                .transpose()?;
            let Some(row) = row.filter(|r| r.state == RowState::Dead) else {
                // A stale index entry (its row is gone, or queued again by a replay), left by
                // a store written before row transitions were serialised: it goes now, so it
                // stops counting against every later scan's bound.
                batch.delete_cf(index, &k);
                stale += 1;
                continue;
            };
            batch.delete_cf(&deliveries, keys::delivery(seq, sink));
            delete_dead_index(&mut batch, index, seq, sink, &row);
            count(&mut batch, &row, 0, -1);
            deleted_keys.insert((seq, sink));
            bytes += row.size;
            victims.push((seq, row));
        }
        let mut checked = HashSet::new();
        for (seq, row) in &victims {
            if checked.insert(*seq) {
                self.delete_hook_if_done(&db, &mut batch, *seq, row, &deleted_keys)?;
            }
        }
        if !victims.is_empty() || stale > 0 {
            self.write(&db, batch, true)?;
        }
        Ok((victims.len(), bytes, more))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::test_util::temp_store;
    use crate::store::{IngestRecord, IngestResult, Outcome};

    /// Ingests `n` hooks for tenant and kills each at dead_at = base + i.
    pub(crate) fn seed_dead(
        s: &Store,
        tenant: &str,
        source: &str,
        n: usize,
        base: u64,
        class: ErrorClass,
    ) {
        let recs: Vec<_> = (0..n)
            .map(|_| IngestRecord {
                envelope: crate::store::ingest_test_envelope(tenant, source),
                sinks: vec!["http"],
                lanes: vec![],
                dedupe: None,
            })
            .collect();
        for r in s.commit_ingest(&recs, 1, false).unwrap() {
            assert!(matches!(r, IngestResult::Accepted { .. }));
        }
        let (claimed, _) = s.claim_due(tenant, 1, n, u64::MAX).unwrap();
        let outcomes: Vec<_> = claimed
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut row = c.row.clone();
                row.dead_at = Some(base + i as u64);
                row.error_class = Some(class);
                row.last_error = Some("boom".into());
                Outcome::Dead {
                    seq: c.seq,
                    sink: c.sink,
                    row,
                }
            })
            .collect();
        s.apply_outcomes(&outcomes, &Default::default()).unwrap();
    }

    #[test]
    fn pages_newest_first_with_cursor_and_totals() {
        let (_d, s) = temp_store();
        seed_dead(&s, "a", "src", 5, 100, ErrorClass::Transient);
        seed_dead(&s, "b", "src", 3, 200, ErrorClass::Permanent);
        let p = s.list_dead(&DeadFilter::default(), None, 4).unwrap();
        assert_eq!(p.total, Some(8));
        assert_eq!(
            p.entries.iter().map(|e| e.dead_at).collect::<Vec<_>>(),
            vec![202, 201, 200, 104]
        );
        let c = DeadCursor::decode(p.next_cursor.as_deref().unwrap()).unwrap();
        let p2 = s.list_dead(&DeadFilter::default(), Some(c), 10).unwrap();
        assert_eq!(p2.entries.len(), 4);
        assert!(p2.next_cursor.is_none());
        let fa = DeadFilter {
            tenant: Some("a".into()),
            ..Default::default()
        };
        let pa = s.list_dead(&fa, None, 100).unwrap();
        assert_eq!(pa.entries.len(), 5);
        assert_eq!(pa.total, Some(5));
        let fp = DeadFilter {
            error_class: Some(ErrorClass::Permanent),
            ..Default::default()
        };
        let pp = s.list_dead(&fp, None, 100).unwrap();
        assert_eq!(pp.entries.len(), 3);
        assert_eq!(pp.total, Some(3));
        let fs = DeadFilter {
            since: Some(103),
            until: Some(200),
            ..Default::default()
        };
        assert_eq!(s.list_dead(&fs, None, 100).unwrap().entries.len(), 3);
    }

    #[test]
    fn one_scan_examines_at_most_ten_thousand_keys() {
        let (_d, s) = temp_store();
        seed_dead(&s, "a", "src", 12_000, 1_000, ErrorClass::Transient);
        // A filter that matches nothing: a short (empty) page with a cursor, not a full scan.
        let f = DeadFilter {
            error_class: Some(ErrorClass::Permanent),
            ..Default::default()
        };
        let p = s.list_dead(&f, None, 100).unwrap();
        assert_eq!(p.examined, MAX_EXAMINED);
        assert!(p.entries.is_empty());
        assert!(
            p.total.is_none(),
            "not free: the scan did not reach the end"
        );
        let c = DeadCursor::decode(p.next_cursor.as_deref().unwrap()).unwrap();
        let p2 = s.list_dead(&f, Some(c), 100).unwrap();
        assert_eq!(p2.examined, 2_000);
        assert!(p2.next_cursor.is_none());
        // The tenant index: a tenant page reads only that tenant's keys.
        seed_dead(&s, "b", "src", 5, 50_000, ErrorClass::Permanent);
        let fb = DeadFilter {
            tenant: Some("b".into()),
            ..Default::default()
        };
        let p = s.list_dead(&fb, None, 100).unwrap();
        assert_eq!((p.entries.len(), p.examined), (5, 5));
    }

    #[test]
    fn delete_drops_stale_index_entries_and_keeps_live_rows() {
        let (_d, s) = temp_store();
        seed_dead(&s, "a", "src", 2, 100, ErrorClass::Transient);
        // A pending row, and index entries that claim it and a missing row are dead.
        let recs = vec![IngestRecord {
            envelope: crate::store::ingest_test_envelope("a", "src"),
            sinks: vec!["http"],
            lanes: vec![],
            dedupe: None,
        }];
        let IngestResult::Accepted { seq: live, .. } = s.commit_ingest(&recs, 1, false).unwrap()[0]
        else {
            panic!("not accepted")
        };
        let summary = DeadSummary {
            tenant: "a".into(),
            source_id: "src".into(),
            sink: 0,
            sink_type: "http".into(),
            error_class: ErrorClass::Transient,
            hook_id: uuid::Uuid::nil(),
        }
        .encode();
        {
            let db = s.db().unwrap();
            let index = Store::cf(&db, keys::CF_INDEX).unwrap();
            let mut b = WriteBatch::default();
            for seq in [live, 999_999] {
                b.put_cf(index, keys::dead(50, seq, 0), &summary);
                b.put_cf(index, keys::dead_tenant("a", 50, seq, 0), &summary);
            }
            s.write(&db, b, true).unwrap();
        }
        let (n, _, more) = s.delete_dead(&DeadFilter::default(), 10).unwrap();
        assert_eq!((n, more), (2, false));
        let all = s.list_dead(&DeadFilter::default(), None, 10).unwrap();
        assert_eq!(
            (all.entries.len(), all.examined),
            (0, 0),
            "global index emptied"
        );
        let fa = DeadFilter {
            tenant: Some("a".into()),
            ..Default::default()
        };
        let (n, _, _) = s.delete_dead(&fa, 10).unwrap();
        assert_eq!(n, 0);
        assert_eq!(
            s.list_dead(&fa, None, 10).unwrap().examined,
            0,
            "tenant index emptied"
        );
        assert_eq!(s.rows_of(live).unwrap().len(), 1, "the pending row stays");
        assert_eq!(s.counter(keys::C_DEAD).unwrap(), 0);
    }

    #[test]
    fn delete_removes_rows_and_hooks() {
        let (_d, s) = temp_store();
        seed_dead(&s, "a", "src", 3, 100, ErrorClass::Transient);
        let (n, _, more) = s.delete_dead(&DeadFilter::default(), 2).unwrap();
        assert_eq!((n, more), (2, true));
        assert_eq!(s.counter(keys::C_DEAD).unwrap(), 1);
        assert_eq!(s.counter(keys::C_HOOKS).unwrap(), 1);
        assert_eq!(
            s.list_dead(&DeadFilter::default(), None, 10)
                .unwrap()
                .entries[0]
                .dead_at,
            102
        );
    }
}

/// One dead row for `Store::bulk_load_dead`.
#[derive(Debug, Clone)]
pub struct DeadSeed {
    pub tenant: String,
    pub source_id: String,
    pub sink: u16,
    pub sink_type: String,
    pub error_class: ErrorClass,
    pub dead_at: u64,
    pub body: bytes::Bytes,
}

impl Store {
    /// Writes dead rows (each with its hook) directly, unsynced and without the WAL, in large
    /// batches: for seeding benchmarks and tests with millions of rows. The keys are exactly the
    /// ones dispatch writes when it dead-letters a row, and counters are kept. Call
    /// `flush` before relying on the rows surviving a crash.
    pub fn bulk_load_dead(&self, rows: &[DeadSeed]) -> Result<(), StoreError> {
        let db = self.db()?;
        let hooks = Self::cf(&db, keys::CF_HOOKS)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let index = Self::cf(&db, keys::CF_INDEX)?;
        let first = self.reserve_seqs(rows.len() as u64);
        let mut batch = WriteBatch::default();
        for (i, r) in rows.iter().enumerate() {
            let seq = first + i as u64;
            let id = Uuid::now_v7();
            let env = super::codec::Envelope {
                id,
                seq,
                received_at: r.dead_at.saturating_sub(1_000),
                tenant: r.tenant.clone(),
                source_id: r.source_id.clone(),
                headers: Vec::new(),
                content_type: Some("application/json".into()),
                verification: super::codec::Verification {
                    status: super::codec::VerifyStatus::Skipped,
                    flagged: false,
                },
                dedupe_key: None,
                traceparent: None,
                tracestate: None,
                body: r.body.clone(),
            };
            batch.put_cf(hooks, keys::hook(seq), super::codec::encode_envelope(&env));
            batch.put_cf(index, keys::hook_id(&id), seq.to_be_bytes());
            let row = DeliveryRow {
                sink_type: r.sink_type.clone(),
                tenant: r.tenant.clone(),
                source_id: r.source_id.clone(),
                hook_id: id,
                size: r.body.len() as u64,
                state: super::codec::RowState::Dead,
                attempts: 1,
                first_attempt_at: Some(r.dead_at.saturating_sub(500)),
                due_at: r.dead_at,
                last_error: Some(format!("{}: permanent: status 410", r.sink_type)),
                error_class: Some(r.error_class),
                dead_at: Some(r.dead_at),
                replay_id: None,
                lane: None,
            };
            batch.put_cf(deliveries, keys::delivery(seq, r.sink), row.encode());
            super::queue::put_dead_index(&mut batch, index, seq, r.sink, &row);
            count(&mut batch, &row, 0, 1);
            batch.merge(keys::C_HOOKS, 1i64.to_le_bytes());
            batch.merge(keys::C_HOOK_BYTES, (r.body.len() as i64).to_le_bytes());
        }
        batch.merge(
            keys::META_NEXT_SEQ,
            (first + rows.len() as u64).to_be_bytes(),
        );
        let mut wo = rocksdb::WriteOptions::default();
        wo.disable_wal(true);
        db.write_opt(batch, &wo).map_err(|e| classify(&e))
    }

    /// Flushes memtables to SST files (after a WAL-less bulk load).
    pub fn flush(&self) -> Result<(), StoreError> {
        let db = self.db()?;
        for name in keys::ALL_CFS {
            let cf = Self::cf(&db, name)?;
            db.flush_cf(cf).map_err(|e| classify(&e))?;
        }
        db.flush().map_err(|e| classify(&e))
    }
}
