//! The Gateway's blob stores: `spec.archive` (per pod, `local` or a bucket) and the bucket of
//! `spec.durability.backup.store` and `spec.settings.claim_check.store` (never `local`: a store
//! on the pod's own volume goes with it). A bucket is S3-compatible (`s3`), Google Cloud
//! Storage (`gcs`) or an Azure Blob Storage container (`azure`); credentials come from Secrets
//! only. Which fields belong to which type is checked here (CEL) where a rule is short, and by
//! the operator's render for the rest, naming the field.

use ankusa_config::{ArchiveAt, BlobStoreType};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::SecretKeyRef;

/// A bucket for backups (`spec.durability.backup.store`) or claims
/// (`spec.settings.claim_check.store`): the bucket fields of `spec.archive`. Type `local` is
/// refused: a store on the pod's own volume goes with it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("self.type != 'local'")
        .message("store.type must be s3, gcs or azure: a store on the pod's own volume is lost with it"),
    validation = Rule::new("self.type == 'azure' || has(self.bucket)")
        .message("store.bucket is required for types s3 and gcs"),
    validation = Rule::new("self.type != 'azure' || (has(self.account) && has(self.container))")
        .message("store.account and store.container are required for type azure")
)]
#[serde(rename_all = "camelCase")]
pub struct BackupStoreSpec {
    /// `s3` (an S3-compatible bucket), `gcs` (Google Cloud Storage) or `azure` (an Azure Blob
    /// Storage container).
    #[serde(rename = "type")]
    pub type_: BlobStoreType,
    /// The bucket (types `s3` and `gcs`; required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// Another endpoint: an S3-compatible one (default: AWS's endpoint of the region), the GCS
    /// JSON API's (default `https://storage.googleapis.com`) or the Azure account's blob
    /// service root (default `https://<account>.blob.core.windows.net`). No credentials in
    /// the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Signing region (`s3`); default `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Path-style addressing (`s3`); default true with an `endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_path_style: Option<bool>,
    /// The storage account (`azure`; required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The blob container (`azure`; required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// No authentication at all (`gcs`, for an emulator: needs `endpoint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anonymous: Option<bool>,
    /// Credentials, each a key of a Secret labelled `ankusa.dev/usable=true`. Absent: the
    /// pods' environment (S3 web identity or instance metadata, the GKE metadata server,
    /// Entra workload identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<ArchiveCredentials>,
    /// Per request, connect to response (ms; default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// Where the pods archive hooks (the gateway's `storage:` section, per pod). Credentials come
/// from Secrets only.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("self.type == 'local' || self.type == 'azure' || has(self.bucket)")
        .message("archive.bucket is required for types s3 and gcs"),
    validation = Rule::new("self.type != 'azure' || (has(self.account) && has(self.container))")
        .message("archive.account and archive.container are required for type azure"),
    validation = Rule::new("self.type != 'local' || (!has(self.bucket) && !has(self.endpoint) && !has(self.region) && !has(self.forcePathStyle) && !has(self.account) && !has(self.container) && !has(self.anonymous) && !has(self.credentials) && !has(self.timeoutMs))")
        .message("archive.bucket, endpoint, region, forcePathStyle, account, container, anonymous, credentials and timeoutMs are for a bucket, not type local")
)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveSpec {
    /// `s3` (an S3-compatible bucket: AWS, MinIO, R2, ...), `gcs` (Google Cloud Storage),
    /// `azure` (an Azure Blob Storage container) or `local` (the directory `archive` on each
    /// pod's own volume, which goes with the volume).
    #[serde(rename = "type")]
    pub type_: BlobStoreType,
    /// When a hook is archived: `settled` (default: once every delivery is delivered or dead)
    /// or `ack` (at once, hooks still retrying included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_at: Option<ArchiveAt>,
    /// The bucket (`s3`, `gcs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// Another endpoint: an S3-compatible one (`https://minio.storage:9000`; default: AWS's
    /// endpoint of the region), the GCS JSON API's or the Azure account's blob service root.
    /// No credentials in the URL: give them in `credentials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Signing region (`s3`); default `us-east-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Path-style addressing (`s3`: `<endpoint>/<bucket>/<key>`); default true with an
    /// `endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_path_style: Option<bool>,
    /// The storage account (`azure`; required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The blob container (`azure`; required there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// No authentication at all (`gcs`, for an emulator: needs `endpoint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anonymous: Option<bool>,
    /// Prefix of every object key (`<keyPrefix>/archive/v1/dt=<day>/<pod>/...`); default
    /// `<namespace>/<gateway>`, so Gateways sharing a bucket never write the same keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// Credentials, each a key of a Secret labelled `ankusa.dev/usable=true`. Absent: the
    /// pods' environment (S3 web identity or instance metadata, the GKE metadata server,
    /// Entra workload identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<ArchiveCredentials>,
    /// A segment is closed at this size (bytes; default 16 MiB, at most 32 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roll_bytes: Option<u64>,
    /// ... or when its oldest hook has waited this long (ms; default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roll_ms: Option<u64>,
    /// How often each pod looks for hooks to archive (ms; default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// Per request, connect to response (ms; default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// A bucket's credentials as Secret keys: for `s3` `accessKeyId` and `secretAccessKey`
/// together (and `sessionToken`); for `gcs` `serviceAccountKey` (the key's JSON); for `azure`
/// one of `sasToken` and `accountKey`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveCredentials {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<SecretKeyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<SecretKeyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token: Option<SecretKeyRef>,
    /// A Google service-account key (the JSON file's content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_key: Option<SecretKeyRef>,
    /// An Azure SAS token with read, add, create, write, delete and list on the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sas_token: Option<SecretKeyRef>,
    /// An Azure storage account's access key (Shared Key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_key: Option<SecretKeyRef>,
}

impl ArchiveCredentials {
    /// `(field, reference)` of each credential given, by its name in the spec.
    pub fn refs(&self) -> impl Iterator<Item = (&'static str, &SecretKeyRef)> {
        [
            ("accessKeyId", &self.access_key_id),
            ("secretAccessKey", &self.secret_access_key),
            ("sessionToken", &self.session_token),
            ("serviceAccountKey", &self.service_account_key),
            ("sasToken", &self.sas_token),
            ("accountKey", &self.account_key),
        ]
        .into_iter()
        .filter_map(|(f, r)| Some((f, r.as_ref()?)))
    }
}
