//! The quarantine pen as stored state (family `quarantine`): per entry a summary by time
//! (`s<received_at:8><id:16>`) and the whole envelope (`e<id:16>`), written in one synced batch
//! with the pen's counters (`c:quarantine_entries`, `c:quarantine_bytes`) and its shares per
//! source and tenant (`pen_shares`), so a restart neither empties the pen nor forgets its size
//! or who holds it. Listing, purging, the expiry and a release job read the summaries; only a
//! release reads envelopes, and only of the entries it looks at.

use ankusa_api::JobState;
use rocksdb::{DB, IteratorMode, ReadOptions, WriteBatch};
use uuid::Uuid;

use super::codec::{self, Envelope, PenSummary};
use super::ingest::{Committed, IngestRecord, IngestResult};
use super::job::StoredJob;
use super::{Store, StoreError, classify, keys};

/// Summaries one listing, purge or release step examines at most.
pub const PEN_MAX_EXAMINED: usize = 100_000;

/// One entry to hold: its summary (`size` set to the envelope's length) and its encoded
/// envelope.
#[derive(Debug, Clone)]
pub struct PenWrite {
    pub summary: PenSummary,
    pub envelope: Vec<u8>,
}

/// Which entries a listing, purge or release means; set fields combine with AND. `since` and
/// `until` bound `received_at` (unix ms, inclusive).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PenFilter {
    pub tenant: Option<String>,
    pub source_id: Option<String>,
    pub id: Option<Uuid>,
    pub since: Option<u64>,
    pub until: Option<u64>,
}

impl PenFilter {
    fn matches(&self, s: &PenSummary) -> bool {
        self.tenant.as_deref().is_none_or(|t| t == s.tenant)
            && self.source_id.as_deref().is_none_or(|x| x == s.source_id)
            && self.id.is_none_or(|id| id == s.id)
            && self.since.is_none_or(|t| s.received_at >= t)
            && self.until.is_none_or(|t| s.received_at <= t)
    }

    /// [lower, upper) of the summary keys inside since/until.
    fn range(&self) -> (Vec<u8>, Vec<u8>) {
        let mut lower = vec![keys::PEN_SUMMARY];
        lower.extend_from_slice(&self.since.unwrap_or(0).to_be_bytes());
        let upper = match self.until {
            Some(u) if u < u64::MAX => {
                let mut k = vec![keys::PEN_SUMMARY];
                k.extend_from_slice(&(u + 1).to_be_bytes());
                k
            }
            _ => keys::prefix_end(&[keys::PEN_SUMMARY]),
        };
        (lower, upper)
    }
}

/// An entry a release step looks at.
#[derive(Debug, Clone)]
pub struct PenHeld {
    pub summary: PenSummary,
    pub envelope: Envelope,
}

/// A page of entries for a release step, oldest first, after the job's cursor.
#[derive(Debug, Clone, Default)]
pub struct PenPage {
    pub entries: Vec<PenHeld>,
    /// The last summary key examined: the job's next cursor.
    pub last_key: Option<Vec<u8>>,
    pub examined: u64,
    /// The scan reached the end of the job's range.
    pub finished: bool,
}

/// What `DELETE /v1/quarantine` removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PenPurged {
    pub deleted: u64,
    pub bytes: u64,
}

/// A release step's outcome: the entries that passed, committed as hooks.
#[derive(Debug, Clone, Default)]
pub struct PenRelease {
    pub committed: Committed,
    /// Entries that left the pen (accepted hooks and duplicates) and their bytes.
    pub removed: PenPurged,
    pub accepted: u64,
    pub duplicates: u64,
    /// Delivery rows written (one per sink of each accepted hook).
    pub rows: u64,
}

impl Store {
    /// (entries, bytes) the pen holds, from its counters.
    pub fn pen_totals(&self) -> Result<(i64, i64), StoreError> {
        Ok((
            self.counter(keys::C_PEN_ENTRIES)?,
            self.counter(keys::C_PEN_BYTES)?,
        ))
    }

