//! The GCS and Azure Blob stores against real emulators on loopback, started by
//! `tests/brokers/start.sh` (fake-gcs-server on 127.0.0.1:9023, Azurite on 127.0.0.1:10000):
//! put / get / ranged get / delete / list round trips (a listing over several pages, overwrites,
//! not-found, the `max` bounds) for GCS and for Azure with a SAS and with Shared Key; a GCS
//! service-account key whose RS256 assertion a local token endpoint checks and exchanges once
//! for many requests; refusals and transport failures whose errors carry no SAS, key,
//! assertion or token; and the archive and a backup through the real binary on each store:
//! hooks archived and fetched back by id, the data dir lost, every pending hook restored.
//! A missing emulator fails the test; it never skips.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_config::StorageConfig;
use ankusa_gateway::blob::{BlobError, BlobStore, Listed};
use base64::Engine;
use bytes::Bytes;
use common::receiver::{Receiver, Reply};
use common::*;
use serde_json::Value;

fn store(yaml: &str) -> BlobStore {
    let cfg: StorageConfig = serde_yaml_ng::from_str(yaml).expect("storage yaml");
    BlobStore::from_config(&cfg).expect("the store builds")
}

async fn gcs_store(c: &reqwest::Client) -> BlobStore {
    let bucket = gcs_bucket(c, "ankusa-blob").await;
    store(&format!("type: gcs\n{}", gcs_yaml(&bucket, "")))
}

async fn azure_store(c: &reqwest::Client, auth: AzureAuth) -> BlobStore {
    let container = azurite_container(c, "ankusa-blob").await;
    store(&format!(
        "type: azure\n{}",
        azure_yaml(&container, auth, "")
    ))
}

fn body(i: usize, len: usize) -> Bytes {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

/// Every operation of the API on `s`, listings in pages of 3.
async fn round_trip(mut s: BlobStore) {
    s.set_list_page(3);
    let kind = s.kind();
    let keys: Vec<String> = (0..7)
        .map(|i| format!("team-x/archive/v1/dt=2026-12-0{i}/node-0/{i}-{}.seg", i + 1))
        .collect();
    let sizes = [0, 1, 13, 4096, 70_000, 3 << 20, 5];
    for (i, k) in keys.iter().enumerate() {
        s.put(k, body(i, sizes[i]))
            .await
            .unwrap_or_else(|e| panic!("{kind} put {k}: {e}"));
    }
    // Whole, bounded, ranged.
    for (i, k) in keys.iter().enumerate() {
        let got = s.get(k, 8 << 20).await.unwrap();
        assert_eq!(got, body(i, sizes[i]), "{kind} {k}");
    }
    let big = &keys[5];
    let e = s.get(big, 1 << 20).await.unwrap_err();
    assert!(
        matches!(e, BlobError::TooLarge { max, .. } if max == 1 << 20),
        "{kind}: {e}"
    );
    let want = body(5, sizes[5]);
    for (off, len) in [(0u64, 1u32), (1_000_000, 65_536), ((3 << 20) - 10, 10)] {
        let got = s.get_range(big, off, len).await.unwrap();
        assert_eq!(
            &got[..],
            &want[off as usize..off as usize + len as usize],
            "{kind} range {off}+{len}"
        );
    }
    assert!(s.get_range(big, 5, 0).await.unwrap().is_empty());
    // An overwrite replaces (LATEST is rewritten in place).
    s.put(&keys[2], Bytes::from_static(b"second version"))
        .await
        .unwrap();
    assert_eq!(s.get(&keys[2], 100).await.unwrap(), &b"second version"[..]);

    // A listing over three pages, sorted, with sizes; bounded by `max`.
    let mut want: Vec<Listed> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| Listed {
            key: k.clone(),
            size: if i == 2 { 14 } else { sizes[i] as u64 },
        })
        .collect();
    want.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(
        s.list("team-x/archive/", 100).await.unwrap(),
        want,
        "{kind}"
    );
    assert_eq!(
        s.list("team-x/archive/v1/dt=2026-12-03/", 100)
            .await
            .unwrap(),
        want[3..4].to_vec()
    );
    let e = s.list("team-x/archive/", 5).await.unwrap_err();
    assert!(
        matches!(e, BlobError::TooLarge { max: 5, .. }),
        "{kind}: {e}"
    );
    assert!(s.list("team-y/", 100).await.unwrap().is_empty());

    // Not found, and deletes that are idempotent.
    let missing = "team-x/archive/v1/nothing-here.seg";
    assert!(
        matches!(s.get(missing, 10).await, Err(BlobError::NotFound { .. })),
        "{kind}"
    );
    assert!(matches!(
        s.get_range(missing, 0, 4).await,
        Err(BlobError::NotFound { .. })
    ));
    s.delete(&keys[1]).await.unwrap();
    assert!(matches!(
        s.get(&keys[1], 10).await,
        Err(BlobError::NotFound { .. })
    ));
    s.delete(&keys[1]).await.unwrap();
    s.delete(missing).await.unwrap();
    assert_eq!(s.list("team-x/", 100).await.unwrap().len(), 6);
}

