//! What `wal.type: dual` keeps in the store: a marker per hook committed here whose intake
//! record the log has not confirmed (so a crash between the two halves is carried to
//! completion by the reconciler at the next start), and the commit with a hook that runs
//! between planning a batch and writing it (the publish starts there, in parallel with the
//! synced write).

use rocksdb::{IteratorMode, ReadOptions, WriteBatch};

use super::ingest::{CommitOpts, Committed, IngestRecord};
use super::{Store, StoreError, classify, keys};

impl Store {
    /// `commit_encoded`, calling `before_write` with the planned results and the batch before
    /// the synced write: what it adds to the batch is written with the hooks.
    pub fn commit_encoded_with(
        &self,
        records: &[IngestRecord],
        encoded: &[Vec<u8>],
        now: u64,
        sweep: bool,
        before_write: impl FnOnce(&Committed, &mut WriteBatch),
    ) -> Result<Committed, StoreError> {
        debug_assert_eq!(records.len(), encoded.len());
        let db = self.db()?;
        // Sized up front: a growing batch would copy every body again at each doubling.
        let estimate: usize = records
            .iter()
            .map(|r| r.envelope.body.len() + 768 * (1 + r.sinks.len()))
            .sum();
        let mut batch = WriteBatch::with_capacity_bytes(estimate);
        let opts = CommitOpts {
            sweep,
            archive: self.archiving(),
            ..Default::default()
        };
        let _gate = self.dedupe_gate(false);
        let committed = self.ingest_into(&db, &mut batch, records, encoded, now, opts)?;
        before_write(&committed, &mut batch);
        self.write(&db, batch, true)?;
        Ok(committed)
    }

    /// Holds every commit off while `f` runs: what is committed is exactly what was committed
    /// before `f` (the intake watermark of a backup is read in there).
    pub fn with_commits_paused<T>(&self, f: impl FnOnce() -> T) -> T {
        let _gate = self.dedupe_gate(true);
        f()
    }

    /// Up to `limit` hooks whose intake record is not confirmed, oldest first: (seq, metadata).
    pub fn intake_pending(&self, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let db = self.db()?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(keys::prefix_end(keys::INTAKE_PENDING_PREFIX));
        let mut out = Vec::new();
        for item in db.iterator_opt(
            IteratorMode::From(keys::INTAKE_PENDING_PREFIX, rocksdb::Direction::Forward),
            ro,
        ) {
            let (k, v) = item.map_err(|e| classify(&e))?;
            if let Some(seq) = keys::parse_intake_pending(&k) {
                out.push((seq, v.to_vec()));
            }
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// Forgets the markers of confirmed records. Not synced: a marker that comes back after a
    /// power loss only republishes a record the log already has (a rebuild skips its id).
    pub fn intake_settle(&self, seqs: &[u64]) -> Result<(), StoreError> {
        if seqs.is_empty() {
            return Ok(());
        }
        let db = self.db()?;
        let mut batch = WriteBatch::default();
        for &s in seqs {
            batch.delete(keys::intake_pending(s));
        }
        self.write(&db, batch, false)
    }

    /// Whether a hook with this id is stored (whatever its rows' state).
    pub fn has_hook_id(&self, id: &uuid::Uuid) -> Result<bool, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        Ok(db
            .get_pinned_cf(&ix, keys::hook_id(id))
            .map_err(|e| classify(&e))?
            .is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::temp_store;
    use crate::{Dedupe, IngestResult, encode_envelope};

    fn rec(key: &str) -> IngestRecord {
        IngestRecord {
            envelope: crate::test_util::ingest_test_envelope("t", "s"),
            sinks: vec!["log"],
            lanes: vec![],
            dedupe: Some(Dedupe {
                key: key.into(),
                ttl_ms: 60_000,
                source_wide: false,
            }),
            skip_sinks: Vec::new(),
        }
    }

    #[test]
    fn markers_are_written_with_the_batch_and_settled_after() {
        let (_d, s) = temp_store();
        let recs = vec![rec("a"), rec("b"), rec("a")];
        let enc: Vec<Vec<u8>> = recs.iter().map(|r| encode_envelope(&r.envelope)).collect();
        let mut planned = Vec::new();
        let c = s
            .commit_encoded_with(&recs, &enc, 10, false, |committed, batch| {
                for r in &committed.results {
                    if let IngestResult::Accepted { seq, .. } = r {
                        batch.put(keys::intake_pending(*seq), b"{}");
                        planned.push(*seq);
                    }
                }
            })
            .unwrap();
        // The third record is a duplicate of the first inside the batch: no marker.
        assert!(matches!(c.results[2], IngestResult::Duplicate { .. }));
        assert_eq!(planned.len(), 2);
        let pending: Vec<u64> = s
            .intake_pending(10)
            .unwrap()
            .into_iter()
            .map(|p| p.0)
            .collect();
        assert_eq!(pending, planned);
        assert_eq!(s.intake_pending(1).unwrap().len(), 1);
        s.intake_settle(&planned[..1]).unwrap();
        let left: Vec<u64> = s
            .intake_pending(10)
            .unwrap()
            .into_iter()
            .map(|p| p.0)
            .collect();
        assert_eq!(left, planned[1..]);
        let IngestResult::Accepted { id, .. } = c.results[0] else {
            panic!()
        };
        assert!(s.has_hook_id(&id).unwrap());
        assert!(!s.has_hook_id(&uuid::Uuid::nil()).unwrap());
    }

    #[test]
    fn a_pause_holds_commits_off() {
        let (_d, s) = temp_store();
        let s = std::sync::Arc::new(s);
        let (tx, rx) = std::sync::mpsc::channel();
        let s2 = s.clone();
        s.with_commits_paused(|| {
            let t = std::thread::spawn(move || {
                let r = rec("x");
                let e = encode_envelope(&r.envelope);
                s2.commit_encoded(&[r], &[e], 1, false).unwrap();
                tx.send(()).unwrap();
            });
            // While paused, the commit cannot finish.
            assert!(
                rx.recv_timeout(std::time::Duration::from_millis(200))
                    .is_err()
            );
            t
        })
        .join()
        .unwrap();
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok());
    }
}