    /// Per source holding entries: its entries, bytes and oldest `received_at`, from one
    /// forward scan of the summaries (oldest first) that examines at most `PEN_MAX_EXAMINED`;
    /// the flag says whether the scan saw every entry (else the counts are lower bounds).
    pub fn pen_by_source(&self) -> Result<(Vec<ankusa_api::PenSourceStatus>, bool), StoreError> {
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_QUARANTINE)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(vec![keys::PEN_SUMMARY + 1]);
        let start = [keys::PEN_SUMMARY];
        let mut by: std::collections::BTreeMap<String, ankusa_api::PenSourceStatus> =
            Default::default();
        let mut complete = true;
        for (examined, item) in db
            .iterator_cf_opt(
                cf,
                ro,
                IteratorMode::From(&start, rocksdb::Direction::Forward),
            )
            .enumerate()
        {
            if examined >= PEN_MAX_EXAMINED {
                complete = false;
                break;
            }
            let (_, v) = item.map_err(|e| classify(&e))?;
            if let Some(s) = decode_summary(&v) {
                let e =
                    by.entry(s.source_id.clone())
                        .or_insert_with(|| ankusa_api::PenSourceStatus {
                            source: s.source_id.clone(),
                            oldest_received_at: Some(s.received_at),
                            ..Default::default()
                        });
                e.entries += 1;
                e.bytes += s.size as i64;
                e.oldest_received_at = e.oldest_received_at.min(Some(s.received_at));
            }
        }
        Ok((by.into_values().collect(), complete))
    }

    /// Holds `writes` with one synced write: all of them or none.
    pub fn pen_put(&self, writes: &[PenWrite]) -> Result<(), StoreError> {
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_QUARANTINE)?;
        let size: usize = writes.iter().map(|w| w.envelope.len() + 256).sum();
        let mut batch = WriteBatch::with_capacity_bytes(size);
        let mut bytes = 0i64;
        for w in writes {
            let s = &w.summary;
            batch.put_cf(cf, keys::pen_summary(s.received_at, &s.id), s.encode());
            batch.put_cf(cf, keys::pen_envelope(&s.id), &w.envelope);
            bytes += s.size as i64;
        }
        batch.merge(keys::C_PEN_ENTRIES, (writes.len() as i64).to_le_bytes());
        batch.merge(keys::C_PEN_BYTES, bytes.to_le_bytes());
        let added: Vec<&PenSummary> = writes.iter().map(|w| &w.summary).collect();
        self.pen_write(&db, batch, &added, &[])
    }

    /// Entries matching `f`, newest first, at most `limit`; no bodies.
    pub fn pen_list(&self, f: &PenFilter, limit: usize) -> Result<Vec<PenSummary>, StoreError> {
        Ok(self.pen_list_page(f, limit, None)?.0)
    }

    /// A page of `pen_list` below `before` (the cursor: the last summary key of the previous
    /// page), and the cursor of the next page when the scan stopped at `limit` or at
    /// `PEN_MAX_EXAMINED` before the end.
    pub fn pen_list_page(
        &self,
        f: &PenFilter,
        limit: usize,
        before: Option<&[u8]>,
    ) -> Result<(Vec<PenSummary>, Option<Vec<u8>>), StoreError> {
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_QUARANTINE)?;
        if let Some(id) = f.id {
            let one = self.pen_by_id(&db, &id)?.filter(|s| f.matches(s));
            return Ok((one.into_iter().collect(), None));
        }
        let (lower, mut upper) = f.range();
        if let Some(b) = before
            && b < upper.as_slice()
        {
            upper = b.to_vec();
        }
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(lower);
        ro.set_iterate_upper_bound(upper);
        let mut out = Vec::new();
        let mut next = None;
        let mut last_key: Option<Vec<u8>> = None;
        for (examined, item) in db.iterator_cf_opt(cf, ro, IteratorMode::End).enumerate() {
            if out.len() >= limit || examined >= PEN_MAX_EXAMINED {
                next = last_key.take();
                break;
            }
            let (k, v) = item.map_err(|e| classify(&e))?;
            last_key = Some(k.to_vec());
            if let Some(s) = decode_summary(&v)
                && f.matches(&s)
            {
                out.push(s);
            }
        }
        Ok((out, next))
    }

    /// The summary of entry `id`, found through its envelope (which holds `received_at`).
    fn pen_by_id(&self, db: &DB, id: &Uuid) -> Result<Option<PenSummary>, StoreError> {
        let cf = Self::cf(db, keys::CF_QUARANTINE)?;
        let Some(env) = db
            .get_pinned_cf(cf, keys::pen_envelope(id))
            .map_err(|e| classify(&e))?
        else {
            return Ok(None);
        };
        let env = codec::decode_envelope(0, &env)?;
        let Some(v) = db
            .get_pinned_cf(cf, keys::pen_summary(env.received_at, id))
            .map_err(|e| classify(&e))?
        else {
            return Ok(None);
        };
        Ok(decode_summary(&v))
    }

    /// Deletes up to `limit` entries matching `f`, oldest first, and frees their bytes (and
    /// their shares). The expiry is a purge of the entries received up to its cutoff.
    pub fn pen_purge(&self, f: &PenFilter, limit: usize) -> Result<PenPurged, StoreError> {
        let _pen = self.pen_guard();
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_QUARANTINE)?;
        let victims: Vec<PenSummary> = match f.id {
            Some(id) => self
                .pen_by_id(&db, &id)?
                .filter(|s| f.matches(s))
                .into_iter()
                .collect(),
            None => {
                let (lower, upper) = f.range();
                let mut ro = ReadOptions::default();
                ro.set_iterate_upper_bound(upper);
                let it = db.iterator_cf_opt(
                    cf,
                    ro,
                    IteratorMode::From(&lower, rocksdb::Direction::Forward),
                );
                let mut out = Vec::new();
                for (examined, item) in it.enumerate() {
                    if out.len() >= limit || examined >= PEN_MAX_EXAMINED {
                        break;
                    }
                    let (_, v) = item.map_err(|e| classify(&e))?;
                    if let Some(s) = decode_summary(&v)
                        && f.matches(&s)
                    {
                        out.push(s);
                    }
                }
                out
            }
        };
        if victims.is_empty() {
            return Ok(PenPurged::default());
        }
        let mut batch = WriteBatch::default();
        let purged = remove(&mut batch, cf, &victims);
        self.pen_write(&db, batch, &[], &victims)?;
        Ok(purged)
    }

    /// The next entries of a release job after `after` (a summary key), matching `f` and
    /// received at or before `until`: at most `limit` entries and `PEN_MAX_EXAMINED` keys.
    pub fn pen_page(
        &self,
        f: &PenFilter,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<PenPage, StoreError> {
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_QUARANTINE)?;
        let (lower, upper) = f.range();
        let start = match after {
            Some(a) => {
                let mut k = a.to_vec();
                k.push(0);
                k.max(lower)
            }
            None => lower,
        };
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(upper);
        let it = db.iterator_cf_opt(
            cf,
            ro,
            IteratorMode::From(&start, rocksdb::Direction::Forward),
        );
        let mut page = PenPage {
            finished: true,
            ..Default::default()
        };
        for item in it {
            if page.entries.len() >= limit || page.examined as usize >= PEN_MAX_EXAMINED {
                page.finished = false;
                break;
            }
            let (k, v) = item.map_err(|e| classify(&e))?;
            page.examined += 1;
            page.last_key = Some(k.to_vec());
            let Some(summary) = decode_summary(&v) else {
                continue;
            };
            if !f.matches(&summary) {
                continue;
            }
            let Some(env) = db
                .get_pinned_cf(cf, keys::pen_envelope(&summary.id))
                .map_err(|e| classify(&e))?
            else {
                continue;
            };
            match codec::decode_envelope(0, &env) {
                Ok(envelope) => page.entries.push(PenHeld { summary, envelope }),
                Err(e) => {
                    tracing::error!(id = %summary.id, error = %e, "a quarantined envelope does not decode; it stays in the pen");
                }
            }
        }
        Ok(page)
    }

    /// Commits the entries that passed (`records[i]` is the hook of `passed[i]`, `encoded[i]`
    /// its envelope) through the ingest commit, with the job's id on every delivery row, and
    /// deletes them from the pen, in one synced batch with the job (its cursor and counts
    /// updated here). An entry purged since the page was read is left out; a duplicate of a
    /// hook already accepted leaves the pen too.
    pub fn pen_release(
        &self,
        job: &mut StoredJob,
        passed: &[PenSummary],
        records: &[IngestRecord],
        encoded: &[Vec<u8>],
        now: u64,
    ) -> Result<PenRelease, StoreError> {
        let _pen = self.pen_guard();
        let _gate = self.dedupe_gate(true);
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_QUARANTINE)?;
        let mut keep_summaries = Vec::new();
        let mut keep_records = Vec::new();
        let mut keep_encoded = Vec::new();
        for ((s, r), e) in passed.iter().zip(records).zip(encoded) {
            let still = db
                .get_pinned_cf(cf, keys::pen_summary(s.received_at, &s.id))
                .map_err(|e| classify(&e))?
                .is_some();
            if still {
                keep_summaries.push(s.clone());
                keep_records.push(r.clone());
                keep_encoded.push(e.clone());
            }
        }
        let mut batch = WriteBatch::default();
        let opts = super::ingest::CommitOpts {
            replay_id: Some(job.id.as_str()),
            archive: self.archiving(),
            ..Default::default()
        };
        let committed =
            self.ingest_into(&db, &mut batch, &keep_records, &keep_encoded, now, opts)?;
        let removed = remove(&mut batch, cf, &keep_summaries);
        let mut out = PenRelease {
            removed,
            ..Default::default()
        };
        for (res, rec) in committed.results.iter().zip(&keep_records) {
            match res {
                IngestResult::Accepted { .. } => {
                    out.accepted += 1;
                    out.rows += rec.sinks.len() as u64;
                }
                IngestResult::Duplicate { .. } => out.duplicates += 1,
            }
        }
        job.moved += out.rows;
        job.released += out.accepted;
        job.skipped += out.duplicates;
        job.updated_at = now;
        if job.state == JobState::Completed && job.completed_at.is_none() {
            job.completed_at = Some(now);
        }
        batch.put(keys::job(&job.id), job.encode());
        self.pen_write(&db, batch, &[], &keep_summaries)?;
        out.committed = committed;
        Ok(out)
    }
}

