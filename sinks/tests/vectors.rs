//! Producer vectors: `tests/vectors/producer.json` holds the exact bytes the encoder writes for
//! a set of hooks (inline and claim bodies, replays, no dedupe key, a flagged verification,
//! forwarded headers, trace context, the default tenant, an ordered sink), plus the metadata
//! set and the derived ids. This test regenerates them in memory and fails when the encoder's
//! output drifts from the checked-in file, so a change to the wire format is a visible change
//! to that file, which every consumer SDK decodes.
//!
//! To rewrite the file after an intended change:
//!     ANKUSA_REGEN_VECTORS=1 cargo test -p ankusa-sinks --test vectors

use ankusa_core::{ClaimCheckRef, DeliveryCtx, Envelope, Verification, VerifyStatus};
use ankusa_sinks::message;
use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/producer.json");
/// The same vectors as conformance cases every consumer SDK runs (conformance/README.md).
const CONFORMANCE_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../conformance/cases/producer.json"
);

fn base_env() -> Envelope {
    let body = Bytes::from_static(br#"{"id":"evt_1","type":"invoice.paid"}"#);
    let mut env = Envelope::new("acme", "stripe", body);
    env.id = uuid::Uuid::parse_str("0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d").unwrap();
    env.seq = 42;
    env.received_at = 1_737_500_000_000;
    env.content_type = Some("application/json".into());
    env.verification = Verification::OK;
    env.dedupe_key = Some("evt_1".into());
    env
}

fn base_ctx() -> DeliveryCtx {
    DeliveryCtx {
        instance: "default".into(),
        region: Some("eu-west-1".into()),
        attempt: 1,
        replay_id: None,
        forward_headers: vec![],
        tenant_for_pools: "acme".into(),
        claim_check: None,
        ordering_key: None,
        traceparent: None,
        original_sha256: None,
    }
}

fn cases() -> Vec<(&'static str, Envelope, DeliveryCtx)> {
    let mut out = Vec::new();
    out.push(("inline", base_env(), base_ctx()));

    let mut e = base_env();
    // Small so the file stays small: a claim is what dispatch set, whatever the body's size.
    e.body = Bytes::from(vec![0x5a; 1_000]);
    e.content_type = Some("application/octet-stream".into());
    let mut c = base_ctx();
    c.claim_check = Some(ClaimCheckRef {
        urn: "urn:ankusa:claim:v1:acme:01M39VMD8RA3C5HR4RBV67Y002".into(),
        sha256: {
            use sha2::Digest;
            hex::encode(sha2::Sha256::digest(&e.body))
        },
    });
    out.push(("claim", e, c));

    let mut c = base_ctx();
    c.replay_id = Some("0192f1c1-0000-7000-8000-00000000beef".into());
    out.push(("replay", base_env(), c));

    let mut e = base_env();
    e.dedupe_key = None;
    e.tenant = "default".into();
    let mut c = base_ctx();
    c.region = None;
    out.push(("no_dedupe_default_tenant", e, c));

    let mut e = base_env();
    e.verification = Verification {
        status: VerifyStatus::Failed,
        flagged: true,
    };
    out.push(("flagged", e, base_ctx()));

    let mut e = base_env();
    e.verification.status = VerifyStatus::Skipped;
    e.content_type = None;
    let mut c = base_ctx();
    c.forward_headers = vec![
        ("X-GitHub-Event".into(), "push".into()),
        (
            "x-github-delivery".into(),
            "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
        ),
        ("accept".into(), "*/*".into()),
        ("accept".into(), "application/json".into()),
        ("x-note".into(), "quote \" backslash \\ unicode é".into()),
    ];
    out.push(("headers_skipped_no_content_type", e, c));

    let mut e = base_env();
    e.traceparent = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into());
    e.tracestate = Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7".into());
    out.push(("traceparent", e, base_ctx()));

    let mut e = base_env();
    e.body = Bytes::new();
    let mut c = base_ctx();
    c.ordering_key = Some("cus_123".into());
    out.push(("empty_body_ordered", e, c));
    out
}

