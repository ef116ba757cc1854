//! The ingest commit: one synced batch holding many hooks, their delivery rows and due keys,
//! dedupe entries and counters. Dedupe is decided here, inside the batch, so two copies of a
//! hook in one batch still collapse.

use std::collections::HashMap;

use rocksdb::{IteratorMode, ReadOptions, WriteBatch};
use uuid::Uuid;

use super::codec::{DedupeEntry, DeliveryRow, Envelope, RowState};
use super::index::LaneId;
use super::{Store, StoreError, classify, keys};

/// The dedupe key of a hook, checked and recorded in the commit: a repeat of `key` from the
/// same tenant and source within `ttl_ms` is a duplicate.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dedupe {
    pub key: String,
    pub ttl_ms: u64,
    /// The key is the source's, whatever tenant the URL names: a source shared by URL
    /// tenants whose signature does not cover the tenant keeps one dedupe namespace, so a
    /// valid request re-posted under another tenant's URL is a duplicate of the first, not a
    /// second hook for that tenant.
    pub source_wide: bool,
}

/// The tenant slot of a source-wide dedupe key: not a valid tenant id, so it never meets one.
const ANY_TENANT: &str = "*";

/// One accepted request, ready to commit.
#[derive(Debug, Clone)]
pub struct IngestRecord {
    pub envelope: Envelope,
    /// Type names of the source's sinks at ack time, in index order: one row each.
    pub sinks: Vec<&'static str>,
    /// Per sink index, the lane key of an ordered sink entry (empty: no ordered sinks).
    pub lanes: Vec<Option<String>>,
    pub dedupe: Option<Dedupe>,
    /// Sink indexes whose `filter` did not match the hook (ascending): they get no delivery
    /// row. Empty: every sink gets one.
    pub skip_sinks: Vec<u16>,
}

impl IngestRecord {
    /// The dedupe index key (tenant, source, key): also what a fleet hashes to find the key's
    /// owner pod.
    pub fn dedupe_key(&self) -> Option<Vec<u8>> {
        let d = self.dedupe.as_ref()?;
        let tenant = if d.source_wide {
            ANY_TENANT
        } else {
            &self.envelope.tenant
        };
        Some(keys::dedupe(tenant, &self.envelope.source_id, &d.key))
    }
}

/// What a commit did: one result per record, and the ordering lanes that got rows (dispatch
/// gives each its head).
#[derive(Debug, Clone, Default)]
pub struct Committed {
    pub results: Vec<IngestResult>,
    pub lanes: Vec<LaneId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngestResult {
    Accepted {
        id: Uuid,
        seq: u64,
    },
    /// A repeat of a hook already accepted within the dedupe TTL: the original id.
    Duplicate {
        id: Uuid,
    },
}

/// How `ingest_into` commits: what the ack path, a quarantine release and an archive replay
/// each need.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CommitOpts<'a> {
    /// Sweep expired dedupe keys in the same batch.
    pub sweep: bool,
    /// Marks every delivery row (a replay: the job's id).
    pub replay_id: Option<&'a str>,
    /// Writes each hook's archive obligation (the archive is on, and the hook is new to it).
    pub archive: bool,
    /// Rows only for these sink indexes (an archive replay's subset); `None`: every sink.
    pub only_sinks: Option<&'a [u16]>,
}

/// Expired dedupe keys swept per commit, so a sweep never delays an ack by much.
const SWEEP_PER_COMMIT: usize = 64;

impl Store {
    /// Commits a batch with one WAL fsync. Either every accepted record is durable, or the
    /// call fails and none is (their seqs are burned).
    pub fn commit_ingest(
        &self,
        records: &[IngestRecord],
        now: u64,
        sweep: bool,
    ) -> Result<Vec<IngestResult>, StoreError> {
        let encoded: Vec<Vec<u8>> = records
            .iter()
            .map(|r| super::codec::encode_envelope(&r.envelope))
            .collect();
        Ok(self.commit_encoded(records, &encoded, now, sweep)?.results)
    }

    /// `commit_ingest` with each record's envelope already encoded (`encoded[i]` is
    /// `encode_envelope(&records[i].envelope)`): the committer encodes in the request's task, so
    /// the one commit thread spends its time on the write itself.
    pub fn commit_encoded(
        &self,
        records: &[IngestRecord],
        encoded: &[Vec<u8>],
        now: u64,
        sweep: bool,
    ) -> Result<Committed, StoreError> {
        self.commit_encoded_with(records, encoded, now, sweep, |_, _| {})
    }

