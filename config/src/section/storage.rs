//! `storage`: the archive, and the blob store shape (`local`, `s3`, `gcs` or `azure`) that
//! `backup.store` reuses.
//!
//! The archive packs every hook accepted while it is configured into segments in a blob store
//! (a local directory, an S3-compatible bucket, a GCS bucket or an Azure blob container), so a
//! hook can be fetched back by id, re-sent by a `kind: archive` replay, and evicted from a full
//! DLQ without being lost. Imports the leaves and `cloud_stores` (the `gcs` and `azure`
//! sections).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, in_range};
use crate::secrets::{Secret, SecretUrl};
use crate::section::cloud_stores::{AzureStoreConfig, GcsStoreConfig};

/// Segments roll at this many bytes by default (16 MiB).
pub const DEFAULT_ROLL_BYTES: u64 = 16 * 1024 * 1024;
/// Largest `roll_bytes` (32 MiB): a segment is at most this (or one hook, when a hook alone is
/// larger), well under the 64 MiB a node reads back in one piece.
pub const MAX_ROLL_BYTES: u64 = 32 * 1024 * 1024;

/// The stores the operator renders (the CRDs' `spec.archive.type` and
/// `spec.durability.backup.store.type`): a subset of `BlobStoreKind`, the stores the gateway
/// reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BlobStoreType {
    /// A directory on this node (`storage.local.dir`).
    Local,
    /// An S3-compatible bucket (AWS, MinIO, R2, ...).
    S3,
    /// A Google Cloud Storage bucket.
    Gcs,
    /// An Azure Blob Storage container.
    Azure,
}

/// Which blob store a `storage` or `backup.store` block uses (its `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BlobStoreKind {
    /// A directory on this node (`local.dir`).
    Local,
    /// An S3-compatible bucket (AWS, MinIO, R2, ...).
    S3,
    /// A Google Cloud Storage bucket.
    Gcs,
    /// An Azure Blob Storage container.
    Azure,
}

impl BlobStoreKind {
    /// The `type` value, which is also the name of the block's store section.
    pub fn as_str(self) -> &'static str {
        match self {
            BlobStoreKind::Local => "local",
            BlobStoreKind::S3 => "s3",
            BlobStoreKind::Gcs => "gcs",
            BlobStoreKind::Azure => "azure",
        }
    }
}

impl From<BlobStoreType> for BlobStoreKind {
    fn from(t: BlobStoreType) -> Self {
        match t {
            BlobStoreType::Local => BlobStoreKind::Local,
            BlobStoreType::S3 => BlobStoreKind::S3,
            BlobStoreType::Gcs => BlobStoreKind::Gcs,
            BlobStoreType::Azure => BlobStoreKind::Azure,
        }
    }
}

impl PartialEq<BlobStoreType> for BlobStoreKind {
    fn eq(&self, other: &BlobStoreType) -> bool {
        *self == BlobStoreKind::from(*other)
    }
}

