//! `ankusa-store`: the gateway node's RocksDB store: hooks, delivery rows, indexes, counters,
//! the quarantine pen, archive obligations and replay job records.
//!
//! The only code that knows column families and key bytes (`keys`, `codec`): callers speak
//! hooks, tenants and seqs, and hold lanes (`LaneId`) and scan positions (`DueCursor`,
//! `DeadCursor`) as opaque values. `ingest` commits new hooks; `queue` claims due rows and
//! records outcomes; `dlq` pages and deletes dead rows; `jobs` moves them back for replays;
//! `index` is what all of them write besides the rows (counters, the dead index); `audit` is the
//! lifecycle events' trail. Every method
//! is synchronous and meant for a blocking thread. A failed write marks the store unhealthy and
//! asks for a reopen (at most once per 5 s) so a latched RocksDB error clears once the cause
//! (a full disk, a read-only remount) is gone; unreadable state is never treated as empty.
//!
//! May import: `ankusa-format` (the bytes), `ankusa-core` (the stored hook, the clock),
//! `ankusa-config` (where the store lives, error classes) and `ankusa-api` (the DLQ filter and
//! page types its scans take and return). Nothing of the gateway: the store is below it, and
//! the replay job it persists is its own record (`job::StoredJob`), not the API's type, so the
//! admin API can change without changing stored bytes. It is the only crate linking RocksDB.

mod archive;
mod audit;
mod corrupt;
mod dlq;
mod index;
mod ingest;
mod intake;
mod job;
mod jobs;
mod lanes;
mod pen;
mod pen_shares;
mod queue;
mod seed;
mod snapshot;

// Key bytes and value encodings live in `ankusa-format` (fuzzed without RocksDB); the store
// is still their only user, under the same module names.
use ankusa_format::{codec, keys};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ankusa_core::now_ms;
use rocksdb::{
    ColumnFamily, ColumnFamilyDescriptor, DB, DBRecoveryMode, IteratorMode, MergeOperands, Options,
    ReadOptions, WriteOptions,
};
use serde::Serialize;

pub use archive::{ArchiveCandidate, ArchiveCounts, ArchivedHook};
pub use audit::{AUDIT_MAX_EXAMINED, AuditCursor, AuditEvent, AuditFilter, AuditPage, AuditSwept};
pub use codec::{DeliveryRow, Envelope, ErrorClass, PenSummary, RowState, encode_envelope};
pub use corrupt::{CheckReport, CorruptEntry};
pub use dlq::MAX_EXAMINED;
pub use index::{DeadCursor, LaneId};
pub use ingest::{Committed, Dedupe, IngestRecord, IngestResult};
pub use job::StoredJob;
pub use jobs::{JobSettled, NoGate, ReplayGate, StepResult};
pub use lanes::{LaneAdvance, LaneState};
pub use pen::{PEN_MAX_EXAMINED, PenFilter, PenHeld, PenPage, PenPurged, PenRelease, PenWrite};
pub use pen_shares::{Held, Usage};
pub use queue::{ClaimPage, Claimed, DeadLetterResume, DueCursor, Outcome};
/// The batch `Store::commit_encoded_with` lets its caller add writes to (the intake log's
/// pending marks), so that caller needs no RocksDB dependency of its own.
pub use rocksdb::WriteBatch;
pub use seed::DeadSeed;

/// The store directory of a config: `<data_dir>/<instance>/store`.
pub fn store_path(c: &ankusa_config::Config) -> PathBuf {
    c.node.data_dir.join(&c.node.instance).join("store")
}

/// Why a store operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The write did not reach the disk (full disk, IO error, read-only, reopening).
    #[error("store unavailable ({class}): {message}")]
    Unavailable {
        class: &'static str,
        message: String,
    },
    /// Data that cannot be decoded or a database that refuses to open because of damage.
    #[error("store corrupt: {0}")]
    Corrupt(String),
    /// The store could not be opened.
    #[error("cannot open store at {path}: {reason}")]
    Open { path: String, reason: String },
}

