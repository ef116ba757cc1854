//! Value encodings. Metadata is JSON (self-describing, so fields can be added without a
//! migration); a hook's body follows its metadata as raw bytes, never re-encoded.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::FormatError;

pub use ankusa_core::{Envelope, Verification};

#[derive(Deserialize)]
struct EnvelopeMeta {
    id: Uuid,
    received_at: u64,
    tenant: String,
    source_id: String,
    headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content_type: Option<String>,
    verification: Verification,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dedupe_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    traceparent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracestate: Option<String>,
}

const ENVELOPE_V1: u8 = 1;

/// The metadata as `encode_envelope` writes it: borrowed, so encoding copies nothing but the
/// output. Field for field the same JSON as `EnvelopeMeta`.
#[derive(Serialize)]
struct EnvelopeMetaRef<'a> {
    id: Uuid,
    received_at: u64,
    tenant: &'a str,
    source_id: &'a str,
    headers: &'a [(String, String)],
    #[serde(skip_serializing_if = "Option::is_none")]
    content_type: Option<&'a str>,
    verification: Verification,
    #[serde(skip_serializing_if = "Option::is_none")]
    dedupe_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    traceparent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tracestate: Option<&'a str>,
}

/// `[1][meta length: u32 BE][meta JSON][body]`.
pub fn encode_envelope(e: &Envelope) -> Vec<u8> {
    let meta = EnvelopeMetaRef {
        id: e.id,
        received_at: e.received_at,
        tenant: &e.tenant,
        source_id: &e.source_id,
        headers: &e.headers,
        content_type: e.content_type.as_deref(),
        verification: e.verification,
        dedupe_key: e.dedupe_key.as_deref(),
        traceparent: e.traceparent.as_deref(),
        tracestate: e.tracestate.as_deref(),
    };
    let meta = serde_json::to_vec(&meta).expect("envelope metadata serialises");
    let mut out = Vec::with_capacity(5 + meta.len() + e.body.len());
    out.push(ENVELOPE_V1);
    out.extend_from_slice(&(meta.len() as u32).to_be_bytes());
    out.extend_from_slice(&meta);
    out.extend_from_slice(&e.body);
    out
}

/// The inverse of `encode_envelope`.
pub fn decode_envelope(seq: u64, v: &[u8]) -> Result<Envelope, FormatError> {
    let bad = |why: &str| FormatError::Corrupt(format!("hook {seq}: {why}"));
    if v.len() < 5 || v[0] != ENVELOPE_V1 {
        return Err(bad("unknown envelope encoding"));
    }
    let len = u32::from_be_bytes([v[1], v[2], v[3], v[4]]) as usize;
    let meta_end = 5usize
        .checked_add(len)
        .filter(|&e| e <= v.len())
        .ok_or_else(|| bad("truncated"))?;
    let m: EnvelopeMeta = serde_json::from_slice(&v[5..meta_end])
        .map_err(|e| json_error(&format!("hook {seq}"), &e))?;
    Ok(Envelope {
        id: m.id,
        seq,
        received_at: m.received_at,
        tenant: m.tenant,
        source_id: m.source_id,
        headers: m.headers,
        content_type: m.content_type,
        verification: m.verification,
        dedupe_key: m.dedupe_key,
        traceparent: m.traceparent,
        tracestate: m.tracestate,
        body: Bytes::copy_from_slice(&v[meta_end..]),
    })
}

/// A decode error as where and what kind, never the text serde would quote from the value (a
/// stored row holds tenants' data; the message reaches logs and the admin API).
fn json_error(what: &str, e: &serde_json::Error) -> FormatError {
    let kind = match e.classify() {
        serde_json::error::Category::Io => "read error",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "unexpected field or type",
        serde_json::error::Category::Eof => "truncated",
    };
    FormatError::Corrupt(format!(
        "{what}: {kind} at line {} column {}",
        e.line(),
        e.column()
    ))
}

/// What the pen keeps beside each quarantined envelope (the value of its summary key): what a
/// listing, a purge and a release filter on, so none of them reads a body it does not need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PenSummary {
    pub id: Uuid,
    pub source_id: String,
    pub tenant: String,
    pub received_at: u64,
    /// Why verification failed (`ankusa_verify::VerifyFailure::code`).
    pub reason: String,
    /// Bytes of the stored envelope: what the entry counts against `quarantine.max_bytes`.
    pub size: u64,
    pub method: String,
    pub path: String,
    /// The tenant came from the URL (`routing: tenant_path`): a release dedupes as the edge
    /// would have for that request.
    #[serde(default)]
    pub url_tenant: bool,
}

