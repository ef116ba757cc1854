//! A blob store in a local directory: each object a file, written to a temporary name,
//! synced, renamed into place, and its directory synced, so a put that returned survives power
//! loss and a reader never sees half an object.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::BlobError;

pub struct LocalStore {
    root: PathBuf,
}

fn io_err(op: &'static str, key: &str, e: &std::io::Error) -> BlobError {
    if e.kind() == std::io::ErrorKind::NotFound {
        return BlobError::NotFound {
            op,
            key: key.to_string(),
        };
    }
    BlobError::Transient {
        op,
        key: key.to_string(),
        message: format!("{:?}", e.kind()),
    }
}

impl LocalStore {
    pub fn new(root: PathBuf) -> LocalStore {
        LocalStore { root }
    }

    /// The directory keys are files under.
    pub fn dir(&self) -> &std::path::Path {
        &self.root
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
        let path = self.path(key);
        on_thread("put", key, move |key| {
            write_synced(&path, &bytes).map_err(|e| io_err("put", key, &e))
        })
        .await
    }

    pub async fn get(&self, key: &str, max: u64) -> Result<Bytes, BlobError> {
        let path = self.path(key);
        on_thread("get", key, move |key| {
            let mut f = std::fs::File::open(&path).map_err(|e| io_err("get", key, &e))?;
            let len = f.metadata().map_err(|e| io_err("get", key, &e))?.len();
            if len > max {
                return Err(BlobError::TooLarge {
                    op: "get",
                    key: key.to_string(),
                    max,
                });
            }
            let mut buf = Vec::with_capacity(len as usize);
            f.read_to_end(&mut buf)
                .map_err(|e| io_err("get", key, &e))?;
            Ok(Bytes::from(buf))
        })
        .await
    }

    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        let path = self.path(key);
        on_thread("delete", key, move |key| {
            match std::fs::remove_file(&path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io_err("delete", key, &e)),
            }
        })
        .await
    }

    /// Files under the root whose key starts with `prefix`, walking only the directory the
    /// prefix names (a prefix ends at a `/`). Temporary files of puts in progress are skipped.
    pub async fn list(&self, prefix: &str, max: usize) -> Result<Vec<super::Listed>, BlobError> {
        let root = self.root.clone();
        let dir_key = prefix
            .rsplit_once('/')
            .map(|(d, _)| d.to_string())
            .unwrap_or_default();
        let prefix_owned = prefix.to_string();
        on_thread("list", prefix, move |key| {
            let mut out = Vec::new();
            let start = if dir_key.is_empty() {
                root.clone()
            } else {
                root.join(&dir_key)
            };
            let mut stack = vec![(start, dir_key.clone())];
            while let Some((dir, rel)) = stack.pop() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_err("list", key, &e)),
                };
                for entry in entries {
                    let entry = entry.map_err(|e| io_err("list", key, &e))?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if name.starts_with('.') {
                        continue;
                    }
                    let k = if rel.is_empty() {
                        name
                    } else {
                        format!("{rel}/{name}")
                    };
                    let meta = entry.metadata().map_err(|e| io_err("list", key, &e))?;
                    if meta.is_dir() {
                        if format!("{k}/").starts_with(&prefix_owned)
                            || prefix_owned.starts_with(&format!("{k}/"))
                        {
                            stack.push((entry.path(), k));
                        }
                    } else if k.starts_with(&prefix_owned) {
                        if out.len() >= max {
                            return Err(BlobError::TooLarge {
                                op: "list",
                                key: key.to_string(),
                                max: max as u64,
                            });
                        }
                        out.push(super::Listed {
                            key: k,
                            size: meta.len(),
                        });
                    }
                }
            }
            out.sort_by(|a, b| a.key.cmp(&b.key));
            Ok(out)
        })
        .await
    }

    pub async fn get_range(&self, key: &str, offset: u64, len: u32) -> Result<Bytes, BlobError> {
        let path = self.path(key);
        on_thread("get", key, move |key| {
            let mut f = std::fs::File::open(&path).map_err(|e| io_err("get", key, &e))?;
            f.seek(SeekFrom::Start(offset))
                .map_err(|e| io_err("get", key, &e))?;
            let mut buf = vec![0u8; len as usize];
            f.read_exact(&mut buf).map_err(|e| io_err("get", key, &e))?;
            Ok(Bytes::from(buf))
        })
        .await
    }
}

/// Runs a file operation on a blocking thread (`key` names the object in its errors).
async fn on_thread<T: Send + 'static>(
    op: &'static str,
    key: &str,
    f: impl FnOnce(&str) -> Result<T, BlobError> + Send + 'static,
) -> Result<T, BlobError> {
    let owned = key.to_string();
    tokio::task::spawn_blocking(move || f(&owned))
        .await
        .map_err(|e| BlobError::Transient {
            op,
            key: key.to_string(),
            message: e.to_string(),
        })?
}

/// Temp file + fsync + rename + directory fsync; missing directories are created synced.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("object path has no parent"))?;
    ankusa_store::create_dir_synced(dir)?;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("object path has no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        uuid::Uuid::now_v7().simple()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn put_get_and_range() {
        let d = tempfile::tempdir().unwrap();
        let s = LocalStore::new(d.path().join("blobs"));
        s.put("a/b/c.seg", Bytes::from_static(b"hello world"))
            .await
            .unwrap();
        assert_eq!(&s.get("a/b/c.seg", 100).await.unwrap()[..], b"hello world");
        assert_eq!(&s.get_range("a/b/c.seg", 6, 5).await.unwrap()[..], b"world");
        assert!(matches!(
            s.get("a/b/c.seg", 3).await,
            Err(BlobError::TooLarge { .. })
        ));
        assert!(matches!(
            s.get("nope", 3).await,
            Err(BlobError::NotFound { .. })
        ));
        assert!(
            s.get_range("a/b/c.seg", 8, 10).await.is_err(),
            "past the end"
        );
    }

    #[tokio::test]
    async fn list_by_prefix_and_delete() {
        let d = tempfile::tempdir().unwrap();
        let s = LocalStore::new(d.path().join("blobs"));
        assert!(s.list("p/x/", 10).await.unwrap().is_empty(), "no root yet");
        for k in ["p/x/a", "p/x/y/b", "p/xy/c", "q/d"] {
            s.put(k, Bytes::from_static(b"abc")).await.unwrap();
        }
        let keys = |v: Vec<crate::blob::Listed>| v.into_iter().map(|l| l.key).collect::<Vec<_>>();
        assert_eq!(
            keys(s.list("p/x/", 10).await.unwrap()),
            ["p/x/a", "p/x/y/b"]
        );
        assert_eq!(s.list("p/x/", 10).await.unwrap()[0].size, 3);
        assert!(matches!(
            s.list("p/x/", 1).await,
            Err(BlobError::TooLarge { .. })
        ));
        s.delete("p/x/a").await.unwrap();
        s.delete("p/x/a").await.unwrap();
        assert_eq!(keys(s.list("p/", 10).await.unwrap()), ["p/x/y/b", "p/xy/c"]);
    }
}
