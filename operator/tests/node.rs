//! The real-node suite: Ankusa installed and run as a user runs it, on a one-node cluster with
//! a real kubelet and container runtime (`e2e/node`: kubelet 1.20 with dockershim on Docker,
//! kube-scheduler, kube-proxy, local PersistentVolumes), driven with `helm`, `kubectl` and
//! `docker` only. The images are built from this run's debug binaries with the script
//! `scripts/images` uses. One cluster, the scenarios of the issue in order:
//!
//! a. `helm install`; the operator Deployment Available, one replica holding the Lease; the
//!    manifests of `docs/examples/` applied: three gateway pods Ready through their probes,
//!    three PVCs Bound, the Gateway, Source and Sink Ready.
//! b. Signed hooks from the host to every gateway pod (through the pod network), delivered to a
//!    receiver pod that checks every Standard Webhooks signature.
//! c. Under that load, `kubectl delete pod` of one gateway pod and `docker kill` of another's
//!    container, while deliveries are held back so both pods hold acked, undelivered hooks:
//!    both come back on the same volume; nothing acked is lost.
//! d. Secret rotation by `kubectl apply` while hooks signed with the old and the new secret
//!    flow: no hook signed with a secret valid at send time is refused.
//! e. A sink outage dead-letters hooks on all three pods; a ReplayJob brings every one back.
//! g. `spec.durability` (dual on a JetStream intake log, backups to S3; both served on the
//!    bridge address by brokers of the test's own) rolls the pods; then, under load with
//!    deliveries held back, one gateway pod AND its PVC are deleted: it comes back on another
//!    PersistentVolume, restores its backup, replays the log, and every acked hook is
//!    delivered (missing 0).
//! f. `helm upgrade` rolls the operator (log level) and then the gateways (image), keeping the
//!    volumes; `helm uninstall` keeps the CRDs and the user's objects.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ankusa_testkit::node::{RealNode, eventually};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;
use sha2::Sha256;

const OP_NS: &str = "ankusa-system";
const NS: &str = "shop";
const RELEASE: &str = "ankusa";
const IMAGE: &str = "ghcr.io/ankusa/ankusa";
const RECEIVER_IMAGE: &str = "ankusa-e2e/receiver:test";
const GATEWAY: &str = "webhooks";
const GW_SELECTOR: &str = "app.kubernetes.io/instance=webhooks";
const RECEIVER_SECRET: &str = "whsec_cmVjZWl2ZXItc2lnbmluZy1rZXktZm9yLXRoZS1ub2RlLXN1aXRl";
const OLD: &str = "whsec_b2xkLXNvdXJjZS1zZWNyZXQtb2YtdGhlLW5vZGUtc3VpdGU=";
const NEW: &str = "whsec_bmV3LXNvdXJjZS1zZWNyZXQtb2YtdGhlLW5vZGUtc3VpdGU=";
const OUTAGE: &str = "whsec_b3V0YWdlLXNvdXJjZS1zZWNyZXQtb2YtdGhlLXN1aXRl";

fn chart() -> String {
    ankusa_testkit::repo_root()
        .join("charts/ankusa")
        .display()
        .to_string()
}

fn example(name: &str) -> String {
    ankusa_testkit::repo_root()
        .join("docs/examples")
        .join(name)
        .display()
        .to_string()
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 10.0).round() / 10.0
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .expect("http client")
}

