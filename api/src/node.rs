//! The node: its status (what the operator reads to know a pod runs its config), a config
//! push or reload, and the error body every refusal carries.

use ankusa_config::Role;
use serde::{Deserialize, Serialize};

/// `GET /v1/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub instance: String,
    #[serde(default)]
    pub version: String,
    /// `Config::hash` of the file as written: what the operator compares with what it rendered.
    pub config_hash: String,
    #[serde(default)]
    pub generation: u64,
    #[serde(default)]
    pub loaded_at: u64,
    #[serde(default)]
    pub last_reload_error: Option<ReloadError>,
    /// Fields changed by a reload that take effect only after a restart.
    #[serde(default)]
    pub restart_required: Vec<String>,
    #[serde(default)]
    pub sources: Vec<String>,
    #[serde(default)]
    pub config_path: Option<String>,
    #[serde(default)]
    pub roles: Vec<Role>,
    /// Sinks whose latest delivery attempt failed, by source and sink; empty when every sink's
    /// latest attempt succeeded (or on a node without the `dispatch` role).
    #[serde(default)]
    pub failing_sinks: Vec<SinkFailure>,
    /// The quarantine pen: totals and, per source holding entries, its share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine: Option<PenStatus>,
    /// The archive, when `storage` is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<ArchiveStatus>,
    /// The dead-letter queue: size and whether it refuses new hooks (`dlq_full`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlq: Option<DlqStatus>,
    /// Backups, when `backup.enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupStatus>,
    /// The intake log, under `wal.type: dual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intake: Option<IntakeStatus>,
}

/// Backups on one node (`GET /v1/status`, `backup`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupStatus {
    /// `local` or `s3`.
    pub store: String,
    /// Unix ms of the last backup whose `LATEST` was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success_at: Option<u64>,
    /// Seconds since `last_success_at` (since start when none succeeded yet).
    pub age_seconds: u64,
    /// Backups written since start.
    pub runs: u64,
    /// Failed backups in a row (0 when the last one succeeded).
    #[serde(default)]
    pub failures: u64,
    /// The last failure (no secrets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Set when this node started by restoring a backup: the manifest's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<String>,
}

/// The intake log on one node (`GET /v1/status`, `intake`; also `GET /v1/wal`, `intake`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IntakeStatus {
    /// `kafka` or `jetstream`.
    pub log: String,
    /// This node's name in the log.
    pub node: String,
    /// `recovering` (boot replay), `ready`, or `down` (the breaker is open).
    pub state: String,
    /// Kafka partition of this node's records (absent on JetStream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// Offset (JetStream: stream sequence) of the last confirmed record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// Every record below this offset is in this node's store: where a rebuild starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark: Option<i64>,
    /// Hooks committed here whose publish is not confirmed yet.
    pub pending: u64,
    /// Age of the oldest pending hook (seconds; 0 when none).
    pub lag_seconds: f64,
    /// Publishes that failed in a row.
    #[serde(default)]
    pub failures: u64,
}

/// The pen on one node (`GET /v1/status`, `quarantine`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PenStatus {
    pub entries: i64,
    pub bytes: i64,
    /// `quarantine.max_bytes`.
    pub max_bytes: u64,
    /// Unix ms the oldest entry was received, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_received_at: Option<u64>,
    /// Sources with entries, by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<PenSourceStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PenSourceStatus {
    pub source: String,
    pub entries: i64,
    pub bytes: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_received_at: Option<u64>,
}

/// The archive on one node (`GET /v1/status`, `archive`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveStatus {
    /// `local` or `s3`.
    pub store: String,
    /// Hooks accepted and not yet in an uploaded segment.
    pub pending: i64,
    /// Segments uploaded and catalogued on this node.
    pub segments: i64,
    /// Hooks archived (catalogued) on this node.
    pub archived: i64,
    /// Unix ms of the last segment upload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_upload_at: Option<u64>,
    /// Failed uploads in a row (0 when the last one succeeded).
    #[serde(default)]
    pub failures: u64,
    /// The last upload's error (no secrets, no URLs with credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The DLQ on one node (`GET /v1/status`, `dlq`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlqStatus {
    pub rows: i64,
    pub bytes: i64,
    /// Over a `queue.dlq` bound with nothing archived left to evict: new hooks get
    /// `503 dlq_full`.
    pub full: bool,
}

/// Longest `SinkFailure::error` a node reports, in bytes (cut on a character boundary, `…`
/// marking the cut): a sink's error names the failing step, not a transcript.
pub const MAX_SINK_ERROR_BYTES: usize = 512;

/// One sink of one source whose latest delivery attempt failed: the error as dispatch records
/// it on the delivery row (`<sink type>: <error>`, already free of secrets), cleared by the
/// sink's next successful delivery or a change of its config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkFailure {
    /// The source id.
    pub source: String,
    /// The sink's index in the source's `sinks`.
    pub sink: u16,
    /// `sources.<id>.sink_names[sink]`: on Kubernetes, the `Sink` object's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The sink type (`http`, `redis`, ...).
    #[serde(rename = "type")]
    pub sink_type: String,
    /// The latest failure, at most `MAX_SINK_ERROR_BYTES`.
    pub error: String,
    /// Unix ms of the latest failure.
    pub at: u64,
    /// Unix ms of the first failure since the last success.
    pub since: u64,
    /// Failed attempts since the last success.
    pub failures: u64,
    /// The circuit breaker of the latest failure's sink key was open (or probing) after it.
    #[serde(default)]
    pub breaker_open: bool,
}

/// The last reload that was refused (the previous config stayed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadError {
    #[serde(default)]
    pub at: u64,
    pub message: String,
}

/// `PUT /v1/config` and `POST /v1/config/reload`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadReply {
    pub changed: bool,
    pub config_hash: String,
    #[serde(default)]
    pub generation: u64,
    #[serde(default)]
    pub restart_required: Vec<String>,
}

/// A refusal that names a field: `400 invalid_config` (a pushed or reloaded config) and
/// `400 invalid_filter`. `field` is `null` when the error is not about one key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    pub error: String,
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub message: String,
}

/// `GET /health` (ingest and admin ports): the process answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// Always `ok`.
    pub status: String,
    pub instance: String,
    pub version: String,
}

/// `GET /ready`: `200` with `status: ready` and the listeners served, or `503` + `Retry-After`
/// with `status: unavailable` (or `starting`, before every listener is bound) and the part
/// that is not ready.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    pub status: String,
    /// Every listener this node serves (`ingest`, `admin`, `claim_check`), all bound: a client
    /// that saw `ready` can connect to each of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<String>,
    /// `write_failed` or `store_unavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// The intake log's state under `wal.type: dual` (`recovering`, `down`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intake: Option<String>,
}
