//! The archive: a compactor packs every hook accepted while `storage` is configured into
//! segments (`ankusa_format::segment`) in the blob store, keyed
//! `<key_prefix>/archive/v1/dt=<day>/<node>/<first_seq>-<last_seq>.seg` with a sibling `.idx`,
//! and catalogues them in the store, so one hook can be fetched back by id (a ranged GET), a
//! window re-sent (`kind: archive` replays, `replay::archive`), and a dead row evicted from a
//! bounded DLQ (`dlq_bounds`) without losing its hook.
//!
//! Each tick takes the oldest obligations — with `archive_at: settled` (the default) only of
//! hooks whose deliveries have all settled (delivered or dead), with `ack` all of them: a
//! segment is cut once they reach `roll_bytes` or the oldest has waited `roll_ms`; a backlog
//! yields several segments back to back. The upload comes first, the catalogue commit
//! (obligations cleared, delivered hooks reclaimed) after, so a crash between them uploads the
//! hooks again under a new segment and never loses one. A failure backs off (the interval
//! doubled per failure in a row, jittered, at most 60 s) and never touches ingest: obligations
//! wait in the store.
//!
//! Imports `blob` and `metrics`; the replayer and the admin API read it, it reads neither.

pub mod dlq_bounds;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_api::ArchiveStatus;
use ankusa_config::{ArchiveAt, ConfigError, StorageConfig};
use ankusa_core::now_ms;
use ankusa_format::segment::{self, MAX_SEGMENT_BYTES, Record, SegmentRow};
use ankusa_store::{ArchiveCandidate, ArchivedHook, Envelope, Store, StoreError};
use bytes::Bytes;

use crate::blob::{BlobError, BlobStore};
use crate::blocking::blocking;
use crate::metrics::Metrics;

/// Hooks one segment holds at most.
const MAX_PER_SEGMENT: usize = 50_000;
/// Longest pause after failures in a row.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("blob store: {0}")]
    Blob(#[from] BlobError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A segment or record that does not match its catalogued sha256, or does not decode.
    #[error("corrupt: {0}")]
    Corrupt(String),
}

#[derive(Default)]
struct State {
    last_upload_at: Option<u64>,
    failures: u64,
    last_error: Option<String>,
}

pub struct Archive {
    store: Arc<Store>,
    blob: BlobStore,
    cfg: StorageConfig,
    /// The node's name as it appears in keys.
    node: String,
    metrics: Arc<Metrics>,
    state: Mutex<State>,
}

/// `node.instance` as a key segment: anything outside `[A-Za-z0-9-_.]` becomes `_` (the
/// archive's and the backups' keys, so one node's objects sit under one name).
pub(crate) fn key_segment(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out == "." || out == ".." {
        "node".into()
    } else {
        out
    }
}

/// The blob store of `storage`, built without contacting it: what `Archive::new` writes to,
/// and what `ankusa check-config` builds to refuse what a start would (`cli::check`).
pub fn blob_store(cfg: &StorageConfig) -> Result<BlobStore, ConfigError> {
    // The blob store's errors lead with the key (`storage.s3.endpoint: ...`).
    BlobStore::from_config(cfg).map_err(ConfigError::general)
}

