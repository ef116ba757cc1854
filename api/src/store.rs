//! The node's store as the admin API shows it: counters and health (`GET /v1/wal`), the rows
//! set aside as corrupt (`GET /v1/store/corrupt`), and the quarantine pen's pages and purges
//! (`GET|DELETE /v1/quarantine`). The wire shape, apart from how the store keeps them.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::node::IntakeStatus;

/// `GET /v1/wal`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WalStatus {
    /// The next hook sequence number.
    pub next_seq: u64,
    /// Hooks stored (awaiting delivery or dead-lettered) and their body bytes.
    pub hooks: i64,
    pub hook_bytes: i64,
    pub deliveries: DeliveryCounts,
    /// Store size on disk (SST files and memtables).
    pub disk_bytes: u64,
    /// Unix ms of the last successful synced write (`0`: none).
    pub last_sync_ok_ms: u64,
    /// Unix ms of the last failed write (`0`: none).
    pub last_failure_ms: u64,
    pub last_failure_class: Option<String>,
    pub path: String,
    /// The intake log, under `wal.type: dual`; `null` otherwise.
    pub intake: Option<IntakeStatus>,
}

/// Delivery rows pending or in flight, and dead-lettered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryCounts {
    pub pending: i64,
    pub dead: i64,
}

/// `GET /v1/store/corrupt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorruptRows {
    /// Every row set aside since the store was made.
    pub total: i64,
    /// Oldest key first, at most the request's `limit`.
    pub rows: Vec<CorruptRow>,
}

/// A row that did not decode (its bytes are kept in the store, not shown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorruptRow {
    /// The column family it was found in.
    pub family: String,
    /// Its key, hex.
    pub key: String,
    /// Unix ms it was set aside.
    pub at: u64,
    pub error: String,
    /// Length of the bytes kept.
    pub size: usize,
}

/// `GET /v1/quarantine`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantinePage {
    pub entries: Vec<PenEntry>,
    /// The whole pen's entries and bytes, given only when no filter is set (and not to a
    /// tenant-limited token).
    pub total: Option<i64>,
    pub bytes: Option<i64>,
    /// Where the next page starts; `None` when the scan reached the end.
    pub next_cursor: Option<String>,
}

/// One entry of the pen, without its body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PenEntry {
    pub id: Uuid,
    pub source_id: String,
    pub tenant: String,
    pub received_at: u64,
    /// Why verification failed (`no_matching_signature`, ...).
    pub reason: String,
    /// What the entry counts against `quarantine.max_bytes`.
    pub size: u64,
    pub method: String,
    pub path: String,
    /// The tenant came from the URL (`routing: tenant_path`).
    pub url_tenant: bool,
}

/// `DELETE /v1/quarantine`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantinePurged {
    pub deleted: u64,
    pub bytes: u64,
}
