//! Claims in a blob store the fleet shares (`claim_check.store`), through the real binary on
//! S3 (moto), GCS (fake-gcs-server) and Azure (Azurite), all on loopback: a body above a
//! RabbitMQ sink's inline limit is checked in by gateway A, the message (from the real broker)
//! carries the claim reference, and gateway B — another process with its own volume — redeems it
//! with a tenant-limited token: the bytes match the message's sha256, one `Range` works, a token
//! of another tenant gets `403`, and after A is killed with `kill -9` and its volume deleted the
//! claim still redeems from B and from A restarted empty. Also: a declared bucket expiry shorter
//! than a source's retries is refused at start and on a push (`retry_exceeds_claim_expiry`).
//! A missing emulator or broker fails the test; it never skips.

mod common;

use std::time::{Duration, Instant};

use ankusa_config::BackupStoreConfig;
use ankusa_gateway::blob::BlobStore;
use ankusa_testkit::brokers::{rabbit_teardown, rabbit_topology};
use common::*;
use lapin::options::BasicGetOptions;
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties};
use serde_json::Value;
use sha2::Digest;

const RABBIT: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const ACME_TOKEN: &str = "acme-claim-reader-0001";
const BETA_TOKEN: &str = "beta-claim-reader-0001";

struct Queue {
    _conn: Connection,
    ch: Channel,
    exchange: String,
    queue: String,
}

impl Queue {
    async fn new(name: &str) -> Queue {
        let conn = Connection::connect(RABBIT, ConnectionProperties::default())
            .await
            .expect("RabbitMQ on 127.0.0.1:5672");
        let ch = conn.create_channel().await.unwrap();
        let suffix = uuid::Uuid::now_v7().simple().to_string();
        let exchange = format!("claims-{name}-{suffix}");
        let queue = format!("claims-{name}-q-{suffix}");
        rabbit_topology(&ch, &exchange, &queue, "ankusa.big", FieldTable::default())
            .await
            .unwrap();
        Queue {
            _conn: conn,
            ch,
            exchange,
            queue,
        }
    }

    /// The next queue message, waiting up to 20 s.
    async fn next(&self) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(m) = self
                .ch
                .basic_get(self.queue.as_str().into(), BasicGetOptions { no_ack: true })
                .await
                .unwrap()
            {
                return serde_json::from_slice(&m.delivery.data).expect("a JSON queue message");
            }
            assert!(Instant::now() < deadline, "no message in {}", self.queue);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The `store:` block (YAML of `claim_check.store`, unindented) and its config's text.
fn config(store: &str, exchange: &str) -> String {
    let indented: String = store.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "egress: {{allow_loopback: true}}\n\
         claim_check:\n  pack_linger_ms: 200\n  tokens:\n\
         \x20   - {{token: {ACME_TOKEN}, tenants: [acme]}}\n\
         \x20   - {{token: {BETA_TOKEN}, tenants: [beta]}}\n\
         \x20 store:\n{indented}\
         sources:\n  big:\n    tenant: acme\n    sinks:\n      - type: rabbitmq\n        url: {RABBIT}\n        exchange: {exchange}\n        inline_max_bytes: 4096\n"
    )
}

async fn redeem(
    c: &reqwest::Client,
    g: &Gateway,
    path: &str,
    token: &str,
    range: Option<&str>,
) -> reqwest::Response {
    let mut r = c
        .get(format!("http://{}{path}", g.claims))
        .bearer_auth(token);
    if let Some(range) = range {
        r = r.header("range", range);
    }
    r.send().await.expect("claim port")
}

