//! Store backups (`backup.*`): every `interval_ms` a RocksDB checkpoint of the store is taken
//! into `<data_dir>/<instance>/backup-tmp` and uploaded to a blob store (the archive's by
//! default) under `<key_prefix>/backup/<instance>/`: SST files once each, keyed by content;
//! the other files with each backup; then a sha256 manifest; then `LATEST`, last, so a crash
//! or a failed upload at any point leaves `LATEST` on the previous complete backup. The
//! newest `keep` backups are kept; older manifests and the files no kept manifest uses are
//! deleted. A clean stop writes one more. A node that boots with an empty store restores
//! `LATEST` (`restore`).
//!
//! The checkpoint runs on a blocking thread and the uploads are async: the commit path never
//! waits for a backup. Every manifest carries the store's id (`m:store_id`): a `LATEST` of
//! another store is never overwritten (`foreign_backup`), nor one that another writer moved
//! since this node last wrote it (`prefix_shared`, two nodes restored from one backup).
//!
//! Under `wal.type: dual` the intake log passes an `IntakeMark`: asked right before each
//! checkpoint, its watermark goes into the manifest, and a restore hands it back (`Restored`)
//! so the rebuild replays only the log after it.

pub mod checkpoint;
pub mod manifest;
pub mod restore;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_api::BackupStatus;
use ankusa_config::{Config, ConfigError};
use ankusa_core::now_ms;
use ankusa_store::{Store, StoreError};
use bytes::Bytes;
use futures::future::BoxFuture;

use crate::blob::{BlobError, BlobStore};
use crate::metrics::Metrics;
use checkpoint::LocalFile;
use manifest::{FORMAT, FileEntry, FileKind, Latest, Layout, MAX_MANIFEST_BYTES, Manifest};

pub use restore::{RestoreError, Restored, restore_if_empty};

/// Uploads in flight during a backup (each holds one file, at most 64 MiB, in memory).
const UPLOADS: usize = 2;
/// Objects a listing of one backup directory may return.
const MAX_LISTED: usize = 500_000;

/// The intake log's side of a backup (`wal.type: dual`).
pub trait IntakeMark: Send + Sync {
    /// Called right BEFORE the checkpoint is taken. Returns once every intake record below the
    /// returned watermark is committed to the store, so a checkpoint taken after holds them.
    fn mark(&self) -> BoxFuture<'static, Option<serde_json::Value>>;
}

/// Why a backup failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("blob store: {0}")]
    Blob(#[from] BlobError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{step} ({path}): {message}")]
    Io {
        step: &'static str,
        path: String,
        message: String,
    },
    #[error(
        "foreign_backup: {latest} holds a backup of store {theirs}, this store is {ours}; refusing to overwrite another store's backups (give this node its own backup.key_prefix, or restore into an empty data dir)"
    )]
    Foreign {
        latest: String,
        theirs: String,
        ours: String,
    },
    #[error(
        "prefix_shared: {latest} moved to backup {found} since this node wrote {ours}; another node writes the same prefix (give each node its own backup.key_prefix or node.instance)"
    )]
    PrefixShared {
        latest: String,
        found: String,
        ours: String,
    },
    #[error(
        "file_too_large: checkpoint file {name} is {size} bytes, over the {max}-byte cap of a backup file",
        max = manifest::MAX_FILE_BYTES
    )]
    FileTooLarge { name: String, size: u64 },
    #[error("the checkpoint holds {name:?}, which is not a RocksDB file a restore accepts")]
    UnexpectedFile { name: String },
    #[error("LATEST: {0}")]
    Latest(String),
    #[error("the backup task failed: {0}")]
    Task(String),
}

impl BackupError {
    /// The code of a refusal (counted in `ankusa_backup_refused_total`), if it is one.
    pub fn refusal(&self) -> Option<&'static str> {
        match self {
            BackupError::Foreign { .. } => Some("foreign_backup"),
            BackupError::PrefixShared { .. } => Some("prefix_shared"),
            _ => None,
        }
    }
}

