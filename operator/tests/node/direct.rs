//! Scenario i of the real-node suite (issue 29): a second Gateway, `direct`, in
//! `durability.mode: direct` publishing to a JetStream stream on the drill's nats-server. It
//! runs as a Deployment (no StatefulSet, no volume claim), takes hooks on both pods through the
//! pod network, and a pod deleted under load loses nothing: every hook answered `201` is in
//! the stream. The Gateway is deleted at the end so the upgrade scenario after it sees only
//! `webhooks`.

use super::*;

const DIRECT: &str = "direct";
const DIRECT_SECRET: &str = "whsec_ZGlyZWN0LXNvdXJjZS1zZWNyZXQtb2YtdGhlLXN1aXRl";

fn direct_world_yaml() -> String {
    let base = std::fs::read_to_string(example("01-gateway.yaml")).expect("example gateway");
    let gateway = base
        .replace("name: webhooks", &format!("name: {DIRECT}"))
        .replace("replicas: 3", "replicas: 2")
        .replace(
            "  settings:\n",
            "  durability:\n    mode: direct\n    publishTimeoutMs: 5000\n  settings:\n",
        );
    format!(
        r#"{gateway}    egress:
      allow_cidrs: ["10.250.0.0/24"]
---
apiVersion: ankusa.dev/v1alpha1
kind: Sink
metadata:
  name: stream
spec:
  type: nats
  nats:
    servers: ["nats://{BRIDGE_IP}:{DRILL_NATS_PORT}"]
    subject: direct.orders
---
apiVersion: v1
kind: Secret
metadata:
  name: direct-verify
  labels:
    ankusa.dev/usable: "true"
stringData:
  key: {DIRECT_SECRET}
---
apiVersion: ankusa.dev/v1alpha1
kind: Source
metadata:
  name: direct-orders
spec:
  gatewayRef:
    name: {DIRECT}
  verify:
    type: standard_webhooks
    secretRefs:
    - name: direct-verify
      key: key
  sinks:
  - name: stream
"#
    )
}

/// The direct Gateway's pods: name → (uid, pod IP), those not being deleted.
async fn direct_pods(node: &RealNode) -> BTreeMap<String, (String, String)> {
    let v = json(
        node,
        &[
            "get",
            "pods",
            "-n",
            NS,
            "-l",
            "app.kubernetes.io/instance=direct",
        ],
    )
    .await;
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && pod_is_ready(p))
        .filter_map(|p| {
            Some((
                p["metadata"]["name"].as_str()?.to_string(),
                (
                    p["metadata"]["uid"].as_str()?.to_string(),
                    p["status"]["podIP"].as_str()?.to_string(),
                ),
            ))
        })
        .collect()
}

/// Posts to every ready direct pod in turn until `stop`; the ids answered `201`, and how many
/// answers were `503` (a pod going away, or the deadline).
async fn direct_load(node: &RealNode, stop: &AtomicBool) -> (Vec<String>, u64) {
    let client = http();
    let mut acked = Vec::new();
    let mut unavailable = 0;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let pods = direct_pods(node).await;
        for (_, ip) in pods.values() {
            n += 1;
            let body = format!(r#"{{"direct":{n}}}"#);
            match post_signed(&client, ip, "direct-orders", DIRECT_SECRET, &body).await {
                Ok(Ok(id)) => acked.push(id),
                Ok(Err(503)) => unavailable += 1,
                Ok(Err(s)) => panic!("direct pod {ip} answered {s}"),
                // The pod went away mid-request: nothing was promised.
                Err(_) => {}
            }
        }
    }
    (acked, unavailable)
}

pub(super) async fn direct_drill(node: &RealNode, report: &mut BTreeMap<&str, Value>) {
    let nats = format!("{BRIDGE_IP}:{DRILL_NATS_PORT}");
    create_stream_at(&nats, "DIRECT", "direct").await;
    node.kubectl_stdin(&["apply", "-n", NS, "-f", "-"], &direct_world_yaml())
        .await
        .expect("apply the direct Gateway");
    wait_ready(node, "gateway/direct", Duration::from_secs(240)).await;
    wait_ready(node, "source/direct-orders", Duration::from_secs(60)).await;
    node.kubectl(&["get", "deployment", DIRECT, "-n", NS])
        .await
        .expect("a Deployment");
    assert!(
        node.kubectl(&["get", "statefulset", DIRECT, "-n", NS])
            .await
            .is_err(),
        "no StatefulSet for a direct Gateway"
    );
    let pvcs = json(
        node,
        &[
            "get",
            "pvc",
            "-n",
            NS,
            "-l",
            "app.kubernetes.io/instance=direct",
        ],
    )
    .await;
    assert_eq!(pvcs["items"].as_array().map(Vec::len), Some(0), "no PVC");
    let before = direct_pods(node).await;
    assert_eq!(before.len(), 2, "{before:?}");

    // Load on both pods; one is deleted under it and the Deployment replaces it.
    let stop = AtomicBool::new(false);
    let victim = before.keys().next().cloned().expect("a pod");
    let killer = async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        node.kubectl(&["delete", "pod", &victim, "-n", NS, "--wait=false"])
            .await
            .expect("delete a direct pod");
        eventually(
            "the deleted direct pod replaced",
            Duration::from_secs(180),
            || async {
                let now = direct_pods(node).await;
                (now.len() == 2 && !now.contains_key(&victim)).then_some(())
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        tokio::time::sleep(Duration::from_secs(3)).await;
        stop.store(true, Ordering::Relaxed);
    };
    let ((acked, unavailable), ()) = tokio::join!(direct_load(node, &stop), killer);
    let held: BTreeSet<String> = ankusa_testkit::scenario::stream_msg_ids(&nats, "DIRECT")
        .await
        .expect("read the stream back")
        .into_iter()
        .collect();
    let missing: Vec<&String> = acked.iter().filter(|id| !held.contains(*id)).collect();
    eprintln!(
        "[node] i: direct Gateway: {} acked, {} answered 503, {} in the stream, {} acked missing",
        acked.len(),
        unavailable,
        held.len(),
        missing.len()
    );
    assert!(acked.len() > 50, "load ran: {} acked", acked.len());
    assert!(
        missing.is_empty(),
        "acked but not in the stream: {missing:?}"
    );
    report.insert("i_direct_acked", acked.len().into());
    report.insert("i_direct_missing", missing.len().into());

    // Nothing is queued on a direct pod: its Source goes at once.
    let t_del = Instant::now();
    node.kubectl(&[
        "delete",
        "source",
        "direct-orders",
        "-n",
        NS,
        "--timeout=60s",
    ])
    .await
    .expect("delete the direct Source");
    report.insert("i_source_delete_s", secs(t_del.elapsed()).into());
    node.kubectl(&[
        "delete",
        "gateway",
        DIRECT,
        "-n",
        NS,
        "--wait=true",
        "--timeout=120s",
    ])
    .await
    .expect("delete the direct Gateway");
    eventually("the direct pods gone", Duration::from_secs(120), || async {
        direct_pods(node).await.is_empty().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}