impl From<ankusa_format::FormatError> for StoreError {
    fn from(e: ankusa_format::FormatError) -> Self {
        match e {
            ankusa_format::FormatError::Corrupt(msg) => StoreError::Corrupt(msg),
        }
    }
}

impl StoreError {
    /// Whether the disk or the database failed (worth a reopen), rather than a row's bytes.
    pub fn is_io(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }

    pub fn class(&self) -> &'static str {
        match self {
            StoreError::Unavailable { class, .. } => class,
            StoreError::Corrupt(_) => "corruption",
            StoreError::Open { .. } => "open_failed",
        }
    }
}

/// Maps a RocksDB error to the classes counted in `ankusa_store_write_failures_total`.
fn classify(e: &rocksdb::Error) -> StoreError {
    let msg = e.to_string();
    let lower = msg.to_ascii_lowercase();
    let class = if lower.contains("no space") || lower.contains("nospace") {
        "no_space"
    } else if lower.contains("read-only") || lower.contains("read only") {
        "read_only"
    } else if matches!(e.kind(), rocksdb::ErrorKind::Corruption) {
        "corruption"
    } else if matches!(
        e.kind(),
        rocksdb::ErrorKind::Busy | rocksdb::ErrorKind::TryAgain
    ) {
        "busy"
    } else if matches!(e.kind(), rocksdb::ErrorKind::IOError) {
        "io_error"
    } else {
        "other"
    };
    StoreError::Unavailable {
        class,
        message: msg,
    }
}

fn unavailable(message: &str) -> StoreError {
    StoreError::Unavailable {
        class: "other",
        message: message.to_string(),
    }
}

/// What `/ready` and the write-failure metrics read.
#[derive(Default)]
pub struct Health {
    last_sync_ok_ms: AtomicU64,
    last_failure_ms: AtomicU64,
    last_failure_class: Mutex<Option<&'static str>>,
    failures: Mutex<std::collections::BTreeMap<&'static str, u64>>,
    reopens: Mutex<(u64, u64)>,
}

impl Health {
    pub fn last_sync_ok_ms(&self) -> u64 {
        self.last_sync_ok_ms.load(Ordering::Relaxed)
    }
    pub fn last_failure_ms(&self) -> u64 {
        self.last_failure_ms.load(Ordering::Relaxed)
    }
    pub fn last_failure_class(&self) -> Option<&'static str> {
        *self
            .last_failure_class
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
    /// Write failures per class since start.
    pub fn failures(&self) -> Vec<(&'static str, u64)> {
        let f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        f.iter().map(|(k, v)| (*k, *v)).collect()
    }
    /// (successful, failed) reopens since start.
    pub fn reopens(&self) -> (u64, u64) {
        *self.reopens.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn ok(&self, now_ms: u64) {
        self.last_sync_ok_ms.store(now_ms, Ordering::Relaxed);
    }
    fn failed(&self, now_ms: u64, class: &'static str) {
        self.last_failure_ms.store(now_ms, Ordering::Relaxed);
        *self
            .last_failure_class
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(class);
        *self
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(class)
            .or_default() += 1;
    }
}

/// The node-wide counters: stored hooks and their body bytes, delivery rows queued (pending or
/// in flight) and dead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub hooks: i64,
    pub hook_bytes: i64,
    pub pending: i64,
    pub dead: i64,
}

