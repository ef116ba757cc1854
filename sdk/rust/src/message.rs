//! The queue message (v1): what every queue sink publishes, byte for byte (`docs/sinks.md`,
//! "The message (v1)"). [`decode_message`] applies the contract's rules in order, so the first
//! broken rule names the code; every failure is permanent (dead-letter, never requeue).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::claim_ref::ClaimRef;
use crate::delivery::is_sha256_hex;
use crate::errors::{MessageDecodeError, MessageErrorKind as Kind};
use crate::verification::{Verification, idempotency_key, trusted};

/// The message versions this SDK reads (v2 = v1 + additive fields).
pub const SUPPORTED_VERSIONS: std::ops::RangeInclusive<u64> = 1..=2;

/// The body of a message: inline, or a claim check to redeem
/// ([`to_hook`](crate::to_hook)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageBody {
    /// `body_base64`, decoded and checked against `size` and `sha256`.
    Inline(Bytes),
    /// `claim`: the body is held by the gateway's claim port.
    Claim(ClaimRef),
}

/// A decoded queue message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Format version: 1 or 2.
    pub v: u64,
    /// The stored hook's id; every redelivery carries the same.
    pub id: String,
    pub source_id: String,
    /// `None` for the default tenant.
    pub tenant_id: Option<String>,
    /// Unix ms the edge accepted the request.
    pub received_at: u64,
    pub content_type: Option<String>,
    /// Body length and lowercase hex SHA-256 (inline bodies are checked against them).
    pub size: u64,
    pub sha256: String,
    pub dedupe_key: Option<String>,
    pub replay_id: Option<String>,
    /// What to dedupe on (the hook id when the message has none).
    pub idempotency_key: String,
    /// How the edge judged the provider's signature; `None` from a node older than the field.
    pub verification: Option<Verification>,
    /// Forwarded provider headers (lowercase names).
    pub headers: BTreeMap<String, String>,
    pub instance: Option<String>,
    pub region: Option<String>,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    /// Only from an `ordered: true` sink: the lane's key.
    pub ordering_key: Option<String>,
    pub body: MessageBody,
}

impl Message {
    /// The tenant: `tenant_id`, else `default`.
    pub fn tenant(&self) -> &str {
        self.tenant_id.as_deref().unwrap_or("default")
    }

    /// The inline body; `None` for a claim.
    pub fn inline_body(&self) -> Option<&Bytes> {
        match &self.body {
            MessageBody::Inline(b) => Some(b),
            MessageBody::Claim(_) => None,
        }
    }

    /// The claim reference; `None` for an inline body.
    pub fn claim(&self) -> Option<&ClaimRef> {
        match &self.body {
            MessageBody::Claim(c) => Some(c),
            MessageBody::Inline(_) => None,
        }
    }

    /// The key to dedupe on; with `include_replay`, `<key>#replay:<replay_id>` for a replay.
    pub fn idempotency_key(&self, include_replay: bool) -> String {
        idempotency_key(
            &self.idempotency_key,
            self.replay_id.as_deref(),
            include_replay,
        )
    }

    /// True only when the edge verified the provider's signature and did not flag the hook.
    pub fn is_trusted(&self) -> bool {
        trusted(self.verification.as_ref())
    }
}

/// The optional string fields, checked in this order after the required ones.
const OPTIONAL_STRINGS: [&str; 10] = [
    "tenant_id",
    "content_type",
    "dedupe_key",
    "replay_id",
    "idempotency_key",
    "instance",
    "region",
    "traceparent",
    "tracestate",
    "ordering_key",
];