/// The store section a block's `type` names, borrowed from the block.
#[derive(Debug, Clone, Copy)]
pub enum StoreSection<'a> {
    Local(&'a LocalStoreConfig),
    S3(&'a S3StoreConfig),
    Gcs(&'a GcsStoreConfig),
    Azure(&'a AzureStoreConfig),
}

/// The four store sections of a `storage` or `backup.store` block, any of them absent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sections<'a> {
    pub local: Option<&'a LocalStoreConfig>,
    pub s3: Option<&'a S3StoreConfig>,
    pub gcs: Option<&'a GcsStoreConfig>,
    pub azure: Option<&'a AzureStoreConfig>,
}

impl<'a> Sections<'a> {
    /// The section `kind` names, if it is set.
    pub(crate) fn get(self, kind: BlobStoreKind) -> Option<StoreSection<'a>> {
        match kind {
            BlobStoreKind::Local => self.local.map(StoreSection::Local),
            BlobStoreKind::S3 => self.s3.map(StoreSection::S3),
            BlobStoreKind::Gcs => self.gcs.map(StoreSection::Gcs),
            BlobStoreKind::Azure => self.azure.map(StoreSection::Azure),
        }
    }

    /// The names of the sections that are set.
    fn set(self) -> impl Iterator<Item = BlobStoreKind> {
        [
            (BlobStoreKind::Local, self.local.is_some()),
            (BlobStoreKind::S3, self.s3.is_some()),
            (BlobStoreKind::Gcs, self.gcs.is_some()),
            (BlobStoreKind::Azure, self.azure.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
    }
}

/// When a hook is packed into a segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ArchiveAt {
    /// Once every delivery of the hook has settled: delivered, or dead (so a dead row can be
    /// evicted from a bounded DLQ). Hooks still retrying wait.
    #[default]
    Settled,
    /// At once, whatever its deliveries: the archive then also holds hooks still retrying.
    Ack,
}

/// Where and how hooks are archived. Absent: no archive (a hook's rows go once delivered).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// `local`, `s3`, `gcs` or `azure`: which of the store sections is read (and required).
    #[serde(rename = "type")]
    pub store_type: BlobStoreKind,
    /// When a hook is archived: `settled` (default) or `ack`.
    #[serde(default)]
    pub archive_at: ArchiveAt,
    /// Prefix of every object this node writes (`<key_prefix>/archive/v1/dt=<day>/<node>/...`);
    /// give each node its own in a shared bucket. Default: none (keys start at `archive/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// A segment is closed at this size (bytes of packed hooks).
    #[serde(default = "d_roll_bytes")]
    pub roll_bytes: u64,
    /// ... or when its oldest hook has waited this long.
    #[serde(default = "d_roll_ms")]
    pub roll_ms: u64,
    /// How often the compactor looks for hooks to archive.
    #[serde(default = "d_interval_ms")]
    pub interval_ms: u64,
    /// The directory segments are written under, for `type: local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalStoreConfig>,
    /// The S3-compatible bucket segments are uploaded to, for `type: s3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3StoreConfig>,
    /// The GCS bucket segments are uploaded to, for `type: gcs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs: Option<GcsStoreConfig>,
    /// The Azure blob container segments are uploaded to, for `type: azure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureStoreConfig>,
}

fn d_roll_bytes() -> u64 {
    DEFAULT_ROLL_BYTES
}
fn d_roll_ms() -> u64 {
    30_000
}
fn d_interval_ms() -> u64 {
    1_000
}

/// A blob store in a local directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LocalStoreConfig {
    /// The directory objects are written under (created if missing).
    pub dir: PathBuf,
}

/// A blob store in an S3-compatible bucket (AWS, MinIO, R2, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct S3StoreConfig {
    /// The bucket name: 3-63 characters of `[a-z0-9.-]`, starting and ending with a letter
    /// or digit.
    pub bucket: String,
    /// Signing region; default `AWS_REGION`, else `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// An S3-compatible endpoint (MinIO, R2, a VPC endpoint); default
    /// `https://s3.<region>.amazonaws.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<SecretUrl>,
    /// Path-style addressing (`<endpoint>/<bucket>/<key>`); default true with an `endpoint`,
    /// virtual-hosted style on AWS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_path_style: Option<bool>,
    /// Static credentials; absent: `AWS_*` env, web identity (IRSA), profile, IMDSv2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<Secret>,
    /// The secret key of `access_key_id` (the two are given together or not at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<Secret>,
    /// A session token for temporary static credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token: Option<Secret>,
    /// Per request, connect to response (ms).
    #[serde(default = "d_timeout_ms")]
    pub timeout_ms: u64,
}

fn d_timeout_ms() -> u64 {
    30_000
}

