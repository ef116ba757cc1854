//! Claim readers with Kubernetes ServiceAccount tokens (`claim_check.token_review`), against a
//! real kube-apiserver (`e2e/controlplane`, started here) and the real binary: tokens minted
//! with `kubectl create token --audience` as a user would. The gateway reviews with its own
//! ServiceAccount's token, bound to `system:auth-delegator`. A listed reader reads its tenants'
//! claims and gets `403` for another tenant's; an authenticated ServiceAccount that is not
//! listed gets `403`; a token for another audience or a made-up one `401`; with the API server
//! gone, a token not reviewed before is `503 auth_unavailable` (+ `Retry-After`) while one
//! reviewed a moment ago still reads (the cache). A gateway whose own ServiceAccount may not
//! create TokenReviews answers `503` too, never `200`.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ankusa_testkit::brokers::{rabbit_teardown, rabbit_topology};
use ankusa_testkit::controlplane::ControlPlane;
use common::*;
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};

const RABBIT: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const NS: &str = "claims";
const AUDIENCE: &str = "ankusa-claims";

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(ankusa_testkit::kubectl_bin())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "kubectl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The control plane's `env` file (`ANKUSA_CP_*`).
fn cp_env(cp: &ControlPlane) -> HashMap<String, String> {
    std::fs::read_to_string(cp.workdir().join("env"))
        .expect("the control plane's env file")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

async fn status(c: &reqwest::Client, g: &Gateway, path: &str, token: &str) -> (u16, Vec<u8>) {
    let r = c
        .get(format!("http://{}{path}", g.claims))
        .bearer_auth(token)
        .send()
        .await
        .expect("claim port");
    let code = r.status().as_u16();
    let retry_after = r.headers().get("retry-after").cloned();
    let body = r.bytes().await.unwrap().to_vec();
    if code == 503 {
        assert_eq!(
            retry_after.as_ref().map(|v| v.to_str().unwrap()),
            Some("5"),
            "{}",
            String::from_utf8_lossy(&body)
        );
    }
    (code, body)
}

#[test]
fn service_account_tokens_read_the_tenants_their_entry_gives() {
    if !ankusa_testkit::control_plane_available("claim_token_review") {
        return;
    }
    let _serial = ankusa_testkit::serial();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(scenario());
}

async fn scenario() {
    let dir = tempfile::tempdir().unwrap();
    let mut cp = ControlPlane::start(&dir.path().join("cp")).expect("the control plane");
    let env = cp_env(&cp);
    let kc = cp.kubeconfig().to_path_buf();
    kubectl(&kc, &["create", "namespace", NS]);
    for sa in [
        "gateway",
        "lonely-gateway",
        "reader-acme",
        "reader-all",
        "outsider",
    ] {
        kubectl(&kc, &["-n", NS, "create", "serviceaccount", sa]);
    }
    kubectl(
        &kc,
        &[
            "create",
            "clusterrolebinding",
            "claims-gateway-auth-delegator",
            "--clusterrole=system:auth-delegator",
            &format!("--serviceaccount={NS}:gateway"),
        ],
    );
    let token = |sa: &str, audience: Option<&str>, duration: &str| {
        let duration = format!("--duration={duration}");
        let mut args = vec!["-n", NS, "create", "token", sa, duration.as_str()];
        if let Some(a) = audience {
            args.extend(["--audience", a]);
        }
        kubectl(&kc, &args)
    };
    // The gateway's own credential: a token for the API server (its default audience).
    let gw_token = dir.path().join("gateway.token");
    std::fs::write(&gw_token, token("gateway", None, "1h")).unwrap();
    let acme = token("reader-acme", Some(AUDIENCE), "1h");
    let all = token("reader-all", Some(AUDIENCE), "1h");
    let outsider = token("outsider", Some(AUDIENCE), "1h");
    let api_audience = token("reader-acme", None, "1h");
    // Another lifetime: not the same JWT as `all` minted in the same second.
    let late = token("reader-all", Some(AUDIENCE), "2h");
    assert_ne!(late, all);

    let conn = Connection::connect(RABBIT, ConnectionProperties::default())
        .await
        .expect("RabbitMQ on 127.0.0.1:5672");
    let ch = conn.create_channel().await.unwrap();
    let suffix = uuid::Uuid::now_v7().simple().to_string();
    let (exchange, queue) = (format!("review-{suffix}"), format!("review-q-{suffix}"));
    rabbit_topology(&ch, &exchange, &queue, "ankusa.big", FieldTable::default())
        .await
        .unwrap();
    let review = |token_file: &Path| {
        format!(
            "  token_review:\n    audience: {AUDIENCE}\n    api_server: {}\n    ca_file: {}\n    token_file: {}\n    service_accounts:\n      - {{namespace: {NS}, name: reader-acme, tenants: [acme]}}\n      - {{namespace: {NS}, name: reader-all}}\n",
            env["ANKUSA_CP_APISERVER_URL"],
            env["ANKUSA_CP_CA"],
            token_file.display()
        )
    };
    let cfg = format!(
        "egress: {{allow_loopback: true}}\nclaim_check:\n{}sources:\n  big:\n    tenant: acme\n    sinks:\n      - {{type: rabbitmq, url: \"{RABBIT}\", exchange: {exchange}, inline_max_bytes: 4096}}\n  other:\n    tenant: beta\n    sinks:\n      - {{type: rabbitmq, url: \"{RABBIT}\", exchange: {exchange}, inline_max_bytes: 4096}}\n",
        review(&gw_token)
    );
    let g = Gateway::start(&cfg);
    let out = g.run_subcommand(&["check-config"]);
    assert!(out.status.success(), "{out:?}");
    let c = client();

    let body: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let acme_id = post_hook(&c, &g, "/webhooks/big", body.clone()).await;
    let beta_id = post_hook(&c, &g, "/webhooks/other", body.clone()).await;
    let path = |tenant: &str, id: &str| format!("/v1/claims/{tenant}/{}", id.replace('-', ""));
    let acme_claim = path("acme", &acme_id);
    let beta_claim = path("beta", &beta_id);

    // The claims are checked in when their deliveries run.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (a, _) = status(&c, &g, &acme_claim, &all).await;
        let (b, _) = status(&c, &g, &beta_claim, &all).await;
        if a == 200 && b == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "claims not redeemable: {a} {b}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let (code, bytes) = status(&c, &g, &acme_claim, &acme).await;
    assert_eq!(code, 200);
    assert_eq!(bytes, body);
    assert_eq!(
        status(&c, &g, &beta_claim, &acme).await.0,
        403,
        "acme's reader, beta's claim"
    );
    let missing = path("beta", &uuid::Uuid::now_v7().to_string());
    assert_eq!(
        status(&c, &g, &missing, &acme).await.0,
        403,
        "decided before the store"
    );
    assert_eq!(status(&c, &g, &beta_claim, &all).await.0, 200);
    assert_eq!(
        status(&c, &g, &acme_claim, &outsider).await.0,
        403,
        "not listed"
    );
    assert_eq!(
        status(&c, &g, &acme_claim, &api_audience).await.0,
        401,
        "another audience"
    );
    assert_eq!(status(&c, &g, &acme_claim, "a.b.c").await.0, 401);
    assert_eq!(status(&c, &g, &acme_claim, "not-a-jwt-at-all").await.0, 401);
    let r = c
        .get(format!("http://{}{acme_claim}", g.claims))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "no token");
    // Reviews asked of the API server, one per token (the cache answers repeats); the
    // non-JWTs were never sent.
    let m = g.metrics(&c).await;
    let reviews = |outcome: &str| {
        metric(
            &m,
            &format!("ankusa_claim_token_reviews_total{{outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(reviews("reader"), 2.0, "acme's and the every-tenant reader");
    assert_eq!(reviews("not_listed"), 1.0);
    assert_eq!(reviews("refused"), 2.0, "the API-audience token and a.b.c");
    assert_eq!(reviews("unavailable"), 0.0);

    // A gateway whose ServiceAccount may not create TokenReviews: 503, never a read.
    let lonely_token = dir.path().join("lonely.token");
    std::fs::write(&lonely_token, token("lonely-gateway", None, "1h")).unwrap();
    let lonely_cfg = format!(
        "claim_check:\n{}sources:\n  big:\n    tenant: acme\n    sinks: [{{type: log}}]\n",
        review(&lonely_token)
    );
    let lonely = Gateway::start(&lonely_cfg);
    let (code, body) = status(&c, &lonely, &acme_claim, &acme).await;
    assert_eq!(code, 503, "{}", String::from_utf8_lossy(&body));
    let e: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(e["error"], "auth_unavailable");
    drop(lonely);

    // The API server goes away: a token reviewed a moment ago still reads (cached); one never
    // reviewed cannot be checked.
    cp.stop();
    assert_eq!(status(&c, &g, &acme_claim, &acme).await.0, 200, "cached");
    let (code, body) = status(&c, &g, &acme_claim, &late).await;
    assert_eq!(code, 503, "{}", String::from_utf8_lossy(&body));
    let m = g.metrics(&c).await;
    assert_eq!(
        metric(
            &m,
            "ankusa_claim_token_reviews_total{outcome=\"unavailable\"}"
        ),
        1.0
    );
    rabbit_teardown(&ch, &exchange, &queue).await.ok();
}
