//! Issue 29, the operator's half of direct mode, on a real control plane (the
//! kube-controller-manager makes the Deployment's ReplicaSet and pods; the fake kubelet runs
//! each pod as a real `ankusa` process): a `mode: direct` Gateway runs as a Deployment with no
//! volume claim and one shared config file, its pods answer `201` only once the JetStream sink
//! holds the hook, a ReplayJob against it fails with `DirectGateway`, changing its mode is
//! refused (`DurabilityModeChangeRefused`, the Deployment untouched), `spec.autoscaling` gives a
//! HorizontalPodAutoscaler (removed with the field), and a Source deleted goes at once.

use super::*;

fn direct_gateway_yaml(h: &Harness, replicas: i32) -> String {
    gateway_yaml(h, replicas, None)
        + "  durability:\n    mode: direct\n    publishTimeoutMs: 3000\n    retryAfterS: 1\n"
}

fn nats_sink_yaml(subject: &str) -> String {
    resource_yaml(
        "Sink",
        "stream",
        &format!(
            "  type: nats\n  nats:\n    servers: [\"nats://127.0.0.1:4222\"]\n    subject: {subject}.orders\n"
        ),
    )
}

/// The Gateway's pods as `(name, ip)`, once `n` run with an IP.
async fn direct_pods(h: &Harness, n: usize) -> Vec<(String, String)> {
    eventually(
        &format!("{n} direct pods running"),
        Duration::from_secs(90),
        || async {
            let v = get_json(h, "pods").await;
            let pods: Vec<(String, String)> = v["items"]
                .as_array()?
                .iter()
                .filter(|p| p["metadata"]["labels"]["ankusa.dev/gateway"] == "gw")
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .filter_map(|p| {
                    Some((
                        p["metadata"]["name"].as_str()?.to_string(),
                        p["status"]["podIP"].as_str()?.to_string(),
                    ))
                })
                .collect();
            (pods.len() == n).then_some(pods)
        },
    )
    .await
}

/// POSTs a signed hook to `ip`; the status and the hook id of a `201`.
async fn post_direct(ip: &str, h: &Harness, body: &str) -> (u16, Option<String>) {
    let url = format!("http://{ip}:{}/webhooks/orders", h.http_port);
    let r = http()
        .post(&url)
        .header("content-type", "application/json")
        .header("x-hub-signature-256", sign::github(GH_OLD, body.as_bytes()))
        .body(body.to_string())
        .send()
        .await;
    match r {
        Ok(r) => {
            let code = r.status().as_u16();
            let v: Value = r.json().await.unwrap_or(Value::Null);
            (code, v["id"].as_str().map(String::from))
        }
        Err(e) => {
            eprintln!("[e2e] POST {url}: {e}");
            (0, None)
        }
    }
}

async fn condition_reason(h: &Harness, what: &str, type_: &str) -> Option<String> {
    let v = get_json(h, what).await;
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?["reason"]
        .as_str()
        .map(String::from)
}

async fn exists(h: &Harness, what: &str) -> bool {
    h.kubectl(&["get", what, "-o", "name", "--ignore-not-found"])
        .await
        .is_ok_and(|o| !o.trim().is_empty())
}