impl StorageConfig {
    /// One store section matching `type`, sane sizes, a prefix that stays a prefix.
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        in_range(&f("roll_bytes"), self.roll_bytes, 1024, MAX_ROLL_BYTES)?;
        if self.roll_ms == 0 {
            return Err(err(f("roll_ms"), "must be >= 1, got 0"));
        }
        in_range(&f("interval_ms"), self.interval_ms, 10, 3_600_000)?;
        if let Some(p) = &self.key_prefix {
            key_prefix(&f("key_prefix"), p)?;
        }
        blob_store(path, self.store_type, self.sections())
    }

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

/// A key prefix that stays a prefix: `/`-separated segments of `[A-Za-z0-9-_.=]`.
pub(crate) fn key_prefix(field: &str, p: &str) -> Result<(), ConfigError> {
    let ok = !p.is_empty()
        && p.len() <= 256
        && !p.starts_with('/')
        && !p.ends_with('/')
        && p.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.=".contains(&b))
        });
    if !ok {
        return Err(err(
            field,
            "must be 1-256 characters of [A-Za-z0-9-_.=] in /-separated segments, without leading, trailing or empty segments or . and ..",
        ));
    }
    Ok(())
}

/// One store section matching `store_type` and none of the others, its fields named under
/// `at` (`storage`, `backup.store`).
pub(crate) fn blob_store(
    at: &str,
    store_type: BlobStoreKind,
    sections: Sections<'_>,
) -> Result<(), ConfigError> {
    let name = store_type.as_str();
    if let Some(other) = sections.set().find(|k| *k != store_type) {
        return Err(err(
            format!("{at}.{}", other.as_str()),
            format!("is set but {at}.type is {name}"),
        ));
    }
    let Some(section) = sections.get(store_type) else {
        return Err(err(
            format!("{at}.{name}"),
            format!("is required when {at}.type is {name}"),
        ));
    };
    let here = format!("{at}.{name}");
    match section {
        StoreSection::Local(l) if !l.dir.is_absolute() => {
            Err(err(format!("{here}.dir"), "must be an absolute path"))
        }
        StoreSection::Local(_) => Ok(()),
        StoreSection::S3(s3) => s3.validate(&here),
        StoreSection::Gcs(g) => g.validate(&here),
        StoreSection::Azure(a) => a.validate(&here),
    }
}

impl S3StoreConfig {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        let b = &self.bucket;
        let bucket_ok = (3..=63).contains(&b.len())
            && b.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
            && !b.starts_with(['-', '.'])
            && !b.ends_with(['-', '.']);
        if !bucket_ok {
            return Err(err(
                f("bucket"),
                "must be an S3 bucket name: 3-63 characters of [a-z0-9.-], starting and ending with a letter or digit",
            ));
        }
        if let Some(r) = &self.region
            && (r.is_empty()
                || r.len() > 64
                || !r.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'))
        {
            return Err(err(f("region"), "must be a region name like eu-west-1"));
        }
        if let Some(ep) = &self.endpoint {
            let url =
                url::Url::parse(ep.expose()).map_err(|_| err(f("endpoint"), "is not a URL"))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(err(f("endpoint"), "must be an http(s) URL with a host"));
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err(err(f("endpoint"), "must not carry a query or a fragment"));
            }
        }
        if self.access_key_id.is_some() != self.secret_access_key.is_some() {
            return Err(err(
                f("secret_access_key"),
                "access_key_id and secret_access_key are given together or not at all",
            ));
        }
        in_range(&f("timeout_ms"), self.timeout_ms, 1, 600_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, from_rendered_yaml, validate};

    fn load(yaml: &str) -> Result<Config, ConfigError> {
        let c = from_rendered_yaml(yaml)?;
        validate(&c)?;
        Ok(c)
    }