#[tokio::test]
async fn gcs_round_trips_every_operation() {
    let c = client();
    round_trip(gcs_store(&c).await).await;
}

#[tokio::test]
async fn azure_round_trips_every_operation_with_a_sas_token() {
    let c = client();
    round_trip(azure_store(&c, AzureAuth::Sas).await).await;
}

#[tokio::test]
async fn azure_round_trips_every_operation_with_shared_key() {
    let c = client();
    round_trip(azure_store(&c, AzureAuth::SharedKey).await).await;
}

/// A token endpoint on 127.0.0.1 that checks each assertion's RS256 signature with `public`
/// and answers `token`, or `refusal` (status, body) when set. Returns its URL and the
/// assertions it received.
async fn token_endpoint(
    public: Arc<Mutex<Vec<u8>>>,
    refusal: Option<(u16, &'static str)>,
) -> (String, Arc<Mutex<Vec<Value>>>, tokio::task::JoinHandle<()>) {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let rec = seen.clone();
    let app = axum::Router::new().route(
        "/token",
        axum::routing::post(move |form: String| {
            let (rec, public) = (rec.clone(), public.clone());
            async move {
                let fields: std::collections::HashMap<String, String> =
                    url::form_urlencoded::parse(form.as_bytes()).into_owned().collect();
                assert_eq!(fields["grant_type"], "urn:ietf:params:oauth:grant-type:jwt-bearer");
                let jwt = &fields["assertion"];
                let (signed, sig) = jwt.rsplit_once('.').expect("a JWT");
                let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
                let ok = aws_lc_rs::signature::UnparsedPublicKey::new(
                    &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
                    public.lock().unwrap().clone(),
                )
                .verify(signed.as_bytes(), &b64.decode(sig).unwrap())
                .is_ok();
                let claims: Value = serde_json::from_slice(
                    &b64.decode(signed.split('.').nth(1).unwrap()).unwrap(),
                )
                .unwrap();
                rec.lock().unwrap().push(serde_json::json!({"claims": claims, "verified": ok}));
                let (status, body) = match refusal {
                    Some((s, b)) => (s, b.to_string()),
                    None if ok => (
                        200,
                        r#"{"access_token":"ya29.test-token","expires_in":3599,"token_type":"Bearer"}"#
                            .to_string(),
                    ),
                    None => (400, r#"{"error":"invalid_grant"}"#.to_string()),
                };
                (axum::http::StatusCode::from_u16(status).unwrap(), body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, seen, task)
}

#[tokio::test]
async fn a_gcs_service_account_key_signs_one_assertion_for_many_requests() {
    let c = client();
    let bucket = gcs_bucket(&c, "ankusa-sa").await;
    let public = Arc::new(Mutex::new(Vec::new()));
    let (token_uri, seen, _task) = token_endpoint(public.clone(), None).await;
    let (key_json, public_der) = throwaway_service_account(&token_uri);
    *public.lock().unwrap() = public_der;
    // The key as a file (the inline form is the config tests').
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir
        .path()
        .join("throwaway-service-account-not-a-secret.json");
    std::fs::write(&key_file, &key_json).unwrap();
    let s = store(&format!(
        "type: gcs\ngcs:\n  bucket: {bucket}\n  endpoint: {GCS_EMULATOR}\n  credentials: {}\n",
        key_file.display()
    ));
    for i in 0..5 {
        s.put(&format!("sa/{i}"), body(i, 100)).await.unwrap();
    }
    assert_eq!(s.list("sa/", 10).await.unwrap().len(), 5);
    assert_eq!(s.get("sa/3", 100).await.unwrap(), body(3, 100));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        1,
        "one exchange, cached for every request: {seen:?}"
    );
    assert_eq!(seen[0]["verified"], true);
    let claims = &seen[0]["claims"];
    assert_eq!(claims["iss"], "archive@ankusa-test.iam.gserviceaccount.com");
    assert_eq!(claims["aud"], token_uri.as_str());
    assert_eq!(
        claims["scope"],
        "https://www.googleapis.com/auth/devstorage.read_write"
    );
    assert_eq!(
        claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
        3600
    );
}

/// No error text may hold any of `secrets`.
fn assert_clean(e: &BlobError, secrets: &[&str]) {
    let (shown, debug) = (e.to_string(), format!("{e:?}"));
    for s in secrets {
        assert!(
            !shown.contains(s) && !debug.contains(s),
            "{s:?} in {shown} / {debug}"
        );
    }
}

#[tokio::test]
async fn refusals_and_transport_errors_never_carry_a_sas_key_or_token() {
    let c = client();
    let container = azurite_container(&c, "ankusa-refused").await;
    let azure = |cred: &str, endpoint: &str| {
        store(&format!(
            "type: azure\nazure:\n  account: {AZURITE_ACCOUNT}\n  container: {container}\n  endpoint: {endpoint}\n  {cred}\n"
        ))
    };

    // A wrong account key: Azurite refuses the signature.
    let wrong_key = "d3Jvbmcta2V5LWZvci10aGUtdGVzdC1vbmx5LTEyMzQ1Njc4OTA=";
    let e = azure(&format!("account_key: \"{wrong_key}\""), AZURITE)
        .put("k/x", Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert!(matches!(e, BlobError::Refused { .. }), "{e}");
    assert!(e.to_string().starts_with("put k/x: 403 "), "{e}");
    assert_clean(&e, &[wrong_key, "wrong-key-for"]);

    // A SAS whose signature is wrong.
    let good = azurite_sas();
    let (unsigned, _) = good.split_once("&sig=").unwrap();
    let bad_sig = "c2lnbmF0dXJlLW5vdC1tYWRlLWJ5LWF6dXJlMDEyMzQ1Njc4OQ%3D%3D";
    let e = azure(
        &format!("sas_token: \"?{unsigned}&sig={bad_sig}\""),
        AZURITE,
    )
    .get("k/x", 10)
    .await
    .unwrap_err();
    assert!(matches!(e, BlobError::Refused { .. }), "{e}");
    assert_clean(&e, &[bad_sig, "c2lnbmF0dXJl", &good]);

    // A closed port: the request URL (which holds the SAS) is not in the transport error.
    let closed = format!("http://127.0.0.1:{}/devstoreaccount1", free_port());
    let e = azure(&format!("sas_token: \"{good}\""), &closed)
        .list("k/", 10)
        .await
        .unwrap_err();
    assert!(matches!(e, BlobError::Transient { .. }), "{e}");
    assert_eq!(e.to_string(), "list k/: transport: connect failed");
    assert_clean(&e, &[&good, "sig="]);

    // A GCS token endpoint that refuses: its code is kept, its description and the assertion
    // are not.
    let public = Arc::new(Mutex::new(Vec::new()));
    let (token_uri, seen, _task) = token_endpoint(
        public.clone(),
        Some((400, r#"{"error":"invalid_grant","error_description":"Invalid JWT Signature: leaked-detail"}"#)),
    )
    .await;
    let (key_json, public_der) = throwaway_service_account(&token_uri);
    *public.lock().unwrap() = public_der;
    let key: Value = serde_json::from_str(&key_json).unwrap();
    let pem_line = key["private_key"].as_str().unwrap().lines().nth(1).unwrap()[..48].to_string();
    let bucket = gcs_bucket(&c, "ankusa-refused").await;
    let s = store(&format!(
        "type: gcs\ngcs:\n  bucket: {bucket}\n  endpoint: {GCS_EMULATOR}\n  credentials: '{key_json}'\n"
    ));
    let e = s.put("k/x", Bytes::from_static(b"x")).await.unwrap_err();
    assert!(matches!(e, BlobError::Refused { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "put k/x: service-account token: 400 invalid_grant"
    );
    assert_clean(&e, &["leaked-detail", "eyJ", &pem_line]);
    assert_eq!(seen.lock().unwrap().len(), 1, "a refusal is not retried");
}

// ---------------------------------------------------------------------------------------------
// The archive and a backup through the real binary

/// `done` hooks are delivered (and archived); `live` hooks stay pending (their sink refuses
/// and the next attempt is minutes away), so only a backup brings them back.
fn gateway_config(sink: &str, storage: &str) -> String {
    format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
dispatch: {{breaker_failures: 0}}
{storage}
backup: {{enabled: true, interval_ms: 60000}}
sources:
  done:
    sinks: [{{type: http, url: "{sink}/done", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}]
  live:
    retry: {{base_ms: 600000, max_ms: 600000, max_attempts: 10}}
    sinks: [{{type: http, url: "{sink}/live", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}]
"#
    )
}

async fn wait_archived(c: &reqwest::Client, g: &Gateway, n: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let st = g.admin_json(c, "/v1/status").await;
        if st["archive"]["archived"].as_i64() == Some(n) {
            return st;
        }
        assert!(Instant::now() < deadline, "never {n} archived: {st}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn hook_status(c: &reqwest::Client, g: &Gateway, id: &str) -> u16 {
    c.get(g.admin_url(&format!("/v1/hooks/{id}")))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Archives and backs up to `storage`, loses the data dir, restarts: archived hooks are read
/// back from the store by id, pending ones come back from the backup. Returns the objects'
/// keys as the store lists them under `team-z/`.
async fn archive_and_backup(kind: &str, storage: &str, s: &BlobStore) -> Vec<String> {
    let rx = Receiver::start(|_, r| {
        if r.path.starts_with("/live") {
            Reply::status(500)
        } else {
            Reply::status(200)
        }
    })
    .await;
    let mut g = Gateway::start(&gateway_config(&rx.url(""), storage));
    let c = client();
    let done = post_ids(&c, &g, "/webhooks/done", 12, |i| {
        format!("{{\"done\":{i}}}")
    })
    .await;
    let live = post_ids(&c, &g, "/webhooks/live", 8, |i| format!("{{\"live\":{i}}}")).await;
    let st = wait_archived(&c, &g, 12).await;
    assert_eq!(st["archive"]["store"], kind, "{st}");
    let h = g
        .admin_json(&c, &format!("/v1/archive/hooks/{}", done[5]))
        .await;
    let got = base64::engine::general_purpose::STANDARD
        .decode(h["body_base64"].as_str().unwrap_or_else(|| panic!("{h}")))
        .unwrap();
    assert_eq!(got, b"{\"done\":5}", "{h}");
    let segment = h["segment"].as_str().unwrap().to_string();
    assert!(segment.starts_with("team-z/archive/v1/dt="), "{segment}");

    // A clean stop writes the final backup; the volume is lost; the node restores.
    g.terminate().expect("it ran");
    let log = g.log();
    let final_at = log
        .rfind("clean stop: writing a final backup")
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        log[final_at..].contains("backup written"),
        "{}",
        g.log_tail()
    );
    std::fs::remove_dir_all(g.data_dir()).unwrap();
    let started = Instant::now();
    g.spawn_again();
    g.wait_ready(Duration::from_secs(60));
    eprintln!("{kind}: restored and ready in {:?}", started.elapsed());
    // A fresh client: the pooled connections went to the process that stopped.
    let c = client();
    let st = g.admin_json(&c, "/v1/status").await;
    assert!(st["backup"]["restored_from"].is_string(), "{st}");
    for id in &live {
        assert_eq!(
            hook_status(&c, &g, id).await,
            200,
            "pending hook {id} is back"
        );
    }
    let wal = g.admin_json(&c, "/v1/wal").await;
    assert_eq!(wal["deliveries"]["pending"], 8, "{wal}");
    // The archive's catalogue came back too: an archived hook still reads from the store.
    let h = g
        .admin_json(&c, &format!("/v1/archive/hooks/{}", done[11]))
        .await;
    assert_eq!(
        h["segment"]
            .as_str()
            .map(|k| k.starts_with("team-z/archive/")),
        Some(true),
        "{h}"
    );
    assert!(g.log().contains("store restored from backup"));

    let listed: Vec<String> = s
        .list("team-z/", 10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.key)
        .collect();
    assert!(
        listed.contains(&segment) && listed.contains(&segment.replace(".seg", ".idx")),
        "{listed:?}"
    );
    assert!(
        listed.contains(&"team-z/backup/default/LATEST".to_string()),
        "{listed:?}"
    );
    assert!(listed.iter().any(|k| k.ends_with(".sst")), "{listed:?}");
    listed
}

/// `storage:` of `kind` with its store `section` (indented by two), segments rolled fast.
fn storage_yaml(kind: &str, section: &str) -> String {
    format!(
        "storage:\n  type: {kind}\n  key_prefix: team-z\n  roll_ms: 200\n  interval_ms: 50\n{section}"
    )
}

#[tokio::test]
async fn gcs_archive_and_backup_through_the_gateway() {
    let c = client();
    let bucket = gcs_bucket(&c, "ankusa-gw").await;
    let section = gcs_yaml(&bucket, "  ");
    let s = store(&format!("type: gcs\n{}", gcs_yaml(&bucket, "")));
    archive_and_backup("gcs", &storage_yaml("gcs", &section), &s).await;
}

#[tokio::test]
async fn azure_archive_and_backup_through_the_gateway() {
    let c = client();
    let container = azurite_container(&c, "ankusa-gw").await;
    let section = azure_yaml(&container, AzureAuth::SharedKey, "  ");
    let s = store(&format!(
        "type: azure\n{}",
        azure_yaml(&container, AzureAuth::Sas, "")
    ));
    archive_and_backup("azure", &storage_yaml("azure", &section), &s).await;
}
