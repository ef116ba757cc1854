//! Blob stores: where the archive's segments and the store's backups go. A local directory
//! (`local`), an S3-compatible bucket (`s3`: AWS, MinIO, R2), a Google Cloud Storage bucket
//! (`gcs`) or an Azure Blob Storage container (`azure`), behind one small API: put an object,
//! get it whole (bounded), get a byte range of it, delete it, list a prefix. Keys are the
//! node's own (`archive/v1/...`), checked to stay under the store's root. Errors say which
//! operation and class failed, never a credential.
//!
//! Files: `local`; `s3`; `gcs` over `gcs_auth` (its OAuth2 tokens); `azure` over `azure_auth`
//! (SAS, Shared Key, Entra tokens); `rest`, the leaf the three REST stores share (retries,
//! status classes, error words, token cache).

mod azure;
mod azure_auth;
mod gcs;
mod gcs_auth;
mod local;
mod rest;
mod s3;
#[cfg(test)]
mod test_server;

use bytes::Bytes;

use ankusa_config::{BackupStoreConfig, BlobStoreKind, StorageConfig, StoreSection};

pub use azure::AzureStore;
pub use gcs::GcsStore;
pub use local::LocalStore;
pub use s3::S3Store;

/// Why a blob operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BlobError {
    #[error("{op} {key}: not found")]
    NotFound { op: &'static str, key: String },
    /// Worth retrying later: transport, 5xx, throttling, a local IO error.
    #[error("{op} {key}: {message}")]
    Transient {
        op: &'static str,
        key: String,
        message: String,
    },
    /// The store refuses (credentials, a missing bucket, a bad key): retrying alone won't help.
    #[error("{op} {key}: {message}")]
    Refused {
        op: &'static str,
        key: String,
        message: String,
    },
    /// An object larger than the reader's bound.
    #[error("{op} {key}: larger than {max} bytes")]
    TooLarge {
        op: &'static str,
        key: String,
        max: u64,
    },
}

/// One object of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub size: u64,
}

/// A configured blob store.
pub enum BlobStore {
    Local(LocalStore),
    /// Boxed: the client and credential cache are large beside a path.
    S3(Box<S3Store>),
    Gcs(Box<GcsStore>),
    Azure(Box<AzureStore>),
}

impl BlobStore {
    /// The archive's store (`storage`).
    pub fn from_config(cfg: &StorageConfig) -> Result<BlobStore, String> {
        Self::from_section(cfg.store_type, cfg.store(), "storage")
    }

    /// The store of a `backup.store` block.
    pub fn from_backup(cfg: &BackupStoreConfig) -> Result<BlobStore, String> {
        Self::from_block(cfg, "backup.store")
    }

    /// The store of a block of `backup.store`'s shape at `at` (`claim_check.store`).
    pub fn from_block(cfg: &BackupStoreConfig, at: &str) -> Result<BlobStore, String> {
        Self::from_section(cfg.store_type, cfg.store(), at)
    }

    /// The store of the section a block's `type` names (`None`: the section is missing).
    /// Builds clients and reads key files; contacts nothing.
    pub fn from_section(
        store_type: BlobStoreKind,
        section: Option<StoreSection<'_>>,
        at: &str,
    ) -> Result<BlobStore, String> {
        let here = format!("{at}.{}", store_type.as_str());
        match section.ok_or_else(|| format!("{here}: is required"))? {
            StoreSection::Local(l) => Ok(BlobStore::Local(LocalStore::new(l.dir.clone()))),
            StoreSection::S3(s) => Ok(BlobStore::S3(Box::new(S3Store::new(s)?))),
            StoreSection::Gcs(g) => Ok(BlobStore::Gcs(Box::new(GcsStore::new(g, &here)?))),
            StoreSection::Azure(a) => Ok(BlobStore::Azure(Box::new(AzureStore::new(a, &here)?))),
        }
    }

