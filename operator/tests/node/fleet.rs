//! Scenario j of the real-node suite (issue 31): the Gateway `webhooks` is one fleet. A Source
//! with a dedupe key (Standard Webhooks' `webhook-id`); every event is sent once through the
//! Gateway's Service and once straight to a pod: both answers carry one id. Then
//! `kubectl scale gateway/webhooks --replicas 4`: the operator renders four members and the
//! handover, and a third copy of every event through the Service — now also reaching the new
//! pod and the keys it took over — is answered with its first id. Every hook reaches the
//! receiver; none under a second id. The Gateway is scaled back to three at the end.

use super::*;

const FLEET_SECRET: &str = "whsec_ZmxlZXQtc291cmNlLXNlY3JldC1vZi10aGUtbm9kZS1zdWl0ZQ==";
const EVENTS: usize = 240;

fn fleet_source_yaml() -> String {
    verified_source_yaml(
        "fleet",
        &[("key", FLEET_SECRET)],
        &["key"],
        "  dedupe:\n    preset: standard_webhooks\n",
    )
}

/// One signed POST of event `n` to `host` (a pod or the Service): `(status, body)`.
async fn send(http: &reqwest::Client, host: &str, n: usize) -> (u16, Value) {
    let body = format!("{{\"event\":{n}}}");
    let mut req = http
        .post(format!("http://{host}:4000/webhooks/fleet"))
        .header("content-type", "application/json")
        .body(body.clone());
    for (k, v) in standard_webhooks(FLEET_SECRET, &format!("evt_{n}"), &body) {
        req = req.header(k, v);
    }
    match req.send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            (status, r.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

/// Event `n` to `host` until it is answered `201` (a `503` while an owner is away is retried,
/// as a provider does): its id.
async fn send_until_201(http: &reqwest::Client, host: &str, n: usize) -> (String, bool) {
    for _ in 0..60 {
        let (status, body) = send(http, host, n).await;
        if status == 201 {
            let id = body["id"].as_str().unwrap_or_default().to_string();
            return (id, body["duplicate"] == Value::Bool(true));
        }
        assert!(
            status == 0 || status == 503,
            "event {n} to {host}: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("event {n} to {host}: no 201 in 30 s");
}

async fn service_ip(node: &RealNode) -> String {
    json(node, &["get", "service", GATEWAY, "-n", NS]).await["spec"]["clusterIP"]
        .as_str()
        .expect("the Service's ClusterIP")
        .to_string()
}

async fn pods_ready(node: &RealNode, n: usize) -> Vec<String> {
    eventually(
        &format!("{n} gateway pods Ready"),
        Duration::from_secs(240),
        || async {
            let pods = gateway_pods(node).await;
            let v = json(node, &["get", "pods", "-n", NS, "-l", GW_SELECTOR]).await;
            let ready = v["items"]
                .as_array()?
                .iter()
                .filter(|p| pod_is_ready(p))
                .count();
            (pods.len() == n && ready == n)
                .then(|| pods.values().map(|(_, _, ip, _)| ip.clone()).collect())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

pub(super) async fn fleet_drill(
    node: &RealNode,
    receiver_ip: &str,
    report: &mut BTreeMap<&str, Value>,
) {
    node.kubectl_stdin(&["apply", "-n", NS, "-f", "-"], &fleet_source_yaml())
        .await
        .expect("fleet source");
    wait_ready(node, "source/fleet", Duration::from_secs(120)).await;
    let http = http();
    let svc = service_ip(node).await;
    let pods = pods_ready(node, 3).await;

    // Once through the Service, once straight to a pod: one id.
    let mut ids: BTreeMap<usize, String> = BTreeMap::new();
    for n in 0..EVENTS {
        let (a, _) = send_until_201(&http, &svc, n).await;
        let (b, dup) = send_until_201(&http, &pods[n % pods.len()], n).await;
        assert_eq!(a, b, "event {n}: two ids for one event");
        assert!(dup, "event {n}: the second copy is not a duplicate");
        ids.insert(n, a);
    }
    let distinct: BTreeSet<String> = ids.values().cloned().collect();
    assert_eq!(distinct.len(), EVENTS, "an id given to two events");
    all_delivered(
        receiver_ip,
        &distinct,
        "j (3 pods)",
        Duration::from_secs(90),
    )
    .await;

    // kubectl scale: four members, the handover rendered, applied by reload.
    node.kubectl(&["scale", "-n", NS, "gateway/webhooks", "--replicas", "4"])
        .await
        .expect("kubectl scale");
    let pods = pods_ready(node, 4).await;
    wait_ready(node, "gateway/webhooks", Duration::from_secs(180)).await;
    let secret = node
        .kubectl(&["get", "secret", "-n", NS, "webhooks-config", "-o", "json"])
        .await
        .expect("config Secret");
    let cfg: Value = serde_json::from_str(&secret).expect("Secret JSON");
    let pod3 = STANDARD
        .decode(
            cfg["data"]["webhooks-3.yaml"]
                .as_str()
                .expect("webhooks-3.yaml"),
        )
        .expect("base64");
    let pod3 = String::from_utf8(pod3).expect("utf-8");
    assert!(
        pod3.contains("webhooks-3: https://webhooks-3.webhooks-pods.shop.svc:4004"),
        "{pod3}"
    );
    assert!(pod3.contains("handover_until:"), "{pod3}");

    // A third copy of every event through the Service, and one to the new pod: the first id.
    for n in 0..EVENTS {
        let (id, dup) = send_until_201(&http, &svc, n).await;
        assert_eq!(id, ids[&n], "event {n}: a second id after the scale");
        assert!(dup);
        if n % 4 == 3 {
            let (id, dup) = send_until_201(&http, &pods[3], n).await;
            assert_eq!(id, ids[&n], "event {n} on the new pod: a second id");
            assert!(dup);
        }
    }
    // New events over four pods: one id each.
    for n in EVENTS..EVENTS + 80 {
        let (a, _) = send_until_201(&http, &pods[n % 4], n).await;
        let (b, dup) = send_until_201(&http, &svc, n).await;
        assert_eq!(a, b, "event {n}: two ids after the scale");
        assert!(dup);
        ids.insert(n, a);
    }
    let distinct: BTreeSet<String> = ids.values().cloned().collect();
    assert_eq!(distinct.len(), EVENTS + 80);
    all_delivered(
        receiver_ip,
        &distinct,
        "j (4 pods)",
        Duration::from_secs(90),
    )
    .await;
    report.insert("j_events", (EVENTS + 80).into());

    node.kubectl(&["scale", "-n", NS, "gateway/webhooks", "--replicas", "3"])
        .await
        .expect("kubectl scale back");
    pods_ready(node, 3).await;
    wait_ready(node, "gateway/webhooks", Duration::from_secs(180)).await;
    node.kubectl(&["delete", "source", "fleet", "-n", NS])
        .await
        .expect("delete the fleet source");
}