async fn shared_claims(kind: &str, store: String) {
    let q = Queue::new(kind).await;
    let cfg = config(&store, &q.exchange);
    let mut a = Gateway::start(&cfg);
    let b = Gateway::start(&cfg);
    let c = client();

    let body: Vec<u8> = (0..150_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let id = post_hook(&c, &a, "/webhooks/big", body.clone()).await;
    let m = q.next().await;
    assert_eq!(m["id"], id.as_str(), "{m}");
    assert!(m.get("body_base64").is_none_or(Value::is_null), "{m}");
    let sha = hex::encode(sha2::Sha256::digest(&body));
    assert_eq!(m["sha256"], sha.as_str());
    let urn = m["claim"].as_str().expect("a claim reference");
    let (tenant, claim_id) = urn
        .strip_prefix("urn:ankusa:claim:v1:")
        .and_then(|r| r.split_once(':'))
        .expect("a claim urn");
    assert_eq!(tenant, "acme");
    let path = format!("/v1/claims/{tenant}/{claim_id}");

    // Another process's claim port, with acme's own token.
    let got = redeem(&c, &b, &path, ACME_TOKEN, None).await;
    assert_eq!(got.status().as_u16(), 200, "{kind}");
    assert_eq!(got.headers()["accept-ranges"], "bytes");
    let bytes = got.bytes().await.unwrap();
    assert_eq!(hex::encode(sha2::Sha256::digest(&bytes)), sha, "{kind}");
    let part = redeem(&c, &b, &path, ACME_TOKEN, Some("bytes=1000-1999")).await;
    assert_eq!(part.status().as_u16(), 206);
    assert_eq!(part.headers()["content-range"], "bytes 1000-1999/150000");
    assert_eq!(&part.bytes().await.unwrap()[..], &body[1000..2000]);
    let past = redeem(&c, &b, &path, ACME_TOKEN, Some("bytes=150000-")).await;
    assert_eq!(past.status().as_u16(), 416);
    let head = c
        .head(format!("http://{}{path}", b.claims))
        .bearer_auth(ACME_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(head.headers()["content-length"], "150000");

    // Another tenant's token: 403, for this claim and for one that does not exist alike.
    let other = redeem(&c, &b, &path, BETA_TOKEN, None).await;
    assert_eq!(other.status().as_u16(), 403);
    assert_eq!(other.json::<Value>().await.unwrap()["error"], "forbidden");
    let none = format!("/v1/claims/acme/{}", uuid::Uuid::now_v7().simple());
    assert_eq!(redeem(&c, &b, &none, BETA_TOKEN, None).await.status(), 403);
    let missing = redeem(&c, &b, &none, ACME_TOKEN, None).await;
    assert_eq!(missing.status().as_u16(), 404);
    assert_eq!(
        missing.json::<Value>().await.unwrap()["error"],
        "claim_not_found"
    );
    assert_eq!(
        redeem(&c, &b, &path, "not-a-configured-token", None)
            .await
            .status()
            .as_u16(),
        401
    );

    // The pack sits where the key layout says, outside any key prefix: the only body of its
    // pack is at position 0, whose claim id is the pack id.
    let block: BackupStoreConfig = serde_yaml_ng::from_str(&store).unwrap();
    let s = BlobStore::from_block(&block, "claim_check.store").unwrap();
    let listed = s.list("claims/tenant=acme/", 100).await.unwrap();
    assert_eq!(listed.len(), 1, "{kind}: {listed:?}");
    assert_eq!(claim_id.len(), 26, "a ULID claim id: {claim_id}");
    assert!(
        listed[0].key.starts_with("claims/tenant=acme/dt=20") && listed[0].key.ends_with(claim_id),
        "{}",
        listed[0].key
    );
    assert!(listed[0].size > 150_000, "{kind}: {:?}", listed[0]);

    // A burst: bodies checked in together share packs, each claim redeems from the other pod.
    let bodies: Vec<Vec<u8>> = (0..12u32)
        .map(|n| (0..70_000u32).map(|i| ((i + n) * 13 % 253) as u8).collect())
        .collect();
    let ids = futures::future::join_all(
        bodies
            .iter()
            .map(|b| post_hook(&c, &a, "/webhooks/big", b.clone())),
    )
    .await;
    let mut claimed = std::collections::HashMap::new();
    for _ in 0..bodies.len() {
        let m = q.next().await;
        claimed.insert(
            m["id"].as_str().unwrap().to_string(),
            m["claim"].as_str().expect("a claim").to_string(),
        );
    }
    for (id, body) in ids.iter().zip(&bodies) {
        let urn = &claimed[id];
        let claim = urn.rsplit(':').next().unwrap();
        let got = redeem(
            &c,
            &b,
            &format!("/v1/claims/acme/{claim}"),
            ACME_TOKEN,
            None,
        )
        .await;
        assert_eq!(got.status().as_u16(), 200, "{kind} {urn}");
        assert_eq!(&got.bytes().await.unwrap()[..], &body[..], "{kind} {urn}");
    }
    let packs = s.list("claims/tenant=acme/", 100).await.unwrap();
    assert!(
        packs.len() - 1 < bodies.len() / 2,
        "{kind}: {} packs for {} bodies checked in together",
        packs.len() - 1,
        bodies.len()
    );
    let newest = packs.iter().max_by_key(|l| l.size).unwrap();
    let zip = s.get(&newest.key, 64 << 20).await.unwrap();
    assert_eq!(&zip[..4], b"PK\x03\x04", "{kind}: a pack is a ZIP");
    // The writer counts its packs and their bodies.
    let m = a.metrics(&c).await;
    assert_eq!(
        metric(&m, "ankusa_claim_packs_total{outcome=\"written\"}") as usize,
        packs.len(),
        "{kind}"
    );
    assert_eq!(metric(&m, "ankusa_claim_pack_bodies_sum"), 13.0, "{kind}");

    // The pod that wrote the claim dies and loses its volume: the claim is still there.
    a.kill9();
    std::fs::remove_dir_all(a.data_dir()).unwrap();
    let again = redeem(&c, &b, &path, ACME_TOKEN, None).await;
    assert_eq!(again.status().as_u16(), 200);
    assert_eq!(
        hex::encode(sha2::Sha256::digest(again.bytes().await.unwrap())),
        sha
    );
    a.spawn_again();
    a.wait_ready(Duration::from_secs(30));
    let c = client();
    let from_a = redeem(&c, &a, &path, ACME_TOKEN, None).await;
    assert_eq!(
        from_a.status().as_u16(),
        200,
        "{kind}: the restarted, empty pod"
    );
    assert_eq!(from_a.bytes().await.unwrap().len(), 150_000);
    rabbit_teardown(&q.ch, &q.exchange, &q.queue).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_claims_redeem_from_any_pod_and_outlive_the_writer() {
    let c = client();
    let bucket = moto_bucket(&c, "ankusa-claims").await;
    shared_claims("s3", format!("type: s3\n{}", moto_s3_yaml(&bucket, ""))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gcs_claims_redeem_from_any_pod_and_outlive_the_writer() {
    let c = client();
    let bucket = gcs_bucket(&c, "ankusa-claims").await;
    shared_claims("gcs", format!("type: gcs\n{}", gcs_yaml(&bucket, ""))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn azure_claims_redeem_from_any_pod_and_outlive_the_writer() {
    let c = client();
    let container = azurite_container(&c, "ankusa-claims").await;
    shared_claims(
        "azure",
        format!(
            "type: azure\n{}",
            azure_yaml(&container, AzureAuth::SharedKey, "")
        ),
    )
    .await;
}

/// `claim_check.bucket_expiry_days: 1` with the default 24 h retry horizon and a 1-day redeem
/// grace: a source with a queue sink is refused at start (exit 78, naming the field) and on a
/// push (`422 retry_exceeds_claim_expiry`); a source whose horizon fits is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bucket_expiry_shorter_than_the_retries_is_refused() {
    let c = client();
    let bucket = moto_bucket(&c, "ankusa-expiry").await;
    let store: String = format!("type: s3\n{}", moto_s3_yaml(&bucket, ""))
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    let head = format!(
        "egress: {{allow_loopback: true}}\nadmin: {{tokens: [{{token: admin-token-0000000001, scopes: [\"*\"]}}]}}\nclaim_check:\n  bucket_expiry_days: 2\n  store:\n{store}"
    );
    let source = |horizon_ms: u64| {
        format!(
            "sources:\n  q:\n    retry: {{max_elapsed_ms: {horizon_ms}}}\n    sinks:\n      - type: rabbitmq\n        url: {RABBIT}\n        exchange: claims-expiry\n"
        )
    };
    // 2 days of expiry hold a 12 h horizon + the 1-day grace.
    let fits = format!("{head}{}", source(43_200_000));
    let g = Gateway::start(&fits);
    let too_long = format!("{head}{}", source(172_800_000));
    let out = g.run_subcommand(&["check-config"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let r = c
        .put(g.admin_url("/v1/config"))
        .bearer_auth("admin-token-0000000001")
        .header("content-type", "application/yaml")
        .body(too_long.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"], "retry_exceeds_claim_expiry", "{e}");
    assert_eq!(e["field"], "sources.q.retry.max_elapsed_ms", "{e}");

    g.write_config(&too_long);
    let out = g.run_subcommand(&["check-config"]);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sources.q.retry.max_elapsed_ms")
            && err.contains("retry_exceeds_claim_expiry"),
        "{err}"
    );
}
