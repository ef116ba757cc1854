//! What pods of a fleet send each other. A forwarded commit is an intake record v1
//! (`ankusa_format::intake`): the envelope exactly as the store encodes it, its sink types,
//! lanes and dedupe key, so the owner commits the same hook the receiving pod built (same id).
//! Answers and lookups are small JSON documents. The receiving side decodes a forward as
//! hostile input: every length and name is checked.

use ankusa_format::intake::{IntakeDedupe, IntakeMeta, decode_intake, encode_intake};
use ankusa_store::{Dedupe, IngestRecord, encode_envelope};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub const COMMIT_PATH: &str = "/fleet/v1/commit";
pub const LOOKUP_PATH: &str = "/fleet/v1/lookup";

/// The owner's answer to a forwarded commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitAnswer {
    pub id: Uuid,
    pub duplicate: bool,
}

/// A dedupe key asked of its previous owner during a handover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lookup {
    pub tenant: String,
    pub source: String,
    pub key: String,
    #[serde(default)]
    pub source_wide: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookupAnswer {
    pub id: Option<Uuid>,
}

impl Lookup {
    pub fn of(rec: &IngestRecord) -> Option<Lookup> {
        let d = rec.dedupe.as_ref()?;
        Some(Lookup {
            tenant: rec.envelope.tenant.clone(),
            source: rec.envelope.source_id.clone(),
            key: d.key.clone(),
            source_wide: d.source_wide,
        })
    }

    /// The record whose dedupe index key this lookup names (no body, no sinks).
    pub fn record(&self) -> IngestRecord {
        IngestRecord {
            envelope: ankusa_store::Envelope::new(
                self.tenant.clone(),
                self.source.clone(),
                bytes::Bytes::new(),
            ),
            sinks: Vec::new(),
            lanes: Vec::new(),
            dedupe: Some(Dedupe {
                key: self.key.clone(),
                ttl_ms: 0,
                source_wide: self.source_wide,
            }),
            skip_sinks: Vec::new(),
        }
    }
}

/// The forward of `rec` from pod `sender`.
pub fn encode_commit(sender: &str, rec: &IngestRecord) -> Vec<u8> {
    let meta = IntakeMeta {
        node: sender.to_string(),
        seq: 0,
        sinks: rec.sinks.iter().map(|s| s.to_string()).collect(),
        lanes: rec.lanes.clone(),
        dedupe: rec.dedupe.as_ref().map(|d| IntakeDedupe {
            key: d.key.clone(),
            ttl_ms: d.ttl_ms,
            source_wide: d.source_wide,
        }),
        skip_sinks: rec.skip_sinks.clone(),
    };
    encode_intake(&meta, &encode_envelope(&rec.envelope))
}

/// Why a forward was not taken (the code of the `400`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("the record does not decode")]
    Undecodable,
    #[error("the record names a sink type this build does not know")]
    UnknownSinkType,
    #[error("the record carries no dedupe key")]
    Unkeyed,
}

/// A forward read back: the record to commit and the sending pod's name.
pub fn decode_commit(bytes: &[u8]) -> Result<(String, IngestRecord), WireError> {
    let r = decode_intake(bytes).map_err(|_| WireError::Undecodable)?;
    let Some(d) = r.meta.dedupe else {
        return Err(WireError::Unkeyed);
    };
    let sinks = r
        .meta
        .sinks
        .iter()
        .map(|name| {
            ankusa_config::SINK_TYPES
                .iter()
                .copied()
                .find(|t| t == name)
                .ok_or(WireError::UnknownSinkType)
        })
        .collect::<Result<Vec<&'static str>, _>>()?;
    let mut envelope = r.envelope;
    envelope.seq = 0;
    Ok((
        r.meta.node,
        IngestRecord {
            envelope,
            sinks,
            lanes: r.meta.lanes,
            dedupe: Some(Dedupe {
                key: d.key,
                ttl_ms: d.ttl_ms,
                source_wide: d.source_wide,
            }),
            skip_sinks: r.meta.skip_sinks,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> IngestRecord {
        let mut e = ankusa_store::Envelope::new("acme", "github", bytes::Bytes::from_static(b"{}"));
        e.dedupe_key = Some("d-1".into());
        IngestRecord {
            envelope: e,
            sinks: vec!["http", "rabbitmq"],
            lanes: Vec::new(),
            dedupe: Some(Dedupe {
                key: "d-1".into(),
                ttl_ms: 60_000,
                source_wide: false,
            }),
            skip_sinks: Vec::new(),
        }
    }

    #[test]
    fn a_forward_round_trips_with_its_id() {
        let rec = record();
        let (sender, back) = decode_commit(&encode_commit("gw-1", &rec)).unwrap();
        assert_eq!(sender, "gw-1");
        assert_eq!(back.envelope.id, rec.envelope.id);
        assert_eq!(back.envelope.body, rec.envelope.body);
        assert_eq!(back.sinks, rec.sinks);
        assert_eq!(back.dedupe, rec.dedupe);
        assert_eq!(back.dedupe_key(), rec.dedupe_key());
        assert_eq!(
            Lookup::of(&rec).unwrap().record().dedupe_key(),
            rec.dedupe_key()
        );
    }

    #[test]
    fn hostile_forwards_are_refused() {
        let mut rec = record();
        assert_eq!(
            decode_commit(b"\xa1\xff\xff").unwrap_err(),
            WireError::Undecodable
        );
        // Cut inside the metadata.
        let mut bytes = encode_commit("gw-1", &rec);
        bytes.truncate(12);
        assert_eq!(decode_commit(&bytes).unwrap_err(), WireError::Undecodable);
        rec.dedupe = None;
        assert_eq!(
            decode_commit(&encode_commit("gw-1", &rec)).unwrap_err(),
            WireError::Unkeyed
        );
        let mut rec = record();
        rec.sinks = vec!["telnet"];
        assert_eq!(
            decode_commit(&encode_commit("gw-1", &rec)).unwrap_err(),
            WireError::UnknownSinkType
        );
    }
}