    #[test]
    fn storage_reads_with_defaults_and_names_bad_fields() {
        let c = load(
            "storage:\n  type: s3\n  s3:\n    bucket: my-archive\n    endpoint: http://127.0.0.1:5000\nqueue:\n  dlq:\n    max_rows: 10\n",
        )
        .unwrap();
        let s = c.storage.as_ref().unwrap();
        assert_eq!(s.roll_bytes, DEFAULT_ROLL_BYTES);
        assert_eq!(s.interval_ms, 1_000);
        assert_eq!(c.queue.dlq.max_rows, Some(10));
        assert!(c.queue.dlq.is_bounded());

        let cases = [
            ("storage:\n  type: s3\n", "storage.s3"),
            ("storage:\n  type: local\n", "storage.local"),
            (
                "storage:\n  type: local\n  local:\n    dir: rel/dir\n",
                "storage.local.dir",
            ),
            (
                "storage:\n  type: s3\n  s3:\n    bucket: Bad_Bucket\n",
                "storage.s3.bucket",
            ),
            (
                "storage:\n  type: s3\n  s3:\n    bucket: okay\n    access_key_id: AKIA\n",
                "storage.s3.secret_access_key",
            ),
            (
                "storage:\n  type: s3\n  s3:\n    bucket: okay\n    endpoint: ftp://x\n",
                "storage.s3.endpoint",
            ),
            (
                "storage:\n  type: local\n  key_prefix: ../up\n  local:\n    dir: /tmp/a\n",
                "storage.key_prefix",
            ),
            (
                "storage:\n  type: local\n  roll_bytes: 1\n  local:\n    dir: /tmp/a\n",
                "storage.roll_bytes",
            ),
            ("queue:\n  dlq:\n    max_rows: 0\n", "queue.dlq.max_rows"),
            (
                "queue:\n  dlq:\n    retention_days: 0\n",
                "queue.dlq.retention_days",
            ),
        ];
        for (yaml, field) in cases {
            let e = load(yaml).expect_err(yaml);
            assert_eq!(e.field.as_deref(), Some(field), "{yaml}: {e}");
        }
    }