fn generate() -> String {
    let cases: Vec<Value> = cases()
        .into_iter()
        .map(|(name, env, ctx)| {
            let msg = String::from_utf8(message::encode(&env, &ctx, ctx.claim_check.as_ref()))
                .expect("UTF-8");
            let attributes: serde_json::Map<String, Value> = message::attributes(&env, &ctx)
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::String(v)))
                .collect();
            json!({
                "name": name,
                "input": {
                    "id": env.id.to_string(),
                    "received_at": env.received_at,
                    "tenant": env.tenant,
                    "source_id": env.source_id,
                    "content_type": env.content_type,
                    "verification": {"status": env.verification.status.as_str(), "flagged": env.verification.flagged},
                    "dedupe_key": env.dedupe_key,
                    "traceparent": env.traceparent,
                    "tracestate": env.tracestate,
                    "body_base64": base64::engine::general_purpose::STANDARD.encode(&env.body),
                    "instance": ctx.instance,
                    "region": ctx.region,
                    "replay_id": ctx.replay_id,
                    "forward_headers": ctx.forward_headers,
                    "claim": ctx.claim_check.as_ref().map(|c| json!({"urn": c.urn, "sha256": c.sha256})),
                    "ordering_key": ctx.ordering_key,
                },
                "message": msg,
                "attributes": attributes,
                "msg_id": message::dedupe_id(&env, &ctx),
                "default_key": message::tenant_source_key(&env),
            })
        })
        .collect();
    let doc = json!({
        "format": "ankusa queue message",
        "v": message::VERSION,
        "generated_by": "ankusa-sinks message::encode (ANKUSA_REGEN_VECTORS=1 cargo test -p ankusa-sinks --test vectors)",
        "cases": cases,
    });
    let mut s = serde_json::to_string_pretty(&doc).expect("JSON");
    s.push('\n');
    s
}

/// `conformance/cases/producer.json`: for each vector, `decode_message` must give back what the
/// encoder was handed (the hook's fields, the body or the claim), and `trusted` and
/// `idempotency_key` must answer as the format says.
fn generate_conformance() -> String {
    let doc: Value = serde_json::from_str(&generate()).expect("vectors are JSON");
    let mut cases = Vec::new();
    for v in doc["cases"].as_array().expect("cases") {
        let name = v["name"].as_str().expect("name");
        let input = &v["input"];
        let raw = v["message"].as_str().expect("message");
        let wire: Value = serde_json::from_str(raw).expect("message JSON");
        let tenant = input["tenant"].as_str().expect("tenant");
        let claim = match input["claim"]["urn"].as_str() {
            Some(urn) => {
                let (t, id) = urn
                    .strip_prefix("urn:ankusa:claim:v1:")
                    .and_then(|r| r.split_once(':'))
                    .expect("claim URN");
                json!({"urn": urn, "tenant": t, "claim_id": id})
            }
            None => Value::Null,
        };
        let body = match claim {
            Value::Null => json!({"base64": input["body_base64"]}),
            _ => Value::Null,
        };
        let decoded = json!({
            "v": 1,
            "id": input["id"],
            "source_id": input["source_id"],
            "tenant_id": if tenant == "default" { Value::Null } else { json!(tenant) },
            "tenant": tenant,
            "received_at": input["received_at"],
            "content_type": wire["content_type"],
            "size": wire["size"],
            "sha256": wire["sha256"],
            "dedupe_key": input["dedupe_key"],
            "replay_id": input["replay_id"],
            "idempotency_key": v["attributes"]["ankusa_idempotency_key"],
            "verification": input["verification"],
            "headers": wire["headers"],
            "instance": input["instance"],
            "region": input["region"],
            "traceparent": input["traceparent"],
            "tracestate": input["tracestate"],
            "ordering_key": input["ordering_key"],
            "body": body,
            "claim": claim,
        });
        let message = json!({"message": {"text": raw}});
        cases.push(json!({
            "id": format!("producer.{name}.decode"), "feature": "producer",
            "operation": "decode_message", "input": message, "expect": {"ok": decoded},
        }));
        let trusted = input["verification"] == json!({"status": "ok", "flagged": false});
        cases.push(json!({
            "id": format!("producer.{name}.trusted"), "feature": "producer",
            "operation": "trusted", "input": message, "expect": {"ok": trusted},
        }));
        let key = v["attributes"]["ankusa_idempotency_key"]
            .as_str()
            .expect("key");
        let with_replay = match input["replay_id"].as_str() {
            Some(r) => format!("{key}#replay:{r}"),
            None => key.to_string(),
        };
        cases.push(json!({
            "id": format!("producer.{name}.idempotency_key"), "feature": "producer",
            "operation": "idempotency_key",
            "input": {"message": {"text": raw}, "include_replay": true},
            "expect": {"ok": with_replay},
        }));
    }
    let doc = json!({
        "generated_by": "ankusa-sinks message::encode (ANKUSA_REGEN_VECTORS=1 cargo test -p ankusa-sinks --test vectors)",
        "cases": cases,
    });
    let mut s = serde_json::to_string_pretty(&doc).expect("JSON");
    s.push('\n');
    s
}