#[test]
fn n_direct_gateway_is_a_deployment_without_volumes() {
    scenario("direct", async |h| {
        let suffix = format!("{:08x}", fastrand::u32(..));
        let subject = format!("e2e-direct-{suffix}");
        let stream = format!("E2E_DIRECT_{suffix}");
        create_stream(&stream, &subject).await;
        let github = github_secret_yaml(&[("old", GH_OLD)]);
        let source = source_yaml("orders", &["old"], "stream");
        for doc in [
            github.as_str(),
            &direct_gateway_yaml(h, 2),
            &nats_sink_yaml(&subject),
            &source,
        ] {
            h.apply(doc).await.unwrap();
        }
        wait_ready(h, "gateway/gw", "180s").await;
        wait_ready(h, "source/orders", "60s").await;

        // 1. A Deployment, no StatefulSet, no volume claim; one shared config file, wal none.
        let d = get_json(h, "deployment/gw").await;
        assert_eq!(d["metadata"]["ownerReferences"][0]["kind"], "Gateway");
        assert_eq!(d["spec"]["replicas"], 2);
        assert!(!exists(h, "statefulset/gw").await, "no StatefulSet");
        let pvcs = h.kubectl(&["get", "pvc", "-o", "name"]).await.unwrap();
        assert!(pvcs.trim().is_empty(), "no volume claims: {pvcs}");
        let secret = get_json(h, "secret/gw-config").await;
        let keys: Vec<&String> = secret["data"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["gw.yaml"], "one shared file");
        let yaml = String::from_utf8(
            base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                secret["data"]["gw.yaml"].as_str().unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let c = ankusa_config::from_rendered_yaml(&yaml).expect("a config the gateway reads");
        assert_eq!(c.wal.wal_type, ankusa_config::WalType::None);
        assert_eq!((c.wal.publish_timeout_ms, c.wal.retry_after_s), (3000, 1));
        assert!(
            !c.claim_check.enabled,
            "claims off on an emptyDir by default"
        );
        let gw = get_json(h, "gateway/gw").await;
        assert_eq!(gw["status"]["programmedReplicas"], 2, "{}", gw["status"]);

        // 2. Each pod takes hooks: every 201's id is in the stream the instant it is answered.
        let pods = direct_pods(h, 2).await;
        let mut acked = BTreeSet::new();
        for i in 0..20 {
            let (ip_pod, ip) = &pods[i % 2];
            let (code, id) = post_direct(ip, h, &format!(r#"{{"order":{i}}}"#)).await;
            assert_eq!(code, 201, "pod {ip_pod}");
            let id = id.expect("the 201's id");
            let held = ankusa_testkit::scenario::stream_msg_ids("127.0.0.1:4222", &stream)
                .await
                .unwrap();
            assert!(
                held.contains(&id),
                "{id} in the stream when its 201 arrived"
            );
            acked.insert(id);
        }
        let held: BTreeSet<String> =
            ankusa_testkit::scenario::stream_msg_ids("127.0.0.1:4222", &stream)
                .await
                .unwrap()
                .into_iter()
                .collect();
        assert_eq!(held, acked, "exactly the acked hooks, once each");

        // 3. A ReplayJob against it fails at once, saying why.
        h.apply(&replay_yaml("again", 100)).await.unwrap();
        let reason = eventually("the ReplayJob refused", Duration::from_secs(30), || async {
            let v = get_json(h, "replayjob/again").await;
            (v["status"]["phase"] == "Failed").then_some(())?;
            condition_reason(h, "replayjob/again", "Ready").await
        })
        .await;
        assert_eq!(reason, "DirectGateway");

        // 4. A mode change is refused; the Deployment and its pods are left as they are.
        let uid = d["metadata"]["uid"].clone();
        merge_patch_gw(
            h,
            r#"{"spec":{"durability":{"mode":"disk","publishTimeoutMs":null,"retryAfterS":null}}}"#,
        )
        .await
        .unwrap();
        eventually(
            "DurabilityModeChangeRefused",
            Duration::from_secs(30),
            || async {
                (condition_reason(h, "gateway/gw", "Degraded")
                    .await
                    .as_deref()
                    == Some("DurabilityModeChangeRefused"))
                .then_some(())
            },
        )
        .await;
        assert!(!exists(h, "statefulset/gw").await, "no StatefulSet made");
        assert_eq!(get_json(h, "deployment/gw").await["metadata"]["uid"], uid);
        let events = events_where(h, "reason=DurabilityModeChangeRefused").await;
        assert!(events.contains("cannot change in place"), "{events}");
        merge_patch_gw(h, r#"{"spec":{"durability":{"mode":"direct"}}}"#)
            .await
            .unwrap();
        wait_ready(h, "gateway/gw", "60s").await;

        // 5. Autoscaling: a HorizontalPodAutoscaler over the Deployment, gone with the field.
        merge_patch_gw(
            h,
            r#"{"spec":{"autoscaling":{"minReplicas":2,"maxReplicas":4,"targetCPUUtilizationPercentage":60}}}"#,
        )
        .await
        .unwrap();
        let hpa = eventually("the autoscaler", Duration::from_secs(30), || async {
            exists(h, "hpa/gw").await.then_some(())?;
            Some(get_json(h, "hpa/gw").await)
        })
        .await;
        assert_eq!(hpa["spec"]["scaleTargetRef"]["kind"], "Deployment");
        assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "gw");
        assert_eq!(hpa["spec"]["maxReplicas"], 4);
        assert_eq!(hpa["spec"]["targetCPUUtilizationPercentage"], 60);
        merge_patch_gw(h, r#"{"spec":{"autoscaling":null}}"#)
            .await
            .unwrap();
        eventually(
            "the autoscaler removed",
            Duration::from_secs(30),
            || async { (!exists(h, "hpa/gw").await).then_some(()) },
        )
        .await;

        // 6. A deleted Source goes at once: nothing is queued on a direct pod.
        let t0 = Instant::now();
        h.kubectl(&["delete", "source/orders", "--timeout=30s"])
            .await
            .unwrap();
        eprintln!(
            "[e2e] direct Source deleted in {:.1}s",
            t0.elapsed().as_secs_f64()
        );
    });
}