/// Adds the deletes of these entries and their counters to `batch`.
fn remove(batch: &mut WriteBatch, cf: &rocksdb::ColumnFamily, entries: &[PenSummary]) -> PenPurged {
    let mut bytes = 0u64;
    for s in entries {
        batch.delete_cf(cf, keys::pen_summary(s.received_at, &s.id));
        batch.delete_cf(cf, keys::pen_envelope(&s.id));
        bytes += s.size;
    }
    batch.merge(keys::C_PEN_ENTRIES, (-(entries.len() as i64)).to_le_bytes());
    batch.merge(keys::C_PEN_BYTES, (-(bytes as i64)).to_le_bytes());
    PenPurged {
        deleted: entries.len() as u64,
        bytes,
    }
}

/// A summary, or `None` (logged) when it does not decode: the entry stays where it is, and no
/// listing or release stops for it.
fn decode_summary(v: &[u8]) -> Option<PenSummary> {
    match PenSummary::decode(v) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::error!(error = %e, "a quarantine summary does not decode; skipped");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::temp_store;

    fn entry(tenant: &str, source: &str, at: u64, body: &'static [u8]) -> PenWrite {
        let env = Envelope {
            received_at: at,
            ..Envelope::new(tenant, source, bytes::Bytes::from_static(body))
        };
        let encoded = codec::encode_envelope(&env);
        PenWrite {
            summary: PenSummary {
                id: env.id,
                source_id: source.into(),
                tenant: tenant.into(),
                received_at: at,
                reason: "no_match".into(),
                size: encoded.len() as u64,
                method: "POST".into(),
                path: format!("/webhooks/{source}"),
                url_tenant: false,
            },
            envelope: encoded,
        }
    }

    #[test]
    fn pages_walk_the_whole_pen_newest_first_with_a_cursor() {
        let (_d, s) = temp_store();
        let ws: Vec<PenWrite> = (0..7).map(|i| entry("a", "src", 100 + i, b"{}")).collect();
        s.pen_put(&ws).unwrap();
        let mut seen = Vec::new();
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let (page, next) = s
                .pen_list_page(&PenFilter::default(), 3, cursor.as_deref())
                .unwrap();
            seen.extend(page.iter().map(|e| e.received_at));
            match next {
                Some(n) => cursor = Some(n),
                None => break,
            }
        }
        assert_eq!(
            seen,
            vec![106, 105, 104, 103, 102, 101, 100],
            "each once, newest first"
        );
    }

    #[test]
    fn puts_list_newest_first_and_purge_oldest_first_with_their_bytes() {
        let (d, s) = temp_store();
        let ws: Vec<PenWrite> = (0..5)
            .map(|i| entry(if i % 2 == 0 { "a" } else { "b" }, "src", 100 + i, b"{}"))
            .collect();
        s.pen_put(&ws).unwrap();
        let total: u64 = ws.iter().map(|w| w.summary.size).sum();
        assert_eq!(s.pen_totals().unwrap(), (5, total as i64));
        let all = s.pen_list(&PenFilter::default(), 100).unwrap();
        let at: Vec<u64> = all.iter().map(|e| e.received_at).collect();
        assert_eq!(at, vec![104, 103, 102, 101, 100]);
        let a = PenFilter {
            tenant: Some("a".into()),
            ..Default::default()
        };
        assert_eq!(s.pen_list(&a, 100).unwrap().len(), 3);
        let one = PenFilter {
            id: Some(ws[3].summary.id),
            ..Default::default()
        };
        assert_eq!(s.pen_list(&one, 100).unwrap()[0].received_at, 103);

        let p = s.pen_purge(&a, 2).unwrap();
        assert_eq!(p.deleted, 2);
        assert_eq!(p.bytes, ws[0].summary.size + ws[2].summary.size);
        let left: Vec<u64> = s
            .pen_list(&PenFilter::default(), 100)
            .unwrap()
            .iter()
            .map(|e| e.received_at)
            .collect();
        assert_eq!(left, vec![104, 103, 101], "the two oldest of tenant a went");
        let window = PenFilter {
            since: Some(101),
            until: Some(103),
            ..Default::default()
        };
        assert_eq!(s.pen_purge(&window, 100).unwrap().deleted, 2);
        // Counters survive a reopen.
        drop(s);
        let s = Store::open(&d.path().join("store")).unwrap();
        assert_eq!(s.pen_totals().unwrap(), (1, ws[4].summary.size as i64));
        assert_eq!(s.pen_purge(&one, 10).unwrap().deleted, 0, "already gone");
    }

    #[test]
    fn pages_resume_after_the_cursor() {
        let (_d, s) = temp_store();
        let ws: Vec<PenWrite> = (0..5).map(|i| entry("t", "src", 10 + i, b"x")).collect();
        s.pen_put(&ws).unwrap();
        let f = PenFilter {
            until: Some(13),
            ..Default::default()
        };
        let p = s.pen_page(&f, None, 2).unwrap();
        assert_eq!(p.entries.len(), 2);
        assert!(!p.finished);
        let p2 = s.pen_page(&f, p.last_key.as_deref(), 10).unwrap();
        let at: Vec<u64> = p2.entries.iter().map(|e| e.summary.received_at).collect();
        assert_eq!(
            at,
            vec![12, 13],
            "entries received after `until` are not touched"
        );
        assert!(p2.finished);
        assert_eq!(&p2.entries[0].envelope.body[..], b"x");
    }
}
