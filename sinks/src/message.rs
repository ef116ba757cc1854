//! The queue message, v1: the one JSON document every queue sink publishes, byte-identical on
//! every transport, plus the `ankusa_*` metadata set that transports with headers or
//! attributes carry beside it.
//!
//! Field order is fixed (serde writes struct fields in declaration order) so that the same hook
//! and context always encode to the same bytes; the producer vectors in
//! `tests/vectors/producer.json` pin it.

use ankusa_core::{ClaimCheckRef, DeliveryCtx, Envelope, SinkError};
use base64::Engine;
use serde::Serialize;
use serde::ser::SerializeMap;
use sha2::{Digest, Sha256};

/// The message format's major version.
pub const VERSION: u8 = 1;

/// What a body with no declared type is sent as (RFC 9110 §8.3: a recipient may assume it).
pub const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

/// The tenant every hook without one belongs to; such a hook ships `tenant_id: null` and no
/// `ankusa_tenant_id` header (the idempotency key and claim URN still say `default`).
pub const DEFAULT_TENANT: &str = "default";

#[derive(Serialize)]
struct Wire<'a> {
    v: u8,
    id: String,
    source_id: &'a str,
    tenant_id: Option<&'a str>,
    received_at: u64,
    content_type: &'a str,
    size: u64,
    sha256: &'a str,
    dedupe_key: Option<&'a str>,
    replay_id: Option<&'a str>,
    idempotency_key: &'a str,
    verification: WireVerification,
    headers: Headers<'a>,
    instance: &'a str,
    region: Option<&'a str>,
    traceparent: Option<&'a str>,
    tracestate: Option<&'a str>,
    /// The ordering lane's key, on ordered sinks only (an additive v1 field).
    #[serde(skip_serializing_if = "Option::is_none")]
    ordering_key: Option<&'a str>,
    /// The received body's SHA-256 when the sink's `transform` replaced it (`sha256` and
    /// `size` are the sent body's); an additive v1 field.
    #[serde(skip_serializing_if = "Option::is_none")]
    original_sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    claim: Option<&'a str>,
}

#[derive(Serialize)]
struct WireVerification {
    status: &'static str,
    flagged: bool,
}

/// Forwarded headers as a JSON object in arrival order: names lowercased, repeated names joined
/// with `, ` (RFC 9110 §5.3), so no value is lost to a duplicate key.
struct Headers<'a>(&'a [(String, String)]);

impl Serialize for Headers<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut merged: Vec<(String, String)> = Vec::with_capacity(self.0.len());
        for (name, value) in self.0 {
            let name = name.to_ascii_lowercase();
            match merged.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => {
                    v.push_str(", ");
                    v.push_str(value);
                }
                None => merged.push((name, value.clone())),
            }
        }
        let mut m = s.serialize_map(Some(merged.len()))?;
        for (n, v) in &merged {
            m.serialize_entry(n, v)?;
        }
        m.end()
    }
}

/// The tenant as the message states it: `None` for the default tenant.
pub fn tenant_id(env: &Envelope) -> Option<&str> {
    (env.tenant != DEFAULT_TENANT).then_some(env.tenant.as_str())
}

pub fn content_type(env: &Envelope) -> &str {
    env.content_type
        .as_deref()
        .filter(|c| !c.is_empty())
        .unwrap_or(DEFAULT_CONTENT_TYPE)
}

/// The hook's id, or `<id>:replay:<replay_id>` on a replay: JetStream's `Nats-Msg-Id` and SQS
/// FIFO's `MessageDeduplicationId`, so a re-send of one delivery collapses while a deliberate
/// replay is stored.
pub fn dedupe_id(env: &Envelope, ctx: &DeliveryCtx) -> String {
    match &ctx.replay_id {
        Some(r) => format!("{}:replay:{r}", env.id),
        None => env.id.to_string(),
    }
}

/// The ordering lane's key of an ordered sink; `None` for an unordered sink and for the
/// keyless lane (`""`).
pub fn lane_key(ctx: &DeliveryCtx) -> Option<&str> {
    ctx.ordering_key.as_deref().filter(|k| !k.is_empty())
}

/// `<tenant>/<source_id>` (`/<source_id>` without a tenant): the Kafka key and the FIFO
/// MessageGroupId by default.
pub fn tenant_source_key(env: &Envelope) -> String {
    format!("{}/{}", tenant_id(env).unwrap_or(""), env.source_id)
}

