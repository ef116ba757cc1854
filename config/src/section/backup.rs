//! `backup`: checkpoints of the store, uploaded to a blob store under `<key_prefix>/backup/`.
//! They are the only copy of the DLQ and settled state, and bound how much of the intake log
//! (`wal.rs`) a rebuild replays. The store has the archive's shape (`storage.rs`), and is the
//! archive's own when absent: that a backup then needs `storage` is `validate.rs`'s rule.
//! Imports the leaves, `storage` and `cloud_stores`.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::in_range;
use crate::section::cloud_stores::{AzureStoreConfig, GcsStoreConfig};
use crate::section::storage::{
    BlobStoreKind, LocalStoreConfig, S3StoreConfig, Sections, StoreSection, blob_store, key_prefix,
};

/// Where backups go: the same shape as the archive's store. Absent: the archive's
/// (`storage`) store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BackupStoreConfig {
    /// `local`, `s3`, `gcs` or `azure`: which of the sections below is read (and required).
    #[serde(rename = "type")]
    pub store_type: BlobStoreKind,
    /// The directory backups are written under, for `type: local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalStoreConfig>,
    /// The S3-compatible bucket backups are uploaded to, for `type: s3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3StoreConfig>,
    /// The GCS bucket backups are uploaded to, for `type: gcs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs: Option<GcsStoreConfig>,
    /// The Azure blob container backups are uploaded to, for `type: azure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureStoreConfig>,
}

impl BackupStoreConfig {
    pub(crate) fn sections(&self) -> Sections<'_> {
        Sections {
            local: self.local.as_ref(),
            s3: self.s3.as_ref(),
            gcs: self.gcs.as_ref(),
            azure: self.azure.as_ref(),
        }
    }

    /// The store section `type` names (`None` only in a config that was not validated).
    pub fn store(&self) -> Option<StoreSection<'_>> {
        self.sections().get(self.store_type)
    }
}

/// Checkpoints of the store, uploaded to a blob store under `<key_prefix>/backup/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct BackupConfig {
    /// Take backups (default false); a disabled backup section is not checked.
    pub enabled: bool,
    /// Time between two backups; a clean stop writes one more.
    pub interval_ms: u64,
    /// Backups kept (older manifests and the files only they use are deleted).
    pub keep: u32,
    /// Default: the archive's store (`storage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<BackupStoreConfig>,
    /// Default: `storage.key_prefix`, else none (keys start at `backup/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
}

impl Default for BackupConfig {
    fn default() -> Self {
        BackupConfig {
            enabled: false,
            interval_ms: 60_000,
            keep: 3,
            store: None,
            key_prefix: None,
        }
    }
}

impl BackupConfig {
    /// A disabled backup is not checked.
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if !self.enabled {
            return Ok(());
        }
        in_range(
            &format!("{path}.interval_ms"),
            self.interval_ms,
            1_000,
            86_400_000,
        )?;
        in_range(&format!("{path}.keep"), self.keep.into(), 1, 1000)?;
        if let Some(s) = &self.store {
            blob_store(&format!("{path}.store"), s.store_type, s.sections())?;
        }
        if let Some(p) = &self.key_prefix {
            key_prefix(&format!("{path}.key_prefix"), p)?;
        }
        Ok(())
    }
}
