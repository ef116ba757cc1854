//! Pure tests of `spec.settings.claim_check.token_review`: every pod's config lists the
//! ServiceAccounts that may read claims (with the in-cluster API address and the pod's own
//! token), the claim port moves to the pod network, and only such a Gateway's pods get an API
//! token and CA projected (hourly rotated) where the gateway looks for them; every other
//! Gateway's pods still mount none.

use ankusa_crds::Gateway;
use ankusa_operator::render::{self, Inputs, SecretValues};
use ankusa_operator::resources;
use common::object;
use serde_json::json;

mod common;

fn gateway(spec: serde_json::Value) -> Gateway {
    object(
        json!({"name": "gw", "namespace": "ns", "uid": "11111111-2222-3333-4444-555555555555", "generation": 1}),
        spec,
    )
}

fn render_gw(gw: &Gateway) -> render::Rendered {
    render::render(&Inputs {
        gateway: gw,
        sources: &[],
        sinks: &[],
        secrets: &SecretValues::new(),
        admin_token: "operator-admin-token-0123456789",
        scrape_token: None,
        previous: None,
    })
}

#[test]
fn service_account_readers_reach_every_pod_with_an_api_token() {
    let gw = gateway(
        json!({"replicas": 2, "settings": {"claim_check": {"token_review": {
        "service_accounts": [
            {"namespace": "billing", "name": "invoice-worker", "tenants": ["acme"]},
            {"namespace": "ops", "name": "replayer"}]}}}}),
    );
    let r = render_gw(&gw);
    assert_eq!(r.error, None);
    for pod in ["gw-0", "gw-1"] {
        let c = r.for_pod(pod).unwrap();
        assert!(
            c.claim_check.ip.is_unspecified(),
            "the claim port is on the pod network"
        );
        let review = c.claim_check.token_review.as_ref().expect("token_review");
        assert_eq!(review.audience, "ankusa-claims");
        assert_eq!(review.api_server, None, "the in-cluster address");
        assert_eq!(
            review.token_file.to_str(),
            Some("/var/run/secrets/kubernetes.io/serviceaccount/token")
        );
        assert_eq!(review.service_accounts.len(), 2);
        assert_eq!(
            review.service_accounts[0].username(),
            "system:serviceaccount:billing:invoice-worker"
        );
        assert!(review.service_accounts[0].allows("acme"));
        assert!(!review.service_accounts[0].allows("beta"));
        assert!(review.service_accounts[1].allows("beta"));
    }

    let sts = resources::statefulset(&gw, "ankusa:test");
    let pod = sts.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.automount_service_account_token, Some(false));
    let vol = pod
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "api-access")
        .expect("the projected API token");
    let sources = vol.projected.unwrap().sources.unwrap();
    let token = sources[0].service_account_token.as_ref().unwrap();
    assert_eq!(
        (token.path.as_str(), token.expiration_seconds),
        ("token", Some(3607))
    );
    assert_eq!(token.audience, None, "for the API server itself");
    let ca = sources[1].config_map.as_ref().unwrap();
    assert_eq!(ca.name, "kube-root-ca.crt");
    let mount = pod.containers[0]
        .volume_mounts
        .clone()
        .unwrap()
        .into_iter()
        .find(|m| m.name == "api-access")
        .unwrap();
    assert_eq!(
        mount.mount_path,
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    assert_eq!(mount.read_only, Some(true));
}

#[test]
fn without_readers_no_pod_mounts_an_api_token() {
    let gw = gateway(json!({"settings": {"claim_check": {"retention_days": 3}}}));
    let r = render_gw(&gw);
    assert_eq!(r.error, None);
    assert!(
        r.for_pod("gw-0")
            .unwrap()
            .claim_check
            .token_review
            .is_none()
    );
    let sts = resources::statefulset(&gw, "ankusa:test");
    let pod = sts.spec.unwrap().template.spec.unwrap();
    assert!(pod.volumes.unwrap().iter().all(|v| v.projected.is_none()));
    assert!(
        pod.containers[0]
            .volume_mounts
            .clone()
            .unwrap()
            .iter()
            .all(|m| !m.mount_path.starts_with("/var/run/secrets/kubernetes.io"))
    );
}

#[test]
fn an_audience_can_be_chosen_and_a_reader_must_be_named() {
    let gw = gateway(json!({"settings": {"claim_check": {"token_review": {
        "audience": "hooks.example.com",
        "service_accounts": [{"namespace": "billing", "name": "worker"}]}}}}));
    let r = render_gw(&gw);
    assert_eq!(r.error, None);
    let c = r.for_pod("gw-0").unwrap();
    assert_eq!(
        c.claim_check.token_review.as_ref().unwrap().audience,
        "hooks.example.com"
    );
    // A namespace that is not a DNS label is refused by the gateway's validation, named.
    let gw = gateway(json!({"settings": {"claim_check": {"token_review": {
        "service_accounts": [{"namespace": "Bad_NS", "name": "worker"}]}}}}));
    let err = render_gw(&gw).error.expect("refused");
    assert!(
        err.contains("claim_check.token_review.service_accounts[0].namespace"),
        "{err}"
    );
}