    /// `local`, `s3`, `gcs` or `azure`.
    pub fn kind(&self) -> &'static str {
        match self {
            BlobStore::Local(_) => "local",
            BlobStore::S3(_) => "s3",
            BlobStore::Gcs(_) => "gcs",
            BlobStore::Azure(_) => "azure",
        }
    }

    /// Lists in pages of `n` keys where the store lets the client choose (`gcs`, `azure`;
    /// default 1000): a test sees a listing cross pages without writing a thousand objects.
    pub fn set_list_page(&mut self, n: u32) {
        match self {
            BlobStore::Gcs(s) => s.set_list_page(n),
            BlobStore::Azure(s) => s.set_list_page(n),
            BlobStore::Local(_) | BlobStore::S3(_) => {}
        }
    }

    /// Writes an object durably (a local write is synced before this returns; S3, GCS and
    /// Azure answer 2xx only once they stored the object).
    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
        check_key("put", key)?;
        match self {
            BlobStore::Local(s) => s.put(key, bytes).await,
            BlobStore::S3(s) => s.put(key, bytes).await,
            BlobStore::Gcs(s) => s.put(key, bytes).await,
            BlobStore::Azure(s) => s.put(key, bytes).await,
        }
    }

    /// The whole object, at most `max` bytes.
    pub async fn get(&self, key: &str, max: u64) -> Result<Bytes, BlobError> {
        check_key("get", key)?;
        match self {
            BlobStore::Local(s) => s.get(key, max).await,
            BlobStore::S3(s) => s.get(key, max).await,
            BlobStore::Gcs(s) => s.get(key, max).await,
            BlobStore::Azure(s) => s.get(key, max).await,
        }
    }

    /// Deletes an object; one that is not there is not an error (deletes are retried).
    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        check_key("delete", key)?;
        match self {
            BlobStore::Local(s) => s.delete(key).await,
            BlobStore::S3(s) => s.delete(key).await,
            BlobStore::Gcs(s) => s.delete(key).await,
            BlobStore::Azure(s) => s.delete(key).await,
        }
    }

    /// Every object whose key starts with `prefix` (a `/`-ended key prefix), with its size, at
    /// most `max` of them (more is an error rather than a silently cut listing: a caller that
    /// deletes what a listing does not show must see all of it).
    pub async fn list(&self, prefix: &str, max: usize) -> Result<Vec<Listed>, BlobError> {
        let trimmed = prefix.strip_suffix('/').unwrap_or(prefix);
        check_key("list", trimmed)?;
        match self {
            BlobStore::Local(s) => s.list(prefix, max).await,
            BlobStore::S3(s) => s.list(prefix, max).await,
            BlobStore::Gcs(s) => s.list(prefix, max).await,
            BlobStore::Azure(s) => s.list(prefix, max).await,
        }
    }

    /// `len` bytes from `offset`: a ranged GET.
    pub async fn get_range(&self, key: &str, offset: u64, len: u32) -> Result<Bytes, BlobError> {
        check_key("get", key)?;
        match self {
            BlobStore::Local(s) => s.get_range(key, offset, len).await,
            BlobStore::S3(s) => s.get_range(key, offset, len).await,
            BlobStore::Gcs(s) => s.get_range(key, offset, len).await,
            BlobStore::Azure(s) => s.get_range(key, offset, len).await,
        }
    }
}

/// Keys are relative, `/`-separated, of `[A-Za-z0-9-_.=]` segments, never `.` or `..`: a key
/// the node did not make (one read back from the store's own catalogue) cannot leave the root.
fn check_key(op: &'static str, key: &str) -> Result<(), BlobError> {
    let ok = !key.is_empty()
        && key.len() <= 1024
        && key.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.=".contains(&b))
        });
    if ok {
        Ok(())
    } else {
        Err(BlobError::Refused {
            op,
            key: "(invalid key)".into(),
            message: "the key is not a relative path of [A-Za-z0-9-_.=] segments".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_under_the_root() {
        for bad in ["", "/abs", "a//b", "../x", "a/./b", "a/b c", "a\\b", "a/b/"] {
            assert!(check_key("put", bad).is_err(), "{bad:?}");
        }
        assert!(check_key("put", "p/archive/v1/dt=2026-12-01/node-0/1-2.seg").is_ok());
    }
}
