//! The archive's state in the store: obligations (`a<seq>`: a hook accepted while the archive
//! is on, not yet in an uploaded segment), the catalogue (`S<first_seq>`: one uploaded segment;
//! `c<id>`: where one hook's record sits), and the archive replay's commit.
//!
//! A hook with an obligation outlives its deliveries: `delete_hook_if_done` leaves it, and the
//! compactor's commit (which clears the obligation) reclaims every hook whose rows are gone.
//! The commit holds the rows lock, so a last delivery and an archive commit of the same hook
//! cannot both leave the hook to the other.

use std::collections::HashSet;

use ankusa_format::segment::{CatalogueEntry, IndexEntry, SegmentRow};
use rocksdb::{IteratorMode, ReadOptions, WriteBatch};
use serde::Serialize;
use uuid::Uuid;

use super::ingest::CommitOpts;
use super::job::StoredJob;
use super::{Committed, IngestRecord, Store, StoreError, classify, codec, keys};

/// A hook to pack: its stored bytes unchanged.
#[derive(Debug, Clone)]
pub struct ArchiveCandidate {
    pub seq: u64,
    pub id: Uuid,
    pub tenant: String,
    pub received_at: u64,
    pub body_len: u64,
    pub encoded: Vec<u8>,
}

/// The archive's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ArchiveCounts {
    pub pending: i64,
    pub archived: i64,
    pub segments: i64,
}

/// One archived hook found by id.
#[derive(Debug, Clone)]
pub struct ArchivedHook {
    pub entry: CatalogueEntry,
    pub segment: SegmentRow,
}

/// Obligations one candidate scan examines at most.
const SCAN_MAX: usize = 100_000;

impl Store {
    /// Hooks waiting to be archived, lowest seq first, as many as fit in `max_bytes` of stored
    /// bytes and `max_count` hooks (at least one when any waits), and whether more wait beyond
    /// them. An obligation whose hook is gone or does not decode is dropped (and the hook set
    /// aside), so it never blocks the archive.
    pub fn archive_candidates(
        &self,
        max_bytes: u64,
        max_count: usize,
    ) -> Result<Vec<ArchiveCandidate>, StoreError> {
        Ok(self.archive_batch(max_bytes, max_count, false)?.0)
    }