pub struct Store {
    path: PathBuf,
    db: RwLock<Option<Arc<DB>>>,
    next_seq: AtomicU64,
    pub health: Health,
    reopen_lock: Mutex<()>,
    last_reopen_attempt_ms: AtomicU64,
    /// Serialises every read-modify-write of existing delivery rows: dispatch's claims,
    /// outcomes and lane hand-overs, and the admin's dead-lettering, DLQ deletes and replay
    /// moves. Each reads a row and writes it back; two of them on one row would lose a
    /// transition (a claim writing back a row the admin had just dead-lettered revived it).
    rows: Mutex<()>,
    /// The pen's locks and its shares in memory (`pen_shares`).
    pen: pen_shares::PenState,
    /// The archive is on: every new hook gets an archive obligation, and its rows' last
    /// delivery leaves it to the compactor (`archive`).
    archiving: std::sync::atomic::AtomicBool,
    /// Dedupe decisions are serialised per key by the commit partitions (a key always goes to
    /// the same one); a quarantine release decides outside them, so it takes this exclusively
    /// while the partitions take it shared: a provider retry committed in the same instant as
    /// the release of its quarantined copy cannot be accepted twice.
    dedupe_gate: RwLock<()>,
    /// The audit trail's next seq (`audit`).
    audit_seq: audit::AuditSeq,
}

/// A hold on `Store::dedupe_gate`.
pub(crate) enum DedupeGuard<'a> {
    Shared(#[allow(dead_code)] std::sync::RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code)] std::sync::RwLockWriteGuard<'a, ()>),
}

fn merge(key: &[u8], existing: Option<&[u8]>, ops: &MergeOperands) -> Option<Vec<u8>> {
    if key == keys::META_NEXT_SEQ {
        // Highest seq reserved so far; partitions commit out of order, so it is a max. A value
        // of the wrong length counts as nothing: this runs inside RocksDB, where a panic aborts
        // the process.
        let mut max = existing.and_then(keys::be64).unwrap_or(0);
        for op in ops {
            max = max.max(keys::be64(op).unwrap_or(0));
        }
        return Some(max.to_be_bytes().to_vec());
    }
    let read = |b: &[u8]| -> i64 {
        let mut a = [0u8; 8];
        if b.len() == 8 {
            a.copy_from_slice(b);
        }
        i64::from_le_bytes(a)
    };
    let mut sum = existing.map(read).unwrap_or(0);
    for op in ops {
        sum = sum.saturating_add(read(op));
    }
    Some(sum.to_le_bytes().to_vec())
}

fn db_options() -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.create_missing_column_families(true);
    o.set_paranoid_checks(true);
    o.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
    o.set_max_background_jobs(2);
    o.set_bytes_per_sync(1 << 20);
    o.set_merge_operator_associative("ankusa_counters", merge);
    // Commit partitions write concurrently: let one's memtable insert overlap another's WAL
    // write instead of queueing whole writes behind each other.
    o.set_enable_pipelined_write(true);
    // A restart replays every live WAL file before the store opens (about 90 MB/s here): with
    // one 48 MiB memtable per family, a kill while deliveries drained a backlog left ~100 MB
    // and 2.6 s to `/ready`. Past this total the families holding the oldest WAL are flushed.
    o.set_max_total_wal_size(MAX_TOTAL_WAL_BYTES);
    file_sizes(&mut o);
    o
}

/// Bound of the live WAL (see `db_options`).
const MAX_TOTAL_WAL_BYTES: u64 = 64 << 20;

/// Keeps every SST file well under the 64 MiB a backup uploads in one piece: a flush writes at
/// most about one memtable, a compaction cuts its output at the target size.
fn file_sizes(o: &mut Options) {
    o.set_write_buffer_size(48 << 20);
    o.set_target_file_size_base(32 << 20);
}

/// Every family; `with_pen: false` leaves out the quarantine pen's, `with_audit: false` the
/// audit trail's, which a store made before them does not have (a read-only open cannot create
/// them; a read-write open creates them: `create_missing_column_families`).
fn cf_descriptors(with_pen: bool, with_audit: bool) -> Vec<ColumnFamilyDescriptor> {
    let mut v = vec![ColumnFamilyDescriptor::new(
        rocksdb::DEFAULT_COLUMN_FAMILY_NAME,
        db_options(),
    )];
    let pen = with_pen.then_some(keys::CF_QUARANTINE);
    let audit = with_audit.then_some(keys::CF_AUDIT);
    for name in keys::ALL_CFS.into_iter().chain(pen).chain(audit) {
        let mut o = Options::default();
        o.set_paranoid_checks(true);
        file_sizes(&mut o);
        v.push(ColumnFamilyDescriptor::new(name, o));
    }
    v
}

