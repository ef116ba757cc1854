//! The claim check through the real binary: a body above a queue sink's inline limit is
//! checked in once, the message carries `urn:ankusa:claim:v1:<tenant>:<id>` and the body's
//! sha256, and the claim is redeemed over HTTP from the claim port (whole and by range).

mod common;

use common::*;
use serde_json::Value;
use sha2::Digest;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_large_body_is_claim_checked_and_redeemed_over_http() {
    let channel = format!("ankusa-claims-{}", uuid::Uuid::now_v7().simple());
    let mut pubsub = redis_subscriber(&channel).await;
    let g = Gateway::start(&format!(
        "egress: {{allow_loopback: true}}\nsources:\n  big:\n    tenant: acme\n    sinks:\n      - type: redis\n        url: redis://127.0.0.1:6379/0\n        channel: {channel}\n        inline_max_bytes: 4096\n"
    ));
    let c = client_http();

    // 100 KB: above the 4 KiB inline limit.
    let body: Vec<u8> = (0..100_000u32)
        .map(|i| b"abcdefghij"[(i % 10) as usize])
        .collect();
    let id = post_hook(&c, &g, "/webhooks/big", body.clone()).await;

    let m = next_message(&mut pubsub, &g, 15).await;
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

/// `claim_check.tokens` entries limited to tenants: a token of tenant `beta` reading tenant
/// `acme`'s claim gets `403 forbidden` — the same answer whether the claim exists or not — and
/// `acme`'s own token and an every-tenant token read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claim_tokens_are_limited_to_their_tenants() {
    let channel = format!("ankusa-claims-scoped-{}", uuid::Uuid::now_v7().simple());
    let mut pubsub = redis_subscriber(&channel).await;
    let g = Gateway::start(&format!(
        "egress: {{allow_loopback: true}}\n\
         claim_check:\n  tokens:\n\
         \x20   - every-tenant-reader-01\n\
         \x20   - {{token: acme-claim-reader-0001, tenants: [acme]}}\n\
         \x20   - {{token: beta-claim-reader-0001, tenants: [beta, gamma]}}\n\
         sources:\n  big:\n    tenant: acme\n    sinks:\n      - type: redis\n        \
         url: redis://127.0.0.1:6379/0\n        channel: {channel}\n        inline_max_bytes: 1024\n"
    ));
    let c = client_http();
    let body = vec![b'x'; 8_000];
    post_hook(&c, &g, "/webhooks/big", body.clone()).await;

    let m = next_message(&mut pubsub, &g, 15).await;
    let urn = m["claim"].as_str().expect("a claim reference");
    let rest = urn.strip_prefix("urn:ankusa:claim:v1:").expect("claim urn");
    let (tenant, claim_id) = rest.split_once(':').unwrap();
    assert_eq!(tenant, "acme");

    let get = |path: String, token: Option<&'static str>| {
        let mut req = c.get(format!("http://{}{path}", g.claims));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move {
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.bytes().await.unwrap())
        }
    };
    let acme = format!("/v1/claims/acme/{claim_id}");
    let (s, b) = get(acme.clone(), Some("acme-claim-reader-0001")).await;
    assert_eq!((s, b.len()), (200, body.len()));
    let (s, b) = get(acme.clone(), Some("every-tenant-reader-01")).await;
    assert_eq!((s, b.len()), (200, body.len()));
    let (s, _) = get(acme.clone(), None).await;
    assert_eq!(s, 401);

    // Tenant beta's token: refused, and the refusal does not tell an existing claim from a
    // missing one (or from a tenant that has no claims at all).
    let (s, existing) = get(acme.clone(), Some("beta-claim-reader-0001")).await;
    assert_eq!(s, 403);
    let (s, missing) = get(
        format!("/v1/claims/acme/{}", "0".repeat(32)),
        Some("beta-claim-reader-0001"),
    )
    .await;
    assert_eq!(s, 403);
    assert_eq!(existing, missing);
    let v: Value = serde_json::from_slice(&existing).unwrap();
    assert_eq!(v["error"], "forbidden");
    // Its own tenants: the usual 404 for a claim that is not there.
    let (s, _) = get(
        format!("/v1/claims/gamma/{}", "0".repeat(32)),
        Some("beta-claim-reader-0001"),
    )
    .await;
    assert_eq!(s, 404);

    // `GET /v1/config` shows the scoped token's tenants, never a token.
    let cfg: Value = g.admin_json(&c, "/v1/config").await;
    let tokens = &cfg["claim_check"]["tokens"];
    assert_eq!(tokens[0], "[redacted]");
    assert_eq!(tokens[1]["tenants"][0], "acme");
    assert_eq!(tokens[2]["token"], "[redacted]");
    assert!(!cfg.to_string().contains("claim-reader"), "{cfg}");
}
