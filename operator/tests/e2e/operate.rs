//! Issue 28 on a real control plane (1.20: PodDisruptionBudgets at `policy/v1beta1` only): the
//! PodDisruptionBudget each Gateway gets (`maxUnavailable: 1`, shown by `kubectl get pdb`, a
//! change applied, deleted when switched off); the scrape Secret (a token kept across
//! reconciles, the admin CA bundle) whose token every pod runs with scope `metrics:read` only
//! (the pod answers it `403` on `/v1/status`); and `spec.monitoring.serviceMonitor`: without
//! the Prometheus Operator's CRD the Gateway says `PrometheusOperatorMissing` and stays Ready,
//! with a minimal ServiceMonitor CRD installed the operator applies a ServiceMonitor scraping
//! the admin port over TLS with the scrape Secret's CA and token.

use super::*;

fn b64_decode(s: &str) -> String {
    use base64::Engine;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .expect("base64"),
    )
    .expect("utf-8")
}

/// Key `key` of Secret `name`, decoded; `None` while absent.
async fn secret_key(h: &Harness, name: &str, key: &str) -> Option<String> {
    let out = h
        .kubectl(&["get", "secret", name, "-o", "json", "--ignore-not-found"])
        .await
        .ok()?;
    let v: Value = serde_json::from_str(&out).ok()?;
    v["data"][key].as_str().map(b64_decode)
}

/// `(token, scopes)` of each `admin.tokens` entry of pod `gw-<pod>`'s rendered config.
async fn pod_tokens(h: &Harness, pod: u8) -> Vec<(String, Vec<String>)> {
    let yaml = secret_key(h, "gw-config", &format!("gw-{pod}.yaml"))
        .await
        .expect("the pod's config file");
    let c = ankusa_operator::render::parse_rendered(&yaml).expect("a config the gateway loads");
    c.admin
        .tokens
        .iter()
        .map(|t| (t.token.clone(), t.scopes.clone()))
        .collect()
}

/// The PodDisruptionBudget `gw` as JSON, once it exists.
async fn pdb(h: &Harness) -> Option<Value> {
    let out = h
        .kubectl(&["get", "pdb", "gw", "-o", "json", "--ignore-not-found"])
        .await
        .ok()?;
    serde_json::from_str(&out).ok()
}

/// The Gateway's condition `type_` as (status, reason, message).
async fn gw_condition(h: &Harness, type_: &str) -> Option<(String, String, String)> {
    let gw = get_json(h, "gateway/gw").await;
    let c = gw["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?
        .clone();
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
        c["message"].as_str().unwrap_or_default().to_string(),
    ))
}