/// Opens the database. A directory that holds files but no `CURRENT` is refused: starting
/// empty there would silently drop what it held.
fn open_db(path: &Path) -> Result<DB, StoreError> {
    let open_err = |reason: String| StoreError::Open {
        path: path.display().to_string(),
        reason,
    };
    if path.exists() {
        let mut entries = std::fs::read_dir(path).map_err(|e| open_err(e.to_string()))?;
        let non_empty = entries.next().is_some();
        if non_empty && !path.join("CURRENT").exists() {
            return Err(open_err(
                "the directory holds files but no RocksDB CURRENT file; refusing to start empty"
                    .into(),
            ));
        }
    } else {
        create_dir_synced(path).map_err(|e| open_err(e.to_string()))?;
    }
    DB::open_cf_descriptors(&db_options(), path, cf_descriptors(true, true))
        .map_err(|e| open_err(e.to_string()))
}

/// Creates a directory and fsyncs every parent it created, so the directory survives power
/// loss along with what is written in it.
pub fn create_dir_synced(path: &Path) -> std::io::Result<()> {
    let mut missing = Vec::new();
    let mut p = Some(path);
    while let Some(dir) = p {
        if dir.exists() {
            break;
        }
        missing.push(dir.to_path_buf());
        p = dir.parent();
    }
    std::fs::create_dir_all(path)?;
    for dir in missing.iter().rev() {
        if let Some(parent) = dir.parent()
            && let Ok(f) = std::fs::File::open(parent)
        {
            let _ = f.sync_all();
        }
    }
    Ok(())
}

