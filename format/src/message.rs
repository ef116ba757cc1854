//! The queue message v1 as a consumer reads it: the typed inverse of `ankusa-sinks`'
//! `message::encode` (docs/sinks.md, "The message (v1)"). The gateway never decodes its own
//! messages; this is the reference decoder the producer vectors and the fuzz target hold the
//! format to, and what a Rust consumer can use.
//!
//! Lenient where the format promises to grow (unknown keys are ignored, `v` 1 and 2 are
//! accepted: v2 is v1 plus additive fields), strict where a consumer would act on a lie:
//! exactly one of `body_base64` and `claim`, an inline body that matches `size` and `sha256`,
//! a claim URN of the message's own tenant.

use std::collections::BTreeMap;

use ankusa_core::Verification;
use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::FormatError;

/// The versions a v1 consumer accepts.
pub const VERSIONS: std::ops::RangeInclusive<u8> = 1..=2;

/// The tenant a `tenant_id: null` message belongs to (its claim URN says so).
pub const DEFAULT_TENANT: &str = "default";

/// One message, field for field as it travels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueMessage {
    pub v: u8,
    pub id: Uuid,
    pub source_id: String,
    pub tenant_id: Option<String>,
    pub received_at: u64,
    pub content_type: String,
    pub size: u64,
    pub sha256: String,
    pub dedupe_key: Option<String>,
    pub replay_id: Option<String>,
    pub idempotency_key: String,
    pub verification: Verification,
    /// Forwarded headers, lowercase names (a repeated one already joined with `, `).
    pub headers: BTreeMap<String, String>,
    pub instance: String,
    pub region: Option<String>,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    /// Ordered sinks only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
}

/// Where a message's body is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Inline(Vec<u8>),
    /// `urn:ankusa:claim:v1:<tenant>:<claim_id>`, to fetch from the claim-check port.
    Claim {
        tenant: String,
        claim_id: String,
    },
}