/// `GET /v1/status` on pod 0's admin API with `token`; the status code.
async fn status_code_with(h: &Harness, token: &str) -> u16 {
    let ca = secret_key(h, "gw-scrape", "ca.crt")
        .await
        .expect("the scrape Secret's CA");
    let host = format!("gw-0.gw-pods.{}.svc", h.ns);
    let ip: std::net::IpAddr = h.pod_ip("gw", 0).parse().unwrap();
    let client =
        ankusa_testkit::admin_client(&ca, &host, std::net::SocketAddr::new(ip, h.admin_port))
            .unwrap();
    let url = format!("https://{host}:{}/v1/status", h.admin_port);
    client
        .get(&url)
        .bearer_auth(token)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

#[test]
fn m_pdb_scrape_secret_and_service_monitor() {
    scenario("operate", async |h| {
        h.apply(&gateway_yaml(h, 2, None)).await.unwrap();
        wait_ready(h, "gateway/gw", "180s").await;

        // The PodDisruptionBudget: maxUnavailable 1 over the StatefulSet's pods, owned.
        let p = eventually("PodDisruptionBudget gw", Duration::from_secs(30), || pdb(h)).await;
        assert_eq!(
            p["apiVersion"], "policy/v1beta1",
            "the version a 1.20 server serves"
        );
        assert_eq!(p["spec"]["maxUnavailable"], 1);
        let sts = get_json(h, "statefulset/gw").await;
        assert_eq!(p["spec"]["selector"], sts["spec"]["selector"]);
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "Gateway");
        assert_eq!(p["metadata"]["ownerReferences"][0]["controller"], true);
        let listed = h.kubectl(&["get", "pdb"]).await.unwrap();
        eprintln!("$ kubectl get pdb\n{listed}");
        let row = listed
            .lines()
            .find(|l| l.starts_with("gw "))
            .unwrap_or_else(|| panic!("no row for gw in:\n{listed}"));
        assert!(row.split_whitespace().any(|c| c == "1"), "{row}");

        // A changed maxUnavailable is applied.
        merge_patch_gw(h, r#"{"spec":{"disruption":{"maxUnavailable":"50%"}}}"#)
            .await
            .unwrap();
        eventually("maxUnavailable 50%", Duration::from_secs(30), || async {
            pdb(h)
                .await
                .filter(|p| p["spec"]["maxUnavailable"] == "50%")
        })
        .await;

        // The scrape Secret: a token and the admin CA bundle that verifies the pods.
        let token = eventually("the scrape token", Duration::from_secs(30), || {
            secret_key(h, "gw-scrape", "token")
        })
        .await;
        assert_eq!(token.len(), 64, "256 bits as hex");
        let ca = secret_key(h, "gw-scrape", "ca.crt").await.unwrap();
        assert_eq!(
            Some(ca),
            secret_key(h, "gw-admin-tls", "ca.crt").await,
            "the bundle the pods' certificate verifies against"
        );
        // Every pod's config holds it, with metrics:read only.
        for pod in 0..2 {
            let tokens = pod_tokens(h, pod).await;
            let scrape: Vec<&Vec<String>> = tokens
                .iter()
                .filter(|(t, _)| *t == token)
                .map(|(_, s)| s)
                .collect();
            assert_eq!(scrape, [&vec!["metrics:read".to_string()]], "gw-{pod}");
        }
        // The pod runs it: known (not 401) but granted nothing of /v1 (403).
        eventually(
            "the pod knows the scrape token",
            Duration::from_secs(30),
            || async { (status_code_with(h, &token).await == 403).then_some(()) },
        )
        .await;

        // Without the Prometheus Operator's CRDs: a condition, not a failed reconcile.
        merge_patch_gw(
            h,
            r#"{"spec":{"monitoring":{"serviceMonitor":{"enabled":true,"interval":"15s","labels":{"release":"prom"}}}}}"#,
        )
        .await
        .unwrap();
        let (status, _, msg) = eventually(
            "PrometheusOperatorMissing",
            Duration::from_secs(30),
            || async {
                gw_condition(h, "MonitoringReady")
                    .await
                    .filter(|c| c.1 == "PrometheusOperatorMissing")
            },
        )
        .await;
        assert_eq!(status, "False");
        assert!(msg.contains("ServiceMonitor"), "{msg}");
        wait_ready(h, "gateway/gw", "60s").await;

        // With a (minimal) ServiceMonitor CRD: the operator applies one.
        let crd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/servicemonitor-crd.yaml");
        h.kubectl_global(&["apply", "-f", &crd.display().to_string()])
            .await
            .unwrap();
        h.kubectl_global(&[
            "wait",
            "--for=condition=Established",
            "crd/servicemonitors.monitoring.coreos.com",
            "--timeout=60s",
        ])
        .await
        .unwrap();
        let sm = eventually("ServiceMonitor gw", Duration::from_secs(60), || async {
            let out = h
                .kubectl(&[
                    "get",
                    "servicemonitors.monitoring.coreos.com",
                    "gw",
                    "-o",
                    "json",
                    "--ignore-not-found",
                ])
                .await
                .ok()?;
            serde_json::from_str::<Value>(&out).ok()
        })
        .await;
        assert_eq!(sm["metadata"]["ownerReferences"][0]["kind"], "Gateway");
        assert_eq!(sm["metadata"]["labels"]["release"], "prom");
        let ep = &sm["spec"]["endpoints"][0];
        assert_eq!(ep["port"], "admin");
        assert_eq!(ep["path"], "/metrics");
        assert_eq!(ep["scheme"], "https");
        assert_eq!(ep["interval"], "15s");
        assert_eq!(ep["tlsConfig"]["ca"]["secret"]["name"], "gw-scrape");
        assert_eq!(ep["tlsConfig"]["ca"]["secret"]["key"], "ca.crt");
        assert_eq!(
            ep["tlsConfig"]["serverName"],
            format!("gw-pods.{}.svc", h.ns)
        );
        assert_eq!(ep["authorization"]["credentials"]["name"], "gw-scrape");
        assert_eq!(ep["authorization"]["credentials"]["key"], "token");
        let (_, reason, _) =
            eventually("MonitoringReady True", Duration::from_secs(60), || async {
                gw_condition(h, "MonitoringReady")
                    .await
                    .filter(|c| c.0 == "True")
            })
            .await;
        assert_eq!(reason, "Applied");

        // The token is kept across reconciles (each patch above ran several).
        assert_eq!(secret_key(h, "gw-scrape", "token").await, Some(token));

        // Switched off, the Gateway's own budget is deleted.
        merge_patch_gw(h, r#"{"spec":{"disruption":{"enabled":false}}}"#)
            .await
            .unwrap();
        eventually(
            "the PodDisruptionBudget gone",
            Duration::from_secs(30),
            || async { pdb(h).await.is_none().then_some(()) },
        )
        .await;
    });
}