#[test]
fn conformance_producer_cases_match_the_encoder() {
    let fresh = generate_conformance();
    if std::env::var_os("ANKUSA_REGEN_VECTORS").is_some() {
        std::fs::write(CONFORMANCE_PATH, &fresh).expect("write conformance/cases/producer.json");
        return;
    }
    let on_disk = std::fs::read_to_string(CONFORMANCE_PATH).unwrap_or_default();
    assert!(
        on_disk == fresh,
        "conformance/cases/producer.json drifted from the encoder; if the change is intended, run \
         ANKUSA_REGEN_VECTORS=1 cargo test -p ankusa-sinks --test vectors and commit the file"
    );
}

#[test]
fn producer_vectors_match_the_encoder() {
    let fresh = generate();
    if std::env::var_os("ANKUSA_REGEN_VECTORS").is_some() {
        std::fs::create_dir_all(std::path::Path::new(PATH).parent().unwrap()).unwrap();
        std::fs::write(PATH, &fresh).expect("write vectors");
        return;
    }
    let on_disk = std::fs::read_to_string(PATH)
        .expect("tests/vectors/producer.json exists (ANKUSA_REGEN_VECTORS=1 writes it)");
    if on_disk != fresh {
        let a: Value = serde_json::from_str(&on_disk).unwrap_or(Value::Null);
        let b: Value = serde_json::from_str(&fresh).unwrap();
        let first = a["cases"]
            .as_array()
            .zip(b["cases"].as_array())
            .and_then(|(x, y)| x.iter().zip(y).find(|(p, q)| p != q))
            .map(|(p, q)| format!("first differing case:\n  file:    {p}\n  encoder: {q}"))
            .unwrap_or_else(|| "the case lists differ".into());
        panic!(
            "the encoder's output drifted from tests/vectors/producer.json; if the change is \
             intended, run ANKUSA_REGEN_VECTORS=1 cargo test -p ankusa-sinks --test vectors \
             and commit the file.\n{first}"
        );
    }
}

/// Every vector decodes as a consumer would and is self-consistent (size, sha256 of inline
/// bodies, exactly one of body_base64 and claim).
#[test]
fn vectors_are_self_consistent() {
    let doc: Value = serde_json::from_str(&generate()).unwrap();
    for case in doc["cases"].as_array().unwrap() {
        let m: Value = serde_json::from_str(case["message"].as_str().unwrap()).unwrap();
        assert_eq!(m["v"], 1);
        let inline = m.get("body_base64").is_some();
        assert_ne!(inline, m.get("claim").is_some(), "{}", case["name"]);
        if inline {
            let body = base64::engine::general_purpose::STANDARD
                .decode(m["body_base64"].as_str().unwrap())
                .unwrap();
            assert_eq!(m["size"], body.len());
            use sha2::Digest;
            assert_eq!(m["sha256"], hex::encode(sha2::Sha256::digest(&body)));
        } else {
            let input = &case["input"];
            let body = base64::engine::general_purpose::STANDARD
                .decode(input["body_base64"].as_str().unwrap())
                .unwrap();
            use sha2::Digest;
            assert_eq!(m["size"], body.len());
            assert_eq!(m["sha256"], hex::encode(sha2::Sha256::digest(&body)));
            assert_eq!(m["claim"], input["claim"]["urn"]);
        }
    }
}