    #[test]
    fn gcs_and_azure_read_with_one_auth_mode_and_name_bad_fields() {
        let c = load(
            "storage:\n  type: gcs\n  gcs:\n    bucket: my-archive\n    endpoint: http://127.0.0.1:9023\n    anonymous: true\n",
        )
        .unwrap();
        let s = c.storage.as_ref().unwrap();
        assert_eq!(s.store_type, BlobStoreKind::Gcs);
        assert!(
            matches!(s.store(), Some(StoreSection::Gcs(g)) if g.anonymous && g.timeout_ms == 30_000)
        );
        let c = load("backup:\n  enabled: true\n  store:\n    type: azure\n    azure:\n      account: acct1\n      container: backups\n").unwrap();
        let st = c.backup.store.as_ref().unwrap();
        let Some(StoreSection::Azure(a)) = st.store() else {
            panic!("{st:?}")
        };
        assert_eq!(a.service_url(), "https://acct1.blob.core.windows.net");
        assert!(
            a.sas_token.is_none() && a.account_key.is_none(),
            "workload identity"
        );

        let sa = r#"'{"type": "service_account", "client_email": "a@b", "private_key": "pk"}'"#;
        assert!(
            load(&format!(
                "storage:\n  type: gcs\n  gcs:\n    bucket: bkt\n    credentials: {sa}\n"
            ))
            .is_ok()
        );
        let cases = [
            ("storage:\n  type: gcs\n", "storage.gcs"),
            ("storage:\n  type: azure\n", "storage.azure"),
            (
                "storage:\n  type: gcs\n  gcs: {bucket: bkt}\n  s3: {bucket: bkt}\n",
                "storage.s3",
            ),
            (
                "storage:\n  type: s3\n  s3: {bucket: bkt}\n  azure: {account: acct, container: ctr}\n",
                "storage.azure",
            ),
            (
                "storage:\n  type: gcs\n  gcs: {bucket: Bad}\n",
                "storage.gcs.bucket",
            ),
            (
                "storage:\n  type: gcs\n  gcs: {bucket: bkt, anonymous: true}\n",
                "storage.gcs.anonymous",
            ),
            (
                "storage:\n  type: gcs\n  gcs: {bucket: bkt, anonymous: true, endpoint: 'http://h', credentials: /k.json}\n",
                "storage.gcs.anonymous",
            ),
            (
                "storage:\n  type: gcs\n  gcs: {bucket: bkt, credentials: rel/k.json}\n",
                "storage.gcs.credentials",
            ),
            (
                "storage:\n  type: gcs\n  gcs: {bucket: bkt, credentials: '{\"type\": \"user\"}'}\n",
                "storage.gcs.credentials",
            ),
            (
                "storage:\n  type: gcs\n  gcs: {bucket: bkt, endpoint: 'http://h/?x=1'}\n",
                "storage.gcs.endpoint",
            ),
            (
                "storage:\n  type: gcs\n  gcs: {bucket: bkt, timeout_ms: 0}\n",
                "storage.gcs.timeout_ms",
            ),
            (
                "storage:\n  type: azure\n  azure: {account: Acct, container: ctr}\n",
                "storage.azure.account",
            ),
            (
                "storage:\n  type: azure\n  azure: {account: acct, container: a--b}\n",
                "storage.azure.container",
            ),
            (
                "storage:\n  type: azure\n  azure: {account: acct, container: ctr, sas_token: 'sv=1&sig=x', account_key: a2V5}\n",
                "storage.azure.account_key",
            ),
            (
                "storage:\n  type: azure\n  azure: {account: acct, container: ctr, sas_token: 'sv=2021'}\n",
                "storage.azure.sas_token",
            ),
            (
                "storage:\n  type: azure\n  azure: {account: acct, container: ctr, account_key: 'not base64!'}\n",
                "storage.azure.account_key",
            ),
            (
                "storage:\n  type: azure\n  azure: {account: acct, container: ctr, endpoint: 'ftp://h'}\n",
                "storage.azure.endpoint",
            ),
            (
                "backup:\n  enabled: true\n  store:\n    type: azure\n    gcs: {bucket: bkt}\n",
                "backup.store.gcs",
            ),
            (
                "backup:\n  enabled: true\n  store:\n    type: gcs\n    gcs: {bucket: B}\n",
                "backup.store.gcs.bucket",
            ),
        ];
        for (yaml, field) in cases {
            let e = load(yaml).expect_err(yaml);
            assert_eq!(e.field.as_deref(), Some(field), "{yaml}: {e}");
        }
    }

    #[test]
    fn cloud_credentials_are_never_echoed() {
        for yaml in [
            "storage:\n  type: azure\n  azure: {account: acct, container: ctr, sas_token: 'sv=hunter2'}\n",
            "storage:\n  type: azure\n  azure: {account: acct, container: ctr, account_key: 'hunter2!'}\n",
            "storage:\n  type: azure\n  azure: {account: acct, container: ctr, sas_token: 'sig=hunter2', account_key: aHVudGVyMg==}\n",
            "storage:\n  type: gcs\n  gcs: {bucket: bkt, credentials: 'hunter2'}\n",
            "storage:\n  type: gcs\n  gcs: {bucket: bkt, credentials: '{\"type\": \"hunter2\"}'}\n",
            "storage:\n  type: gcs\n  gcs: {bucket: bkt, credentials: '{hunter2'}\n",
            "storage:\n  type: gcs\n  gcs: {bucket: bkt, endpoint: 'http://u:hunter2@h/'}\n",
        ] {
            let e = load(yaml).expect_err(yaml);
            assert!(!e.to_string().contains("hunter2"), "{e}");
            assert!(!format!("{e:?}").contains("hunter2"), "{e:?}");
        }
    }

    #[test]
    fn a_secret_endpoint_is_never_echoed() {
        let e = load(
            "storage:\n  type: s3\n  s3:\n    bucket: okay\n    endpoint: 'http://user:hunter2@'\n",
        )
        .expect_err("no host");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}
