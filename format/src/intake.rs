//! The intake record v1: one hook as `wal.type: dual` publishes it to the intake log, and as a
//! node rebuilding its store reads it back. Everything needed to commit the hook again with
//! its original id: the envelope as the store encodes it, the sink types and lane keys of its
//! delivery rows at ack time, and its dedupe key.
//!
//! Layout: `0xA1`, a big-endian u32 length, that many bytes of JSON metadata, then the encoded
//! envelope (`codec::encode_envelope`). Read back from a broker, a record is hostile input:
//! every length is checked and the envelope decodes through the store's own checked decoder.

use serde::{Deserialize, Serialize};

use crate::FormatError;
use crate::codec::{Envelope, decode_envelope};

pub const INTAKE_V1: u8 = 0xA1;
/// Largest metadata part a reader accepts.
const MAX_META: usize = 256 * 1024;

/// The dedupe key of the hook, as the commit checked it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntakeDedupe {
    pub key: String,
    pub ttl_ms: u64,
    #[serde(default)]
    pub source_wide: bool,
}

/// What a record carries beside the envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntakeMeta {
    /// The node that acked it (its name in the log).
    pub node: String,
    /// Its seq on that node.
    pub seq: u64,
    /// Sink type names, one per delivery row, in index order.
    pub sinks: Vec<String>,
    /// Per sink index, the ordering lane key (empty: no ordered sinks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe: Option<IntakeDedupe>,
    /// Sink indexes whose filter did not match (ascending): no delivery row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_sinks: Vec<u16>,
}

/// Encodes a record from metadata and the envelope exactly as the store encoded it.
pub fn encode_intake(meta: &IntakeMeta, encoded_envelope: &[u8]) -> Vec<u8> {
    let m = serde_json::to_vec(meta).expect("intake metadata serialises");
    encode_intake_json(&m, encoded_envelope)
}

/// `encode_intake` with the metadata already serialised (the committer writes the same bytes
/// to the hook's pending marker).
pub fn encode_intake_json(m: &[u8], encoded_envelope: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + m.len() + encoded_envelope.len());
    out.push(INTAKE_V1);
    out.extend_from_slice(&(m.len() as u32).to_be_bytes());
    out.extend_from_slice(m);
    out.extend_from_slice(encoded_envelope);
    out
}

/// A decoded record: its metadata, the envelope, and the envelope's bytes as encoded.
#[derive(Debug, Clone)]
pub struct IntakeRecord {
    pub meta: IntakeMeta,
    pub envelope: Envelope,
    pub encoded_envelope: Vec<u8>,
}

pub fn decode_intake(v: &[u8]) -> Result<IntakeRecord, FormatError> {
    let bad = |why: &str| FormatError::Corrupt(format!("intake record: {why}"));
    if v.len() < 5 || v[0] != INTAKE_V1 {
        return Err(bad("unknown encoding"));
    }
    let len = u32::from_be_bytes([v[1], v[2], v[3], v[4]]) as usize;
    if len > MAX_META || v.len() < 5 + len {
        return Err(bad("metadata length out of range"));
    }
    let meta: IntakeMeta =
        serde_json::from_slice(&v[5..5 + len]).map_err(|_| bad("metadata does not parse"))?;
    if meta.node.is_empty() || meta.node.len() > 64 {
        return Err(bad("node name out of range"));
    }
    if meta.sinks.len() > u16::MAX as usize
        || (!meta.lanes.is_empty() && meta.lanes.len() != meta.sinks.len())
    {
        return Err(bad("sink list out of range"));
    }
    let encoded_envelope = v[5 + len..].to_vec();
    let envelope = decode_envelope(meta.seq, &encoded_envelope)
        .map_err(|_| bad("envelope does not decode"))?;
    Ok(IntakeRecord {
        meta,
        envelope,
        encoded_envelope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encode_envelope;

    fn envelope() -> Envelope {
        let mut e = Envelope::new("t", "s", bytes::Bytes::from_static(b"{\"a\":1}"));
        e.id = uuid::Uuid::from_u128(7);
        e.headers = vec![("content-type".into(), "application/json".into())];
        e
    }

    #[test]
    fn round_trip() {
        let meta = IntakeMeta {
            node: "gw-0".into(),
            seq: 42,
            sinks: vec!["http".into(), "kafka".into()],
            lanes: vec![None, Some("k".into())],
            dedupe: Some(IntakeDedupe {
                key: "evt_1".into(),
                ttl_ms: 1000,
                source_wide: false,
            }),
            skip_sinks: vec![1],
        };
        let env = envelope();
        let enc = encode_envelope(&env);
        let r = decode_intake(&encode_intake(&meta, &enc)).expect("decodes");
        assert_eq!(r.meta, meta);
        assert_eq!(r.envelope.id, env.id);
        assert_eq!(r.encoded_envelope, enc);
    }

    #[test]
    fn hostile_records_are_refused() {
        let meta = IntakeMeta {
            node: "gw-0".into(),
            seq: 1,
            sinks: vec!["http".into()],
            lanes: vec![],
            dedupe: None,
            skip_sinks: Vec::new(),
        };
        let good = encode_intake(&meta, &encode_envelope(&envelope()));
        // The body runs to the end (the broker keeps a record whole: its CRC covers it), so
        // every cut before the body must be refused.
        let body_at = good.len() - envelope().body.len();
        for cut in 0..body_at {
            assert!(decode_intake(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = good.clone();
        long[1..5].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_intake(&long).is_err());
        let mut lanes = meta.clone();
        lanes.lanes = vec![None, None];
        assert!(decode_intake(&encode_intake(&lanes, &encode_envelope(&envelope()))).is_err());
    }
}