impl PenSummary {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("pen summary serialises")
    }

    pub fn decode(v: &[u8]) -> Result<PenSummary, FormatError> {
        serde_json::from_slice(v).map_err(|e| json_error("quarantine summary", &e))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowState {
    Pending,
    Inflight,
    Dead,
}

pub use ankusa_config::ErrorClass;

/// One obligation: deliver hook `seq` to sink `sink` of its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRow {
    /// Sink type bound at ack (`http`, `log`, ...): the row falls back to the one sink of that
    /// type if the source's sinks were reordered.
    pub sink_type: String,
    pub tenant: String,
    pub source_id: String,
    pub hook_id: Uuid,
    /// Body size, counted against the in-flight byte windows.
    pub size: u64,
    pub state: RowState,
    pub attempts: u32,
    /// The horizon's origin; persisted so a restart does not reset it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_attempt_at: Option<u64>,
    pub due_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_id: Option<String>,
    /// The ordering lane key of an ordered sink entry (`""`: the keyless lane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
}

impl DeliveryRow {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("delivery row serialises")
    }

    pub fn decode(v: &[u8]) -> Result<DeliveryRow, FormatError> {
        serde_json::from_slice(v).map_err(|e| json_error("delivery row", &e))
    }
}

/// The value of a dead-index key: enough to filter and list without reading the row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadSummary {
    pub tenant: String,
    pub source_id: String,
    pub sink: u16,
    pub sink_type: String,
    pub error_class: ErrorClass,
    pub hook_id: Uuid,
}

impl DeadSummary {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("dead summary serialises")
    }

    pub fn decode(v: &[u8]) -> Result<DeadSummary, FormatError> {
        serde_json::from_slice(v).map_err(|e| json_error("dead index", &e))
    }
}

/// A dedupe key's claim: the hook that first used it and when the claim lapses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DedupeEntry {
    pub id: Uuid,
    pub expires_at: u64,
}

impl DedupeEntry {
    pub fn encode(&self) -> [u8; 24] {
        let mut v = [0u8; 24];
        v[..16].copy_from_slice(self.id.as_bytes());
        v[16..].copy_from_slice(&self.expires_at.to_be_bytes());
        v
    }

    pub fn decode(v: &[u8]) -> Result<DedupeEntry, FormatError> {
        if v.len() != 24 {
            return Err(FormatError::Corrupt(
                "dedupe entry has the wrong length".into(),
            ));
        }
        let id = Uuid::from_slice(&v[..16])
            .map_err(|_| FormatError::Corrupt("dedupe entry: bad hook id".into()))?;
        Ok(DedupeEntry {
            id,
            expires_at: crate::keys::be64(&v[16..])
                .ok_or_else(|| FormatError::Corrupt("dedupe entry has the wrong length".into()))?,
        })
    }
}

/// A row set aside because it did not decode: the error and the bytes as they were, so an
/// operator can inspect (and a future release perhaps repair) what was found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorruptRow {
    /// When it was set aside, ms since the epoch.
    pub at: u64,
    /// What failed to decode and why; built from the decoder's message, never from the value.
    pub error: String,
    /// The value as found, base64 (standard alphabet).
    pub value: String,
}

impl CorruptRow {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("corrupt row serialises")
    }

    pub fn decode(v: &[u8]) -> Result<CorruptRow, FormatError> {
        serde_json::from_slice(v).map_err(|e| json_error("corrupt index", &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_round_trips_with_binary_body() {
        let e = Envelope {
            seq: 7,
            received_at: 1_700_000_000_000,
            headers: vec![("x-a".into(), "1".into())],
            content_type: Some("application/json".into()),
            verification: Verification::OK,
            dedupe_key: Some("evt_1".into()),
            ..Envelope::new(
                "acme",
                "stripe",
                Bytes::from_static(&[0, 159, 146, 150, 255]),
            )
        };
        assert_eq!(decode_envelope(7, &encode_envelope(&e)).unwrap(), e);
        assert_eq!(e.idempotency_key(), "acme:stripe:evt_1");
        assert!(decode_envelope(7, &[1, 0, 0, 0, 200, b'{']).is_err());
        assert!(decode_envelope(7, &[]).is_err());
    }
}