    /// Adds the commit of `records` to `batch` (the caller writes it, synced): what
    /// `commit_encoded` writes alone, and a quarantine release or an archive replay writes
    /// together with the pen's deletes or the job's cursor.
    pub(crate) fn ingest_into(
        &self,
        db: &rocksdb::DB,
        batch: &mut WriteBatch,
        records: &[IngestRecord],
        encoded: &[Vec<u8>],
        now: u64,
        opts: CommitOpts<'_>,
    ) -> Result<Committed, StoreError> {
        let CommitOpts {
            sweep,
            replay_id,
            archive,
            only_sinks,
        } = opts;
        let hooks = Self::cf(db, keys::CF_HOOKS)?;
        let deliveries = Self::cf(db, keys::CF_DELIVERIES)?;
        let ix = Self::cf(db, keys::CF_INDEX)?;
        let mut results = Vec::with_capacity(records.len());
        let mut lanes: Vec<LaneId> = Vec::new();
        let dedupe_keys: Vec<Option<Vec<u8>>> =
            records.iter().map(IngestRecord::dedupe_key).collect();
        // Dedupe keys taken by this batch: a second copy in it is a duplicate too.
        let mut taken_here: HashMap<&[u8], Uuid> = HashMap::new();
        let fresh = records.len() as u64;
        let first_seq = self.reserve_seqs(fresh);
        let mut seq = first_seq;
        let mut accepted = 0i64;
        let mut stored = 0i64;
        let mut archived = 0i64;
        let mut rows = 0i64;
        let mut bytes = 0i64;
        let mut per_tenant: HashMap<&str, i64> = HashMap::new();
        let mut per_source: HashMap<&str, i64> = HashMap::new();

        for ((rec, value), dedupe_key) in records.iter().zip(encoded).zip(&dedupe_keys) {
            if let Some(dkey) = dedupe_key {
                if let Some(id) = taken_here.get(dkey.as_slice()) {
                    results.push(IngestResult::Duplicate { id: *id });
                    continue;
                }
                if let Some(v) = db.get_pinned_cf(&ix, dkey).map_err(|e| classify(&e))? {
                    match DedupeEntry::decode(&v) {
                        Ok(entry) if entry.expires_at > now => {
                            results.push(IngestResult::Duplicate { id: entry.id });
                            continue;
                        }
                        Ok(_) => {}
                        // A damaged claim guards nothing: the hook is accepted and its own entry
                        // (written below, after the set-aside's delete) takes the key.
                        Err(e) => self.set_aside(db, batch, keys::CF_INDEX, dkey, &v, &e)?,
                    }
                }
            }
            let env = &rec.envelope;
            let mut row_count = 0i64;
            for (i, sink_type) in rec.sinks.iter().enumerate() {
                let sink = i as u16;
                if only_sinks.is_some_and(|only| !only.contains(&sink))
                    || rec.skip_sinks.contains(&sink)
                {
                    continue;
                }
                row_count += 1;
                let row = DeliveryRow {
                    sink_type: (*sink_type).to_string(),
                    tenant: env.tenant.clone(),
                    source_id: env.source_id.clone(),
                    hook_id: env.id,
                    size: env.body.len() as u64,
                    state: RowState::Pending,
                    attempts: 0,
                    first_attempt_at: None,
                    due_at: now,
                    last_error: None,
                    error_class: None,
                    dead_at: None,
                    replay_id: replay_id.map(String::from),
                    lane: rec.lanes.get(i).cloned().flatten(),
                };
                batch.put_cf(&deliveries, keys::delivery(seq, sink), row.encode());
                match LaneId::of(&row, sink) {
                    // An ordered row waits in its lane; dispatch makes it due when it is the head.
                    Some(lane) => {
                        batch.put_cf(ix, keys::lane_pending(lane.bytes(), seq), []);
                        if !lanes.contains(&lane) {
                            lanes.push(lane);
                        }
                    }
                    None => batch.put_cf(ix, keys::due(&env.tenant, now, seq, sink), []),
                }
            }
            if let (Some(d), Some(dkey)) = (&rec.dedupe, dedupe_key) {
                let expires_at = now.saturating_add(d.ttl_ms);
                batch.put_cf(
                    &ix,
                    dkey,
                    DedupeEntry {
                        id: env.id,
                        expires_at,
                    }
                    .encode(),
                );
                batch.put_cf(&ix, keys::dedupe_expiry(expires_at, dkey), []);
                taken_here.insert(dkey.as_slice(), env.id);
            }
            // A hook every sink's filter turned away is kept only for the archive (which
            // reclaims it once archived, as it does a delivered one): with no row and no
            // archive, nothing would ever delete it. Its dedupe entry is kept either way.
            if row_count > 0 || archive {
                batch.put_cf(&hooks, keys::hook(seq), value);
                batch.put_cf(&ix, keys::hook_id(&env.id), seq.to_be_bytes());
                stored += 1;
                bytes += env.body.len() as i64;
            }
            if archive {
                batch.put_cf(&ix, keys::archive_due(seq), []);
                archived += 1;
            }
            accepted += 1;
            rows += row_count;
            *per_tenant.entry(env.tenant.as_str()).or_default() += row_count;
            *per_source.entry(env.source_id.as_str()).or_default() += row_count;
            results.push(IngestResult::Accepted { id: env.id, seq });
            seq += 1;
        }

        batch.merge(keys::META_NEXT_SEQ, (first_seq + fresh).to_be_bytes());
        if accepted > 0 {
            batch.merge(keys::C_HOOKS, stored.to_le_bytes());
            batch.merge(keys::C_HOOK_BYTES, bytes.to_le_bytes());
            batch.merge(keys::C_PENDING, rows.to_le_bytes());
            if archived > 0 {
                batch.merge(keys::C_ARCHIVE_PENDING, archived.to_le_bytes());
            }
            for (tenant, n) in per_tenant {
                batch.merge(keys::c_pending_tenant(tenant), n.to_le_bytes());
            }
            for (source, n) in per_source {
                batch.merge(keys::c_pending_source(source), n.to_le_bytes());
            }
        }
        if sweep {
            self.sweep_dedupe(db, ix, batch, now, &taken_here)?;
        }
        Ok(Committed { results, lanes })
    }

