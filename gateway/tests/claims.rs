//! The claim check through the real binary: a body above a queue sink's inline limit is
//! checked in once, the message carries `urn:ankusa:claim:v1:<tenant>:<id>` and the body's
//! sha256, and the claim is redeemed over HTTP from the claim port (whole and by range).

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;
use sha2::Digest;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_large_body_is_claim_checked_and_redeemed_over_http() {
    let channel = format!("ankusa-claims-{}", uuid::Uuid::now_v7().simple());
    let client = redis::Client::open("redis://127.0.0.1:6379/").expect("redis url");
    let mut pubsub = client
        .get_async_pubsub()
        .await
        .expect("Redis on 127.0.0.1:6379 (run tests/brokers/start.sh <statedir>)");
    pubsub.subscribe(&channel).await.unwrap();
    let g = Gateway::start(&format!(
        "egress: {{allow_loopback: true}}\nsources:\n  big:\n    tenant: acme\n    sinks:\n      - type: redis\n        url: redis://127.0.0.1:6379/0\n        channel: {channel}\n        inline_max_bytes: 4096\n"
    ));
    let c = client_http();

    // 100 KB: above the 4 KiB inline limit.
    let body: Vec<u8> = (0..100_000u32)
        .map(|i| b"abcdefghij"[(i % 10) as usize])
        .collect();
    let r = c
        .post(g.url("/webhooks/big"))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    use futures::StreamExt;
    let msg = tokio::time::timeout(Duration::from_secs(15), pubsub.on_message().next())
        .await
        .expect("a message within 15 s")
        .expect("a message");
    let m: Value = serde_json::from_slice(msg.get_payload_bytes()).unwrap();
    assert_eq!(m["id"], id.as_str());
    assert!(
        m.get("body_base64").is_none_or(Value::is_null),
        "no inline body: {m}"
    );
    let sha = hex::encode(sha2::Sha256::digest(&body));
    assert_eq!(m["sha256"], sha.as_str());
    assert_eq!(m["size"], 100_000);
    let urn = m["claim"].as_str().expect("a claim reference");
    let rest = urn.strip_prefix("urn:ankusa:claim:v1:").expect("claim urn");
    let (tenant, claim_id) = rest.split_once(':').unwrap();
    assert_eq!(tenant, "acme");

    // Redeem over HTTP, check the bytes against the message's sha256.
    let url = format!("http://{}/v1/claims/{tenant}/{claim_id}", g.claims);
    let got = c.get(&url).send().await.unwrap();
    assert_eq!(got.status().as_u16(), 200);
    assert_eq!(got.headers()["accept-ranges"], "bytes");
    let bytes = got.bytes().await.unwrap();
    assert_eq!(hex::encode(sha2::Sha256::digest(&bytes)), sha);

    let head = c.head(&url).send().await.unwrap();
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(head.headers()["content-length"], "100000");

    let part = c
        .get(&url)
        .header("range", "bytes=10-19")
        .send()
        .await
        .unwrap();
    assert_eq!(part.status().as_u16(), 206);
    assert_eq!(part.headers()["content-range"], "bytes 10-19/100000");
    assert_eq!(&part.bytes().await.unwrap()[..], &body[10..20]);

    let past = c
        .get(&url)
        .header("range", "bytes=200000-")
        .send()
        .await
        .unwrap();
    assert_eq!(past.status().as_u16(), 416);
    let missing = c
        .get(format!(
            "http://{}/v1/claims/acme/{}",
            g.claims,
            "0".repeat(32)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    assert_eq!(
        missing.json::<Value>().await.unwrap()["error"],
        "claim_not_found"
    );
}

fn client_http() -> reqwest::Client {
    client()
}
