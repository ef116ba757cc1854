//! Pure tests of rendering the Gateway's buckets on Google Cloud Storage and Azure Blob
//! Storage: `spec.archive`, `spec.durability.backup.store` and
//! `spec.settings.claim_check.store` of types `gcs` and `azure`, their credentials from
//! Secrets, and the refusals that name a field and never a Secret's value.

use ankusa_config::BlobStoreKind;
use ankusa_crds::Gateway;
use ankusa_operator::render::{self, Inputs, SecretValues};
use common::{object, secrets};
use serde_json::json;

mod common;

fn gateway(spec: serde_json::Value) -> Gateway {
    object(
        json!({"name": "gw", "namespace": "ns", "uid": "11111111-2222-3333-4444-555555555555", "generation": 1}),
        spec,
    )
}

fn render_gw(gw: &Gateway, secrets: &SecretValues) -> render::Rendered {
    render::render(&Inputs {
        gateway: gw,
        sources: &[],
        sinks: &[],
        secrets,
        admin_token: "operator-admin-token-0123456789",
        scrape_token: None,
        previous: None,
    })
}

/// The shape of a service-account key file (the private key is a placeholder: nothing here
/// signs with it).
const SA_KEY: &str = r#"{"type": "service_account", "project_id": "hooks", "client_email": "gw@hooks.iam.gserviceaccount.com", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC-not-a-real-key\n-----END PRIVATE KEY-----\n", "token_uri": "https://oauth2.googleapis.com/token"}"#;
const SAS: &str = "sv=2021-08-06&ss=b&srt=co&sp=rwdlac&se=2030-01-01T00:00:00Z&sig=c2lnbmF0dXJlLW9mLXRoZS1zYXM%3D";
const ACCOUNT_KEY: &str = "RXZlcnkgQXp1cmUgYWNjb3VudCBrZXkgaXMgYmFzZTY0LWVuY29kZWQgYnl0ZXM=";

fn cloud_secrets() -> SecretValues {
    secrets(&[
        ("gcp", "key.json", SA_KEY),
        ("azure", "sas", SAS),
        ("azure", "key", ACCOUNT_KEY),
        ("gcp", "not-json", "/var/run/secrets/google/key.json"),
    ])
}

fn no_secret_in(text: &str) {
    for s in [SA_KEY, "not-a-real-key", SAS, "c2lnbmF0dXJl", ACCOUNT_KEY] {
        assert!(!text.contains(s), "a Secret's value leaked: {text}");
    }
}

#[test]
fn a_gcs_archive_with_a_service_account_key_reaches_every_pod() {
    let gw = gateway(json!({
        "replicas": 2,
        "archive": {"type": "gcs", "bucket": "hooks-archive", "timeoutMs": 20000,
                    "credentials": {"serviceAccountKey": {"name": "gcp", "key": "key.json"}}},
    }));
    let r = render_gw(&gw, &cloud_secrets());
    assert_eq!(r.error, None);
    assert!(r.secrets_used.contains("gcp"), "a rotation re-renders");
    let c = r.for_pod("gw-1").unwrap();
    let st = c.storage.as_ref().expect("storage rendered");
    assert_eq!(st.store_type, BlobStoreKind::Gcs);
    assert_eq!(st.key_prefix.as_deref(), Some("ns/gw"));
    assert!(st.s3.is_none() && st.azure.is_none());
    let g = st.gcs.as_ref().unwrap();
    assert_eq!(g.bucket, "hooks-archive");
    assert_eq!(g.timeout_ms, 20_000);
    assert_eq!(g.endpoint, None, "Google's endpoint by default");
    assert_eq!(g.credentials.as_ref().map(|s| s.expose()), Some(SA_KEY));
    assert!(
        matches!(
            g.credentials(),
            Some(ankusa_config::GcsCredentials::Inline(_))
        ),
        "the key's JSON, never a path the pod would read"
    );
    no_secret_in(&format!("{c:?}"));
    let back = render::parse_rendered(&c.to_yaml()).expect("the pod's file parses");
    assert_eq!(back.storage, c.storage);

    // No credentials: the pods' metadata server (GKE workload identity).
    let gw = gateway(json!({"archive": {"type": "gcs", "bucket": "hooks-archive"}}));
    let c = render_gw(&gw, &cloud_secrets()).for_pod("gw-0").unwrap();
    let g = c.storage.unwrap().gcs.unwrap();
    assert!(g.credentials.is_none() && !g.anonymous);
}