    /// `archive_candidates` with the "more wait" flag; `settled_only` passes over hooks with
    /// a delivery still pending or in flight (`storage.archive_at: settled`).
    pub fn archive_batch(
        &self,
        max_bytes: u64,
        max_count: usize,
        settled_only: bool,
    ) -> Result<(Vec<ArchiveCandidate>, bool), StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let hooks = Self::cf(&db, keys::CF_HOOKS)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(vec![keys::IX_ARCHIVE_DUE + 1]);
        let start = [keys::IX_ARCHIVE_DUE];
        let it = db.iterator_cf_opt(
            ix,
            ro,
            IteratorMode::From(&start, rocksdb::Direction::Forward),
        );
        let mut out = Vec::new();
        let mut bytes = 0u64;
        let mut drop = WriteBatch::default();
        let mut dropped = 0i64;
        let mut more = false;
        for item in it.take(SCAN_MAX) {
            if out.len() >= max_count {
                more = true;
                break;
            }
            let (k, _) = item.map_err(|e| classify(&e))?;
            let Some(seq) = keys::parse_archive_seq(&k) else {
                drop.delete_cf(ix, &k);
                continue;
            };
            if settled_only && self.unsettled(&db, seq)? {
                continue;
            }
            let Some(v) = db
                .get_cf(hooks, keys::hook(seq))
                .map_err(|e| classify(&e))?
            else {
                drop.delete_cf(ix, &k);
                dropped += 1;
                continue;
            };
            if !out.is_empty() && bytes + v.len() as u64 > max_bytes {
                more = true;
                break;
            }
            match codec::decode_envelope(seq, &v) {
                Ok(env) => {
                    bytes += v.len() as u64;
                    out.push(ArchiveCandidate {
                        seq,
                        id: env.id,
                        tenant: env.tenant.clone(),
                        received_at: env.received_at,
                        body_len: env.body.len() as u64,
                        encoded: v,
                    });
                }
                Err(e) => {
                    self.set_aside(&db, &mut drop, keys::CF_HOOKS, &keys::hook(seq), &v, &e)?;
                    drop.delete_cf(ix, &k);
                    dropped += 1;
                }
            }
        }
        if !drop.is_empty() {
            drop.merge(keys::C_ARCHIVE_PENDING, (-dropped).to_le_bytes());
            self.write(&db, drop, true)?;
        }
        Ok((out, more))
    }

    /// Whether hook `seq` has a delivery row that is not dead (pending, in flight, or one that
    /// does not decode, which dispatch sets aside when it meets it).
    fn unsettled(&self, db: &rocksdb::DB, seq: u64) -> Result<bool, StoreError> {
        let deliveries = Self::cf(db, keys::CF_DELIVERIES)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(keys::delivery(seq + 1, 0).to_vec());
        for item in db.iterator_cf_opt(
            deliveries,
            ro,
            IteratorMode::From(&keys::delivery(seq, 0), rocksdb::Direction::Forward),
        ) {
            let (_, v) = item.map_err(|e| classify(&e))?;
            match codec::DeliveryRow::decode(&v) {
                Ok(row) if row.state == codec::RowState::Dead => {}
                _ => return Ok(true),
            }
        }
        Ok(false)
    }

    /// Records an uploaded segment: its row, each hook's catalogue entry (with its tenant,
    /// `tenants[i]` for `entries[i]`), the obligations cleared, and every hook whose
    /// deliveries are all done reclaimed; one synced batch.
    pub fn archive_commit(
        &self,
        segment: &SegmentRow,
        entries: &[IndexEntry],
        body_lens: &[u64],
        tenants: &[String],
    ) -> Result<(), StoreError> {
        let _rows = self.rows_guard();
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let mut batch = WriteBatch::default();
        for (i, e) in entries.iter().enumerate() {
            let sha = ankusa_format::segment::parse_sha256(&e.sha256)
                .ok_or_else(|| StoreError::Corrupt("index entry sha256".into()))?;
            batch.delete_cf(ix, keys::archive_due(e.seq));
            batch.put_cf(
                ix,
                keys::archive_hook(&e.id),
                CatalogueEntry {
                    segment: segment.first_seq,
                    seq: e.seq,
                    offset: e.offset,
                    len: e.len,
                    received_at: e.received_at,
                    sha256: sha,
                    tenant: tenants.get(i).cloned(),
                }
                .encode(),
            );
        }
        batch.put_cf(
            ix,
            keys::archive_segment(segment.first_seq),
            segment.encode(),
        );
        let n = entries.len() as i64;
        batch.merge(keys::C_ARCHIVE_PENDING, (-n).to_le_bytes());
        batch.merge(keys::C_ARCHIVED, n.to_le_bytes());
        batch.merge(keys::C_SEGMENTS, 1i64.to_le_bytes());
        for (e, body_len) in entries.iter().zip(body_lens) {
            self.reclaim_if_settled(&db, &mut batch, e.seq, &e.id, *body_len)?;
        }
        self.write(&db, batch, true)
    }

    /// Deletes hook `seq` in the batch when it has no delivery row left.
    fn reclaim_if_settled(
        &self,
        db: &rocksdb::DB,
        batch: &mut WriteBatch,
        seq: u64,
        id: &Uuid,
        body_len: u64,
    ) -> Result<(), StoreError> {
        let deliveries = Self::cf(db, keys::CF_DELIVERIES)?;
        let ix = Self::cf(db, keys::CF_INDEX)?;
        let hooks = Self::cf(db, keys::CF_HOOKS)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(keys::delivery(seq + 1, 0).to_vec());
        let mut it = db.iterator_cf_opt(
            deliveries,
            ro,
            IteratorMode::From(&keys::delivery(seq, 0), rocksdb::Direction::Forward),
        );
        if it.next().transpose().map_err(|e| classify(&e))?.is_some() {
            return Ok(());
        }
        batch.delete_cf(hooks, keys::hook(seq));
        // The id may point at a later copy of the hook (an archive replay): that one keeps it.
        let points_here = db
            .get_pinned_cf(ix, keys::hook_id(id))
            .map_err(|e| classify(&e))?
            .is_some_and(|v| keys::be64(&v) == Some(seq));
        if points_here {
            batch.delete_cf(ix, keys::hook_id(id));
        }
        batch.merge(keys::C_HOOKS, (-1i64).to_le_bytes());
        batch.merge(keys::C_HOOK_BYTES, (-(body_len as i64)).to_le_bytes());
        Ok(())
    }

    /// Drops up to `limit` obligations (the archive was turned off), reclaiming the hooks
    /// they kept; returns how many went.
    pub fn drop_archive_obligations(&self, limit: usize) -> Result<usize, StoreError> {
        let cands = self.archive_candidates(u64::MAX, limit)?;
        if cands.is_empty() {
            return Ok(0);
        }
        let _rows = self.rows_guard();
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let mut batch = WriteBatch::default();
        for c in &cands {
            batch.delete_cf(ix, keys::archive_due(c.seq));
            self.reclaim_if_settled(&db, &mut batch, c.seq, &c.id, c.body_len)?;
        }
        batch.merge(
            keys::C_ARCHIVE_PENDING,
            (-(cands.len() as i64)).to_le_bytes(),
        );
        self.write(&db, batch, true)?;
        Ok(cands.len())
    }

    /// Uploaded segments from `first_seq` on, in seq order, at most `limit`.
    pub fn archive_segments(
        &self,
        first_seq: u64,
        limit: usize,
    ) -> Result<Vec<SegmentRow>, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(vec![keys::IX_ARCHIVE_SEGMENT + 1]);
        let start = keys::archive_segment(first_seq);
        let mut out = Vec::new();
        for item in db
            .iterator_cf_opt(
                ix,
                ro,
                IteratorMode::From(&start, rocksdb::Direction::Forward),
            )
            .take(limit)
        {
            let (k, v) = item.map_err(|e| classify(&e))?;
            match SegmentRow::decode(&v) {
                Ok(row) => out.push(row),
                Err(e) => self.set_aside_now(keys::CF_INDEX, &k, &v, &e)?,
            }
        }
        Ok(out)
    }

    /// Where the archived hook `id` is, if it is archived.
    pub fn archive_lookup(&self, id: &Uuid) -> Result<Option<ArchivedHook>, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let Some(v) = db
            .get_pinned_cf(ix, keys::archive_hook(id))
            .map_err(|e| classify(&e))?
        else {
            return Ok(None);
        };
        let entry = CatalogueEntry::decode(&v)?;
        let Some(sv) = db
            .get_pinned_cf(ix, keys::archive_segment(entry.segment))
            .map_err(|e| classify(&e))?
        else {
            return Err(StoreError::Corrupt(
                "archive catalogue: a hook's segment row is missing".into(),
            ));
        };
        Ok(Some(ArchivedHook {
            entry,
            segment: SegmentRow::decode(&sv)?,
        }))
    }

    pub fn archive_counts(&self) -> Result<ArchiveCounts, StoreError> {
        Ok(ArchiveCounts {
            pending: self.counter(keys::C_ARCHIVE_PENDING)?,
            archived: self.counter(keys::C_ARCHIVED)?,
            segments: self.counter(keys::C_SEGMENTS)?,
        })
    }

    /// Commits hooks an archive replay re-enqueues (no dedupe, no new obligation, rows only for
    /// `only_sinks` when given, each marked with the job's id) with the job's new cursor and
    /// counts, in one synced batch: a restart resumes after the last hook it committed.
    pub fn archive_replay_commit(
        &self,
        job: &StoredJob,
        records: &[IngestRecord],
        only_sinks: Option<&[u16]>,
        now: u64,
    ) -> Result<Committed, StoreError> {
        let db = self.db()?;
        let encoded: Vec<Vec<u8>> = records
            .iter()
            .map(|r| codec::encode_envelope(&r.envelope))
            .collect();
        let mut batch = WriteBatch::default();
        let opts = CommitOpts {
            replay_id: Some(job.id.as_str()),
            only_sinks,
            ..Default::default()
        };
        let committed = self.ingest_into(&db, &mut batch, records, &encoded, now, opts)?;
        batch.put(keys::job(&job.id), job.encode());
        self.write(&db, batch, true)?;
        Ok(committed)
    }

    /// Computes the dead rows' byte counter once for a store made before it was kept.
    pub(super) fn init_dead_bytes(&self) -> Result<(), StoreError> {
        let db = self.db()?;
        if db
            .get(keys::META_DEAD_BYTES_V1)
            .map_err(|e| classify(&e))?
            .is_some()
        {
            return Ok(());
        }
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(vec![keys::IX_DEAD + 1]);
        let start = [keys::IX_DEAD];
        let mut total = 0i64;
        let mut seen = HashSet::new();
        for item in db.iterator_cf_opt(
            ix,
            ro,
            IteratorMode::From(&start, rocksdb::Direction::Forward),
        ) {
            let (k, _) = item.map_err(|e| classify(&e))?;
            let Some((_, seq, sink)) = keys::parse_dead(&k) else {
                continue;
            };
            if !seen.insert((seq, sink)) {
                continue;
            }
            if let Some(v) = db
                .get_pinned_cf(deliveries, keys::delivery(seq, sink))
                .map_err(|e| classify(&e))?
                && let Ok(row) = codec::DeliveryRow::decode(&v)
                && row.state == codec::RowState::Dead
            {
                total += row.size as i64;
            }
        }
        let mut b = WriteBatch::default();
        b.put(keys::C_DEAD_BYTES, total.to_le_bytes());
        b.put(keys::META_DEAD_BYTES_V1, [1]);
        self.write(&db, b, true)
    }

    /// Dead rows and their body bytes, from counters.
    pub fn dead_totals(&self) -> Result<(i64, i64), StoreError> {
        Ok((
            self.counter(keys::C_DEAD)?,
            self.counter(keys::C_DEAD_BYTES)?,
        ))
    }

    /// When the oldest dead row died (unix ms), if any.
    pub fn oldest_dead_at(&self) -> Result<Option<u64>, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(vec![keys::IX_DEAD + 1]);
        let start = [keys::IX_DEAD];
        let first = db
            .iterator_cf_opt(
                ix,
                ro,
                IteratorMode::From(&start, rocksdb::Direction::Forward),
            )
            .next();
        match first {
            Some(item) => {
                let (k, _) = item.map_err(|e| classify(&e))?;
                Ok(keys::parse_dead(&k).map(|(at, _, _)| at))
            }
            None => Ok(None),
        }
    }

    /// When the oldest hook still waiting for the archive was received, if any.
    pub fn oldest_unarchived_at(&self) -> Result<Option<u64>, StoreError> {
        Ok(self
            .archive_candidates(0, 1)?
            .first()
            .map(|c| c.received_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{deliver, seed_dead, temp_store};
    use crate::{ErrorClass, IngestResult};
    use ankusa_api::DeadFilter;
    use ankusa_format::segment;

    fn ingest(s: &Store, n: usize) -> Vec<u64> {
        let recs: Vec<_> = (0..n)
            .map(|_| IngestRecord {
                envelope: crate::test_util::ingest_test_envelope("t", "s"),
                sinks: vec!["http"],
                lanes: vec![],
                dedupe: None,
                skip_sinks: Vec::new(),
            })
            .collect();
        s.commit_ingest(&recs, 1, false)
            .unwrap()
            .into_iter()
            .map(|r| match r {
                IngestResult::Accepted { seq, .. } => seq,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn archive_all(s: &Store) -> usize {
        let c = s.archive_candidates(u64::MAX, 1000).unwrap();
        let recs: Vec<(u64, &[u8], Uuid, u64)> = c
            .iter()
            .map(|c| (c.seq, c.encoded.as_slice(), c.id, c.received_at))
            .collect();
        let p = segment::pack("n", 5, &recs);
        let row = SegmentRow {
            key: "k.seg".into(),
            first_seq: p.header.first_seq,
            last_seq: p.header.last_seq,
            count: p.header.count,
            size: p.bytes.len() as u64,
            sha256: hex::encode(p.sha256),
            min_received_at: p.header.min_received_at,
            max_received_at: p.header.max_received_at,
            created_at: 5,
        };
        let lens: Vec<u64> = c.iter().map(|c| c.body_len).collect();
        let tenants: Vec<String> = c.iter().map(|c| c.tenant.clone()).collect();
        s.archive_commit(&row, &p.entries, &lens, &tenants).unwrap();
        c.len()
    }

    #[test]
    fn a_delivered_hook_waits_for_the_archive_and_goes_with_it() {
        let (_d, s) = temp_store();
        s.set_archiving(true);
        let seqs = ingest(&s, 3);
        assert_eq!(s.archive_counts().unwrap().pending, 3);
        let (claimed, _) = s.claim_due("t", 1, 10, u64::MAX).unwrap();
        deliver(&s, &claimed);
        // Delivered, but not archived: the hooks stay.
        for seq in &seqs {
            assert!(s.get_hook(*seq).unwrap().is_some());
        }
        assert_eq!(archive_all(&s), 3);
        for seq in &seqs {
            assert!(
                s.get_hook(*seq).unwrap().is_none(),
                "reclaimed once archived"
            );
        }
        let c = s.archive_counts().unwrap();
        assert_eq!((c.pending, c.archived, c.segments), (0, 3, 1));
        assert_eq!(s.totals().unwrap().hooks, 0);
    }

    #[test]
    fn settled_only_passes_over_hooks_still_being_delivered() {
        let (_d, s) = temp_store();
        s.set_archiving(true);
        let seqs = ingest(&s, 3);
        let (claimed, _) = s.claim_due("t", 1, 1, u64::MAX).unwrap();
        deliver(&s, &claimed);
        let (settled, _) = s.archive_batch(u64::MAX, 10, true).unwrap();
        assert_eq!(
            settled.iter().map(|c| c.seq).collect::<Vec<_>>(),
            vec![seqs[0]],
            "only the delivered hook"
        );
        let (all, _) = s.archive_batch(u64::MAX, 10, false).unwrap();
        assert_eq!(all.len(), 3);
    }

    #[test]
    fn eviction_takes_only_archived_dead_rows_and_counts_bytes() {
        let (_d, s) = temp_store();
        seed_dead(&s, "t", "s", 2, 100, ErrorClass::Transient);
        assert_eq!(s.dead_totals().unwrap(), (2, 4));
        assert_eq!(s.oldest_dead_at().unwrap(), Some(100));
        let r = s.evict_dead(&DeadFilter::default(), 10, true).unwrap();
        assert_eq!(
            (r.deleted, r.unarchived),
            (0, 2),
            "nothing archived: nothing evicted"
        );
        s.set_archiving(true);
        seed_dead(&s, "t", "s", 2, 200, ErrorClass::Transient);
        archive_all(&s);
        let r = s.evict_dead(&DeadFilter::default(), 10, true).unwrap();
        assert_eq!((r.deleted, r.unarchived), (2, 2));
        assert_eq!(s.dead_totals().unwrap(), (2, 4));
    }
}