impl Store {
    /// Opens (or creates) the store, resumes the seq above everything stored, and puts rows
    /// claimed by a previous process back in the due index.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let started = Instant::now();
        let db = open_db(path)?;
        let store = Store::over(path, db, 1);
        store.check_format()?;
        store
            .next_seq
            .store(store.recover_next_seq()?, Ordering::SeqCst);
        let recovered = store.recover_inflight()?;
        store.init_dead_bytes()?;
        tracing::info!(
            path = %path.display(),
            next_seq = store.next_seq.load(Ordering::SeqCst),
            recovered_inflight = recovered,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "store opened"
        );
        Ok(store)
    }

    /// A `Store` over an opened database, `next_seq` set (the read-only store never takes one).
    fn over(path: &Path, db: DB, next_seq: u64) -> Store {
        Store {
            path: path.to_path_buf(),
            db: RwLock::new(Some(Arc::new(db))),
            next_seq: AtomicU64::new(next_seq),
            health: Health::default(),
            reopen_lock: Mutex::new(()),
            rows: Mutex::new(()),
            pen: Default::default(),
            last_reopen_attempt_ms: AtomicU64::new(0),
            archiving: Default::default(),
            dedupe_gate: RwLock::new(()),
            audit_seq: Default::default(),
        }
    }

    /// Opens an existing store without writing to it: no recovery, no format stamp. For
    /// `ankusa store check` (and only reads work on it).
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let open_err = |reason: String| StoreError::Open {
            path: path.display().to_string(),
            reason,
        };
        if !path.join("CURRENT").exists() {
            return Err(open_err("no RocksDB store here".into()));
        }
        let names = DB::list_cf(&db_options(), path).unwrap_or_default();
        let has = |cf: &str| names.iter().any(|n| n == cf);
        let descriptors = cf_descriptors(has(keys::CF_QUARANTINE), has(keys::CF_AUDIT));
        let db = DB::open_cf_descriptors_read_only(&db_options(), path, descriptors, false)
            .map_err(|e| open_err(e.to_string()))?;
        Ok(Store::over(path, db, 0))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn db(&self) -> Result<Arc<DB>, StoreError> {
        self.db
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| unavailable("the store is closed for a reopen"))
    }

    pub(crate) fn cf<'a>(db: &'a DB, name: &str) -> Result<&'a ColumnFamily, StoreError> {
        db.cf_handle(name)
            .ok_or_else(|| StoreError::Corrupt(format!("column family {name} is missing")))
    }

    fn check_format(&self) -> Result<(), StoreError> {
        let db = self.db()?;
        match db.get(keys::META_FORMAT).map_err(|e| classify(&e))? {
            None => {
                let mut b = WriteBatch::default();
                b.put(keys::META_FORMAT, keys::FORMAT_VERSION.to_be_bytes());
                b.put(keys::META_STORE_ID, uuid::Uuid::now_v7().as_bytes());
                self.write(&db, b, true)?;
            }
            Some(v) if keys::be64(&v) == Some(keys::FORMAT_VERSION) => {
                // A store made before ids gets one now: every backup manifest carries it.
                if db
                    .get(keys::META_STORE_ID)
                    .map_err(|e| classify(&e))?
                    .is_none()
                {
                    let mut b = WriteBatch::default();
                    b.put(keys::META_STORE_ID, uuid::Uuid::now_v7().as_bytes());
                    self.write(&db, b, true)?;
                }
            }
            Some(v) => {
                return Err(StoreError::Corrupt(format!(
                    "store format {:?} is not supported by this release (expected {})",
                    v,
                    keys::FORMAT_VERSION
                )));
            }
        }
        Ok(())
    }

    /// One more than the highest seq reserved, stored or referenced by a delivery row.
    fn recover_next_seq(&self) -> Result<u64, StoreError> {
        let db = self.db()?;
        let mut next = db
            .get(keys::META_NEXT_SEQ)
            .map_err(|e| classify(&e))?
            .and_then(|v| keys::be64(&v))
            .unwrap_or(1);
        let hooks = Self::cf(&db, keys::CF_HOOKS)?;
        if let Some(item) = db.iterator_cf(&hooks, IteratorMode::End).next() {
            let (k, _) = item.map_err(|e| classify(&e))?;
            if let Some(seq) = keys::be64(&k) {
                next = next.max(seq.saturating_add(1));
            }
        }
        let deliveries = Self::cf(&db, keys::CF_DELIVERIES)?;
        if let Some(item) = db.iterator_cf(&deliveries, IteratorMode::End).next() {
            let (k, _) = item.map_err(|e| classify(&e))?;
            if let Some((seq, _)) = keys::parse_delivery(&k) {
                next = next.max(seq + 1);
            }
        }
        Ok(next.max(1))
    }

    /// Reserves `n` consecutive seqs; the first is returned.
    pub(crate) fn reserve_seqs(&self, n: u64) -> u64 {
        self.next_seq.fetch_add(n, Ordering::SeqCst)
    }

    /// Turns archive obligations on (the archive is configured) or off.
    pub fn set_archiving(&self, on: bool) {
        self.archiving.store(on, Ordering::SeqCst);
    }

    pub fn archiving(&self) -> bool {
        self.archiving.load(Ordering::SeqCst)
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq.load(Ordering::SeqCst)
    }

    /// Held shared by a commit partition's dedupe-and-write, exclusively by a release's.
    pub(crate) fn dedupe_gate(&self, exclusive: bool) -> DedupeGuard<'_> {
        if exclusive {
            DedupeGuard::Exclusive(self.dedupe_gate.write().unwrap_or_else(|p| p.into_inner()))
        } else {
            DedupeGuard::Shared(self.dedupe_gate.read().unwrap_or_else(|p| p.into_inner()))
        }
    }

    /// Held across a read-modify-write of existing delivery rows (see `rows`).
    pub(crate) fn rows_guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes a batch; `sync` waits for the WAL fsync. Failures update health.
    pub(crate) fn write(&self, db: &DB, batch: WriteBatch, sync: bool) -> Result<(), StoreError> {
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        match db.write_opt(batch, &wo) {
            Ok(()) => {
                if sync {
                    self.health.ok(now_ms());
                }
                Ok(())
            }
            Err(e) => {
                let err = classify(&e);
                self.health.failed(now_ms(), err.class());
                tracing::error!(class = err.class(), error = %e, "store write failed");
                Err(err)
            }
        }
    }

    /// A synced write of a probe key: what `/ready` trusts.
    pub fn probe(&self) -> Result<(), StoreError> {
        let db = self.db()?;
        let mut b = WriteBatch::default();
        b.put(keys::META_READY_PROBE, now_ms().to_be_bytes());
        self.write(&db, b, true)
    }

    /// Closes and reopens the database to clear a latched write error. At most once per 5 s;
    /// returns whether a reopen was attempted and succeeded.
    pub fn maybe_reopen(&self) -> bool {
        let now = now_ms();
        let last = self.last_reopen_attempt_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < 5_000
            || self
                .last_reopen_attempt_ms
                .compare_exchange(last, now, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        let _guard = self.reopen_lock.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.db.write().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(old) = old {
            // Wait for in-flight operations to drop their handles; RocksDB closes on drop.
            let deadline = Instant::now() + Duration::from_secs(10);
            while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if Arc::strong_count(&old) > 1 {
                tracing::warn!("store reopen skipped: handles still in use");
                *self.db.write().unwrap_or_else(|p| p.into_inner()) = Some(old);
                self.count_reopen(false);
                return false;
            }
            drop(old);
        }
        match open_db(&self.path) {
            Ok(db) => {
                *self.db.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(db));
                self.count_reopen(true);
                tracing::info!(path = %self.path.display(), "store reopened");
                true
            }
            Err(e) => {
                self.count_reopen(false);
                tracing::error!(error = %e, "store reopen failed; writes answer 503 until it succeeds");
                false
            }
        }
    }

    fn count_reopen(&self, ok: bool) {
        let mut r = self
            .health
            .reopens
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if ok { r.0 += 1 } else { r.1 += 1 }
    }

    pub fn is_open(&self) -> bool {
        self.db.read().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// The node-wide counters.
    pub fn totals(&self) -> Result<Totals, StoreError> {
        Ok(Totals {
            hooks: self.counter(keys::C_HOOKS)?,
            hook_bytes: self.counter(keys::C_HOOK_BYTES)?,
            pending: self.counter(keys::C_PENDING)?,
            dead: self.counter(keys::C_DEAD)?,
        })
    }

    /// Reads a counter (`keys::C_*`, `keys::c_*`).
    pub(crate) fn counter(&self, key: &[u8]) -> Result<i64, StoreError> {
        let db = self.db()?;
        let v = db.get(key).map_err(|e| classify(&e))?;
        Ok(v.filter(|v| v.len() == 8)
            .map(|v| {
                let mut a = [0u8; 8];
                a.copy_from_slice(&v);
                i64::from_le_bytes(a)
            })
            .unwrap_or(0))
    }

    /// Bytes of SST files plus WAL on disk (an estimate from RocksDB properties).
    pub fn disk_bytes(&self) -> u64 {
        let Ok(db) = self.db() else { return 0 };
        let sst = db
            .property_int_value("rocksdb.live-sst-files-size")
            .ok()
            .flatten()
            .unwrap_or(0);
        let mem = db
            .property_int_value("rocksdb.cur-size-all-mem-tables")
            .ok()
            .flatten()
            .unwrap_or(0);
        sst + mem
    }

    pub fn get_hook(&self, seq: u64) -> Result<Option<Envelope>, StoreError> {
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_HOOKS)?;
        match db
            .get_pinned_cf(&cf, keys::hook(seq))
            .map_err(|e| classify(&e))?
        {
            Some(v) => Ok(Some(codec::decode_envelope(seq, &v)?)),
            None => Ok(None),
        }
    }

    /// The id of the hook holding dedupe index key `dkey` (`IngestRecord::dedupe_key`) at
    /// `now`, if one does and its entry has not expired. A damaged entry holds nothing.
    pub fn dedupe_holder(&self, dkey: &[u8], now: u64) -> Result<Option<uuid::Uuid>, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let Some(v) = db.get_pinned_cf(&ix, dkey).map_err(|e| classify(&e))? else {
            return Ok(None);
        };
        Ok(codec::DedupeEntry::decode(&v)
            .ok()
            .filter(|e| e.expires_at > now)
            .map(|e| e.id))
    }

    /// The stored hook with this id, if it is still stored.
    pub fn get_hook_by_id(&self, id: &uuid::Uuid) -> Result<Option<Envelope>, StoreError> {
        let db = self.db()?;
        let ix = Self::cf(&db, keys::CF_INDEX)?;
        let Some(seq) = db
            .get_pinned_cf(&ix, keys::hook_id(id))
            .map_err(|e| classify(&e))?
        else {
            return Ok(None);
        };
        let Some(seq) = keys::be64(&seq) else {
            return Err(StoreError::Corrupt(
                "hook id index value has the wrong length".into(),
            ));
        };
        self.get_hook(seq)
    }

    /// Every delivery row of a hook.
    pub fn rows_of(&self, seq: u64) -> Result<Vec<(u16, DeliveryRow)>, StoreError> {
        let db = self.db()?;
        let cf = Self::cf(&db, keys::CF_DELIVERIES)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(keys::delivery(seq + 1, 0).to_vec());
        let mut out = Vec::new();
        let it = db.iterator_cf_opt(
            &cf,
            ro,
            IteratorMode::From(&keys::delivery(seq, 0), rocksdb::Direction::Forward),
        );
        for item in it {
            let (k, v) = item.map_err(|e| classify(&e))?;
            if let Some((s, sink)) = keys::parse_delivery(&k)
                && s == seq
            {
                // A damaged row is skipped here (dispatch sets it aside when it meets it).
                if let Ok(row) = DeliveryRow::decode(&v) {
                    out.push((sink, row));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod test_util;

#[cfg(test)]
mod tests {
    use super::test_util::temp_store;
    use super::*;

    #[test]
    fn refuses_a_non_empty_directory_without_current() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("store");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("000001.log"), b"junk").unwrap();
        let e = Store::open(&p).err().expect("must refuse");
        assert!(e.to_string().contains("refusing to start empty"), "{e}");
    }

    #[test]
    fn counters_sum_and_seq_is_a_max() {
        let (_d, s) = temp_store();
        let db = s.db().unwrap();
        let mut b = WriteBatch::default();
        b.merge(keys::C_HOOKS, 5i64.to_le_bytes());
        b.merge(keys::C_HOOKS, (-2i64).to_le_bytes());
        b.merge(keys::META_NEXT_SEQ, 10u64.to_be_bytes());
        b.merge(keys::META_NEXT_SEQ, 7u64.to_be_bytes());
        s.write(&db, b, true).unwrap();
        assert_eq!(s.counter(keys::C_HOOKS).unwrap(), 3);
        assert_eq!(
            keys::be64(&db.get(keys::META_NEXT_SEQ).unwrap().unwrap()),
            Some(10)
        );
    }

    #[test]
    fn reopen_keeps_data() {
        let (_d, s) = temp_store();
        s.probe().unwrap();
        s.last_reopen_attempt_ms.store(0, Ordering::SeqCst);
        assert!(s.maybe_reopen());
        s.probe().unwrap();
        assert!(!s.maybe_reopen(), "rate limited to once per 5 s");
    }
}
