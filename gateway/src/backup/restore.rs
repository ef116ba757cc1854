//! Boot restore: a node whose store directory is absent or empty, with backups on, rebuilds it
//! from `LATEST` before the store opens.
//!
//! Every file is downloaded into `restore-tmp` beside the store, its size and sha256 checked
//! against a manifest that was itself checked (`manifest::parse_manifest`), the copy opened
//! read-only to check it is the store the manifest names, and only then renamed into place. A
//! `RESTORE-IN-PROGRESS` marker in the instance directory spans the whole restore: a crash
//! mid-way leaves it, and the next boot throws away whatever it finds and restores again, so a
//! half store is never opened. Any failure refuses to start (`store_restore_failed`, naming the
//! step and the file); no backup at all (`LATEST` absent) is a first boot and starts empty, but
//! a `LATEST` that cannot be read is never taken for "no backup".

use std::path::{Path, PathBuf};

use ankusa_config::Config;
use ankusa_store::Store;
use sha2::{Digest, Sha256};

use super::manifest::{
    FileEntry, Layout, MAX_LATEST_BYTES, MAX_MANIFEST_BYTES, Manifest, parse_latest, parse_manifest,
};
use crate::blob::{BlobError, BlobStore};

/// Downloads in flight during a restore (each holds one file, at most 64 MiB, in memory).
const DOWNLOADS: usize = 4;

/// The name of the marker file in `<data_dir>/<instance>/`.
pub const MARKER: &str = "RESTORE-IN-PROGRESS";

/// The backup a node started from.
#[derive(Debug, Clone, PartialEq)]
pub struct Restored {
    pub backup_id: String,
    pub created_at_ms: u64,
    /// The manifest's `intake` (the intake log's watermark at the checkpoint), if any.
    pub intake: Option<serde_json::Value>,
}

/// Why the node refuses to start. The text always holds `store_restore_failed` and the step;
/// it never holds a credential (blob errors carry a key and S3's error code only).
#[derive(Debug, thiserror::Error)]
#[error("store_restore_failed: {step}: {message}")]
pub struct RestoreError {
    pub step: String,
    pub message: String,
    /// The backup target is refused by its config (nothing was contacted): a config error,
    /// which `ankusa check-config` refuses as well (`super::check`).
    config: bool,
}

impl RestoreError {
    /// Whether the config, not the store or the backup, is at fault.
    pub fn is_config(&self) -> bool {
        self.config
    }
}

fn fail(step: impl Into<String>, message: impl std::fmt::Display) -> RestoreError {
    RestoreError {
        step: step.into(),
        message: message.to_string(),
        config: false,
    }
}

fn io_fail(step: &str, path: &Path, e: &std::io::Error) -> RestoreError {
    fail(step, format!("{}: {:?}", path.display(), e.kind()))
}

/// Where a restore works: `<data_dir>/<instance>/{store, restore-tmp, RESTORE-IN-PROGRESS}`.
#[derive(Debug, Clone)]
pub struct Paths {
    pub instance_dir: PathBuf,
    pub store: PathBuf,
    pub tmp: PathBuf,
    pub marker: PathBuf,
}

impl Paths {
    pub fn of(c: &Config) -> Paths {
        Paths::at(
            &c.node.data_dir.join(&c.node.instance),
            &ankusa_store::store_path(c),
        )
    }

    pub fn at(instance_dir: &Path, store: &Path) -> Paths {
        Paths {
            instance_dir: instance_dir.to_path_buf(),
            store: store.to_path_buf(),
            tmp: instance_dir.join("restore-tmp"),
            marker: instance_dir.join(MARKER),
        }
    }
}

/// Restores the store of `c` if backups are on and the store directory is absent or empty (or
/// an earlier restore was interrupted). `None`: nothing restored, open the store as it is.
pub async fn restore_if_empty(c: &Config) -> Result<Option<Restored>, RestoreError> {
    let paths = Paths::of(c);
    if !c.backup.enabled {
        if paths.marker.exists() {
            return Err(fail(
                "interrupted restore",
                format!(
                    "{} exists (a restore did not finish) and backup.enabled is false; enable backups to restore again",
                    paths.marker.display()
                ),
            ));
        }
        return Ok(None);
    }
    let (blob, layout) = super::target(c).map_err(|e| RestoreError {
        config: true,
        ..fail("backup store", e)
    })?;
    restore_into(&blob, &layout, &paths).await
}

fn has_entries(dir: &Path) -> Result<bool, RestoreError> {
    match std::fs::read_dir(dir) {
        Ok(mut it) => Ok(it.next().is_some()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_fail("read the store directory", dir, &e)),
    }
}