impl Archive {
    /// The archive of this config's `storage`, its compactor started.
    pub fn start(
        store: Arc<Store>,
        cfg: &StorageConfig,
        node: &str,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Archive>, ConfigError> {
        let a = Arc::new(Archive::new(store, cfg, node, metrics)?);
        tokio::spawn(a.clone().run());
        Ok(a)
    }

    pub fn new(
        store: Arc<Store>,
        cfg: &StorageConfig,
        node: &str,
        metrics: Arc<Metrics>,
    ) -> Result<Archive, ConfigError> {
        let blob = blob_store(cfg)?;
        store.set_archiving(true);
        Ok(Archive {
            blob,
            store,
            cfg: cfg.clone(),
            node: key_segment(node),
            metrics,
            state: Mutex::new(State::default()),
        })
    }

    pub fn blob(&self) -> &BlobStore {
        &self.blob
    }

    async fn run(self: Arc<Self>) {
        let interval = Duration::from_millis(self.cfg.interval_ms);
        let mut delay = interval;
        loop {
            tokio::time::sleep(delay).await;
            match self.tick().await {
                // A full segment went: more may be waiting.
                Ok(Tick::Rolled { full: true }) => delay = Duration::ZERO,
                Ok(_) => delay = interval,
                Err(e) => {
                    let failures = {
                        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                        st.failures += 1;
                        st.last_error = Some(e.to_string());
                        st.failures
                    };
                    self.metrics.archive.failures.inc();
                    let base = interval
                        .saturating_mul(1u32 << failures.min(16) as u32)
                        .min(MAX_BACKOFF);
                    delay = base.mul_f64(0.5 + fastrand::f64() * 0.5);
                    tracing::warn!(error = %e, failures, retry_in_ms = delay.as_millis() as u64, "archive upload failed; hooks wait in the store");
                }
            }
        }
    }

    /// One compaction step: packs and uploads at most one segment.
    pub async fn tick(&self) -> Result<Tick, ArchiveError> {
        let store = self.store.clone();
        let roll = self.cfg.roll_bytes;
        let settled = self.cfg.archive_at == ArchiveAt::Settled;
        let (cands, full) =
            blocking(move || store.archive_batch(roll, MAX_PER_SEGMENT, settled)).await?;
        let Some(oldest) = cands.iter().map(|c| c.received_at).min() else {
            return Ok(Tick::Idle);
        };
        let waited = now_ms().saturating_sub(oldest);
        if !full && waited < self.cfg.roll_ms {
            return Ok(Tick::Waiting);
        }
        self.roll(&cands).await?;
        Ok(Tick::Rolled { full })
    }

    /// Packs, uploads and catalogues one segment of `cands`.
    async fn roll(&self, cands: &[ArchiveCandidate]) -> Result<(), ArchiveError> {
        let started = Instant::now();
        let recs: Vec<(u64, &[u8], uuid::Uuid, u64)> = cands
            .iter()
            .map(|c| (c.seq, c.encoded.as_slice(), c.id, c.received_at))
            .collect();
        let packed = segment::pack(&self.node, now_ms(), &recs);
        let h = &packed.header;
        let base = format!(
            "archive/v1/dt={}/{}/{:020}-{:020}",
            segment::day_of(h.min_received_at),
            self.node,
            h.first_seq,
            h.last_seq
        );
        let base = match &self.cfg.key_prefix {
            Some(p) => format!("{p}/{base}"),
            None => base,
        };
        let seg_key = format!("{base}.seg");
        let idx_key = format!("{base}.idx");
        let index = serde_json::to_vec(&packed.index(&seg_key)).expect("index serialises");
        let row = SegmentRow {
            key: seg_key.clone(),
            first_seq: h.first_seq,
            last_seq: h.last_seq,
            count: h.count,
            size: packed.bytes.len() as u64,
            sha256: hex::encode(packed.sha256),
            min_received_at: h.min_received_at,
            max_received_at: h.max_received_at,
            created_at: h.created_at,
        };
        let n = packed.entries.len() as u64;
        self.blob.put(&seg_key, Bytes::from(packed.bytes)).await?;
        self.blob.put(&idx_key, Bytes::from(index)).await?;
        let store = self.store.clone();
        let entries = packed.entries;
        let lens: Vec<u64> = cands.iter().map(|c| c.body_len).collect();
        let tenants: Vec<String> = cands.iter().map(|c| c.tenant.clone()).collect();
        blocking(move || store.archive_commit(&row, &entries, &lens, &tenants)).await?;
        let elapsed = started.elapsed();
        self.metrics
            .archive
            .upload_seconds
            .observe(elapsed.as_secs_f64());
        self.metrics.archive.segments.inc();
        self.metrics.archive.hooks.inc_by(n);
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.last_upload_at = Some(now_ms());
        st.failures = 0;
        st.last_error = None;
        tracing::debug!(key = %seg_key, hooks = n, elapsed_ms = elapsed.as_millis() as u64, "segment archived");
        Ok(())
    }

    /// The catalogue's entry of one archived hook (its segment, where its record sits, its
    /// tenant), from the store alone: nothing is read from the blob store. `None` when the
    /// hook is not archived. `read_hook` then reads the hook itself.
    pub async fn lookup(&self, id: &uuid::Uuid) -> Result<Option<ArchivedHook>, ArchiveError> {
        let store = self.store.clone();
        let id = *id;
        Ok(blocking(move || store.archive_lookup(&id)).await?)
    }

    /// Reads the hook of a catalogue entry: a ranged GET of its record, checked against its
    /// catalogued sha256.
    pub async fn read_hook(
        &self,
        found: ArchivedHook,
    ) -> Result<(Envelope, SegmentRow), ArchiveError> {
        let e = found.entry;
        let bytes = self
            .blob
            .get_range(&found.segment.key, e.offset, e.len)
            .await?;
        let env = segment::decode_record(e.seq, &bytes, &e.sha256)
            .map_err(|err| ArchiveError::Corrupt(format!("{}: {err}", found.segment.key)))?;
        Ok((env, found.segment))
    }

    /// Reads a whole segment, checked against its catalogued sha256.
    pub async fn read_segment(&self, row: &SegmentRow) -> Result<Vec<Record>, ArchiveError> {
        let bytes = self.blob.get(&row.key, MAX_SEGMENT_BYTES).await?;
        let (_, records) = segment::decode_segment(&bytes, &row.sha256())
            .map_err(|err| ArchiveError::Corrupt(format!("{}: {err}", row.key)))?;
        Ok(records)
    }

    /// `GET /v1/status`'s `archive`.
    pub fn status(&self) -> ArchiveStatus {
        let counts = self.store.archive_counts().unwrap_or_default();
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        ArchiveStatus {
            store: self.blob.kind().to_string(),
            pending: counts.pending,
            segments: counts.segments,
            archived: counts.archived,
            last_upload_at: st.last_upload_at,
            failures: st.failures,
            last_error: st.last_error.clone(),
        }
    }

    /// Copies the archive's state into its gauges (at scrape time).
    pub fn gauges(&self) {
        let counts = self.store.archive_counts().unwrap_or_default();
        self.metrics.archive.pending.set(counts.pending);
        let age = self
            .store
            .oldest_unarchived_at()
            .ok()
            .flatten()
            .map(|at| now_ms().saturating_sub(at) as f64 / 1000.0)
            .unwrap_or(0.0);
        self.metrics.archive.oldest_unarchived_age_seconds.set(age);
    }
}

/// What a compaction step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    Idle,
    /// Hooks wait for more to fill a segment or for `roll_ms`.
    Waiting,
    Rolled {
        full: bool,
    },
}

/// Clears the obligations left by an archive that is no longer configured, so the hooks they
/// kept are reclaimed once delivered; runs once at boot, in bounded batches.
pub fn drop_stale_obligations(store: &Store) -> Result<usize, StoreError> {
    let mut total = 0;
    loop {
        let n = store.drop_archive_obligations(10_000)?;
        total += n;
        if n == 0 {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_become_safe_key_segments() {
        assert_eq!(key_segment("ankusa-0"), "ankusa-0");
        assert_eq!(key_segment("a/b c"), "a_b_c");
        assert_eq!(key_segment(".."), "node");
    }
}