/// The blob store and key layout of a config's backups: `backup.store`, else the archive's
/// store; `backup.key_prefix`, else `storage.key_prefix`. Built without contacting the store:
/// the boot restore, `Backup::new` and `ankusa check-config` (`check`) all build it here.
pub fn target(c: &Config) -> Result<(BlobStore, Layout), ConfigError> {
    // The blob store's errors lead with the key (`backup.store.local: ...`).
    let blob = match (&c.backup.store, &c.storage) {
        (Some(s), _) => BlobStore::from_backup(s).map_err(ConfigError::general)?,
        (None, Some(st)) => BlobStore::from_config(st).map_err(ConfigError::general)?,
        (None, None) => {
            return Err(ConfigError::field(
                "backup.store",
                "is required when storage is not configured",
            ));
        }
    };
    let prefix = c
        .backup
        .key_prefix
        .clone()
        .or_else(|| c.storage.as_ref().and_then(|s| s.key_prefix.clone()));
    Ok((blob, Layout::new(prefix.as_deref(), &c.node.instance)))
}

/// What a start builds of `backup` before anything runs (the boot restore's and the timer's
/// target), checked without contacting the store: `ankusa check-config` refuses what a start
/// would.
pub fn check(c: &Config) -> Result<(), ConfigError> {
    if c.backup.enabled {
        target(c)?;
    }
    Ok(())
}

#[derive(Default)]
struct State {
    last_success_at: Option<u64>,
    runs: u64,
    failures: u64,
    last_error: Option<String>,
    /// The backup id this node believes `LATEST` names (the one it wrote, restored or found).
    last_latest: Option<String>,
    /// The id of the last `LATEST` this node tried to write: a put whose answer was lost may
    /// still have landed, and that is not another writer.
    attempted_latest: Option<String>,
    /// sha256 of SST/blob files by (name, size): they never change, so each is hashed once per
    /// process (a restore starts a new process, where numbers may be reused, hence the size).
    hashes: HashMap<(String, u64), String>,
    /// Manifests written or read, by id, for pruning.
    manifests: HashMap<String, Manifest>,
}

/// What one backup did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    pub backup_id: String,
    pub files: usize,
    pub uploaded: usize,
    pub uploaded_bytes: u64,
}

pub struct Backup {
    store: Arc<Store>,
    blob: BlobStore,
    layout: Layout,
    interval: Duration,
    keep: usize,
    metrics: Arc<Metrics>,
    intake: Option<Arc<dyn IntakeMark>>,
    scratch: PathBuf,
    started_at_ms: u64,
    restored_from: Option<String>,
    /// One backup at a time (the timer's and the final one of a clean stop).
    running: tokio::sync::Mutex<()>,
    stop: tokio::sync::watch::Sender<bool>,
    state: Mutex<State>,
}

impl Backup {
    /// Backups of `c`'s store, the timer started. `restored`: the backup this node started
    /// from (shown in the status; its id is what `LATEST` is expected to name).
    pub fn start(
        store: Arc<Store>,
        c: &Config,
        metrics: Arc<Metrics>,
        intake: Option<Arc<dyn IntakeMark>>,
        restored: Option<&Restored>,
    ) -> Result<Arc<Backup>, ConfigError> {
        let b = Arc::new(Backup::new(store, c, metrics, intake, restored)?);
        tokio::spawn(b.clone().run());
        Ok(b)
    }