#[test]
fn an_azure_archive_with_a_sas_is_also_the_backups_store() {
    let gw = gateway(json!({
        "archive": {"type": "azure", "account": "hooksacct", "container": "ankusa-archive",
                    "endpoint": "http://127.0.0.1:10000/hooksacct",
                    "credentials": {"sasToken": {"name": "azure", "key": "sas"}}},
        "durability": {"mode": "disk", "backup": {"intervalMs": 30000}},
    }));
    let r = render_gw(&gw, &cloud_secrets());
    assert_eq!(r.error, None);
    assert!(r.secrets_used.contains("azure"));
    let c = r.for_pod("gw-0").unwrap();
    let st = c.storage.as_ref().unwrap();
    assert_eq!(st.store_type, BlobStoreKind::Azure);
    let a = st.azure.as_ref().unwrap();
    assert_eq!(
        (a.account.as_str(), a.container.as_str()),
        ("hooksacct", "ankusa-archive")
    );
    assert_eq!(a.service_url(), "http://127.0.0.1:10000/hooksacct");
    assert_eq!(a.sas_token.as_ref().map(|s| s.expose()), Some(SAS));
    assert_eq!(a.account_key, None);
    assert!(c.backup.enabled);
    assert_eq!(
        c.backup.store, None,
        "the gateway's default: the archive's bucket"
    );
    no_secret_in(&format!("{c:?}"));
    let back = render::parse_rendered(&c.to_yaml()).expect("the pod's file parses");
    assert_eq!(back.storage, c.storage);
}

#[test]
fn backups_and_claims_in_buckets_of_either_cloud() {
    let gw = gateway(json!({
        "archive": {"type": "local"},
        "settings": {"claim_check": {
            "store": {"type": "azure", "account": "hooksacct", "container": "claims",
                      "credentials": {"accountKey": {"name": "azure", "key": "key"}}},
            "bucket_expiry_days": 30}},
        "durability": {"mode": "disk", "backup": {
            "store": {"type": "gcs", "bucket": "hooks-backup", "anonymous": true,
                      "endpoint": "http://127.0.0.1:4443"}}},
    }));
    let r = render_gw(&gw, &cloud_secrets());
    assert_eq!(r.error, None);
    assert!(r.secrets_used.contains("azure"));
    let c = r.for_pod("gw-0").unwrap();
    let b = c.backup.store.as_ref().expect("the backup store");
    assert_eq!(b.store_type, BlobStoreKind::Gcs);
    let g = b.gcs.as_ref().unwrap();
    assert_eq!(g.bucket, "hooks-backup");
    assert!(g.anonymous && g.credentials.is_none());
    assert_eq!(
        g.endpoint.as_ref().map(|e| e.expose()),
        Some("http://127.0.0.1:4443")
    );
    let cs = c.claim_check.store.as_ref().expect("the claim store");
    assert_eq!(cs.store_type, BlobStoreKind::Azure);
    let a = cs.azure.as_ref().unwrap();
    assert_eq!(a.container, "claims");
    assert_eq!(
        a.account_key.as_ref().map(|s| s.expose()),
        Some(ACCOUNT_KEY)
    );
    assert_eq!(a.sas_token, None);
    no_secret_in(&format!("{c:?}"));
    let back = render::parse_rendered(&c.to_yaml()).expect("the pod's file parses");
    assert_eq!(back.backup, c.backup);
    assert_eq!(back.claim_check, c.claim_check);
}

/// The error a Gateway with `spec` is refused with.
fn refused(spec: serde_json::Value) -> String {
    let r = render_gw(&gateway(spec), &cloud_secrets());
    let e = r.error.expect("refused");
    no_secret_in(&e);
    e
}