/// The W3C trace context a delivery carries (`traceparent`, `tracestate`): the attempt's own
/// `traceparent` (the gateway's `deliver` span, when traces are exported) or else the hook's as
/// stored at ingest, and the hook's `tracestate`. Every sink takes it from here: the HTTP sink
/// as headers, the queue sinks in the message (`traceparent`/`tracestate` fields) and, where
/// the transport has them, in headers or attributes (`attributes`).
pub fn trace_context<'a>(env: &'a Envelope, ctx: &'a DeliveryCtx) -> TraceContext<'a> {
    TraceContext {
        traceparent: ctx.traceparent.as_deref().or(env.traceparent.as_deref()),
        tracestate: env.tracestate.as_deref(),
    }
}

/// What `trace_context` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext<'a> {
    pub traceparent: Option<&'a str>,
    pub tracestate: Option<&'a str>,
}

/// Encodes the message. A body `checked_in` to the claim check travels as its reference (the
/// `claim` field) instead of inline; its `sha256` is the body's digest.
pub fn encode(env: &Envelope, ctx: &DeliveryCtx, checked_in: Option<&ClaimCheckRef>) -> Vec<u8> {
    let inline_sha;
    let (sha256, body_base64, claim_urn) = match checked_in {
        Some(c) => (c.sha256.as_str(), None, Some(c.urn.as_str())),
        None => {
            inline_sha = hex::encode(Sha256::digest(&env.body));
            (
                inline_sha.as_str(),
                Some(base64::engine::general_purpose::STANDARD.encode(&env.body)),
                None,
            )
        }
    };
    let idempotency_key = env.idempotency_key();
    let trace = trace_context(env, ctx);
    let wire = Wire {
        v: VERSION,
        id: env.id.to_string(),
        source_id: &env.source_id,
        tenant_id: tenant_id(env),
        received_at: env.received_at,
        content_type: content_type(env),
        size: env.body.len() as u64,
        sha256,
        dedupe_key: env.dedupe_key.as_deref(),
        replay_id: ctx.replay_id.as_deref(),
        idempotency_key: &idempotency_key,
        verification: WireVerification {
            status: env.verification.status.as_str(),
            flagged: env.verification.flagged,
        },
        headers: Headers(&ctx.forward_headers),
        instance: &ctx.instance,
        region: ctx.region.as_deref(),
        traceparent: trace.traceparent,
        tracestate: trace.tracestate,
        ordering_key: lane_key(ctx),
        original_sha256: ctx.original_sha256.as_deref(),
        body_base64,
        claim: claim_urn,
    };
    // Serialising plain strings, integers and bools into a Vec cannot fail.
    serde_json::to_vec(&wire).unwrap_or_default()
}

