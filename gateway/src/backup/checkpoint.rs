//! Taking a checkpoint of the live store into a scratch directory beside it, and reading its
//! files back for upload. Blocking code: the runner calls it on a blocking thread, never on
//! the commit path.

use std::io::Read;
use std::path::{Path, PathBuf};

use ankusa_store::Store;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::BackupError;
use super::manifest::{FileKind, MAX_FILE_BYTES, file_kind};

/// One file of a checkpoint.
#[derive(Debug, Clone)]
pub struct LocalFile {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub kind: FileKind,
}

fn io(step: &'static str, path: &Path, e: &std::io::Error) -> BackupError {
    BackupError::Io {
        step,
        path: path.display().to_string(),
        message: format!("{:?}", e.kind()),
    }
}

/// Removes `dir` if it exists (a scratch directory left by a crash, or this run's).
pub fn remove_scratch(dir: &Path) -> Result<(), BackupError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io("remove the scratch directory", dir, &e)),
    }
}

/// Checkpoints `store` into `dir` (removed first if a crash left it) and lists its files. A
/// file that is not a RocksDB file name a restore accepts, or over the size cap, fails the
/// backup here, so no backup is written that a restore would refuse.
pub fn take(store: &Store, dir: &Path) -> Result<Vec<LocalFile>, BackupError> {
    remove_scratch(dir)?;
    if let Some(parent) = dir.parent() {
        ankusa_store::create_dir_synced(parent)
            .map_err(|e| io("create the data dir", parent, &e))?;
    }
    store.checkpoint(dir)?;
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| io("list the checkpoint", dir, &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io("list the checkpoint", dir, &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(kind) = file_kind(&name) else {
            return Err(BackupError::UnexpectedFile { name });
        };
        let meta = entry
            .metadata()
            .map_err(|e| io("stat a checkpoint file", &entry.path(), &e))?;
        if !meta.is_file() {
            return Err(BackupError::UnexpectedFile { name });
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(BackupError::FileTooLarge {
                name,
                size: meta.len(),
            });
        }
        files.push(LocalFile {
            name,
            path: entry.path(),
            size: meta.len(),
            kind,
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// The file's bytes and their sha256 (hex). The size must be the one listed: checkpoint files
/// do not change once the checkpoint is taken.
pub fn read(f: &LocalFile) -> Result<(Bytes, String), BackupError> {
    let mut file =
        std::fs::File::open(&f.path).map_err(|e| io("read a checkpoint file", &f.path, &e))?;
    let mut buf = Vec::with_capacity(f.size as usize);
    // One byte past the listed size: a file that grew is caught, not cut.
    (&mut file)
        .take(f.size + 1)
        .read_to_end(&mut buf)
        .map_err(|e| io("read a checkpoint file", &f.path, &e))?;
    if buf.len() as u64 != f.size {
        return Err(BackupError::Io {
            step: "read a checkpoint file",
            path: f.path.display().to_string(),
            message: format!("size changed from {} to {}", f.size, buf.len()),
        });
    }
    let sha = hex::encode(Sha256::digest(&buf));
    Ok((Bytes::from(buf), sha))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_lists_only_rocksdb_files() {
        let (d, s) = ankusa_store::test_util::temp_store();
        s.probe().unwrap();
        let dir = d.path().join("backup-tmp");
        std::fs::create_dir_all(dir.join("junk")).unwrap();
        let files = take(&s, &dir).unwrap();
        assert!(files.iter().any(|f| f.name == "CURRENT"), "{files:?}");
        assert!(
            files.iter().any(|f| f.name.starts_with("MANIFEST-")),
            "{files:?}"
        );
        for f in &files {
            let (b, sha) = read(f).unwrap();
            assert_eq!(b.len() as u64, f.size);
            assert_eq!(sha.len(), 64);
        }
        remove_scratch(&dir).unwrap();
        assert!(!dir.exists());
    }
}
