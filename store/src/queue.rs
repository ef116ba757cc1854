//! Delivery rows as a queue: claim due rows, record attempt outcomes, recover claims after a
//! restart. Outcome writes are not individually synced: power loss can undo one, which means
//! a redelivery, never a loss (the next synced ingest commit makes them durable).

use std::collections::{HashMap, HashSet};

use ankusa_api::SourceDeliveries;
use rocksdb::{IteratorMode, ReadOptions, WriteBatch};

use super::codec::{DeliveryRow, Envelope, ErrorClass, RowState};
use super::index::{self, LaneId};
use super::lanes::LaneAdvance;
use super::{Store, StoreError, classify, keys};

/// A claimed row with its hook, ready for an attempt.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub seq: u64,
    pub sink: u16,
    pub row: DeliveryRow,
    pub hook: Envelope,
    /// The row's ordering lane, when its sink entry is ordered.
    pub lane: Option<LaneId>,
}

/// Where a tenant's next claim scan starts: every due key of the tenant below it is known to
/// be deleted. Opaque outside the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueCursor(Vec<u8>);

impl DueCursor {
    /// Moves the cursor back to rows due at `due_at`, if that is earlier: a row due then was
    /// written below it (a retry, a replay, a commit that raced the scan).
    pub fn rewind(&mut self, due_at: u64) {
        if let Some(earliest) = keys::due_rewound(&self.0, due_at)
            && earliest < self.0
        {
            self.0 = earliest;
        }
    }
}

/// One claim scan of a tenant.
#[derive(Debug)]
pub struct ClaimPage {
    pub claimed: Vec<Claimed>,
    /// The tenant's next due time after this scan, if it has rows left.
    pub next_due: Option<u64>,
    /// Where the tenant's next scan starts.
    pub resume: DueCursor,
}

/// What an attempt (or a decision without one) did to a claimed row.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The sink confirmed: the row is done.
    Delivered {
        seq: u64,
        sink: u16,
        row: DeliveryRow,
    },
    /// Due again at `row.due_at` (attempts, errors and horizon already updated).
    Retry {
        seq: u64,
        sink: u16,
        row: DeliveryRow,
    },
    /// Dead-lettered (`row.state` is `Dead`, `dead_at`, `error_class`, `last_error` set).
    Dead {
        seq: u64,
        sink: u16,
        row: DeliveryRow,
    },
}

/// Rows one `dead_letter_source` page reads at most.
pub const DEAD_LETTER_SCAN: usize = 50_000;

/// Where the next `dead_letter_source` page starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetterResume {
    seq: u64,
    sink: u16,
}

impl Store {
    /// Every tenant with due rows and the due time of its earliest row: one seek per tenant.
    pub fn due_tenants(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let mut out = Vec::new();
        let mut seek = vec![keys::IX_DUE];
        loop {
            let mut ro = ReadOptions::default();
            ro.set_iterate_upper_bound(vec![keys::IX_DUE + 1]);
            let mut it = db.iterator_cf_opt(
                &ix,
                ro,
                IteratorMode::From(&seek, rocksdb::Direction::Forward),
            );
            let Some(item) = it.next() else { break };
            let (k, _) = item.map_err(|e| classify(&e))?;
            let Some((tenant, due_at, _, _)) = keys::parse_due(&k) else {
                return Err(StoreError::Corrupt("malformed due key".into()));
            };
            out.push((tenant.to_string(), due_at));
            seek = keys::prefix_end(&keys::due_tenant_prefix(tenant));
        }
        Ok(out)
    }