/// Decodes one queue message (a Kafka value, a RabbitMQ/NATS/Redis payload, an SQS body, a
/// Pub/Sub data field).
pub fn decode_message(bytes: &[u8]) -> Result<Message, MessageDecodeError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        MessageDecodeError::new(Kind::InvalidJson, None, format!("not UTF-8 JSON: {e}"))
    })?;
    let Value::Object(m) = value else {
        return Err(MessageDecodeError::new(
            Kind::NotAnObject,
            None,
            "JSON, but not an object",
        ));
    };
    let v = m
        .get("v")
        .and_then(Value::as_u64)
        .filter(|v| SUPPORTED_VERSIONS.contains(v))
        .ok_or_else(|| {
            MessageDecodeError::new(
                Kind::UnsupportedVersion,
                Some("v"),
                "v must be an integer in 1..=2",
            )
        })?;

    let id = required_string(&m, "id")?;
    let source_id = required_string(&m, "source_id")?;
    let received_at = unsigned(&m, "received_at")?;
    let size = unsigned(&m, "size")?;
    let sha256 = match m.get("sha256") {
        Some(Value::String(s)) if is_sha256_hex(s) => s.clone(),
        _ => return Err(invalid_field("sha256", "must be 64 lowercase hex digits")),
    };
    let mut optional: BTreeMap<&str, Option<String>> = BTreeMap::new();
    for key in OPTIONAL_STRINGS {
        optional.insert(key, optional_string(&m, key)?);
    }
    let headers = headers(&m)?;
    let verification = verification(&m)?;
    let body = body(&m)?;

    let mut take = |key: &str| optional.remove(key).flatten();
    let tenant_id = take("tenant_id");
    let body = match body {
        RawBody::Inline(bytes) => {
            if bytes.len() as u64 != size {
                return Err(MessageDecodeError::new(
                    Kind::SizeMismatch,
                    Some("size"),
                    format!("the body has {} bytes, size says {size}", bytes.len()),
                ));
            }
            if hex::encode(Sha256::digest(&bytes)) != sha256 {
                return Err(MessageDecodeError::new(
                    Kind::Integrity,
                    Some("sha256"),
                    "the body does not match sha256",
                ));
            }
            MessageBody::Inline(Bytes::from(bytes))
        }
        RawBody::Claim(claim) => {
            let tenant = tenant_id.as_deref().unwrap_or("default");
            if claim.tenant != tenant {
                return Err(MessageDecodeError::new(
                    Kind::TenantMismatch,
                    Some("claim"),
                    "the claim's tenant is not the message's",
                ));
            }
            MessageBody::Claim(claim)
        }
    };
    Ok(Message {
        v,
        idempotency_key: take("idempotency_key").unwrap_or_else(|| id.clone()),
        id,
        source_id,
        tenant_id,
        received_at,
        content_type: take("content_type"),
        size,
        sha256,
        dedupe_key: take("dedupe_key"),
        replay_id: take("replay_id"),
        verification,
        headers,
        instance: take("instance"),
        region: take("region"),
        traceparent: take("traceparent"),
        tracestate: take("tracestate"),
        ordering_key: take("ordering_key"),
        body,
    })
}

fn invalid_field(field: &'static str, detail: &str) -> MessageDecodeError {
    MessageDecodeError::new(Kind::InvalidField, Some(field), format!("{field} {detail}"))
}

fn required_string(
    m: &Map<String, Value>,
    key: &'static str,
) -> Result<String, MessageDecodeError> {
    match m.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(invalid_field(key, "must be a non-empty string")),
    }
}

fn unsigned(m: &Map<String, Value>, key: &'static str) -> Result<u64, MessageDecodeError> {
    m.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid_field(key, "must be an integer >= 0"))
}

/// Absent and `null` are the same: no value.
fn optional_string(
    m: &Map<String, Value>,
    key: &'static str,
) -> Result<Option<String>, MessageDecodeError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid_field(key, "must be a string or null")),
    }
}

fn headers(m: &Map<String, Value>) -> Result<BTreeMap<String, String>, MessageDecodeError> {
    let bad = || invalid_field("headers", "must be an object of strings or null");
    match m.get("headers") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(h)) => h
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(bad()),
            })
            .collect(),
        Some(_) => Err(bad()),
    }
}

fn verification(m: &Map<String, Value>) -> Result<Option<Verification>, MessageDecodeError> {
    match m.get("verification") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(v)) => match (v.get("status"), v.get("flagged")) {
            (Some(Value::String(status)), Some(Value::Bool(flagged))) => Ok(Some(Verification {
                status: status.clone(),
                flagged: *flagged,
            })),
            _ => Err(invalid_field(
                "verification",
                "must hold a string status and a boolean flagged",
            )),
        },
        Some(_) => Err(invalid_field("verification", "must be an object or null")),
    }
}

enum RawBody {
    Inline(Vec<u8>),
    Claim(ClaimRef),
}

fn present<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    m.get(key).filter(|v| !v.is_null())
}

fn body(m: &Map<String, Value>) -> Result<RawBody, MessageDecodeError> {
    match (present(m, "body_base64"), present(m, "claim")) {
        (Some(_), Some(_)) => Err(MessageDecodeError::new(
            Kind::AmbiguousBody,
            None,
            "both body_base64 and claim are set",
        )),
        (None, None) => Err(MessageDecodeError::new(
            Kind::MissingBody,
            None,
            "neither body_base64 nor claim is set",
        )),
        (Some(b64), None) => b64
            .as_str()
            .and_then(|s| STANDARD.decode(s).ok())
            .map(RawBody::Inline)
            .ok_or_else(|| {
                MessageDecodeError::new(
                    Kind::InvalidBodyBase64,
                    Some("body_base64"),
                    "body_base64 is not standard padded base64",
                )
            }),
        (None, Some(claim)) => {
            let urn = claim.as_str().ok_or_else(|| {
                MessageDecodeError::new(
                    Kind::InvalidClaimRef,
                    Some("claim"),
                    "claim is not a string",
                )
            })?;
            ClaimRef::parse(urn).map(RawBody::Claim).map_err(|e| {
                MessageDecodeError::new(Kind::InvalidClaimRef, Some("claim"), e.to_string())
            })
        }
    }
}
