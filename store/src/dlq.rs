//! The dead-letter queue: bounded, newest-first pages over the dead index, and eviction.
//!
//! A page is one reverse range scan: over `x` for all tenants or over `X<tenant>\0` for one,
//! so a tenant page never reads another tenant's keys. No scan examines more than
//! `MAX_EXAMINED` keys; a sparse filter returns a short page with a cursor.

use std::collections::HashSet;

use ankusa_api::{DeadEntry, DeadFilter, DeadPage, DeleteDead};
use rocksdb::{IteratorMode, ReadOptions, WriteBatch};

use super::codec::{DeadSummary, DeliveryRow, RowState};
use super::index::{self, DeadCursor};
use super::{Store, StoreError, classify, keys};

/// Most dead keys one scan examines.
pub const MAX_EXAMINED: usize = 10_000;

/// Bounds of a page's scan in index keys: [lower, upper), the upper end lowered to the
/// cursor of the previous page (pages go newest first).
fn page_bounds(f: &DeadFilter, cursor: Option<DeadCursor>) -> (Vec<u8>, Vec<u8>) {
    let tenant = f.tenant.as_deref();
    let (lower, mut upper) = index::dead_range(tenant, f.since.unwrap_or(0), f.until);
    if let Some(c) = cursor {
        upper = upper.min(c.key(tenant));
    }
    (lower, upper)
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
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let hooks = Self::cf(&db, keys::CF_HOOKS)?;
        let (lower, upper) = page_bounds(f, cursor);
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(lower);
        ro.set_iterate_upper_bound(upper);
        let it = db.iterator_cf_opt(ix, ro, IteratorMode::End);

        let mut entries = Vec::new();
        let mut examined = 0;
        let mut last_key: Option<DeadCursor> = None;
        let mut reached_end = true;
        let mut matched = 0u64;
        // Rows that do not decode are set aside after the scan (a page is a read).
        let mut damaged = Vec::new();
        for item in it {
            if entries.len() >= limit || examined >= MAX_EXAMINED {
                reached_end = false;
                break;
            }
            let (k, v) = item.map_err(|e| classify(&e))?;
            examined += 1;
            let Some(at) = index::parse_dead(&k) else {
                continue;
            };
            last_key = Some(at);
            let (dead_at, seq, sink) = (at.dead_at(), at.seq(), at.sink());
            let summary = match DeadSummary::decode(&v) {
                Ok(s) => s,
                Err(e) => {
                    damaged.push((keys::CF_INDEX, k.to_vec(), v.to_vec(), e));
                    continue;
                }
            };
            if !index::matches(f, &summary) {
                continue;
            }
            let row = match db
                .get_pinned_cf(&deliveries, keys::delivery(seq, sink))
                .map_err(|e| classify(&e))?
            {
                Some(v) => match DeliveryRow::decode(&v) {
                    Ok(r) => r,
                    Err(e) => {
                        let dk = keys::delivery(seq, sink).to_vec();
                        damaged.push((keys::CF_DELIVERIES, dk, v.to_vec(), e));
                        continue;
                    }
                },
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
        for (family, key, value, why) in damaged {
            self.set_aside_now(family, &key, &value, &why)?;
        }
        let next_cursor = if reached_end {
            None
        } else {
            last_key.map(|c| c.encode())
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

    /// `DELETE /v1/dlq`: with an archive, the eviction the reaper runs (only archived hooks'
    /// rows go); without one, an explicit purge of the matching rows.
    pub fn delete_dead(&self, f: &DeadFilter, limit: usize) -> Result<DeleteDead, StoreError> {
        self.evict_dead(f, limit, self.archiving())
    }

    /// Deletes up to `limit` dead rows matching the filter, oldest first; their hooks go with
    /// their last row. With `require_archived`, a row whose hook is not in the archive's
    /// catalogue stays and is counted `unarchived`.
    pub fn evict_dead(
        &self,
        f: &DeadFilter,
        limit: usize,
        require_archived: bool,
    ) -> Result<DeleteDead, StoreError> {
        let _rows = self.rows_guard();
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let (lower, upper) = page_bounds(f, None);
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(lower.clone());
        ro.set_iterate_upper_bound(upper);
        let it = db.iterator_cf_opt(
            ix,
            ro,
            IteratorMode::From(&lower, rocksdb::Direction::Forward),
        );
        let mut batch = WriteBatch::default();
        let mut deleted_keys = HashSet::new();
        let mut victims = Vec::new();
        let mut stale = 0usize;
        let mut unarchived = 0usize;
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
            let Some(at) = index::parse_dead(&k) else {
                continue;
            };
            let (seq, sink) = (at.seq(), at.sink());
            let summary = match DeadSummary::decode(&v) {
                Ok(s) => s,
                Err(e) => {
                    self.set_aside(&db, &mut batch, keys::CF_INDEX, &k, &v, &e)?;
                    continue;
                }
            };
            if !index::matches(f, &summary) {
                continue;
            }
            let row = match db
                .get_pinned_cf(&deliveries, keys::delivery(seq, sink))
                .map_err(|e| classify(&e))?
            {
                None => None,
                Some(rv) => match DeliveryRow::decode(&rv) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        let dk = keys::delivery(seq, sink);
                        self.set_aside(&db, &mut batch, keys::CF_DELIVERIES, &dk, &rv, &e)?;
                        batch.delete_cf(ix, &k);
                        continue;
                    }
                },
            };
            let Some(row) = row.filter(|r| r.state == RowState::Dead) else {
                // A stale index entry (its row is gone, or queued again by a replay), left by
                // a store written before row transitions were serialised: it goes now, so it
                // stops counting against every later scan's bound.
                batch.delete_cf(ix, &k);
                stale += 1;
                continue;
            };
            if require_archived
                && db
                    .get_pinned_cf(ix, keys::archive_hook(&row.hook_id))
                    .map_err(|e| classify(&e))?
                    .is_none()
            {
                unarchived += 1;
                continue;
            }
            batch.delete_cf(deliveries, keys::delivery(seq, sink));
            index::delete_dead(&mut batch, ix, seq, sink, &row);
            index::count(&mut batch, &row, 0, -1);
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
        Ok(DeleteDead {
            deleted: victims.len(),
            bytes,
            unarchived,
            more,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{seed_dead, temp_store};
    use crate::{ErrorClass, IngestRecord, IngestResult};

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
            envelope: crate::test_util::ingest_test_envelope("a", "src"),
            sinks: vec!["http"],
            lanes: vec![],
            dedupe: None,
            skip_sinks: Vec::new(),
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
        let DeleteDead {
            deleted: n, more, ..
        } = s.delete_dead(&DeadFilter::default(), 10).unwrap();
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
        let n = s.delete_dead(&fa, 10).unwrap().deleted;
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
        let DeleteDead {
            deleted: n, more, ..
        } = s.delete_dead(&DeadFilter::default(), 2).unwrap();
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

    mod bounds {
        use super::*;
        use proptest::prelude::*;

        fn tenant() -> impl Strategy<Value = String> {
            "[A-Za-z0-9_-]{1,64}"
        }

        proptest! {
            /// Whatever the filter's times and the cursor a caller sends, a tenant-limited
            /// scan's range stays inside that tenant's prefix of the per-tenant dead index.
            #[test]
            fn a_tenant_scan_never_leaves_its_prefix(
                t in tenant(),
                since in any::<u64>(),
                until in proptest::option::of(any::<u64>()),
                cursor in proptest::option::of((any::<u64>(), any::<u64>(), any::<u16>())),
            ) {
                let f = DeadFilter { tenant: Some(t.clone()), since: Some(since), until, ..Default::default() };
                let c = cursor.map(|(a, s, k)| DeadCursor::new(a, s, k));
                let (lower, upper) = page_bounds(&f, c);
                let prefix = keys::dead_tenant_prefix(&t);
                let end = keys::prefix_end(&prefix);
                prop_assert!(lower >= prefix, "lower bound below the tenant's prefix");
                prop_assert!(upper <= end, "upper bound past the tenant's prefix");
                prop_assert!(lower.starts_with(&prefix));
                // And a replay job's resume point (the cursor's key plus one byte) too.
                if let Some(c) = c {
                    let mut after = c.key(Some(&t));
                    after.push(0);
                    prop_assert!(after.starts_with(&prefix));
                }
            }
        }
    }
}