    /// Adds deletes of up to `SWEEP_PER_COMMIT` expired dedupe entries to the batch. An entry
    /// renewed since (it now expires later) keeps its key.
    fn sweep_dedupe(
        &self,
        db: &rocksdb::DB,
        ix: &rocksdb::ColumnFamily,
        batch: &mut WriteBatch,
        now: u64,
        taken_here: &HashMap<&[u8], Uuid>,
    ) -> Result<(), StoreError> {
        let start = [keys::IX_DEDUPE_EXPIRY];
        let mut ro = ReadOptions::default();
        let mut upper = vec![keys::IX_DEDUPE_EXPIRY];
        upper.extend_from_slice(&now.to_be_bytes());
        ro.set_iterate_upper_bound(upper);
        let it = db.iterator_cf_opt(
            ix,
            ro,
            IteratorMode::From(&start, rocksdb::Direction::Forward),
        );
        for item in it.take(SWEEP_PER_COMMIT) {
            let (k, _) = item.map_err(|e| classify(&e))?;
            let Some((expires_at, dkey)) = keys::parse_dedupe_expiry(&k) else {
                continue;
            };
            batch.delete_cf(ix, &k);
            if taken_here.contains_key(dkey.as_slice()) {
                continue;
            }
            if let Some(v) = db.get_pinned_cf(ix, &dkey).map_err(|e| classify(&e))? {
                match DedupeEntry::decode(&v) {
                    Ok(entry) if entry.expires_at <= expires_at => batch.delete_cf(ix, &dkey),
                    Ok(_) => {}
                    Err(e) => self.set_aside(db, batch, keys::CF_INDEX, &dkey, &v, &e)?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::temp_store;

    fn rec(key: Option<&str>) -> IngestRecord {
        IngestRecord {
            envelope: crate::test_util::ingest_test_envelope("t", "s"),
            sinks: vec!["log", "http"],
            lanes: vec![],
            dedupe: key.map(|k| Dedupe {
                key: k.into(),
                ttl_ms: 1000,
                source_wide: false,
            }),
            skip_sinks: Vec::new(),
        }
    }

    #[test]
    fn commits_hooks_rows_and_counters() {
        let (_d, s) = temp_store();
        let r = s
            .commit_ingest(&[rec(None), rec(None)], 100, false)
            .unwrap();
        let IngestResult::Accepted { id, seq } = r[0] else {
            panic!("{r:?}")
        };
        assert_eq!(s.get_hook_by_id(&id).unwrap().unwrap().seq, seq);
        assert_eq!(s.rows_of(seq).unwrap().len(), 2);
        assert_eq!(s.counter(keys::C_HOOKS).unwrap(), 2);
        assert_eq!(s.counter(keys::C_PENDING).unwrap(), 4);
        assert_eq!(s.counter(&keys::c_pending_tenant("t")).unwrap(), 4);
    }

    #[test]
    fn duplicates_collapse_inside_one_batch_and_across_batches_until_expiry() {
        let (_d, s) = temp_store();
        let r = s
            .commit_ingest(
                &[rec(Some("evt_1")), rec(Some("evt_1")), rec(Some("evt_2"))],
                100,
                false,
            )
            .unwrap();
        let IngestResult::Accepted { id: first, .. } = r[0] else {
            panic!()
        };
        assert_eq!(r[1], IngestResult::Duplicate { id: first });
        assert!(matches!(r[2], IngestResult::Accepted { .. }));
        let r = s.commit_ingest(&[rec(Some("evt_1"))], 500, false).unwrap();
        assert_eq!(r[0], IngestResult::Duplicate { id: first });
        // After the TTL (1000 ms from 100) the key is free again.
        let r = s.commit_ingest(&[rec(Some("evt_1"))], 1_200, true).unwrap();
        assert!(matches!(r[0], IngestResult::Accepted { .. }));
        assert_eq!(s.counter(keys::C_HOOKS).unwrap(), 3);
    }

    #[test]
    fn seq_resumes_above_everything_after_reopen() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("store");
        let last = {
            let s = Store::open(&p).unwrap();
            let r = s.commit_ingest(&[rec(None), rec(None)], 1, false).unwrap();
            match r[1] {
                IngestResult::Accepted { seq, .. } => seq,
                _ => panic!(),
            }
        };
        let s = Store::open(&p).unwrap();
        assert!(s.next_seq() > last);
    }
}