fn remove_all(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// The restore itself, on explicit paths (tests call it directly).
pub async fn restore_into(
    blob: &BlobStore,
    layout: &Layout,
    paths: &Paths,
) -> Result<Option<Restored>, RestoreError> {
    let interrupted = paths.marker.exists();
    if interrupted {
        tracing::warn!(
            marker = %paths.marker.display(),
            "an earlier restore did not finish: discarding what it left and restoring again"
        );
        remove_all(&paths.store)
            .map_err(|e| io_fail("discard a half restore", &paths.store, &e))?;
    } else if has_entries(&paths.store)? {
        return Ok(None);
    }
    let latest_bytes = match blob.get(&layout.latest(), MAX_LATEST_BYTES).await {
        Ok(b) => b,
        Err(BlobError::NotFound { .. }) if !interrupted => {
            tracing::info!(
                store = blob.kind(),
                latest = %layout.latest(),
                "no backup found: starting with an empty store"
            );
            return Ok(None);
        }
        Err(e) => return Err(fail("read LATEST", e)),
    };
    let latest = parse_latest(&latest_bytes, layout).map_err(|e| fail("check LATEST", e))?;
    tracing::warn!(
        backup_id = %latest.backup_id,
        created_at_ms = latest.created_at_ms,
        store = blob.kind(),
        "the store directory is empty: restoring the latest backup"
    );
    create_marker(paths)?;
    let result = download_and_place(blob, layout, paths, &latest).await;
    match result {
        Ok(m) => {
            std::fs::remove_file(&paths.marker)
                .and_then(|()| sync_dir(&paths.instance_dir))
                .map_err(|e| io_fail("remove the restore marker", &paths.marker, &e))?;
            tracing::warn!(
                backup_id = %m.backup_id,
                files = m.files.len(),
                bytes = m.files.iter().map(|f| f.size).sum::<u64>(),
                "store restored from backup"
            );
            Ok(Some(Restored {
                backup_id: m.backup_id,
                created_at_ms: m.created_at_ms,
                intake: m.intake,
            }))
        }
        Err(e) => {
            // Nothing half-made stays: the store directory is absent (so the next boot restores
            // again) and the scratch copy is gone.
            let _ = remove_all(&paths.tmp);
            if !has_entries(&paths.store).unwrap_or(true) {
                let _ = std::fs::remove_file(&paths.marker);
            }
            Err(e)
        }
    }
}

fn create_marker(paths: &Paths) -> Result<(), RestoreError> {
    ankusa_store::create_dir_synced(&paths.instance_dir)
        .map_err(|e| io_fail("create the data dir", &paths.instance_dir, &e))?;
    let write = || -> std::io::Result<()> {
        let f = std::fs::File::create(&paths.marker)?;
        f.sync_all()?;
        sync_dir(&paths.instance_dir)
    };
    write().map_err(|e| io_fail("write the restore marker", &paths.marker, &e))
}

async fn download_and_place(
    blob: &BlobStore,
    layout: &Layout,
    paths: &Paths,
    latest: &super::manifest::Latest,
) -> Result<Manifest, RestoreError> {
    let bytes = blob
        .get(&latest.manifest, MAX_MANIFEST_BYTES)
        .await
        .map_err(|e| fail("read the manifest", e))?;
    let manifest =
        parse_manifest(&bytes, layout, latest).map_err(|e| fail("check the manifest", e))?;
    remove_all(&paths.tmp).map_err(|e| io_fail("clear restore-tmp", &paths.tmp, &e))?;
    ankusa_store::create_dir_synced(&paths.tmp)
        .map_err(|e| io_fail("create restore-tmp", &paths.tmp, &e))?;
    for chunk in manifest.files.chunks(DOWNLOADS) {
        // Every download of the chunk runs to its end before a failure is reported: a write
        // still running on a blocking thread would land in restore-tmp after its cleanup.
        let results =
            futures::future::join_all(chunk.iter().map(|f| fetch_one(blob, f, &paths.tmp))).await;
        results.into_iter().collect::<Result<Vec<()>, _>>()?;
    }
    sync_dir(&paths.tmp).map_err(|e| io_fail("sync restore-tmp", &paths.tmp, &e))?;

    // The copy must open, and be the store the manifest names.
    let tmp = paths.tmp.clone();
    let want = manifest.store_id.clone();
    tokio::task::spawn_blocking(move || -> Result<(), RestoreError> {
        let s = Store::open_read_only(&tmp).map_err(|e| fail("open the restored store", e))?;
        let id = s
            .store_id()
            .map_err(|e| fail("read the restored store id", e))?;
        if id.hyphenated().to_string() != want {
            return Err(fail(
                "check the restored store id",
                format!("the files hold store {id}, the manifest names {want}"),
            ));
        }
        Ok(())
    })
    .await
    .map_err(|e| fail("open the restored store", e))??;

    // An empty store directory (the usual fresh volume) makes way for the copy.
    if paths.store.exists() {
        std::fs::remove_dir(&paths.store)
            .map_err(|e| io_fail("replace the empty store directory", &paths.store, &e))?;
    }
    if let Some(parent) = paths.store.parent() {
        ankusa_store::create_dir_synced(parent)
            .map_err(|e| io_fail("create the store's parent", parent, &e))?;
    }
    std::fs::rename(&paths.tmp, &paths.store)
        .map_err(|e| io_fail("move the restored store into place", &paths.store, &e))?;
    if let Some(parent) = paths.store.parent() {
        sync_dir(parent).map_err(|e| io_fail("sync the data dir", parent, &e))?;
    }
    Ok(manifest)
}

/// Downloads one file, checks its size and sha256, and writes it synced under `dir`.
async fn fetch_one(blob: &BlobStore, f: &FileEntry, dir: &Path) -> Result<(), RestoreError> {
    let step = || format!("download {}", f.name);
    let bytes = blob
        .get(&f.key, f.size)
        .await
        .map_err(|e| fail(step(), e))?;
    if bytes.len() as u64 != f.size {
        return Err(fail(
            format!("check {}", f.name),
            format!(
                "size {} differs from the manifest's {}",
                bytes.len(),
                f.size
            ),
        ));
    }
    let sha = hex::encode(Sha256::digest(&bytes));
    if sha != f.sha256 {
        return Err(fail(
            format!("check {}", f.name),
            "sha256 differs from the manifest's (the object was damaged or replaced)",
        ));
    }
    // The name passed `file_kind`: a plain file name, so this stays inside `dir`.
    let path = dir.join(&f.name);
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        use std::io::Write;
        let mut out = std::fs::File::create(&path)?;
        out.write_all(&bytes)?;
        out.sync_all()
    })
    .await
    .map_err(|e| fail(step(), e))?
    .map_err(|e| fail(format!("write {}", f.name), format!("{:?}", e.kind())))
}