impl QueueMessage {
    /// Decodes and checks one message. Errors name the field, never its value.
    pub fn decode(raw: &[u8]) -> Result<(QueueMessage, Body), FormatError> {
        let bad = |why: &str| FormatError::Corrupt(format!("queue message: {why}"));
        let m: QueueMessage = serde_json::from_slice(raw).map_err(|e| {
            bad(&format!(
                "not a v1 message ({:?} at line {} column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        if !VERSIONS.contains(&m.v) {
            return Err(bad("v is not a version this decoder reads"));
        }
        if m.sha256.len() != 64
            || !m
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(bad("sha256 is not lowercase hex of 32 bytes"));
        }
        let body = match (&m.body_base64, &m.claim) {
            (Some(b64), None) => {
                let body = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|_| bad("body_base64 is not standard base64"))?;
                if body.len() as u64 != m.size {
                    return Err(bad("size does not match the body"));
                }
                if hex::encode(Sha256::digest(&body)) != m.sha256 {
                    return Err(bad("sha256 does not match the body"));
                }
                Body::Inline(body)
            }
            (None, Some(urn)) => {
                let (tenant, claim_id) = urn
                    .strip_prefix("urn:ankusa:claim:v1:")
                    .and_then(|rest| rest.split_once(':'))
                    .filter(|(t, c)| ankusa_config::valid_id(t) && ankusa_config::valid_id(c))
                    .ok_or_else(|| bad("claim is not a claim URN"))?;
                if tenant != m.tenant() {
                    return Err(bad("claim belongs to another tenant"));
                }
                Body::Claim {
                    tenant: tenant.to_string(),
                    claim_id: claim_id.to_string(),
                }
            }
            _ => return Err(bad("needs exactly one of body_base64 and claim")),
        };
        Ok((m, body))
    }

    /// The tenant the message belongs to (`default` for `tenant_id: null`).
    pub fn tenant(&self) -> &str {
        self.tenant_id.as_deref().unwrap_or(DEFAULT_TENANT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn vectors() -> Vec<Value> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../sinks/tests/vectors/producer.json"
        );
        let text = std::fs::read_to_string(path).expect("producer vectors");
        let v: Value = serde_json::from_str(&text).expect("vectors are JSON");
        v["cases"].as_array().expect("cases").clone()
    }

    #[test]
    fn decodes_every_producer_vector() {
        let cases = vectors();
        assert!(cases.len() >= 7);
        for case in cases {
            let name = case["name"].as_str().unwrap_or_default();
            let raw = case["message"].as_str().expect("message text");
            let input = &case["input"];
            let (m, body) = QueueMessage::decode(raw.as_bytes()).expect(name);
            assert_eq!(m.id.to_string(), input["id"].as_str().unwrap(), "{name}");
            assert_eq!(m.source_id, input["source_id"].as_str().unwrap(), "{name}");
            assert_eq!(m.tenant(), input["tenant"].as_str().unwrap(), "{name}");
            assert_eq!(m.received_at, input["received_at"].as_u64().unwrap());
            assert_eq!(m.dedupe_key.as_deref(), input["dedupe_key"].as_str());
            assert_eq!(m.replay_id.as_deref(), input["replay_id"].as_str());
            assert_eq!(m.region.as_deref(), input["region"].as_str());
            assert_eq!(m.traceparent.as_deref(), input["traceparent"].as_str());
            assert_eq!(m.tracestate.as_deref(), input["tracestate"].as_str());
            assert_eq!(m.ordering_key.as_deref(), input["ordering_key"].as_str());
            assert_eq!(m.instance, input["instance"].as_str().unwrap());
            assert_eq!(
                serde_json::to_value(m.verification).unwrap(),
                input["verification"]
            );
            assert_eq!(
                m.idempotency_key,
                case["attributes"]["ankusa_idempotency_key"]
                    .as_str()
                    .unwrap()
            );
            let sent = base64::engine::general_purpose::STANDARD
                .decode(input["body_base64"].as_str().unwrap())
                .unwrap();
            assert_eq!(m.size, sent.len() as u64, "{name}");
            match body {
                Body::Inline(b) => assert_eq!(b, sent, "{name}"),
                Body::Claim { tenant, claim_id } => {
                    let urn = input["claim"]["urn"].as_str().unwrap();
                    assert_eq!(urn, format!("urn:ankusa:claim:v1:{tenant}:{claim_id}"));
                    assert_eq!(m.sha256, input["claim"]["sha256"].as_str().unwrap());
                }
            }
            // What decodes re-encodes to a message that decodes the same.
            let again = serde_json::to_vec(&m).unwrap();
            assert_eq!(QueueMessage::decode(&again).unwrap().0, m, "{name}");
        }
    }

    #[test]
    fn refuses_what_a_consumer_must_not_act_on() {
        let cases = vectors();
        let raw = cases[0]["message"].as_str().unwrap();
        let base: Value = serde_json::from_str(raw).unwrap();
        let edit = |f: &dyn Fn(&mut Value)| {
            let mut v = base.clone();
            f(&mut v);
            QueueMessage::decode(&serde_json::to_vec(&v).unwrap())
        };
        assert!(edit(&|_| {}).is_ok());
        assert!(edit(&|v| v["v"] = 3.into()).is_err());
        assert!(edit(&|v| v["size"] = 35.into()).is_err());
        assert!(edit(&|v| v["sha256"] = "00".repeat(32).into()).is_err());
        assert!(edit(&|v| v["body_base64"] = "!!".into()).is_err());
        assert!(edit(&|v| v["claim"] = "urn:ankusa:claim:v1:acme:01J".into()).is_err());
        assert!(
            edit(&|v| {
                v.as_object_mut().unwrap().remove("body_base64");
                v["claim"] = "urn:ankusa:claim:v1:other:01J".into();
            })
            .is_err()
        );
        assert!(edit(&|v| v["later"] = "additive field".into()).is_ok());
        assert!(QueueMessage::decode(b"\xff{").is_err());
    }
}
