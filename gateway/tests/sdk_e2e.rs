//! The consumer SDKs against a running gateway: real deliveries (an HTTP delivery signed by the
//! sink, queue messages from the Redis sink, one of them claim-checked, a lifecycle event) are
//! captured and written as conformance cases whose expectations come from what the test sent,
//! not from any SDK; then each SDK's runner (`sdk/<lang>/conformance-runner`) must pass them,
//! the claim redeemed from the gateway's real claim port. The Rust SDK is also called in
//! process. The node's `GET /asyncapi.json` is validated with the independent AsyncAPI parser.
//!
//! Needs Python 3 and Node.js (the runners); `scripts/test` sets `ANKUSA_REQUIRE_SDK_E2E=1` so
//! a missing one fails instead of skipping that language.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ankusa_testkit::scripted::{Receiver, Reply};
use base64::Engine;
use common::*;
use serde_json::{Value, json};
use sha2::Digest;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CLAIM_TOKEN: &str = "sdk-e2e-claim-reader-0001";

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn config(receiver: &str, channel: &str, events: &str, extra_source: bool) -> String {
    let extra = if extra_source {
        "  later:\n    sinks: [{type: log}]\n"
    } else {
        ""
    };
    format!(
        r#"egress: {{allow_http: true, allow_loopback: true}}
claim_check: {{tokens: ["{CLAIM_TOKEN}"]}}
lifecycle:
  sinks:
    - {{type: redis, url: "redis://127.0.0.1:6379/0", channel: "{events}"}}
sources:
  sdk:
    tenant: acme
    sinks:
      - {{type: http, url: "{receiver}", secret: "{SECRET}"}}
      - {{type: redis, url: "redis://127.0.0.1:6379/0", channel: "{channel}", inline_max_bytes: 4096}}
  topology:
    sink_names: [orders-kafka, orders-rabbit, orders-nats, orders-sqs, orders-pubsub]
    sinks:
      - {{type: kafka, brokers: ["127.0.0.1:1"], topic: orders}}
      - {{type: rabbitmq, url: "amqp://guest:guest@127.0.0.1:1/%2f", exchange: orders}}
      - {{type: nats, servers: ["127.0.0.1:1"], subject: orders.created}}
      - {{type: sqs, queue_url: "http://127.0.0.1:1/000000000000/orders", region: us-east-1, access_key_id: AKIDE2E, secret_access_key: e2e-secret-key}}
      - {{type: google_pubsub, project: acme, topic: orders, auth: none, endpoint: "http://127.0.0.1:1"}}
{extra}"#
    )
}