    /// The earliest due time of one tenant's rows, if it has any.
    pub fn tenant_next_due(&self, tenant: &str) -> Result<Option<u64>, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let prefix = keys::due_tenant_prefix(tenant);
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(keys::prefix_end(&prefix));
        let mut it = db.iterator_cf_opt(
            &ix,
            ro,
            IteratorMode::From(&prefix, rocksdb::Direction::Forward),
        );
        match it.next() {
            None => Ok(None),
            Some(item) => {
                let (k, _) = item.map_err(|e| classify(&e))?;
                Ok(keys::parse_due(&k).map(|(_, at, _, _)| at))
            }
        }
    }

    /// Claims up to `max` rows of `tenant` due at or before `now` (see `claim_due_from`).
    pub fn claim_due(
        &self,
        tenant: &str,
        now: u64,
        max: usize,
        max_bytes: u64,
    ) -> Result<(Vec<Claimed>, Option<u64>), StoreError> {
        let page = self.claim_due_from(tenant, None, now, max, max_bytes)?;
        Ok((page.claimed, page.next_due))
    }

    /// Claims up to `max` rows of `tenant` due at or before `now`, stopping early once their
    /// bodies reach `max_bytes` (at least one row is claimed if any is due). Claimed rows leave
    /// the due index for the in-flight index; the horizon starts at the first claim.
    ///
    /// `from` is where the previous scan said to resume: every due key of the tenant below it
    /// is known to be deleted. Starting there matters: claims delete keys, and a scan from the
    /// start of the tenant's range would step over every tombstone left since the last flush.
    pub fn claim_due_from(
        &self,
        tenant: &str,
        from: Option<&DueCursor>,
        now: u64,
        max: usize,
        max_bytes: u64,
    ) -> Result<ClaimPage, StoreError> {
        let _rows = self.rows_guard();
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let hooks = Self::cf(&db, keys::CF_HOOKS)?;
        let prefix = keys::due_tenant_prefix(tenant);
        let start = match from {
            Some(DueCursor(f)) if f.starts_with(&prefix) => f.clone(),
            _ => prefix.clone(),
        };
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(start.clone());
        ro.set_iterate_upper_bound(keys::prefix_end(&prefix));
        let it = db.iterator_cf_opt(
            ix,
            ro,
            IteratorMode::From(&start, rocksdb::Direction::Forward),
        );

        let mut batch = WriteBatch::default();
        let mut claimed = Vec::new();
        let mut bytes = 0u64;
        let mut next_due = None;
        // Where the next scan starts: the first key this one left, or just past its last.
        let mut resume = start;
        for item in it {
            let (k, _) = item.map_err(|e| classify(&e))?;
            let Some((_, due_at, seq, sink)) = keys::parse_due(&k) else {
                let e = StoreError::Corrupt("malformed due key".into());
                self.set_aside(&db, &mut batch, keys::CF_INDEX, &k, &[], &e)?;
                resume = k.to_vec();
                resume.push(0);
                continue;
            };
            if due_at > now || claimed.len() >= max || (bytes >= max_bytes && !claimed.is_empty()) {
                resume = k.to_vec();
                next_due = Some(due_at);
                break;
            }
            resume = k.to_vec();
            resume.push(0);
            batch.delete_cf(ix, &k);
            let Some(rv) = db
                .get_pinned_cf(&deliveries, keys::delivery(seq, sink))
                .map_err(|e| classify(&e))?
            else {
                // A due key without its row: a leftover of an interrupted write. Drop it.
                tracing::warn!(seq, sink, "due key without a delivery row removed");
                continue;
            };
            let Some(mut row) = self.row_or_set_aside(&db, &mut batch, seq, sink, &rv)? else {
                continue;
            };
            if row.state != RowState::Pending {
                // A due key left behind by a transition that moved the row elsewhere.
                tracing::warn!(seq, sink, state = ?row.state, "due key of a row that is not pending removed");
                continue;
            }
            let Some(hv) = db
                .get_pinned_cf(&hooks, keys::hook(seq))
                .map_err(|e| classify(&e))?
            else {
                tracing::error!(seq, sink, "delivery row without its hook removed");
                batch.delete_cf(deliveries, keys::delivery(seq, sink));
                index::count(&mut batch, &row, -1, 0);
                continue;
            };
            let hook = match super::codec::decode_envelope(seq, &hv) {
                Ok(h) => h,
                Err(e) => {
                    // Without its hook the row cannot be delivered: both are set aside.
                    self.set_aside(&db, &mut batch, keys::CF_HOOKS, &keys::hook(seq), &hv, &e)?;
                    let dk = keys::delivery(seq, sink);
                    self.set_aside(&db, &mut batch, keys::CF_DELIVERIES, &dk, &rv, &e)?;
                    index::count(&mut batch, &row, -1, 0);
                    continue;
                }
            };
            row.state = RowState::Inflight;
            if row.first_attempt_at.is_none() {
                row.first_attempt_at = Some(now);
            }
            batch.put_cf(&deliveries, keys::delivery(seq, sink), row.encode());
            batch.put_cf(&ix, keys::inflight(seq, sink), []);
            bytes += row.size;
            claimed.push(Claimed {
                seq,
                sink,
                lane: LaneId::of(&row, sink),
                row,
                hook,
            });
        }
        if !batch.is_empty() {
            self.write(&db, batch, false)?;
        }
        Ok(ClaimPage {
            claimed,
            next_due,
            resume: DueCursor(resume),
        })
    }

    /// Records outcomes in one batch. A hook whose last row clears is deleted with it, and a
    /// lane whose head cleared hands over to its next row in the same batch.
    ///
    /// `lane_floor` holds, per lane, a seq below which the lane has no waiting row (the lanes
    /// it lacks are read from their start).
    pub fn apply_outcomes(
        &self,
        outcomes: &[Outcome],
        lane_floor: &HashMap<LaneId, u64>,
    ) -> Result<Vec<LaneAdvance>, StoreError> {
        if outcomes.is_empty() {
            return Ok(Vec::new());
        }
        let _rows = self.rows_guard();
        let now = ankusa_core::now_ms();
        let mut advances = Vec::new();
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let mut batch = WriteBatch::default();
        let mut deleted: HashSet<(u64, u16)> = HashSet::new();
        let mut done_hooks: Vec<(u64, &DeliveryRow)> = Vec::new();
        for o in outcomes {
            match o {
                Outcome::Delivered { seq, sink, row } => {
                    batch.delete_cf(&deliveries, keys::delivery(*seq, *sink));
                    batch.delete_cf(&ix, keys::inflight(*seq, *sink));
                    index::count(&mut batch, row, -1, 0);
                    index::count_replayed(&mut batch, row, true);
                    deleted.insert((*seq, *sink));
                    done_hooks.push((*seq, row));
                    if row.lane.is_some() {
                        advances
                            .push(self.advance_lane(&db, &mut batch, row, *sink, now, lane_floor)?);
                    }
                }
                Outcome::Retry { seq, sink, row } => {
                    let mut row = row.clone();
                    row.state = RowState::Pending;
                    batch.put_cf(&deliveries, keys::delivery(*seq, *sink), row.encode());
                    batch.delete_cf(&ix, keys::inflight(*seq, *sink));
                    batch.put_cf(&ix, keys::due(&row.tenant, row.due_at, *seq, *sink), []);
                }
                Outcome::Dead { seq, sink, row } => {
                    let mut row = row.clone();
                    row.state = RowState::Dead;
                    batch.put_cf(&deliveries, keys::delivery(*seq, *sink), row.encode());
                    batch.delete_cf(&ix, keys::inflight(*seq, *sink));
                    index::put_dead(&mut batch, ix, *seq, *sink, &row);
                    index::count(&mut batch, &row, -1, 1);
                    index::count_replayed(&mut batch, &row, false);
                    if row.lane.is_some() {
                        advances.push(
                            self.advance_lane(&db, &mut batch, &row, *sink, now, lane_floor)?,
                        );
                    }
                }
            }
        }
        let mut checked = HashSet::new();
        for (seq, row) in done_hooks {
            if checked.insert(seq) {
                self.delete_hook_if_done(&db, &mut batch, seq, row, &deleted)?;
            }
        }
        self.write(&db, batch, false)?;
        Ok(advances)
    }

    /// Puts rows claimed by a previous process back in the due index, due now, attempts
    /// unchanged. Runs at open, before anything claims.
    pub(crate) fn recover_inflight(&self) -> Result<usize, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(vec![keys::IX_INFLIGHT + 1]);
        let it = db.iterator_cf_opt(
            &ix,
            ro,
            IteratorMode::From(&[keys::IX_INFLIGHT], rocksdb::Direction::Forward),
        );
        let now = ankusa_core::now_ms();
        let mut batch = WriteBatch::default();
        let mut n = 0;
        for item in it {
            let (k, _) = item.map_err(|e| classify(&e))?;
            let Some((seq, sink)) = keys::parse_inflight(&k) else {
                continue;
            };
            batch.delete_cf(&ix, &k);
            if let Some(v) = db
                .get_pinned_cf(&deliveries, keys::delivery(seq, sink))
                .map_err(|e| classify(&e))?
            {
                let Some(mut row) = self.row_or_set_aside(&db, &mut batch, seq, sink, &v)? else {
                    continue;
                };
                if row.state == RowState::Dead {
                    continue;
                }
                row.state = RowState::Pending;
                row.due_at = now;
                batch.put_cf(&deliveries, keys::delivery(seq, sink), row.encode());
                batch.put_cf(&ix, keys::due(&row.tenant, now, seq, sink), []);
                n += 1;
            }
        }
        if !batch.is_empty() {
            self.write(&db, batch, true)?;
        }
        Ok(n)
    }

    /// Pending and dead rows of a source, from counters.
    pub fn source_counts(&self, source_id: &str) -> Result<SourceDeliveries, StoreError> {
        Ok(SourceDeliveries {
            pending: self.counter(&keys::c_pending_source(source_id))?,
            dead: self.counter(&keys::c_dead_source(source_id))?,
        })
    }

    /// Dead-letters up to `limit` pending (not in-flight) rows of a source with `reason`;
    /// returns how many moved and whether more may remain. Used when a source is deleted with
    /// `deliveries=dead_letter`.
    /// One page: moves at most `limit` rows, reading at most `DEAD_LETTER_SCAN` rows from
    /// `from` (a `DeadLetterResume` of the previous page; `None` starts at the oldest row).
    /// Returns what moved, whether the page stopped early, and where the next page starts
    /// (`None` once the scan reached the end).
    pub fn dead_letter_source(
        &self,
        source_id: &str,
        reason: &str,
        now: u64,
        limit: usize,
        from: Option<&DeadLetterResume>,
    ) -> Result<(usize, bool, Option<DeadLetterResume>), StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        // The scan reads rows of every source, so it runs without the row lock (dispatch keeps
        // going) and in pages; each candidate is read again under the lock and moved only if
        // it is still pending.
        let mut candidates = Vec::new();
        let mut more = false;
        let mut next = None;
        let start = from.map(|r| keys::delivery(r.seq, r.sink));
        let mode = match &start {
            Some(k) => IteratorMode::From(k.as_slice(), rocksdb::Direction::Forward),
            None => IteratorMode::Start,
        };
        for (scanned, item) in db.iterator_cf(&deliveries, mode).enumerate() {
            let (k, v) = item.map_err(|e| classify(&e))?;
            let Some((seq, sink)) = keys::parse_delivery(&k) else {
                continue;
            };
            if scanned >= DEAD_LETTER_SCAN || candidates.len() >= limit {
                more = true;
                next = Some(DeadLetterResume { seq, sink });
                break;
            }
            let Ok(row) = DeliveryRow::decode(&v) else {
                // A damaged row is not this source's to move; `store check` reports it.
                continue;
            };
            if row.source_id != source_id || row.state != RowState::Pending {
                continue;
            }
            candidates.push((seq, sink));
        }
        let _rows = self.rows_guard();
        let mut batch = WriteBatch::default();
        let mut moved = 0;
        for (seq, sink) in candidates {
            let k = keys::delivery(seq, sink);
            let Some(v) = db
                .get_pinned_cf(&deliveries, k.as_slice())
                .map_err(|e| classify(&e))?
            else {
                continue;
            };
            let Ok(mut row) = DeliveryRow::decode(&v) else {
                continue;
            };
            if row.state != RowState::Pending {
                // Claimed (or settled) since the scan: dispatch owns it now.
                more = true;
                continue;
            }
            batch.delete_cf(ix, keys::due(&row.tenant, row.due_at, seq, sink));
            if let Some(lane) = LaneId::of(&row, sink) {
                // Every waiting row of the source goes, so its lanes go with them.
                batch.delete_cf(ix, keys::lane_pending(lane.bytes(), seq));
                batch.delete_cf(ix, keys::lane_head(lane.bytes()));
            }
            row.state = RowState::Dead;
            row.dead_at = Some(now);
            row.error_class = Some(ErrorClass::Permanent);
            row.last_error = Some(reason.to_string());
            batch.put_cf(&deliveries, k.as_slice(), row.encode());
            index::put_dead(&mut batch, ix, seq, sink, &row);
            index::count(&mut batch, &row, -1, 1);
            moved += 1;
        }
        if moved > 0 {
            self.write(&db, batch, true)?;
        }
        Ok((moved, more, next))
    }

    /// Counts of delivery rows by state, scanning every row (for tests and `ankusa store`).
    pub fn scan_row_states(&self) -> Result<HashMap<&'static str, u64>, StoreError> {
        let db = self.db()?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let mut out = HashMap::new();
        for item in db.iterator_cf(&deliveries, IteratorMode::Start) {
            let (_, v) = item.map_err(|e| classify(&e))?;
            let Ok(row) = DeliveryRow::decode(&v) else {
                *out.entry("corrupt").or_default() += 1;
                continue;
            };
            let k = match row.state {
                RowState::Pending => "pending",
                RowState::Inflight => "inflight",
                RowState::Dead => "dead",
            };
            *out.entry(k).or_default() += 1;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::temp_store;
    use crate::{IngestRecord, IngestResult};

    fn ingest(s: &Store, tenant: &str, n: usize, now: u64) -> Vec<u64> {
        let recs: Vec<_> = (0..n)
            .map(|_| IngestRecord {
                envelope: crate::test_util::ingest_test_envelope(tenant, "src"),
                sinks: vec!["log"],
                lanes: vec![],
                dedupe: None,
                skip_sinks: Vec::new(),
            })
            .collect();
        s.commit_ingest(&recs, now, false)
            .unwrap()
            .into_iter()
            .map(|r| match r {
                IngestResult::Accepted { seq, .. } => seq,
                IngestResult::Duplicate { .. } => panic!(),
            })
            .collect()
    }

    #[test]
    fn claim_deliver_and_reclaim_the_hook() {
        let (_d, s) = temp_store();
        let seqs = ingest(&s, "t1", 3, 10);
        assert_eq!(s.due_tenants().unwrap(), vec![("t1".to_string(), 10)]);
        let (c, next) = s.claim_due("t1", 10, 2, u64::MAX).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(next, Some(10));
        assert_eq!(c[0].row.first_attempt_at, Some(10));
        let outcomes: Vec<_> = c
            .iter()
            .map(|c| Outcome::Delivered {
                seq: c.seq,
                sink: c.sink,
                row: c.row.clone(),
            })
            .collect();
        s.apply_outcomes(&outcomes, &Default::default()).unwrap();
        assert!(s.get_hook(seqs[0]).unwrap().is_none());
        assert!(s.get_hook(seqs[2]).unwrap().is_some());
        assert_eq!(s.counter(keys::C_HOOKS).unwrap(), 1);
        assert_eq!(s.counter(keys::C_PENDING).unwrap(), 1);
    }

    #[test]
    fn retry_is_due_later_and_dead_goes_to_the_index() {
        let (_d, s) = temp_store();
        ingest(&s, "t1", 2, 10);
        let (c, _) = s.claim_due("t1", 10, 10, u64::MAX).unwrap();
        let mut r0 = c[0].row.clone();
        r0.attempts = 1;
        r0.due_at = 500;
        let mut r1 = c[1].row.clone();
        r1.dead_at = Some(20);
        r1.error_class = Some(ErrorClass::Permanent);
        s.apply_outcomes(
            &[
                Outcome::Retry {
                    seq: c[0].seq,
                    sink: 0,
                    row: r0,
                },
                Outcome::Dead {
                    seq: c[1].seq,
                    sink: 0,
                    row: r1,
                },
            ],
            &Default::default(),
        )
        .unwrap();
        assert_eq!(s.claim_due("t1", 100, 10, u64::MAX).unwrap().0.len(), 0);
        assert_eq!(s.tenant_next_due("t1").unwrap(), Some(500));
        assert_eq!(s.claim_due("t1", 500, 10, u64::MAX).unwrap().0.len(), 1);
        assert_eq!(s.counter(keys::C_DEAD).unwrap(), 1);
        assert_eq!(
            s.source_counts("src").unwrap(),
            SourceDeliveries {
                pending: 1,
                dead: 1
            }
        );
    }

    #[test]
    fn claims_survive_a_restart_as_due_rows() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("store");
        {
            let s = Store::open(&p).unwrap();
            ingest(&s, "t1", 2, 10);
            assert_eq!(s.claim_due("t1", 10, 10, u64::MAX).unwrap().0.len(), 2);
        }
        let s = Store::open(&p).unwrap();
        let (c, _) = s.claim_due("t1", u64::MAX - 1, 10, u64::MAX).unwrap();
        assert_eq!(c.len(), 2, "claimed rows come back after a restart");
        assert_eq!(
            c[0].row.first_attempt_at,
            Some(10),
            "the horizon origin survives"
        );
    }

    #[test]
    fn due_tenants_costs_one_seek_per_tenant() {
        let (_d, s) = temp_store();
        ingest(&s, "a", 50, 10);
        ingest(&s, "b", 1, 99);
        assert_eq!(
            s.due_tenants().unwrap(),
            vec![("a".into(), 10), ("b".into(), 99)]
        );
    }

    /// Dispatch claims and retries rows while the admin dead-letters the source: every row
    /// ends dead exactly once with the admin's reason, and the counters match the rows. (A
    /// claim that wrote back a row dead-lettered under it revived it, behind counters that
    /// said the drain was done.)
    #[test]
    fn dead_lettering_a_source_races_dispatch_without_reviving_rows() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        const ROWS: usize = 300;
        let (_d, s) = temp_store();
        let s = Arc::new(s);
        ingest(&s, "t1", ROWS, 10);
        let stop = Arc::new(AtomicBool::new(false));
        let dispatch = {
            let (s, stop) = (s.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let (claimed, _) = s.claim_due("t1", u64::MAX / 2, 8, u64::MAX).unwrap();
                    let outcomes: Vec<_> = claimed
                        .into_iter()
                        .map(|c| {
                            let mut row = c.row.clone();
                            row.attempts += 1;
                            row.last_error = Some("http: status 503".into());
                            Outcome::Retry {
                                seq: c.seq,
                                sink: c.sink,
                                row,
                            }
                        })
                        .collect();
                    s.apply_outcomes(&outcomes, &Default::default()).unwrap();
                }
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut from = None;
        while s.source_counts("src").unwrap().pending > 0 && std::time::Instant::now() < deadline {
            from = s
                .dead_letter_source("src", "source_gone: src", 50, 7, from.as_ref())
                .unwrap()
                .2;
        }
        stop.store(true, Ordering::Relaxed);
        dispatch.join().unwrap();
        let states = s.scan_row_states().unwrap();
        assert_eq!(states.get("dead").copied(), Some(ROWS as u64), "{states:?}");
        assert_eq!(
            s.source_counts("src").unwrap(),
            SourceDeliveries {
                pending: 0,
                dead: ROWS as i64
            }
        );
        let page = s.list_dead(&Default::default(), None, 1000).unwrap();
        assert_eq!(page.entries.len(), ROWS);
        for e in &page.entries {
            assert_eq!(e.reason.as_deref(), Some("source_gone: src"), "{e:?}");
            assert_eq!(e.error_class, ErrorClass::Permanent);
        }
    }

    #[test]
    fn dead_letter_source_moves_pending_rows() {
        let (_d, s) = temp_store();
        ingest(&s, "t1", 3, 10);
        let (n, more, next) = s
            .dead_letter_source("src", "source_gone", 50, 2, None)
            .unwrap();
        assert_eq!((n, more), (2, true));
        assert!(next.is_some());
        let (n, more, next) = s
            .dead_letter_source("src", "source_gone", 50, 10, next.as_ref())
            .unwrap();
        assert_eq!((n, more, next), (1, false, None));
        assert_eq!(
            s.source_counts("src").unwrap(),
            SourceDeliveries {
                pending: 0,
                dead: 3
            }
        );
        assert!(s.due_tenants().unwrap().is_empty());
    }
}