#[test]
fn fields_and_credentials_of_another_type_are_refused_by_name() {
    let sa = json!({"serviceAccountKey": {"name": "gcp", "key": "key.json"}});
    for (archive, want) in [
        (
            json!({"type": "gcs", "bucket": "b-1", "region": "eu-west-1"}),
            "spec.archive.region: is not a field of type gcs",
        ),
        (
            json!({"type": "azure", "account": "hooksacct", "container": "c-1", "bucket": "b-1"}),
            "spec.archive.bucket: is not a field of type azure",
        ),
        (
            json!({"type": "s3", "bucket": "b-1", "anonymous": true}),
            "spec.archive.anonymous: is not a field of type s3",
        ),
        (
            json!({"type": "s3", "bucket": "b-1", "credentials": sa}),
            "spec.archive.credentials.serviceAccountKey: is not a credential of type s3",
        ),
        (
            json!({"type": "gcs", "bucket": "b-1",
                   "credentials": {"sasToken": {"name": "azure", "key": "sas"}}}),
            "spec.archive.credentials.sasToken: is not a credential of type gcs",
        ),
        (
            json!({"type": "azure", "account": "hooksacct", "container": "c-1",
                   "credentials": {"sasToken": {"name": "azure", "key": "sas"},
                                   "accountKey": {"name": "azure", "key": "key"}}}),
            "spec.archive.credentials: give one of sasToken and accountKey",
        ),
        (
            json!({"type": "gcs", "bucket": "b-1",
                   "credentials": {"serviceAccountKey": {"name": "gcp", "key": "not-json"}}}),
            "spec.archive.credentials.serviceAccountKey: must hold a service-account key's JSON",
        ),
        (
            json!({"type": "azure", "container": "c-1"}),
            "spec.archive.account: is required for type azure",
        ),
        (
            json!({"type": "azure", "account": "hooksacct"}),
            "spec.archive.container: is required for type azure",
        ),
        (
            json!({"type": "local", "account": "hooksacct"}),
            "spec.archive.account: is for a bucket (s3, gcs, azure), not type local",
        ),
        (
            json!({"type": "azure", "account": "hooksacct", "container": "c-1",
                   "endpoint": "https://user:pw@hooksacct.blob.core.windows.net"}),
            "spec.archive.endpoint: carries credentials in its URL",
        ),
    ] {
        let e = refused(json!({ "archive": archive }));
        assert!(e.contains(want), "{archive}: {e}");
    }
}

#[test]
fn what_the_gateway_refuses_in_a_bucket_is_named_as_the_spec_field() {
    // The gateway's own rules on names: the spec field, never the value.
    let e = refused(
        json!({"archive": {"type": "azure", "account": "Not_An_Account", "container": "c-1"}}),
    );
    assert!(e.contains("spec.archive.account"), "{e}");
    assert!(!e.contains("Not_An_Account"), "{e}");
    let e = refused(json!({"archive": {"type": "gcs", "bucket": "goog-reserved"}}));
    assert!(e.contains("spec.archive.bucket"), "{e}");
    let e = refused(json!({"archive": {"type": "gcs", "bucket": "b-1", "anonymous": true}}));
    assert!(e.contains("spec.archive.anonymous"), "{e}");
    let e = refused(json!({"durability": {"mode": "disk", "backup": {
        "store": {"type": "azure", "account": "hooksacct", "container": "a--b"}}}}));
    assert!(e.contains("spec.durability.backup.store.container"), "{e}");
    let e = refused(json!({"settings": {"claim_check": {
        "store": {"type": "gcs", "bucket": "b-1", "region": "x"}, "bucket_expiry_days": 30}}}));
    assert!(
        e.contains("spec.settings.claim_check.store.region: is not a field of type gcs"),
        "{e}"
    );
    let e = refused(json!({"settings": {"claim_check": {"store": {"type": "local"}}}}));
    assert!(
        e.contains("spec.settings.claim_check.store.type: must be s3, gcs or azure"),
        "{e}"
    );
    let e =
        refused(json!({"durability": {"mode": "disk", "backup": {"store": {"type": "local"}}}}));
    assert!(
        e.contains("spec.durability.backup.store.type: must be s3, gcs or azure"),
        "{e}"
    );
}