/// One language's runner over `cases`: its stdout, or `None` when the language's toolchain is
/// missing and the run does not require it.
fn run(lang: &str, cases: &Path) -> Option<String> {
    let root = repo_root();
    let mut cmd = match lang {
        // The example binary `cargo build --workspace --all-targets` made: a nested `cargo run`
        // would wait for the build lock this test's own cargo holds.
        "rust" => {
            let target = std::env::var("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|_| root.join("target"));
            let bin = target.join("debug/examples/conformance");
            if !bin.exists() {
                return missing(
                    lang,
                    &format!("{} (cargo build -p ankusa-sdk --examples)", bin.display()),
                );
            }
            Command::new(bin)
        }
        _ => {
            let tool = if lang == "python" { "python3" } else { "node" };
            if Command::new(tool).arg("--version").output().is_err() {
                return missing(lang, tool);
            }
            Command::new(root.join(format!("sdk/{lang}/conformance-runner")))
        }
    };
    let out = cmd
        .arg("--cases")
        .arg(cases)
        .current_dir(&root)
        .output()
        .expect("run the conformance runner");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{lang} runner failed on the gateway's own output:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

fn missing(lang: &str, what: &str) -> Option<String> {
    assert!(
        std::env::var_os("ANKUSA_REQUIRE_SDK_E2E").is_none(),
        "the {lang} SDK end-to-end run needs {what}"
    );
    eprintln!("skipping the {lang} SDK: {what} is missing");
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_sdk_verifies_and_decodes_what_a_running_gateway_sends() {
    let suffix = uuid::Uuid::now_v7().simple().to_string();
    let channel = format!("ankusa-sdk-{suffix}");
    let events = format!("ankusa-sdk-events-{suffix}");
    let mut pubsub = redis_subscriber(&channel).await;
    let mut lifecycle = redis_subscriber(&events).await;
    let receiver = Receiver::start(|_, _| Reply::status(202)).await;
    let g = Gateway::start(&config(&receiver.url("/hooks"), &channel, &events, false));
    let c = client();

    let small = br#"{"id":"evt_small","type":"invoice.paid"}"#.to_vec();
    let large: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let small_id = post_hook(&c, &g, "/webhooks/sdk", small.clone()).await;
    let large_id = post_hook(&c, &g, "/webhooks/sdk", large.clone()).await;

    // The queue side: one inline message, one claim.
    let mut messages = Vec::new();
    for _ in 0..2 {
        let m = next_message(&mut pubsub, &g, 20).await;
        messages.push(m);
    }
    let by_id = |id: &str| {
        messages
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no message for {id}"))
            .clone()
    };
    let inline_msg = by_id(&small_id);
    let claim_msg = by_id(&large_id);
    assert!(claim_msg["claim"].is_string(), "{claim_msg}");

    // The HTTP side: both deliveries, signed.
    let got = receiver
        .wait_for(Duration::from_secs(20), |r| r.len() >= 2)
        .await;
    let delivery = |id: &str| {
        got.iter()
            .find(|r| r.header("x-ankusa-id").as_deref() == Some(id))
            .unwrap_or_else(|| panic!("no HTTP delivery of {id}"))
            .clone()
    };

    // A lifecycle event: adding a source emits io.ankusa.source.created on the events channel.
    g.write_config(&config(&receiver.url("/hooks"), &channel, &events, true));
    let reload = c
        .post(g.admin_url("/v1/config/reload"))
        .send()
        .await
        .expect("reload");
    assert_eq!(reload.status().as_u16(), 200, "{}", g.log_tail());
    let event_msg = next_message(&mut lifecycle, &g, 20).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let mut cases = Vec::new();
    for (id, body) in [(&small_id, &small), (&large_id, &large)] {
        let d = delivery(id);
        assert_eq!(&d.body[..], &body[..]);
        let headers: serde_json::Map<String, Value> = d
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.to_string(), json!(v.to_str().ok()?))))
            .collect();
        let sha = hex::encode(sha2::Sha256::digest(body));
        cases.push(json!({
            "id": format!("e2e.receive.{id}"), "feature": "webhook.receive", "operation": "receive_delivery",
            "input": {"headers": headers, "body": {"base64": b64(body)}, "secrets": [SECRET]},
            "expect": {"ok": {"id": id, "source_id": "sdk", "tenant_id": "acme", "tenant": "acme",
                              "idempotency_key": id, "signed": true, "body_sha256": sha,
                              "body": {"base64": b64(body)}}},
        }));
        let mut tampered = body.clone();
        tampered[0] ^= 1;
        cases.push(json!({
            "id": format!("e2e.receive_tampered.{id}"), "feature": "webhook.receive",
            "operation": "receive_delivery",
            "input": {"headers": headers, "body": {"base64": b64(&tampered)}, "secrets": [SECRET]},
            "expect": {"error": {"class": "InvalidSignatureError", "code": "no_matching_signature",
                                 "retryable": false, "status": 401}},
        }));
        cases.push(json!({
            "id": format!("e2e.receive_closed.{id}"), "feature": "webhook.require_signature",
            "operation": "receive_delivery",
            "input": {"headers": headers, "body": {"base64": b64(body)}},
            "expect": {"error": {"class": "InvalidSignatureError", "code": "invalid_secret",
                                 "retryable": false, "status": 401}},
        }));
    }
    let text = |m: &Value| json!({"text": m.to_string()});
    cases.push(json!({
        "id": "e2e.message.inline", "feature": "message.decode", "operation": "decode_message",
        "input": {"message": text(&inline_msg)},
        "expect": {"ok": {"id": small_id, "source_id": "sdk", "tenant": "acme", "size": small.len(),
                          "sha256": hex::encode(sha2::Sha256::digest(&small)),
                          "body": {"base64": b64(&small)}, "claim": null}},
    }));
    cases.push(json!({
        "id": "e2e.message.claim", "feature": "message.decode", "operation": "decode_message",
        "input": {"message": text(&claim_msg)},
        "expect": {"ok": {"id": large_id, "tenant": "acme", "size": large.len(), "body": null}},
    }));
    let claims = format!("http://{}", g.claims);
    cases.push(json!({
        "id": "e2e.redeem.claim", "feature": "redeem", "operation": "redeem_claim",
        "input": {"message": text(&claim_msg), "gateway": {"url": claims}, "token": CLAIM_TOKEN},
        "expect": {"ok": {"id": large_id, "size": large.len(), "body": {"base64": b64(&large)}}},
    }));
    cases.push(json!({
        "id": "e2e.redeem.no_token", "feature": "redeem", "operation": "redeem_claim",
        "input": {"message": text(&claim_msg), "gateway": {"url": claims}},
        "expect": {"error": {"class": "ClaimRejectedError", "code": "claim_rejected",
                             "retryable": false, "status": 401}},
    }));
    cases.push(json!({
        "id": "e2e.redeem.inline", "feature": "redeem", "operation": "redeem_claim",
        "input": {"message": text(&inline_msg), "gateway": {"url": claims}, "token": CLAIM_TOKEN},
        "expect": {"ok": {"id": small_id, "body": {"base64": b64(&small)}}},
    }));
    cases.push(json!({
        "id": "e2e.lifecycle.source_created", "feature": "lifecycle",
        "operation": "decode_lifecycle_event", "input": {"message": text(&event_msg)},
        "expect": {"ok": {"type": "io.ankusa.source.created", "subject": "later", "known": true,
                          "specversion": "1.0", "id": event_msg["id"]}},
    }));
    std::fs::write(
        dir.path().join("e2e.json"),
        serde_json::to_vec_pretty(&json!({"cases": cases})).expect("JSON"),
    )
    .expect("write cases");

    let n = cases.len();
    for lang in ["rust", "python", "typescript"] {
        if let Some(out) = run(lang, dir.path()) {
            assert!(
                out.contains(&format!("{n} passed, 0 failed")),
                "{lang}: {out}"
            );
        }
    }

    in_process_rust_sdk(&delivery(&small_id), &small, &claim_msg, &large, &claims).await;

    asyncapi_is_valid(&c, &g).await;
}