/// `webhook-id`, `webhook-timestamp`, `webhook-signature` of a Standard Webhooks request.
fn standard_webhooks(secret: &str, id: &str, body: &str) -> [(&'static str, String); 3] {
    let key = STANDARD
        .decode(secret.trim_start_matches("whsec_"))
        .expect("whsec key");
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        .to_string();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("hmac key");
    mac.update(format!("{id}.{ts}.{body}").as_bytes());
    let sig = STANDARD.encode(mac.finalize().into_bytes());
    [
        ("webhook-id", id.to_string()),
        ("webhook-timestamp", ts),
        ("webhook-signature", format!("v1,{sig}")),
    ]
}

/// One POST of a signed hook; `Ok(Some(id))` on 201, `Ok(None)` on another answer with its
/// status in the error slot, `Err` on a transport error.
async fn post_signed(
    http: &reqwest::Client,
    ip: &str,
    source: &str,
    secret: &str,
    body: &str,
) -> Result<Result<String, u16>, reqwest::Error> {
    let msg_id = format!("msg_{:016x}", fastrand::u64(..));
    let mut req = http
        .post(format!("http://{ip}:4000/webhooks/{source}"))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in standard_webhooks(secret, &msg_id, body) {
        req = req.header(k, v);
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    if status != 201 {
        return Ok(Err(status));
    }
    let v: Value = resp.json().await?;
    Ok(v["id"].as_str().map(String::from).ok_or(status))
}

/// A hook the load generator got `201` for.
#[derive(Debug, Clone)]
struct Acked {
    pod: String,
    phase: &'static str,
}

/// A `401` the load generator got.
#[derive(Debug, Clone)]
struct Reject {
    pod: String,
    secret: &'static str,
    at: Instant,
}

/// The load generator: one task per gateway pod, signing with the current secret, following
/// the pods' IPs as they are replaced.
#[derive(Default)]
struct Load {
    stop: AtomicBool,
    /// (label, secret) the load signs with now.
    secret: Mutex<(&'static str, String)>,
    phase: Mutex<&'static str>,
    pods: Mutex<BTreeMap<String, String>>,
    acked: Mutex<BTreeMap<String, Acked>>,
    rejects: Mutex<Vec<Reject>>,
    sent: AtomicU64,
    other: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Load {
    fn set_secret(&self, label: &'static str, secret: &str) {
        *lock(&self.secret) = (label, secret.to_string());
    }

    fn set_phase(&self, phase: &'static str) {
        *lock(&self.phase) = phase;
    }

    fn acked(&self) -> BTreeMap<String, Acked> {
        lock(&self.acked).clone()
    }

    /// Sends to `pod` every `interval` until stopped.
    async fn run_pod(self: Arc<Self>, pod: String, interval: Duration) {
        let http = http();
        let mut n = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            let Some(ip) = lock(&self.pods).get(&pod).cloned() else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            n += 1;
            let (label, secret) = lock(&self.secret).clone();
            let phase = *lock(&self.phase);
            let body = format!(
                r#"{{"pod":"{pod}","n":{n},"phase":"{phase}","pad":"{}"}}"#,
                "x".repeat(200)
            );
            let at = Instant::now();
            self.sent.fetch_add(1, Ordering::Relaxed);
            match post_signed(&http, &ip, "loadtest", &secret, &body).await {
                Ok(Ok(id)) => {
                    lock(&self.acked).insert(
                        id,
                        Acked {
                            pod: pod.clone(),
                            phase,
                        },
                    );
                }
                Ok(Err(401)) => lock(&self.rejects).push(Reject {
                    pod: pod.clone(),
                    secret: label,
                    at,
                }),
                Ok(Err(_)) | Err(_) => {
                    // Refused connections while a pod restarts, 503 while it drains or starts:
                    // not acked, so not counted; a provider would retry.
                    self.other.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            tokio::time::sleep(interval.saturating_sub(at.elapsed())).await;
        }
    }

    /// Keeps `pods` current: Ready gateway pods that are not terminating, by name.
    async fn follow_pods(self: Arc<Self>, client: kube::Client) {
        let api: Api<Pod> = Api::namespaced(client, NS);
        while !self.stop.load(Ordering::Relaxed) {
            if let Ok(list) = api.list(&ListParams::default().labels(GW_SELECTOR)).await {
                let mut m = BTreeMap::new();
                for p in list {
                    if p.metadata.deletion_timestamp.is_some() {
                        continue;
                    }
                    let Some(st) = &p.status else { continue };
                    let ready = st
                        .conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Ready" && c.status == "True");
                    if let (true, Some(ip), Some(name)) =
                        (ready, st.pod_ip.clone(), p.metadata.name.clone())
                    {
                        m.insert(name, ip);
                    }
                }
                *lock(&self.pods) = m;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// The receiver pod's record: accepted deliveries per hook id, bad signatures.
struct ReceiverStats {
    delivered: BTreeMap<String, u64>,
    bad: Vec<String>,
}

async fn receiver_stats(ip: &str) -> anyhow::Result<ReceiverStats> {
    let v: Value = http()
        .get(format!("http://{ip}:8080/stats"))
        .send()
        .await?
        .json()
        .await?;
    Ok(ReceiverStats {
        delivered: v["delivered"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default(),
        bad: v["bad_signatures"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

async fn receiver_answer(ip: &str, code: u16) {
    let r = http()
        .put(format!("http://{ip}:8080/answer/{code}"))
        .send()
        .await
        .expect("receiver answer");
    assert!(r.status().is_success(), "receiver answer {code}");
}

/// Waits until every id of `ids` was delivered; panics naming what is missing.
async fn all_delivered(receiver_ip: &str, ids: &BTreeSet<String>, what: &str, timeout: Duration) {
    let t0 = Instant::now();
    let mut missing = ids.len();
    while t0.elapsed() < timeout {
        if let Ok(s) = receiver_stats(receiver_ip).await {
            missing = ids.iter().filter(|i| !s.delivered.contains_key(*i)).count();
            if missing == 0 {
                eprintln!(
                    "[node] {what}: all {} acked hooks delivered ({:.1}s)",
                    ids.len(),
                    t0.elapsed().as_secs_f64()
                );
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "{what}: {missing} of {} acked hooks never delivered",
        ids.len()
    );
}

/// A pod (as `kubectl get -o json` shows it) not terminating and `Ready`.
fn pod_is_ready(p: &Value) -> bool {
    p["metadata"]["deletionTimestamp"].is_null()
        && p["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The operator's pods (`kubectl get pods` in the operator's namespace).
async fn operator_pods_json(node: &RealNode) -> Value {
    json(
        node,
        &[
            "get",
            "pods",
            "-n",
            OP_NS,
            "-l",
            "app.kubernetes.io/name=ankusa-operator",
        ],
    )
    .await
}

/// `helm upgrade` of the release with its values and `--set set`.
async fn helm_upgrade(node: &RealNode, set: &str) {
    node.helm(&[
        "upgrade",
        RELEASE,
        &chart(),
        "--namespace",
        OP_NS,
        "--reuse-values",
        "--set",
        set,
    ])
    .await
    .unwrap_or_else(|e| panic!("helm upgrade --set {set}: {e}"));
}

/// `kubectl wait --for=condition=Ready` on `what` (with `--timeout=<secs>s`) in `NS`.
async fn kubectl_wait_ready(node: &RealNode, what: &[&str], timeout: Duration) {
    let timeout = format!("--timeout={}s", timeout.as_secs());
    let mut args = vec!["wait", "-n", NS, "--for=condition=Ready"];
    args.extend_from_slice(what);
    args.push(&timeout);
    node.kubectl(&args)
        .await
        .unwrap_or_else(|e| panic!("kubectl wait {what:?}: {e}"));
}

/// Starts the load on every gateway pod, and the task following the pods; their handles.
fn start_load(load: &Arc<Load>, client: &kube::Client) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = vec![tokio::spawn(load.clone().follow_pods(client.clone()))];
    for i in 0..3 {
        tasks.push(tokio::spawn(
            load.clone()
                .run_pod(format!("{GATEWAY}-{i}"), Duration::from_millis(25)),
        ));
    }
    tasks
}

async fn json(node: &RealNode, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    let out = node.kubectl(&a).await.unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&out).expect("kubectl json")
}

/// Gateway pods by name: (uid, restart count, IP, image).
async fn gateway_pods(node: &RealNode) -> BTreeMap<String, (String, i64, String, String)> {
    let v = json(node, &["get", "pods", "-n", NS, "-l", GW_SELECTOR]).await;
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                (
                    p["metadata"]["uid"].as_str().unwrap_or("").to_string(),
                    p["status"]["containerStatuses"][0]["restartCount"]
                        .as_i64()
                        .unwrap_or(0),
                    p["status"]["podIP"].as_str().unwrap_or("").to_string(),
                    p["spec"]["containers"][0]["image"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                ),
            )
        })
        .collect()
}

/// PVC name → bound PV name.
async fn volumes(node: &RealNode) -> BTreeMap<String, String> {
    let v = json(node, &["get", "pvc", "-n", NS]).await;
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["status"]["phase"] == "Bound")
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                p["spec"]["volumeName"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Waits until the Gateway's three pods run `image`, are Ready, and are not terminating.
async fn gateway_pods_ready(node: &RealNode, image: &str, timeout: Duration) {
    eventually(
        &format!("3 gateway pods Ready on {image}"),
        timeout,
        || async {
            let v = json(node, &["get", "pods", "-n", NS, "-l", GW_SELECTOR]).await;
            let items = v["items"].as_array()?;
            let ready = items
                .iter()
                .filter(|p| p["spec"]["containers"][0]["image"] == image)
                .filter(|p| pod_is_ready(p))
                .count();
            (items.len() == 3 && ready == 3).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// `kubectl wait --for=condition=Ready` on `what` once its Ready condition describes its
/// current generation (so an edit is waited for, not the state before it).
async fn wait_ready(node: &RealNode, what: &str, timeout: Duration) -> Duration {
    let t0 = Instant::now();
    eventually(
        &format!("{what} Ready at its generation"),
        timeout,
        || async {
            let v = json(node, &["get", what, "-n", NS]).await;
            let gen_ = v["metadata"]["generation"].as_i64()?;
            v["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| {
                    c["type"] == "Ready"
                        && c["status"] == "True"
                        && c["observedGeneration"].as_i64() == Some(gen_)
                })
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_wait_ready(node, &[what], timeout).await;
    t0.elapsed()
}

fn gateway_yaml(extra_settings: &str) -> String {
    // docs/examples/01-gateway.yaml as a user edits it: egress to the receiver pod's network
    // (private addresses are refused by default), and no circuit breaker, so the outage of
    // scenario e dead-letters within seconds instead of parking for the breaker's periods.
    let base = std::fs::read_to_string(example("01-gateway.yaml")).expect("example gateway");
    format!(
        "{base}    egress:\n      allow_http: true\n      allow_cidrs: [\"10.250.0.0/24\"]\n{extra_settings}"
    )
}

fn receiver_yaml() -> String {
    format!(
        r#"apiVersion: v1
kind: Secret
metadata:
  name: receiver-signing
  labels:
    ankusa.dev/usable: "true"
stringData:
  whsec: {RECEIVER_SECRET}
---
apiVersion: v1
kind: Pod
metadata:
  name: receiver
  labels: {{app: receiver}}
spec:
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile: {{type: RuntimeDefault}}
  containers:
  - name: receiver
    image: {RECEIVER_IMAGE}
    imagePullPolicy: IfNotPresent
    env:
    - name: RECEIVER_SECRETS
      valueFrom: {{secretKeyRef: {{name: receiver-signing, key: whsec}}}}
    ports: [{{name: http, containerPort: 8080}}]
    readinessProbe:
      httpGet: {{path: /health, port: http}}
      periodSeconds: 2
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {{drop: [ALL]}}
    resources:
      requests: {{cpu: 50m, memory: 32Mi}}
"#
    )
}

fn receiver_sink_yaml(ip: &str) -> String {
    format!(
        r#"apiVersion: ankusa.dev/v1alpha1
kind: Sink
metadata:
  name: receiver
spec:
  type: http
  options:
    url: http://{ip}:8080/hooks
    timeout_ms: 5000
  secretRefs:
    secret:
    - name: receiver-signing
      key: whsec
"#
    )
}

/// A Source `name` verifying Standard Webhooks with the keys `keys` (newest first) of its
/// Secret `<name>-verify`, which holds `secret_data`; `extra` spec lines (indented as spec
/// fields) come before its sinks; it delivers to the receiver.
fn verified_source_yaml(
    name: &str,
    secret_data: &[(&str, &str)],
    keys: &[&str],
    extra: &str,
) -> String {
    let data: String = secret_data
        .iter()
        .map(|(k, v)| format!("  {k}: {v}\n"))
        .collect();
    let refs: String = keys
        .iter()
        .map(|k| format!("    - name: {name}-verify\n      key: {k}\n"))
        .collect();
    format!(
        r#"apiVersion: v1
kind: Secret
metadata:
  name: {name}-verify
  labels:
    ankusa.dev/usable: "true"
stringData:
{data}---
apiVersion: ankusa.dev/v1alpha1
kind: Source
metadata:
  name: {name}
spec:
  gatewayRef:
    name: {GATEWAY}
  verify:
    type: standard_webhooks
    secretRefs:
{refs}{extra}  sinks:
  - name: receiver
"#
    )
}

/// The load source: verified with the Secret `loadtest-verify`'s keys `keys` (newest first).
fn loadtest_yaml(secret_data: &[(&str, &str)], keys: &[&str]) -> String {
    verified_source_yaml("loadtest", secret_data, keys, "")
}

/// The source of the outage scenario: two attempts, fast.
fn outage_yaml() -> String {
    verified_source_yaml(
        "outage",
        &[("key", OUTAGE)],
        &["key"],
        "  retry:\n    baseMs: 100\n    maxMs: 200\n    maxAttempts: 2\n",
    )
}

/// A key of a Secret in `NS`, as a user reads it with kubectl.
async fn secret_key(node: &RealNode, secret: &str, key: &str) -> String {
    let b64 = node
        .kubectl(&[
            "get",
            "secret",
            "-n",
            NS,
            secret,
            "-o",
            &format!("jsonpath={{.data.{}}}", key.replace('.', "\\.")),
        ])
        .await
        .unwrap_or_else(|e| panic!("Secret {secret}: {e}"));
    String::from_utf8(STANDARD.decode(b64.trim()).expect("base64")).expect("utf8")
}

/// The pods' admin token and the CA bundle their admin certificate chains to.
struct Admin {
    token: String,
    ca: String,
}

async fn admin(node: &RealNode) -> Admin {
    Admin {
        token: secret_key(node, "webhooks-admin-token", "token").await,
        ca: secret_key(node, "webhooks-admin-tls", "ca.crt").await,
    }
}

async fn dlq_total(ip: &str, admin: &Admin, source: &str) -> Option<i64> {
    let host = format!("webhooks-pods.{NS}.svc");
    let addr = std::net::SocketAddr::new(ip.parse().ok()?, 4002);
    let client = ankusa_testkit::admin_client(&admin.ca, &host, addr).ok()?;
    let v: Value = client
        .get(format!(
            "https://{host}:4002/v1/dlq?source_id={source}&limit=1000"
        ))
        .bearer_auth(&admin.token)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    v["total"].as_i64()
}

/// Seconds from each gateway pod's creation to its Ready condition.
async fn start_to_ready(node: &RealNode) -> Vec<i64> {
    let v = json(node, &["get", "pods", "-n", NS, "-l", GW_SELECTOR]).await;
    let ts = |s: &str| unix_seconds(s).unwrap_or(0);
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let created = ts(p["metadata"]["creationTimestamp"].as_str()?);
            let ready = p["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Ready")?;
            Some(ts(ready["lastTransitionTime"].as_str()?) - created)
        })
        .collect()
}

/// Seconds since the epoch of an RFC 3339 UTC timestamp as Kubernetes writes them
/// (`2026-12-01T05:00:00Z`).
fn unix_seconds(s: &str) -> Option<i64> {
    let (date, time) = s.trim_end_matches('Z').split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<i64> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let (y, m, day) = (d[0], d[1], d[2]);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2])
}

#[test]
fn real_node_install_load_kill_rotate_replay_upgrade() {
    if !ankusa_testkit::node::available("real-node suite") {
        return;
    }
    let _serial = ankusa_testkit::serial();
    ankusa_testkit::scenario::scenario_runtime(2).block_on(suite());
}

async fn suite() {
    let t_suite = Instant::now();
    let dir = std::env::temp_dir().join(format!("ankusa-node-{}", std::process::id()));
    let node = RealNode::start(&dir).unwrap_or_else(|e| panic!("{e:#}"));
    let client = node.client().await.expect("client");
    let mut report: BTreeMap<&str, Value> = BTreeMap::new();

    // ---- images, from this run's debug binaries ------------------------------------------
    let t0 = Instant::now();
    node.build_image(&format!("{IMAGE}:test"), &["ankusa", "ankusa-operator"])
        .await
        .expect("gateway image");
    node.build_image(RECEIVER_IMAGE, &["ankusa-e2e-receiver"])
        .await
        .expect("receiver image");
    report.insert("images_s", secs(t0.elapsed()).into());

    // ---- a. helm install, examples applied, pods Ready, PVCs Bound -----------------------
    let t_a = Instant::now();
    node.helm(&[
        "install",
        RELEASE,
        &chart(),
        "--namespace",
        OP_NS,
        "--create-namespace",
        "--set",
        "image.tag=test",
    ])
    .await
    .expect("helm install");
    node.kubectl(&[
        "wait",
        "-n",
        OP_NS,
        "--for=condition=Available",
        "deployment/ankusa-ankusa-operator",
        "--timeout=180s",
    ])
    .await
    .expect("operator Deployment Available");
    let operator_pods: BTreeSet<String> = operator_pods_json(&node).await["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect();
    assert_eq!(operator_pods.len(), 2, "two operator replicas");
    let holder = eventually(
        "the operator Lease held",
        Duration::from_secs(60),
        || async {
            let h = node
                .kubectl(&[
                    "get",
                    "lease",
                    "-n",
                    OP_NS,
                    "ankusa-ankusa-operator",
                    "-o",
                    "jsonpath={.spec.holderIdentity}",
                ])
                .await
                .ok()?;
            (!h.trim().is_empty()).then(|| h.trim().to_string())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        operator_pods.contains(&holder),
        "the Lease holder {holder} is one of {operator_pods:?}"
    );
    eprintln!("[node] operator Available; {holder} holds the Lease");

    node.kubectl(&["create", "namespace", NS])
        .await
        .expect("ns");
    eventually(
        "default ServiceAccount",
        Duration::from_secs(30),
        || async { node.kubectl(&["get", "sa", "default", "-n", NS]).await.ok() },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    for f in ["01-gateway.yaml", "02-sink.yaml", "03-source.yaml"] {
        node.kubectl(&["apply", "-n", NS, "-f", &example(f)])
            .await
            .unwrap_or_else(|e| panic!("apply {f}: {e}"));
    }
    eventually("3 gateway pods", Duration::from_secs(60), || async {
        (gateway_pods(&node).await.len() == 3).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    kubectl_wait_ready(&node, &["pod", "-l", GW_SELECTOR], Duration::from_secs(240)).await;
    let vols = volumes(&node).await;
    assert_eq!(vols.len(), 3, "three PVCs Bound: {vols:?}");
    for what in ["gateway/webhooks", "sink/orders-service", "source/github"] {
        wait_ready(&node, what, Duration::from_secs(120)).await;
    }
    let ready_s = start_to_ready(&node).await;
    eprintln!("[node] a: pods start→Ready {ready_s:?} s; PVCs {vols:?}");
    report.insert("a_pod_start_to_ready_s", ready_s.into());
    report.insert("a_s", secs(t_a.elapsed()).into());

    // ---- b. load through the pod network to a receiver pod -------------------------------
    let t_b = Instant::now();
    node.kubectl_stdin(&["apply", "-n", NS, "-f", "-"], &receiver_yaml())
        .await
        .expect("receiver");
    node.kubectl(&[
        "wait",
        "-n",
        NS,
        "--for=condition=Ready",
        "pod/receiver",
        "--timeout=120s",
    ])
    .await
    .expect("receiver Ready");
    let receiver_ip = json(&node, &["get", "pod", "receiver", "-n", NS]).await["status"]["podIP"]
        .as_str()
        .expect("receiver IP")
        .to_string();
    node.kubectl_stdin(
        &["apply", "-n", NS, "-f", "-"],
        &gateway_yaml("    dispatch:\n      breaker_failures: 0\n"),
    )
    .await
    .expect("gateway edit");
    wait_ready(&node, "gateway/webhooks", Duration::from_secs(120)).await;
    node.kubectl_stdin(
        &["apply", "-n", NS, "-f", "-"],
        &receiver_sink_yaml(&receiver_ip),
    )
    .await
    .expect("sink");
    node.kubectl_stdin(
        &["apply", "-n", NS, "-f", "-"],
        &loadtest_yaml(&[("current", OLD)], &["current"]),
    )
    .await
    .expect("source");
    wait_ready(&node, "sink/receiver", Duration::from_secs(120)).await;
    wait_ready(&node, "source/loadtest", Duration::from_secs(120)).await;

    let load = Arc::new(Load::default());
    load.set_secret("old", OLD);
    load.set_phase("b");
    let tasks = start_load(&load, &client);
    tokio::time::sleep(Duration::from_secs(15)).await;
    let acked_b: BTreeSet<String> = load.acked().into_keys().collect();
    assert!(acked_b.len() > 300, "load acked only {}", acked_b.len());
    all_delivered(&receiver_ip, &acked_b, "b", Duration::from_secs(60)).await;
    report.insert("b_acked", acked_b.len().into());
    report.insert("b_s", secs(t_b.elapsed()).into());

    // ---- c. delete one pod, docker kill another, with undelivered hooks on both ----------
    let t_c = Instant::now();
    load.set_phase("c");
    let before = gateway_pods(&node).await;
    let vols_before = volumes(&node).await;
    receiver_answer(&receiver_ip, 503).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let held: BTreeSet<String> = {
        let s = receiver_stats(&receiver_ip).await.expect("stats");
        load.acked()
            .into_iter()
            .filter(|(id, a)| {
                !s.delivered.contains_key(id) && (a.pod.ends_with("-1") || a.pod.ends_with("-2"))
            })
            .map(|(id, _)| id)
            .collect()
    };
    eprintln!(
        "[node] c: {} acked hooks undelivered on webhooks-1/2; deleting webhooks-1, docker kill webhooks-2",
        held.len()
    );
    assert!(held.len() > 20, "a backlog to lose: {}", held.len());
    let container = node
        .docker(&[
            "ps",
            "-q",
            "--filter",
            "label=io.kubernetes.pod.name=webhooks-2",
            "--filter",
            "label=io.kubernetes.container.name=gateway",
        ])
        .await
        .expect("docker ps");
    let container = container.trim().to_string();
    assert!(!container.is_empty(), "webhooks-2's gateway container");
    // The deleted pod's log, streamed through the kubelet until its container exits: the
    // gateway (PID 1 in the image) must drain on the kubelet's SIGTERM, not be killed.
    let mut log_follow = node
        .spawn_kubectl(&[
            "logs",
            "-f",
            "-n",
            NS,
            "webhooks-1",
            "-c",
            "gateway",
            "--since=5s",
        ])
        .expect("kubectl logs -f");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t_kill = Instant::now();
    let del_args = ["delete", "pod", "-n", NS, "webhooks-1"];
    let kill_args = ["kill", container.as_str()];
    let (del, kill) = tokio::join!(node.kubectl(&del_args), node.docker(&kill_args));
    del.expect("kubectl delete pod");
    kill.expect("docker kill");
    let mut last_words = String::new();
    if let Some(mut out) = log_follow.stdout.take() {
        use tokio::io::AsyncReadExt;
        let _ = tokio::time::timeout(Duration::from_secs(10), out.read_to_string(&mut last_words))
            .await;
    }
    let _ = log_follow.kill().await;
    assert!(
        last_words.contains("shutting down") && last_words.contains("stopped"),
        "webhooks-1 drained on SIGTERM and stopped cleanly; its last log lines:\n{last_words}"
    );
    receiver_answer(&receiver_ip, 200).await;
    eventually(
        "webhooks-1 recreated and webhooks-2 restarted, both Ready",
        Duration::from_secs(180),
        || async {
            let now = gateway_pods(&node).await;
            let recreated = now.get("webhooks-1")?.0 != before.get("webhooks-1")?.0;
            let restarted = now.get("webhooks-2")?.1 > before.get("webhooks-2")?.1;
            (recreated && restarted && lock(&load.pods).len() == 3).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let back = t_kill.elapsed();
    assert_eq!(
        volumes(&node).await,
        vols_before,
        "both came back on the same volumes"
    );
    all_delivered(
        &receiver_ip,
        &held,
        "c (backlog of the killed pods)",
        Duration::from_secs(120),
    )
    .await;
    eprintln!(
        "[node] c: both pods back and Ready {:.1}s after the kill",
        back.as_secs_f64()
    );
    report.insert("c_back_ready_s", secs(back).into());
    report.insert("c_backlog", held.len().into());
    report.insert("c_s", secs(t_c.elapsed()).into());

    // ---- d. secret rotation under load ----------------------------------------------------
    let t_d = Instant::now();
    load.set_phase("d");
    let http_client = http();
    let t_apply = Instant::now();
    node.kubectl_stdin(
        &["apply", "-n", NS, "-f", "-"],
        &loadtest_yaml(&[("current", OLD), ("next", NEW)], &["next", "current"]),
    )
    .await
    .expect("rotation: add");
    // Probes signed with the new secret, to every pod, until each accepts them.
    let mut accepted_at: BTreeMap<String, Duration> = BTreeMap::new();
    let mut probe_ids = BTreeSet::new();
    while accepted_at.len() < 3 {
        assert!(
            t_apply.elapsed() < Duration::from_secs(120),
            "new secret not verified on every pod: {accepted_at:?}"
        );
        let pods = lock(&load.pods).clone();
        for (pod, ip) in pods {
            if accepted_at.contains_key(&pod) {
                continue;
            }
            if let Ok(Ok(id)) =
                post_signed(&http_client, &ip, "loadtest", NEW, r#"{"probe":"new"}"#).await
            {
                accepted_at.insert(pod, t_apply.elapsed());
                probe_ids.insert(id);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rotation = accepted_at.values().max().copied().unwrap_or_default();
    eprintln!("[node] d: apply → every pod verifies the new secret: {accepted_at:?}");
    wait_ready(&node, "source/loadtest", Duration::from_secs(120)).await;
    let new_valid_from = Instant::now();
    load.set_secret("new", NEW);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let t_drop = Instant::now();
    node.kubectl_stdin(
        &["apply", "-n", NS, "-f", "-"],
        &loadtest_yaml(&[("current", OLD), ("next", NEW)], &["next"]),
    )
    .await
    .expect("rotation: drop");
    wait_ready(&node, "source/loadtest", Duration::from_secs(120)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The old secret is refused now on every pod.
    let pods = lock(&load.pods).clone();
    for (pod, ip) in pods {
        let r = post_signed(&http_client, &ip, "loadtest", OLD, r#"{"probe":"old"}"#).await;
        assert!(
            matches!(r, Ok(Err(401))),
            "{pod}: old secret after the drop: {r:?}"
        );
    }
    let bad: Vec<Reject> = lock(&load.rejects)
        .iter()
        .filter(|r| match r.secret {
            "old" => r.at < t_drop,
            _ => r.at >= new_valid_from,
        })
        .cloned()
        .collect();
    assert!(
        bad.is_empty(),
        "hooks signed with a valid secret refused: {:?}",
        bad.iter()
            .map(|r| format!("{} ({} secret)", r.pod, r.secret))
            .collect::<Vec<_>>()
    );
    // The kubelet swaps each pod's mounted config Secret too (a symlink swap); the gateway's
    // watcher sees it and finds the config it already runs (pushed by the operator).
    let mut swapped: BTreeMap<String, Duration> = BTreeMap::new();
    while swapped.len() < 3 {
        assert!(
            t_apply.elapsed() < Duration::from_secs(150),
            "the kubelet's Secret swap not seen by every gateway: {swapped:?}"
        );
        for i in 0..3 {
            let pod = format!("{GATEWAY}-{i}");
            if swapped.contains_key(&pod) {
                continue;
            }
            let since = format!("--since={}s", t_apply.elapsed().as_secs() + 2);
            let logs = node
                .kubectl(&["logs", "-n", NS, &pod, "-c", "gateway", &since])
                .await
                .unwrap_or_default();
            if logs.contains("config file changed") || logs.contains("trigger=\"file\"") {
                swapped.insert(pod, t_apply.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("[node] d: apply → the kubelet's volume swap seen by each gateway: {swapped:?}");
    report.insert(
        "d_apply_to_volume_swap_seen_s",
        secs(swapped.values().max().copied().unwrap_or_default()).into(),
    );
    report.insert("d_apply_to_all_pods_verify_new_s", secs(rotation).into());
    report.insert(
        "d_apply_to_source_ready_s",
        secs(new_valid_from.duration_since(t_apply)).into(),
    );
    report.insert("d_s", secs(t_d.elapsed()).into());

    // Load ends; everything it got 201 for is delivered, every signature valid.
    load.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let mut acked: BTreeSet<String> = load.acked().into_keys().collect();
    acked.extend(probe_ids);
    all_delivered(&receiver_ip, &acked, "load b–d", Duration::from_secs(120)).await;
    let s = receiver_stats(&receiver_ip).await.expect("stats");
    assert!(s.bad.is_empty(), "bad signatures: {:?}", s.bad);
    let redelivered = acked
        .iter()
        .filter(|i| s.delivered.get(*i).copied().unwrap_or(0) > 1)
        .count();
    eprintln!(
        "[node] load: {} sent, {} acked, all delivered, {redelivered} delivered more than once (at least once), 0 bad signatures, {} not acked (restarts)",
        load.sent.load(Ordering::Relaxed),
        acked.len(),
        load.other.load(Ordering::Relaxed)
    );
    report.insert("load_acked", acked.len().into());
    let mut per_phase: BTreeMap<&str, usize> = BTreeMap::new();
    for a in load.acked().values() {
        *per_phase.entry(a.phase).or_default() += 1;
    }
    report.insert("load_acked_per_phase", serde_json::json!(per_phase));
    report.insert("load_redelivered", redelivered.into());

    // ---- e. sink outage → DLQ on three pods → ReplayJob -------------------------------------
    let t_e = Instant::now();
    node.kubectl_stdin(&["apply", "-n", NS, "-f", "-"], &outage_yaml())
        .await
        .expect("outage source");
    wait_ready(&node, "source/outage", Duration::from_secs(120)).await;
    let admin = admin(&node).await;
    receiver_answer(&receiver_ip, 503).await;
    let pods = gateway_pods(&node).await;
    let mut outage_ids = BTreeSet::new();
    for (pod, (_, _, ip, _)) in &pods {
        for n in 0..10 {
            let body = format!(r#"{{"outage":"{pod}","n":{n}}}"#);
            let id = post_signed(&http_client, ip, "outage", OUTAGE, &body)
                .await
                .expect("post")
                .unwrap_or_else(|s| panic!("outage hook to {pod}: {s}"));
            outage_ids.insert(id);
        }
    }
    for (pod, (_, _, ip, _)) in &pods {
        eventually(
            &format!("10 dead letters on {pod}"),
            Duration::from_secs(60),
            || async { (dlq_total(ip, &admin, "outage").await == Some(10)).then_some(()) },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
    receiver_answer(&receiver_ip, 200).await;
    node.kubectl_stdin(
        &["apply", "-n", NS, "-f", "-"],
        &format!(
            "apiVersion: ankusa.dev/v1alpha1\nkind: ReplayJob\nmetadata:\n  name: outage-replay\nspec:\n  gatewayRef:\n    name: {GATEWAY}\n  filter:\n    source: outage\n  rate: 100\n"
        ),
    )
    .await
    .expect("replayjob");
    node.kubectl(&[
        "wait",
        "-n",
        NS,
        "--for=condition=Ready",
        "replayjob/outage-replay",
        "--timeout=120s",
    ])
    .await
    .expect("ReplayJob Ready");
    let rj = json(&node, &["get", "replayjob/outage-replay", "-n", NS]).await;
    let st = &rj["status"];
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    assert_eq!(st["progress"], "3/3", "{st:#}");
    for p in st["pods"].as_array().expect("pods") {
        assert_eq!(
            (p["moved"].as_i64(), p["failed"].as_i64()),
            (Some(10), Some(0)),
            "{p}"
        );
    }
    all_delivered(
        &receiver_ip,
        &outage_ids,
        "e (replayed)",
        Duration::from_secs(60),
    )
    .await;
    eprintln!(
        "$ kubectl get replayjobs\n{}",
        node.kubectl(&["get", "replayjobs", "-n", NS])
            .await
            .unwrap_or_default()
    );
    report.insert("e_s", secs(t_e.elapsed()).into());

    // ---- h. a drain's evictions respect the Gateway's PodDisruptionBudget ------------------
    let t_h = Instant::now();
    pdb_refuses_a_second_eviction(&node).await;
    report.insert("h_s", secs(t_h.elapsed()).into());

    // ---- g. durability: a pod AND its volume lost under load --------------------------------
    let t_g = Instant::now();
    // Its brokers serve the pods' intake log and backups until the suite ends (f rolls them).
    let _drill_brokers = lost_volume_drill(&node, &client, &dir, &receiver_ip, &mut report).await;
    report.insert("g_s", secs(t_g.elapsed()).into());
    // ---- i. a direct Gateway: a Deployment without volumes, a pod deleted under load ------
    let t_i = Instant::now();
    direct::direct_drill(&node, &mut report).await;
    report.insert("i_s", secs(t_i.elapsed()).into());
    // ---- j. one fleet: a keyed event through the Service and a pod, kubectl scale 3 → 4 → 3
    let t_j = Instant::now();
    fleet::fleet_drill(&node, &receiver_ip, &mut report).await;
    report.insert("j_s", secs(t_j.elapsed()).into());
    // webhooks-0 is on a new volume now: the upgrade below must keep these.
    let vols = volumes(&node).await;

    // ---- f. helm upgrade rolls what it should; helm uninstall keeps the user's objects -----
    let t_f = Instant::now();
    let gw_before = gateway_pods(&node).await;
    helm_upgrade(&node, "logLevel=debug").await;
    let new_ops = eventually(
        "operator pods replaced",
        Duration::from_secs(180),
        || async {
            let v = operator_pods_json(&node).await;
            let names: BTreeSet<String> = v["items"]
                .as_array()?
                .iter()
                .filter(|p| pod_is_ready(p))
                .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
                .collect();
            (names.len() == 2 && names.is_disjoint(&operator_pods)).then_some(names)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let gw_after_log = gateway_pods(&node).await;
    assert_eq!(
        gw_before
            .iter()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect::<Vec<_>>(),
        gw_after_log
            .iter()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect::<Vec<_>>(),
        "a log-level upgrade leaves the gateway pods alone"
    );
    eprintln!(
        "[node] f: logLevel upgrade rolled the operator ({new_ops:?}), gateway pods untouched"
    );
    node.docker(&["tag", &format!("{IMAGE}:test"), &format!("{IMAGE}:test-b")])
        .await
        .expect("docker tag");
    let t_roll = Instant::now();
    helm_upgrade(&node, &format!("gatewayImage={IMAGE}:test-b")).await;
    gateway_pods_ready(&node, &format!("{IMAGE}:test-b"), Duration::from_secs(300)).await;
    let roll = t_roll.elapsed();
    let gw_after_roll = gateway_pods(&node).await;
    for (name, (uid, ..)) in &gw_after_roll {
        assert_ne!(
            Some(uid),
            gw_before.get(name).map(|p| &p.0),
            "{name} rolled"
        );
    }
    assert_eq!(volumes(&node).await, vols, "the roll kept every volume");
    wait_ready(&node, "gateway/webhooks", Duration::from_secs(120)).await;
    // The rolled pods still hold their DLQ rows (their stores are the old ones) and accept.
    let mut after_roll = BTreeSet::new();
    for (pod, (_, _, ip, _)) in &gw_after_roll {
        let id = post_signed(&http_client, ip, "loadtest", NEW, r#"{"after":"roll"}"#)
            .await
            .expect("post")
            .unwrap_or_else(|s| panic!("{pod} after the roll: {s}"));
        after_roll.insert(id);
    }
    all_delivered(
        &receiver_ip,
        &after_roll,
        "f (after the roll)",
        Duration::from_secs(60),
    )
    .await;
    eprintln!(
        "[node] f: gatewayImage upgrade rolled the 3 gateway pods in {:.1}s",
        roll.as_secs_f64()
    );
    report.insert("f_gateway_roll_s", secs(roll).into());

    node.helm(&["uninstall", RELEASE, "--namespace", OP_NS])
        .await
        .expect("helm uninstall");
    eventually(
        "the operator Deployment gone",
        Duration::from_secs(60),
        || async {
            node.kubectl(&["get", "deployment", "-n", OP_NS, "ankusa-ankusa-operator"])
                .await
                .is_err()
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    for crd in ["gateways", "sources", "sinks", "replayjobs"] {
        node.kubectl(&["get", "crd", &format!("{crd}.ankusa.dev")])
            .await
            .unwrap_or_else(|e| panic!("CRD {crd} kept: {e}"));
    }
    for what in [
        "gateway/webhooks",
        "source/loadtest",
        "source/github",
        "sink/receiver",
        "replayjob/outage-replay",
        "statefulset/webhooks",
    ] {
        node.kubectl(&["get", what, "-n", NS])
            .await
            .unwrap_or_else(|e| panic!("{what} kept after uninstall: {e}"));
    }
    gateway_pods_ready(&node, &format!("{IMAGE}:test-b"), Duration::from_secs(30)).await;
    report.insert("f_s", secs(t_f.elapsed()).into());
    report.insert("suite_s", secs(t_suite.elapsed()).into());
    eprintln!(
        "[node] report {}",
        serde_json::to_string(&report).unwrap_or_default()
    );
    drop(node);
}

/// The bridge address of `e2e/node`: pods reach this host there.
const BRIDGE_IP: &str = "10.250.0.1";
const DRILL_NATS_PORT: u16 = 14222;
const DRILL_S3_PORT: u16 = 15000;

/// A broker of the drill's own on the bridge address (the machine's brokers listen on
/// 127.0.0.1, which pods cannot reach), killed when its handle is dropped.
fn spawn_on_bridge(
    dir: &std::path::Path,
    name: &str,
    cmd: &str,
    args: &[&str],
) -> tokio::process::Child {
    std::fs::create_dir_all(dir.join(name)).expect("broker dir");
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("broker log");
    tokio::process::Command::new(cmd)
        .args(args)
        .current_dir(dir.join(name))
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {cmd}: {e}"))
}

async fn port_open(port: u16) -> bool {
    tokio::net::TcpStream::connect((BRIDGE_IP, port))
        .await
        .is_ok()
}

/// A JetStream stream taking `<subject>.>`, created with the NATS protocol itself.
async fn create_stream_at(addr: &str, name: &str, subject: &str) {
    ankusa_testkit::scenario::create_stream(addr, name, subject)
        .await
        .unwrap_or_else(|e| panic!("JetStream stream {name}: {e:#}"));
}

/// Scenario g: the Gateway gets `spec.durability` (dual on a JetStream intake log, backups
/// every 2 s to an S3 bucket), which rolls its pods; then, under load with deliveries held
/// back, `webhooks-0` AND its PVC are deleted. The pod comes back on a new volume (another
/// local PV), restores its backup, replays the log; every acked hook is delivered.
async fn lost_volume_drill(
    node: &RealNode,
    client: &kube::Client,
    dir: &std::path::Path,
    receiver_ip: &str,
    report: &mut BTreeMap<&str, Value>,
) -> Vec<tokio::process::Child> {
    let nats_port = DRILL_NATS_PORT.to_string();
    let nats_sd = dir.join("drill-nats-js").display().to_string();
    let nats = spawn_on_bridge(
        dir,
        "drill-nats",
        "nats-server",
        &["-a", BRIDGE_IP, "-p", &nats_port, "-js", "-sd", &nats_sd],
    );
    let s3_port = DRILL_S3_PORT.to_string();
    let moto = spawn_on_bridge(
        dir,
        "drill-moto",
        "moto_server",
        &["-H", BRIDGE_IP, "-p", &s3_port],
    );
    for port in [DRILL_NATS_PORT, DRILL_S3_PORT] {
        eventually(
            &format!("{BRIDGE_IP}:{port}"),
            Duration::from_secs(30),
            || async { port_open(port).await.then_some(()) },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let r = http()
        .put(format!("http://{BRIDGE_IP}:{DRILL_S3_PORT}/node-backups"))
        .send()
        .await
        .expect("moto");
    assert!(r.status().is_success(), "bucket: {}", r.status());
    create_stream_at(
        &format!("{BRIDGE_IP}:{DRILL_NATS_PORT}"),
        "INTAKE",
        "intake",
    )
    .await;
    node.kubectl_stdin(
        &["apply", "-n", NS, "-f", "-"],
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: backup-s3\n  labels:\n    ankusa.dev/usable: \"true\"\nstringData:\n  id: AKIANODEDRILL0001\n  key: node-drill-secret-key\n",
    )
    .await
    .expect("backup Secret");
    let patch = serde_json::json!({"spec": {"durability": {
        "mode": "dual",
        "intake": {"type": "jetstream",
                   "options": {"servers": [format!("nats://{BRIDGE_IP}:{DRILL_NATS_PORT}")], "subject": "intake"},
                   "reconcileIntervalMs": 200},
        "backup": {"intervalMs": 2000, "keep": 2,
                   "store": {"type": "s3", "bucket": "node-backups",
                             "endpoint": format!("http://{BRIDGE_IP}:{DRILL_S3_PORT}"),
                             "region": "us-east-1", "forcePathStyle": true,
                             "credentials": {"accessKeyId": {"name": "backup-s3", "key": "id"},
                                             "secretAccessKey": {"name": "backup-s3", "key": "key"}}}}}}})
    .to_string();
    let before_roll = gateway_pods(node).await;
    let t_roll = Instant::now();
    node.kubectl(&[
        "patch", "gateway", GATEWAY, "-n", NS, "--type", "merge", "-p", &patch,
    ])
    .await
    .expect("durability patch");
    eventually(
        "the pods rolled onto durability",
        Duration::from_secs(300),
        || async {
            let now = gateway_pods(node).await;
            let rolled = now.len() == 3
                && now
                    .iter()
                    .all(|(n, p)| before_roll.get(n).is_some_and(|b| b.0 != p.0));
            rolled.then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    wait_ready(node, "gateway/webhooks", Duration::from_secs(240)).await;
    eventually(
        "every pod's intake ready and a backup",
        Duration::from_secs(120),
        || async {
            let gw = json(node, &["get", "gateway", GATEWAY, "-n", NS]).await;
            let pods = gw["status"]["pods"].as_array()?.clone();
            (pods.len() == 3
                && pods
                    .iter()
                    .all(|p| p["intakeState"] == "ready" && p["lastBackupAt"].is_string()))
            .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "[node] g: durability on, pods rolled and backing up in {:.1}s",
        t_roll.elapsed().as_secs_f64()
    );
    report.insert("g_roll_s", secs(t_roll.elapsed()).into());

    let load = Arc::new(Load::default());
    load.set_secret("new", NEW);
    load.set_phase("g");
    let tasks = start_load(&load, client);
    tokio::time::sleep(Duration::from_secs(3)).await;
    receiver_answer(receiver_ip, 503).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pods_before = gateway_pods(node).await;
    let vols_before = volumes(node).await;
    let claim = format!("data-{GATEWAY}-0");
    let held = load
        .acked()
        .into_iter()
        .filter(|(_, a)| a.pod.ends_with("-0"))
        .count();
    eprintln!("[node] g: {held} hooks acked by {GATEWAY}-0; deleting it and its PVC {claim}");
    let t_lost = Instant::now();
    node.kubectl(&["delete", "pvc", "-n", NS, &claim, "--wait=false"])
        .await
        .expect("delete pvc");
    node.kubectl(&[
        "delete",
        "pod",
        "-n",
        NS,
        &format!("{GATEWAY}-0"),
        "--wait=false",
    ])
    .await
    .expect("delete pod");
    let restored = eventually(
        &format!("{GATEWAY}-0 back on a new volume, restored and ready"),
        Duration::from_secs(300),
        || async {
            let vols = volumes(node).await;
            let new_pv = vols.get(&claim)?;
            if Some(new_pv) == vols_before.get(&claim) {
                return None;
            }
            let gw = json(node, &["get", "gateway", GATEWAY, "-n", NS]).await;
            let old_uid = &pods_before.get(&format!("{GATEWAY}-0"))?.0;
            let p = gw["status"]["pods"]
                .as_array()?
                .iter()
                .find(|p| {
                    p["name"] == format!("{GATEWAY}-0").as_str() && p["uid"] != old_uid.as_str()
                })?
                .clone();
            (p["ready"] == true && p["restoredFrom"].is_string()).then(|| (new_pv.clone(), p))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let back = t_lost.elapsed();
    eprintln!(
        "[node] g: {GATEWAY}-0 back on PV {} (was {:?}), restored from {}, ready {:.1}s after the deletion",
        restored.0,
        vols_before.get(&claim),
        restored.1["restoredFrom"],
        back.as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    receiver_answer(receiver_ip, 200).await;
    load.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let acked: BTreeSet<String> = load.acked().into_keys().collect();
    all_delivered(
        receiver_ip,
        &acked,
        "g (a lost volume)",
        Duration::from_secs(180),
    )
    .await;
    let events = node
        .kubectl(&[
            "get",
            "events",
            "-n",
            NS,
            "--field-selector",
            "reason=VolumeReplaced",
            "-o",
            "name",
        ])
        .await
        .unwrap_or_default();
    eprintln!(
        "[node] g: drill: {} sent, {} acked, missing 0; VolumeReplaced events {}",
        load.sent.load(Ordering::Relaxed),
        acked.len(),
        events.lines().count()
    );
    report.insert("g_acked", acked.len().into());
    report.insert("g_missing", 0.into());
    report.insert("g_back_ready_s", secs(back).into());
    vec![nats, moto]
}

/// `POST pods/{pod}/eviction` as `kubectl drain` sends it (policy/v1beta1: the node runs
/// 1.20): `Ok` when the pod is evicted, else the server's message. Through kubectl, which tries
/// once: kube's client retries a `429` until it passes, which would hide the refusal.
async fn evict(node: &RealNode, pod: &str) -> Result<(), String> {
    let body = serde_json::json!({
        "apiVersion": "policy/v1beta1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": NS},
    });
    node.kubectl_stdin(
        &[
            "create",
            "--raw",
            &format!("/api/v1/namespaces/{NS}/pods/{pod}/eviction"),
            "-f",
            "-",
        ],
        &body.to_string(),
    )
    .await
    .map(drop)
    .map_err(|e| format!("{e:#}"))
}

/// The Gateway's budget (maxUnavailable 1, the default) lets a drain take one pod, refuses the
/// next while that one is away (429, as `kubectl drain` sees it and retries), and lets it go
/// once the first is back.
async fn pdb_refuses_a_second_eviction(node: &RealNode) {
    let image = format!("{IMAGE}:test");
    gateway_pods_ready(node, &image, Duration::from_secs(120)).await;
    eventually(
        "the Gateway's PodDisruptionBudget allows one disruption",
        Duration::from_secs(60),
        || async {
            let out = node
                .kubectl(&["get", "pdb", GATEWAY, "-n", NS, "-o", "json"])
                .await
                .ok()?;
            let v: Value = serde_json::from_str(&out).ok()?;
            (v["spec"]["maxUnavailable"] == 1 && v["status"]["disruptionsAllowed"] == 1)
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "$ kubectl get pdb\n{}",
        node.kubectl(&["get", "pdb", "-n", NS])
            .await
            .unwrap_or_default()
    );
    let first = format!("{GATEWAY}-0");
    let second = format!("{GATEWAY}-1");
    if let Err(e) = evict(node, &first).await {
        panic!("the first eviction is allowed: {e}");
    }
    let refused = evict(node, &second).await.err().unwrap_or_else(|| {
        panic!("a second eviction while {first} is away must be refused by the budget")
    });
    assert!(
        refused.contains("TooManyRequests") && refused.contains("disruption budget"),
        "{refused}"
    );
    eprintln!("[node] h: {second} while {first} is away: {refused}");
    // Back to three Ready pods, the budget allows the second eviction again.
    gateway_pods_ready(node, &image, Duration::from_secs(180)).await;
    eventually(
        "the second eviction allowed once the first pod is back",
        Duration::from_secs(60),
        || async { evict(node, &second).await.ok() },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    gateway_pods_ready(node, &image, Duration::from_secs(180)).await;
}

#[path = "node/direct.rs"]
mod direct;
#[path = "node/fleet.rs"]
mod fleet;