    /// Without the timer (tests run backups one by one).
    pub fn new(
        store: Arc<Store>,
        c: &Config,
        metrics: Arc<Metrics>,
        intake: Option<Arc<dyn IntakeMark>>,
        restored: Option<&Restored>,
    ) -> Result<Backup, ConfigError> {
        let (blob, layout) = target(c)?;
        // Both outcomes show from the start (a scrape before the first backup reads 0, not
        // nothing).
        for outcome in ["ok", "failed"] {
            metrics.backup.runs.with_label_values(&[outcome]);
        }
        let scratch = c.node.data_dir.join(&c.node.instance).join("backup-tmp");
        Ok(Backup {
            store,
            blob,
            layout,
            interval: Duration::from_millis(c.backup.interval_ms.max(1)),
            keep: c.backup.keep.max(1) as usize,
            metrics,
            intake,
            scratch,
            started_at_ms: now_ms(),
            restored_from: restored.map(|r| r.backup_id.clone()),
            running: tokio::sync::Mutex::new(()),
            stop: tokio::sync::watch::channel(false).0,
            state: Mutex::new(State {
                last_latest: restored.map(|r| r.backup_id.clone()),
                ..State::default()
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn run(self: Arc<Self>) {
        let mut stop = self.stop.subscribe();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.interval) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let _running = self.running.lock().await;
            if *self.stop.borrow() {
                return;
            }
            let _ = self.backup_now().await;
        }
    }

    /// The last backup of a clean stop: stops the timer, waits for a backup in progress, and
    /// writes one more (call it after the commit path and dispatch have stopped, so it holds
    /// every hook acked).
    pub async fn final_backup(&self) -> Result<Completed, BackupError> {
        let _ = self.stop.send(true);
        let _running = self.running.lock().await;
        tracing::info!("clean stop: writing a final backup");
        self.backup_now().await
    }

    /// One backup, recorded in the status and metrics. Callers hold `running` (or are tests).
    pub async fn backup_now(&self) -> Result<Completed, BackupError> {
        let started = Instant::now();
        let result = self.backup_once().await;
        // The checkpoint's hard links would pin SST files compaction has deleted: removed on
        // every outcome (and before the next checkpoint, if this fails).
        let scratch = self.scratch.clone();
        match blocking(move || checkpoint::remove_scratch(&scratch)).await {
            Ok(()) => {}
            Err(e) => tracing::warn!(error = %e, "cannot remove the backup scratch directory"),
        }
        match &result {
            Ok(done) => {
                let mut st = self.state();
                st.runs += 1;
                st.failures = 0;
                st.last_error = None;
                st.last_success_at = Some(now_ms());
                drop(st);
                self.metrics.backup.runs.with_label_values(&["ok"]).inc();
                tracing::info!(
                    backup_id = %done.backup_id,
                    files = done.files,
                    uploaded = done.uploaded,
                    uploaded_bytes = done.uploaded_bytes,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "backup written"
                );
            }
            Err(e) => {
                let mut st = self.state();
                st.failures += 1;
                st.last_error = Some(e.to_string());
                drop(st);
                self.metrics
                    .backup
                    .runs
                    .with_label_values(&["failed"])
                    .inc();
                if let Some(code) = e.refusal() {
                    self.metrics.backup.refused.with_label_values(&[code]).inc();
                }
                tracing::error!(error = %e, "backup failed; LATEST still names the previous backup");
            }
        }
        self.gauges();
        result
    }

    async fn backup_once(&self) -> Result<Completed, BackupError> {
        let store = self.store.clone();
        let store_id = blocking(move || Ok(store.store_id()?)).await?;
        let store_id = store_id.hyphenated().to_string();
        self.check_latest(&store_id).await?;

        let intake = match &self.intake {
            Some(m) => m.mark().await,
            None => None,
        };
        let backup_id = uuid::Uuid::now_v7().hyphenated().to_string();
        let created_at_ms = now_ms();
        let (store, dir) = (self.store.clone(), self.scratch.clone());
        let files = blocking(move || checkpoint::take(&store, &dir)).await?;

        let existing: HashMap<String, u64> = self
            .blob
            .list(&self.layout.files_dir(), MAX_LISTED)
            .await?
            .into_iter()
            .map(|l| (l.key, l.size))
            .collect();
        // A few at a time, in order (a stream combinator over borrowed futures would not be
        // `Send` for the spawned timer task).
        let mut entries: Vec<(FileEntry, bool)> = Vec::with_capacity(files.len());
        for chunk in files.chunks(UPLOADS) {
            let done = futures::future::try_join_all(
                chunk
                    .iter()
                    .map(|f| self.upload_one(f, &backup_id, &existing)),
            )
            .await?;
            entries.extend(done);
        }
        let uploaded = entries.iter().filter(|(_, up)| *up).count();
        let uploaded_bytes = entries
            .iter()
            .filter(|(_, up)| *up)
            .map(|(e, _)| e.size)
            .sum();
        let manifest = Manifest {
            format: FORMAT,
            backup_id: backup_id.clone(),
            store_id: store_id.clone(),
            created_at_ms,
            files: entries.into_iter().map(|(e, _)| e).collect(),
            intake,
        };
        // Our own manifest must pass what a restore checks.
        manifest::check_manifest(&manifest, &self.layout).map_err(BackupError::Latest)?;
        let manifest_key = self.layout.manifest(&backup_id);
        let body = serde_json::to_vec(&manifest).map_err(|e| BackupError::Task(e.to_string()))?;
        self.blob.put(&manifest_key, Bytes::from(body)).await?;
        let latest = Latest {
            format: FORMAT,
            backup_id: backup_id.clone(),
            store_id,
            created_at_ms,
            manifest: manifest_key,
        };
        let body = serde_json::to_vec(&latest).map_err(|e| BackupError::Task(e.to_string()))?;
        self.state().attempted_latest = Some(backup_id.clone());
        self.blob
            .put(&self.layout.latest(), Bytes::from(body))
            .await?;
        {
            let mut st = self.state();
            st.last_latest = Some(backup_id.clone());
            let names: HashSet<&str> = files.iter().map(|f| f.name.as_str()).collect();
            st.hashes.retain(|(n, _), _| names.contains(n.as_str()));
            for e in &manifest.files {
                if file_kind_shared(&e.name) {
                    st.hashes.insert((e.name.clone(), e.size), e.sha256.clone());
                }
            }
            st.manifests.insert(backup_id.clone(), manifest.clone());
        }
        if let Err(e) = self.prune(&backup_id).await {
            // The backup is complete; what was not deleted is deleted by a later prune.
            tracing::warn!(error = %e, "pruning old backups failed");
        }
        Ok(Completed {
            backup_id,
            files: manifest.files.len(),
            uploaded,
            uploaded_bytes,
        })
    }

    /// Refuses to write over another store's `LATEST`, or one another writer moved.
    async fn check_latest(&self, store_id: &str) -> Result<(), BackupError> {
        let key = self.layout.latest();
        let bytes = match self.blob.get(&key, manifest::MAX_LATEST_BYTES).await {
            Ok(b) => b,
            Err(BlobError::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let latest = manifest::parse_latest(&bytes, &self.layout).map_err(BackupError::Latest)?;
        if latest.store_id != store_id {
            return Err(BackupError::Foreign {
                latest: key,
                theirs: latest.store_id,
                ours: store_id.to_string(),
            });
        }
        let mut st = self.state();
        if st.attempted_latest.as_deref() == Some(latest.backup_id.as_str()) {
            st.last_latest = Some(latest.backup_id);
            return Ok(());
        }
        match &st.last_latest {
            Some(ours) if *ours != latest.backup_id => Err(BackupError::PrefixShared {
                latest: key,
                found: latest.backup_id,
                ours: ours.clone(),
            }),
            Some(_) => Ok(()),
            None => {
                st.last_latest = Some(latest.backup_id);
                Ok(())
            }
        }
    }

    /// Uploads one checkpoint file unless it is a shared file already in the store; its
    /// manifest entry, and whether it was uploaded.
    async fn upload_one(
        &self,
        f: &LocalFile,
        backup_id: &str,
        existing: &HashMap<String, u64>,
    ) -> Result<(FileEntry, bool), BackupError> {
        if f.kind == FileKind::Shared {
            let known = self.state().hashes.get(&(f.name.clone(), f.size)).cloned();
            if let Some(sha) = known
                && let Some(key) = self.layout.file_key(backup_id, &f.name, &sha)
                && existing.get(&key) == Some(&f.size)
            {
                return Ok((
                    FileEntry {
                        name: f.name.clone(),
                        key,
                        size: f.size,
                        sha256: sha,
                    },
                    false,
                ));
            }
        }
        let file = f.clone();
        let (bytes, sha) = blocking(move || checkpoint::read(&file)).await?;
        let key = self
            .layout
            .file_key(backup_id, &f.name, &sha)
            .ok_or_else(|| BackupError::UnexpectedFile {
                name: f.name.clone(),
            })?;
        let entry = FileEntry {
            name: f.name.clone(),
            key: key.clone(),
            size: f.size,
            sha256: sha,
        };
        if f.kind == FileKind::Shared && existing.get(&key) == Some(&f.size) {
            return Ok((entry, false));
        }
        self.blob.put(&key, bytes).await?;
        Ok((entry, true))
    }

    /// Keeps the newest `keep` backups (always the one just written): deletes older manifests,
    /// then every file no kept manifest uses (also what a crashed backup left).
    async fn prune(&self, current: &str) -> Result<(), BackupError> {
        let listed = self
            .blob
            .list(&self.layout.manifests_dir(), MAX_LISTED)
            .await?;
        let mut ids: Vec<String> = listed
            .iter()
            .filter_map(|l| self.layout.manifest_id(&l.key))
            .filter(|id| *id != current)
            .map(String::from)
            .collect();
        ids.sort();
        let cut = ids.len().saturating_sub(self.keep - 1);
        let old: Vec<String> = ids.drain(..cut).collect();
        ids.push(current.to_string());
        let mut referenced = HashSet::new();
        for id in &ids {
            let m = self.manifest(id).await?;
            referenced.extend(m.files.into_iter().map(|f| f.key));
        }
        for id in &old {
            self.blob.delete(&self.layout.manifest(id)).await?;
            self.state().manifests.remove(id);
        }
        let mut deleted = 0usize;
        for dir in [self.layout.files_dir(), self.layout.runs_dir()] {
            for l in self.blob.list(&dir, MAX_LISTED).await? {
                if !referenced.contains(&l.key) {
                    self.blob.delete(&l.key).await?;
                    deleted += 1;
                }
            }
        }
        if !old.is_empty() || deleted > 0 {
            tracing::info!(manifests = old.len(), files = deleted, "old backups pruned");
        }
        Ok(())
    }

    /// A kept manifest: from memory, or read and checked from the store.
    async fn manifest(&self, id: &str) -> Result<Manifest, BackupError> {
        if let Some(m) = self.state().manifests.get(id) {
            return Ok(m.clone());
        }
        let bytes = self
            .blob
            .get(&self.layout.manifest(id), MAX_MANIFEST_BYTES)
            .await?;
        let m: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| BackupError::Latest(format!("manifest {id}: {e}")))?;
        manifest::check_manifest(&m, &self.layout)
            .map_err(|e| BackupError::Latest(format!("manifest {id}: {e}")))?;
        self.state().manifests.insert(id.to_string(), m.clone());
        Ok(m)
    }

    /// `GET /v1/status`, `backup`.
    pub fn status(&self) -> BackupStatus {
        let st = self.state();
        let now = now_ms();
        BackupStatus {
            store: self.blob.kind().to_string(),
            last_success_at: st.last_success_at,
            age_seconds: now.saturating_sub(st.last_success_at.unwrap_or(self.started_at_ms))
                / 1000,
            runs: st.runs,
            failures: st.failures,
            last_error: st.last_error.clone(),
            restored_from: self.restored_from.clone(),
        }
    }

    /// `ankusa_backup_age_seconds`: since the last backup (since start when none yet).
    pub fn gauges(&self) {
        let last = self.state().last_success_at.unwrap_or(self.started_at_ms);
        self.metrics
            .backup
            .age_seconds
            .set(now_ms().saturating_sub(last) as f64 / 1000.0);
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

fn file_kind_shared(name: &str) -> bool {
    manifest::file_kind(name) == Some(FileKind::Shared)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, BackupError> + Send + 'static,
) -> Result<T, BackupError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BackupError::Task(e.to_string()))?
}

#[cfg(test)]
mod tests;
