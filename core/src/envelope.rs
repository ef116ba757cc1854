//! The stored hook as every part of the gateway sees it.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// How the edge judged a hook's signature. Travels with every delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyStatus {
    Ok,
    Failed,
    Skipped,
}

impl VerifyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyStatus::Ok => "ok",
            VerifyStatus::Failed => "failed",
            VerifyStatus::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    pub status: VerifyStatus,
    pub flagged: bool,
}

impl Verification {
    /// The signature checked out.
    pub const OK: Verification = Verification {
        status: VerifyStatus::Ok,
        flagged: false,
    };

    /// The source verifies nothing.
    pub const SKIPPED: Verification = Verification {
        status: VerifyStatus::Skipped,
        flagged: false,
    };
}

/// A stored hook: what the provider sent and what the edge decided about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub id: Uuid,
    /// Commit order on this node; 0 until the store assigns it.
    pub seq: u64,
    /// Unix milliseconds the edge accepted the request.
    pub received_at: u64,
    pub tenant: String,
    pub source_id: String,
    /// Request headers in arrival order, lowercase names (auth, framing and hop-by-hop
    /// headers are not stored).
    pub headers: Vec<(String, String)>,
    pub content_type: Option<String>,
    pub verification: Verification,
    pub dedupe_key: Option<String>,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    pub body: Bytes,
}

impl Envelope {
    /// A hook of `tenant`'s `source_id` received now: a new id, no headers, verification
    /// skipped, no dedupe key or trace context (the edge sets what the request carried).
    pub fn new(tenant: impl Into<String>, source_id: impl Into<String>, body: Bytes) -> Envelope {
        Envelope {
            id: Uuid::now_v7(),
            seq: 0,
            received_at: crate::now_ms(),
            tenant: tenant.into(),
            source_id: source_id.into(),
            headers: Vec::new(),
            content_type: None,
            verification: Verification::SKIPPED,
            dedupe_key: None,
            traceparent: None,
            tracestate: None,
            body,
        }
    }

    /// `tenant:source_id:dedupe_key` when a dedupe key was extracted, else the hook id.
    /// Computed once here and shipped by every sink.
    pub fn idempotency_key(&self) -> String {
        match &self.dedupe_key {
            Some(k) => format!("{}:{}:{}", self.tenant, self.source_id, k),
            None => self.id.to_string(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}
