//! One hook as the admin API shows it: a stored hook and its delivery rows
//! (`GET /v1/hooks/{id}`), and an archived hook read back from the blob store
//! (`GET /v1/archive/hooks/{id}`). The wire shape, apart from how the store keeps them.

use ankusa_config::ErrorClass;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `GET /v1/hooks/{id}`: the hook without its body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookView {
    pub id: Uuid,
    pub seq: u64,
    pub tenant: String,
    pub source_id: String,
    pub received_at: u64,
    /// Body bytes.
    pub size: u64,
    pub content_type: Option<String>,
    pub verification: HookVerification,
    pub dedupe_key: Option<String>,
    /// `<tenant>:<source>:<dedupe key>`, or the hook id without a dedupe key.
    pub idempotency_key: String,
    pub deliveries: Vec<DeliveryView>,
}

/// How the edge judged the hook's signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookVerification {
    /// `ok`, `failed` or `skipped`.
    pub status: String,
    /// Accepted although the check failed (`on_verify_failure: accept_flag`).
    pub flagged: bool,
}

/// One delivery row of a hook: its obligation to one sink of its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryView {
    /// The sink's index in the source's `sinks`.
    pub sink: u16,
    #[serde(rename = "type")]
    pub sink_type: String,
    /// `pending`, `inflight` or `dead`.
    pub state: String,
    pub attempts: u32,
    pub due_at: u64,
    pub first_attempt_at: Option<u64>,
    pub last_error: Option<String>,
    pub error_class: Option<ErrorClass>,
    pub dead_at: Option<u64>,
    pub replay_id: Option<String>,
}

/// `GET /v1/archive/hooks/{id}`: an archived hook, body included (base64), checked against its
/// catalogued sha256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedHook {
    pub id: Uuid,
    pub seq: u64,
    pub tenant: String,
    pub source_id: String,
    pub received_at: u64,
    pub size: u64,
    pub content_type: Option<String>,
    pub dedupe_key: Option<String>,
    /// The blob key of the segment that holds it.
    pub segment: String,
    /// Hex.
    pub body_sha256: String,
    pub body_base64: String,
}
