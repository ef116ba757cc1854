//! One hook with its body in hand, whichever way it came: a queue message (its inline body, or
//! its claim redeemed by [`to_hook`](crate::to_hook)) or an HTTP delivery.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::delivery::Delivery;
use crate::message::{Message, MessageBody};
use crate::verification::{Verification, idempotency_key, trusted};

/// A hook and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub id: String,
    /// Always set from a queue message; from an HTTP delivery, `x-ankusa-source` if sent.
    pub source_id: Option<String>,
    /// `None` for the default tenant.
    pub tenant_id: Option<String>,
    /// What to dedupe on: read it, don't rebuild it.
    pub idempotency_key: String,
    pub dedupe_key: Option<String>,
    pub replay_id: Option<String>,
    pub ordering_key: Option<String>,
    pub verification: Option<Verification>,
    pub content_type: Option<String>,
    /// Unix ms the edge accepted the request (advisory on an HTTP delivery).
    pub received_at: Option<u64>,
    /// Length and lowercase hex SHA-256 of `body`, which was checked against them (from a
    /// delivery: computed from the body received).
    pub size: u64,
    pub sha256: String,
    /// The forwarded provider headers of a queue message (empty for a delivery, whose
    /// provider headers are the request's own).
    pub headers: BTreeMap<String, String>,
    pub traceparent: Option<String>,
    pub body: Bytes,
}

impl Hook {
    /// The tenant: `tenant_id`, else `default`.
    pub fn tenant(&self) -> &str {
        self.tenant_id.as_deref().unwrap_or("default")
    }

    /// The key to dedupe on; with `include_replay` and a replay id,
    /// `<key>#replay:<replay_id>` (a replay to be processed again rather than dropped).
    pub fn idempotency_key(&self, include_replay: bool) -> String {
        idempotency_key(
            &self.idempotency_key,
            self.replay_id.as_deref(),
            include_replay,
        )
    }

    /// True only for a verification of `{"status": "ok", "flagged": false}`.
    pub fn is_trusted(&self) -> bool {
        trusted(self.verification.as_ref())
    }

    /// The hook of `message` with `body` (its inline body, or the redeemed claim).
    pub(crate) fn from_message(message: &Message, body: Bytes) -> Hook {
        Hook {
            id: message.id.clone(),
            source_id: Some(message.source_id.clone()),
            tenant_id: message.tenant_id.clone(),
            idempotency_key: message.idempotency_key.clone(),
            dedupe_key: message.dedupe_key.clone(),
            replay_id: message.replay_id.clone(),
            ordering_key: message.ordering_key.clone(),
            verification: message.verification.clone(),
            content_type: message.content_type.clone(),
            received_at: Some(message.received_at),
            size: message.size,
            sha256: message.sha256.clone(),
            headers: message.headers.clone(),
            traceparent: message.traceparent.clone(),
            body,
        }
    }

    /// The hook of a message with an inline body; `None` for a claim (redeem it with
    /// [`to_hook`](crate::to_hook)).
    pub fn from_inline(message: &Message) -> Option<Hook> {
        match &message.body {
            MessageBody::Inline(b) => Some(Hook::from_message(message, b.clone())),
            MessageBody::Claim(_) => None,
        }
    }
}

impl From<Delivery> for Hook {
    fn from(d: Delivery) -> Hook {
        use sha2::{Digest, Sha256};
        let h = d.headers;
        Hook {
            size: d.body.len() as u64,
            sha256: hex::encode(Sha256::digest(&d.body)),
            id: h.id,
            source_id: h.source_id,
            tenant_id: h.tenant_id,
            idempotency_key: h.idempotency_key,
            dedupe_key: h.dedupe_key,
            replay_id: h.replay_id,
            ordering_key: h.ordering_key,
            verification: h.verification,
            content_type: h.content_type,
            received_at: h.received_at,
            headers: BTreeMap::new(),
            traceparent: None,
            body: d.body,
        }
    }
}