/// The `ankusa_*` metadata set, for transports with headers or attributes: always `ankusa_id`,
/// `ankusa_source_id`, `ankusa_message_version`, `ankusa_idempotency_key`, `content_type`;
/// `ankusa_tenant_id`, `ankusa_dedupe_key`, `ankusa_replay_id`, `ankusa_ordering_key`,
/// `traceparent`, `tracestate` when set. Empty values are left out (SQS refuses them).
pub fn attributes(env: &Envelope, ctx: &DeliveryCtx) -> Vec<(&'static str, String)> {
    let mut a: Vec<(&'static str, String)> = Vec::with_capacity(10);
    a.push(("ankusa_id", env.id.to_string()));
    a.push(("ankusa_source_id", env.source_id.clone()));
    if let Some(t) = tenant_id(env) {
        a.push(("ankusa_tenant_id", t.to_string()));
    }
    a.push(("ankusa_message_version", VERSION.to_string()));
    a.push(("ankusa_idempotency_key", env.idempotency_key()));
    a.push(("content_type", content_type(env).to_string()));
    if let Some(k) = &env.dedupe_key {
        a.push(("ankusa_dedupe_key", k.clone()));
    }
    if let Some(r) = &ctx.replay_id {
        a.push(("ankusa_replay_id", r.clone()));
    }
    if let Some(k) = lane_key(ctx) {
        a.push(("ankusa_ordering_key", k.to_string()));
    }
    let trace = trace_context(env, ctx);
    if let Some(t) = trace.traceparent {
        a.push(("traceparent", t.to_string()));
    }
    if let Some(t) = trace.tracestate {
        a.push(("tracestate", t.to_string()));
    }
    a.retain(|(_, v)| !v.is_empty());
    a
}

/// Bytes the metadata set adds to a message on transports that count it (names plus values).
pub fn attributes_len(a: &[(&'static str, String)]) -> u64 {
    a.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum()
}

/// The size rules every queue sink shares.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest body sent inline (the sink's `inline_max_bytes`).
    pub inline_max: u64,
    /// Largest message the transport takes (`max_message_bytes`, Kafka's `max_record_bytes`);
    /// `u64::MAX` where the sink has none.
    pub max_message: u64,
}

impl Limits {
    /// The inline limit the sink reports to dispatch: its `inline_max_bytes`, lowered so that
    /// an inline message (base64 is 4/3 of the body, plus about 1 KiB of envelope and up to
    /// the source's forwarded-header budget, which JSON escaping may double) still fits
    /// `max_message`. Dispatch checks in every body above it, so a sink is rarely handed an
    /// inline body it cannot send.
    pub fn reported_inline_max(&self, forward_headers_max_bytes: u64) -> u64 {
        if self.max_message == u64::MAX {
            return self.inline_max;
        }
        let overhead = 4096 + 2 * forward_headers_max_bytes;
        let fit = self.max_message.saturating_sub(overhead) / 4 * 3;
        self.inline_max.min(fit.max(1))
    }
}

/// A message ready for a transport.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub json: Vec<u8>,
    /// Whether the body travels as its claim check reference.
    pub checked_in: bool,
}

/// `message_too_large`, permanent: dead-letter now, with no broker call.
pub fn too_large(size: u64, max: u64) -> SinkError {
    SinkError::Permanent(format!("message_too_large: {size} bytes, max {max}"))
}

/// Picks inline or claim and checks the size, before any broker call.
///
/// - A body over the sink's own `inline_max_bytes` goes as a claim; without `ctx.claim_check` the
///   attempt fails transiently (`claim check unavailable`), never inline over the limit.
/// - A body the sink would send inline that is over `max_message` by itself is permanent
///   `message_too_large`.
/// - An inline message over `max_message` (base64 and headers pushed it over) goes as the
///   claim when dispatch checked the body in, else fails transiently like a missing claim.
/// - A claim message over `max_message` (huge forwarded headers) is `message_too_large`.
///
/// `overhead` is what the transport adds and counts against `max_message` (key, headers,
/// attributes).
pub fn prepare(
    env: &Envelope,
    ctx: &DeliveryCtx,
    limits: Limits,
    overhead: u64,
) -> Result<Prepared, SinkError> {
    let size = env.body.len() as u64;
    if size <= limits.inline_max {
        if size.saturating_add(overhead) > limits.max_message {
            return Err(too_large(size.saturating_add(overhead), limits.max_message));
        }
        let json = encode(env, ctx, None);
        if json.len() as u64 + overhead <= limits.max_message {
            return Ok(Prepared {
                json,
                checked_in: false,
            });
        }
        return match &ctx.claim_check {
            Some(c) => checked_in(env, ctx, c, limits, overhead),
            None => Err(SinkError::Transient(format!(
                "claim check unavailable: the inline message ({} bytes) is over max {} and the body was not checked in",
                json.len() as u64 + overhead,
                limits.max_message
            ))),
        };
    }
    match &ctx.claim_check {
        Some(c) => checked_in(env, ctx, c, limits, overhead),
        None => Err(SinkError::Transient(format!(
            "claim check unavailable: body of {size} bytes is over inline_max_bytes {} and has no claim",
            limits.inline_max
        ))),
    }
}

fn checked_in(
    env: &Envelope,
    ctx: &DeliveryCtx,
    reference: &ClaimCheckRef,
    limits: Limits,
    overhead: u64,
) -> Result<Prepared, SinkError> {
    let json = encode(env, ctx, Some(reference));
    let total = json.len() as u64 + overhead;
    if total > limits.max_message {
        return Err(too_large(total, limits.max_message));
    }
    Ok(Prepared {
        json,
        checked_in: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_core::Verification;
    use bytes::Bytes;

    fn env(body: &[u8]) -> Envelope {
        Envelope {
            id: uuid::Uuid::parse_str("0192f1c0-0000-7000-8000-000000000001").unwrap(),
            seq: 1,
            received_at: 1_737_500_000_000,
            content_type: Some("application/json".into()),
            verification: Verification::OK,
            dedupe_key: Some("evt_1".into()),
            ..Envelope::new("acme", "stripe", Bytes::copy_from_slice(body))
        }
    }

    fn ctx() -> DeliveryCtx {
        DeliveryCtx {
            ordering_key: None,
            traceparent: None,
            original_sha256: None,
            instance: "default".into(),
            region: Some("eu-west-1".into()),
            attempt: 1,
            replay_id: None,
            forward_headers: vec![
                ("X-GitHub-Event".into(), "push".into()),
                ("x-multi".into(), "a".into()),
                ("x-multi".into(), "b".into()),
            ],
            tenant_for_pools: "acme".into(),
            claim_check: None,
        }
    }

    #[test]
    fn field_order_and_values() {
        let json = String::from_utf8(encode(&env(b"hello"), &ctx(), None)).unwrap();
        assert_eq!(
            json,
            r#"{"v":1,"id":"0192f1c0-0000-7000-8000-000000000001","source_id":"stripe","tenant_id":"acme","received_at":1737500000000,"content_type":"application/json","size":5,"sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","dedupe_key":"evt_1","replay_id":null,"idempotency_key":"acme:stripe:evt_1","verification":{"status":"ok","flagged":false},"headers":{"x-github-event":"push","x-multi":"a, b"},"instance":"default","region":"eu-west-1","traceparent":null,"tracestate":null,"body_base64":"aGVsbG8="}"#
        );
    }

    /// The attempt's `traceparent` (the gateway's `deliver` span) replaces the hook's in the
    /// message and in the attributes; the hook's `tracestate` stays; without one, the hook's.
    #[test]
    fn the_attempts_trace_context_wins() {
        let mut e = env(b"x");
        e.traceparent = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into());
        e.tracestate = Some("congo=t61rcWkgMzE".into());
        let hooks = |c: &DeliveryCtx| {
            let v: serde_json::Value = serde_json::from_slice(&encode(&e, c, None)).unwrap();
            let a = attributes(&e, c);
            let attr = |k: &str| a.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
            (
                v["traceparent"].as_str().map(str::to_string),
                attr("traceparent"),
                attr("tracestate"),
            )
        };
        let (body, attr, state) = hooks(&ctx());
        assert_eq!(body, e.traceparent);
        assert_eq!(attr, e.traceparent);
        assert_eq!(state, e.tracestate);
        let mut c = ctx();
        let ours = "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01";
        c.traceparent = Some(ours.into());
        let (body, attr, state) = hooks(&c);
        assert_eq!(body.as_deref(), Some(ours));
        assert_eq!(attr.as_deref(), Some(ours));
        assert_eq!(state, e.tracestate);
    }

    #[test]
    fn default_tenant_is_null_and_has_no_attribute() {
        let mut e = env(b"x");
        e.tenant = "default".into();
        let v: serde_json::Value = serde_json::from_slice(&encode(&e, &ctx(), None)).unwrap();
        assert!(v["tenant_id"].is_null());
        assert_eq!(v["idempotency_key"], "default:stripe:evt_1");
        let a = attributes(&e, &ctx());
        assert!(a.iter().all(|(k, _)| *k != "ankusa_tenant_id"));
        assert_eq!(tenant_source_key(&e), "/stripe");
    }

    #[test]
    fn size_rules() {
        let lim = Limits {
            inline_max: 100,
            max_message: 600,
        };
        // Inline.
        let p = prepare(&env(&[b'a'; 50]), &ctx(), lim, 0).unwrap();
        assert!(!p.checked_in);
        // Over inline, no claim: transient, never inline.
        let e = prepare(&env(&[b'a'; 150]), &ctx(), lim, 0).unwrap_err();
        assert!(matches!(e, SinkError::Transient(ref m) if m.contains("claim check unavailable")));
        // Over inline, with claim.
        let mut c = ctx();
        c.claim_check = Some(ClaimCheckRef {
            urn: "urn:ankusa:claim:v1:acme:01J".into(),
            sha256: "ab".into(),
        });
        let p = prepare(&env(&[b'a'; 150]), &c, lim, 0).unwrap();
        assert!(p.checked_in);
        // Body over the message limit by itself, sink would send it inline: permanent.
        let big = Limits {
            inline_max: 10_000,
            max_message: 600,
        };
        let e = prepare(&env(&[b'a'; 700]), &c, big, 0).unwrap_err();
        assert!(matches!(e, SinkError::Permanent(ref m) if m.starts_with("message_too_large")));
        // Inline message over the limit because of base64: the claim is used.
        let p = prepare(&env(&[b'a'; 500]), &c, big, 0).unwrap();
        assert!(p.checked_in);
        let e = prepare(&env(&[b'a'; 500]), &ctx(), big, 0).unwrap_err();
        assert!(matches!(e, SinkError::Transient(_)));
        assert_eq!(big.reported_inline_max(0), 1);
        let k = Limits {
            inline_max: 1_000_000,
            max_message: 1_000_000,
        };
        assert!(k.reported_inline_max(16_384) < 750_000);
    }
}
