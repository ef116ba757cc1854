//! `storage`: the archive, and the blob store shape (`local` or `s3`) that `backup.store`
//! reuses.
//!
//! The archive packs every hook accepted while it is configured into segments in a blob store
//! (a local directory or an S3-compatible bucket), so a hook can be fetched back by id, re-sent
//! by a `kind: archive` replay, and evicted from a full DLQ without being lost. Imports only the
//! leaves.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, in_range};
use crate::secrets::{Secret, SecretUrl};

/// Segments roll at this many bytes by default (16 MiB).
pub const DEFAULT_ROLL_BYTES: u64 = 16 * 1024 * 1024;
/// Largest `roll_bytes` (32 MiB): a segment is at most this (or one hook, when a hook alone is
/// larger), well under the 64 MiB a node reads back in one piece.
pub const MAX_ROLL_BYTES: u64 = 32 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BlobStoreType {
    /// A directory on this node (`storage.local.dir`).
    Local,
    /// An S3-compatible bucket (AWS, MinIO, R2, ...).
    S3,
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
    /// `local` or `s3`: which of the two store sections is read (and required).
    #[serde(rename = "type")]
    pub store_type: BlobStoreType,
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
        blob_store(path, self.store_type, &self.local, &self.s3)
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

/// One store section matching `store_type` (`local` or `s3`) and none of the other, its
/// fields named under `at` (`storage`, `backup.store`).
pub(crate) fn blob_store(
    at: &str,
    store_type: BlobStoreType,
    local: &Option<LocalStoreConfig>,
    s3: &Option<S3StoreConfig>,
) -> Result<(), ConfigError> {
    let (name, given, other) = match store_type {
        BlobStoreType::Local => ("local", local.is_some(), ("s3", s3.is_some())),
        BlobStoreType::S3 => ("s3", s3.is_some(), ("local", local.is_some())),
    };
    if other.1 {
        return Err(err(
            format!("{at}.{}", other.0),
            format!("is set but {at}.type is {name}"),
        ));
    }
    if !given {
        return Err(err(
            format!("{at}.{name}"),
            format!("is required when {at}.type is {name}"),
        ));
    }
    if let (BlobStoreType::Local, Some(l)) = (store_type, local)
        && !l.dir.is_absolute()
    {
        return Err(err(format!("{at}.local.dir"), "must be an absolute path"));
    }
    if let (BlobStoreType::S3, Some(s3)) = (store_type, s3) {
        s3.validate(&format!("{at}.s3"))?;
    }
    Ok(())
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
    fn a_secret_endpoint_is_never_echoed() {
        let e = load(
            "storage:\n  type: s3\n  s3:\n    bucket: okay\n    endpoint: 'http://user:hunter2@'\n",
        )
        .expect_err("no host");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}