async fn in_process_rust_sdk(
    d: &ankusa_testkit::scripted::Received,
    body: &[u8],
    claim_msg: &Value,
    large: &[u8],
    claims: &str,
) {
    let received = ankusa_sdk::receive_delivery(
        &d.headers,
        body,
        &ankusa_sdk::ReceiveOptions {
            secrets: vec![SECRET.to_string()],
            ..Default::default()
        },
    )
    .expect("a real delivery verifies");
    assert_eq!(received.source_id.as_deref(), Some("sdk"));
    assert_eq!(received.body.as_ref(), body);
    let message = ankusa_sdk::decode_message(claim_msg.to_string().as_bytes()).expect("decodes");
    let client = ankusa_sdk::ClaimClient::new(claims).token(CLAIM_TOKEN);
    let hook = ankusa_sdk::to_hook(&message, &client)
        .await
        .expect("the claim redeems");
    assert_eq!(hook.body.as_ref(), large);
}

async fn asyncapi_is_valid(c: &reqwest::Client, g: &Gateway) {
    let doc: Value = c
        .get(g.admin_url("/asyncapi.json"))
        .send()
        .await
        .expect("GET /asyncapi.json")
        .json()
        .await
        .expect("JSON");
    let chans = doc["channels"].as_object().expect("channels");
    for key in [
        "sdk-sink-1",
        "topology-sink-0",
        "topology-sink-1",
        "topology-sink-2",
        "topology-sink-3",
        "topology-sink-4",
        "lifecycle-sink-0",
    ] {
        assert!(chans.contains_key(key), "{key} missing: {doc}");
    }
    let text = doc.to_string();
    for secret in [
        "guest:guest",
        "e2e-secret-key",
        "AKIDE2E",
        CLAIM_TOKEN,
        SECRET,
    ] {
        assert!(
            !text.contains(secret),
            "a credential leaked into the AsyncAPI document"
        );
    }
    if Command::new("node").arg("--version").output().is_err() {
        missing("typescript", "node (the AsyncAPI parser)");
        return;
    }
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), &text).expect("write the document");
    let out = Command::new("node")
        .arg(repo_root().join("sdk/typescript/tools/validate-asyncapi.mjs"))
        .arg(file.path())
        .output()
        .expect("run the AsyncAPI validator");
    assert!(
        out.status.success(),
        "@asyncapi/parser refused the document:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
