//! Issue 4's scenarios on a real control plane (etcd + kube-apiserver + kube-controller-manager
//! 1.20) with the real operator binary and one real `ankusa` gateway process per pod, driven
//! with `kubectl` where a user would use it. See `ankusa-testkit` for the harness.
//!
//! These run in CI (`ANKUSA_REQUIRE_CONTROL_PLANE=1` makes missing binaries a failure); on a
//! machine without the control plane they are skipped with a loud message.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use ankusa_testkit::harness::Harness;
use ankusa_testkit::receiver::Receiver;
use ankusa_testkit::sign;
use futures::FutureExt;
use serde_json::Value;

const OPERATOR: &str = env!("CARGO_BIN_EXE_ankusa-operator");
const GH_OLD: &str = "old-github-secret-0001";
const GH_NEW: &str = "new-github-secret-0002";

/// Runs one scenario in its own world; cleans up; keeps logs when it fails.
fn scenario(name: &str, f: impl AsyncFnOnce(&mut Harness)) {
    if !ankusa_testkit::control_plane_available(name) {
        return;
    }
    let _serial = ankusa_testkit::serial();
    ankusa_testkit::scenario::scenario_runtime(4).block_on(async {
        let t0 = Instant::now();
        let mut h = Harness::start(name, Path::new(OPERATOR))
            .await
            .expect("start the harness");
        let result = std::panic::AssertUnwindSafe(f(&mut h)).catch_unwind().await;
        let failed = result.is_err();
        if failed {
            dump(&h).await;
        }
        h.shutdown(failed).await;
        eprintln!(
            "[e2e] scenario {name}: {} in {:.1}s",
            if failed { "FAILED" } else { "passed" },
            t0.elapsed().as_secs_f64()
        );
        if let Err(p) = result {
            std::panic::resume_unwind(p);
        }
    });
}

async fn dump(h: &Harness) {
    for args in [
        vec!["get", "ankusa", "-o", "wide"],
        vec!["get", "pods,statefulsets,secrets", "-o", "wide"],
        vec!["get", "events", "--sort-by=.metadata.creationTimestamp"],
        vec!["get", "gateways,sources,sinks,replayjobs", "-o", "yaml"],
    ] {
        match h.kubectl(&args).await {
            Ok(out) => eprintln!("$ kubectl {}\n{out}", args.join(" ")),
            Err(e) => eprintln!("$ kubectl {}: {e}", args.join(" ")),
        }
    }
}

/// An `ankusa.dev` object of `kind` named `name` in the scenario's namespace, with `spec`
/// (YAML lines indented as its fields).
fn resource_yaml(kind: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: ankusa.dev/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

/// The Gateway every scenario uses: loopback receivers allowed, fast retries.
fn gateway_yaml(h: &Harness, replicas: i32, max_attempts: Option<u32>) -> String {
    let attempts = max_attempts
        .map(|n| format!("\n        max_attempts: {n}"))
        .unwrap_or_default();
    resource_yaml(
        "Gateway",
        "gw",
        &format!(
            r#"  replicas: {replicas}
  # The harness runs pods as local processes with no pod DNS: no fleet (the real-node suite
  # has one, scenario j).
  fleet:
    dedupe: "off"
  ports:
    http: {http}
    admin: {admin}
  storage:
    size: 1Gi
  terminationGracePeriodSeconds: 10
  settings:
    egress:
      allow_http: true
      allow_loopback: true
    dispatch:
      breaker_failures: 0
      retry:
        base_ms: 50
        max_ms: 300
        jitter: false{attempts}
"#,
            http = h.http_port,
            admin = h.admin_port,
        ),
    )
}

fn github_secret_yaml(keys: &[(&str, &str)]) -> String {
    let mut s = String::from(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: github\n  labels:\n    ankusa.dev/usable: \"true\"\nstringData:\n",
    );
    for (k, v) in keys {
        s.push_str(&format!("  {k}: {v}\n"));
    }
    s
}

fn sink_yaml(name: &str, url: &str) -> String {
    resource_yaml(
        "Sink",
        name,
        &format!(
            r#"  type: http
  http:
    url: {url}
    timeout_ms: 2000
  secretRefs:
    secret:
    - name: signing
      key: whsec
"#
        ),
    )
}

const SIGNING_SECRET: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: signing
  labels:
    ankusa.dev/usable: "true"
stringData:
  whsec: whsec_dGhlLXNpZ25pbmcta2V5LWZvci10ZXN0cw==
"#;

fn source_yaml(name: &str, keys: &[&str], sink: &str) -> String {
    let refs: String = keys
        .iter()
        .map(|k| format!("    - name: github\n      key: {k}\n"))
        .collect();
    resource_yaml(
        "Source",
        name,
        &format!(
            r#"  gatewayRef:
    name: gw
  verify:
    type: github
    secretRefs:
{refs}  sinks:
  - name: {sink}
"#
        ),
    )
}

/// POSTs a hook signed with `secret` to one pod; the HTTP status.
async fn post_hook(
    http: &reqwest::Client,
    h: &Harness,
    pod: u8,
    source: &str,
    secret: &str,
    body: &str,
) -> u16 {
    let url = format!(
        "http://{}:{}/webhooks/{source}",
        h.pod_ip("gw", pod),
        h.http_port
    );
    match http
        .post(&url)
        .header("content-type", "application/json")
        .header("x-hub-signature-256", sign::github(secret, body.as_bytes()))
        .body(body.to_string())
        .send()
        .await
    {
        Ok(r) => r.status().as_u16(),
        Err(e) => {
            eprintln!("[e2e] POST {url}: {e}");
            0
        }
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .unwrap()
}

async fn wait_ready(h: &Harness, what: &str, timeout: &str) {
    let t0 = Instant::now();
    h.kubectl(&[
        "wait",
        "--for=condition=Ready",
        what,
        &format!("--timeout={timeout}"),
    ])
    .await
    .unwrap_or_else(|e| panic!("kubectl wait {what}: {e}"));
    eprintln!(
        "[e2e] {what} Ready after {:.1}s",
        t0.elapsed().as_secs_f64()
    );
}

/// `kubectl patch gateway gw --type=merge -p <patch>`.
async fn merge_patch_gw(h: &Harness, patch: &str) -> anyhow::Result<String> {
    h.kubectl(&["patch", "gateway", "gw", "--type=merge", "-p", patch])
        .await
}

/// `kubectl get events --field-selector <selector>`.
async fn events_where(h: &Harness, selector: &str) -> String {
    h.kubectl(&["get", "events", "--field-selector", selector])
        .await
        .unwrap_or_else(|e| panic!("kubectl get events {selector}: {e}"))
}

async fn get_json(h: &Harness, what: &str) -> Value {
    serde_json::from_str(&h.kubectl(&["get", what, "-o", "json"]).await.unwrap()).unwrap()
}

/// Polls `f` until it returns Some, or panics with `what` after `timeout`.
async fn eventually<T, Fut: Future<Output = Option<T>>>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Fut,
) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Bodies the receiver got, as a set.
fn bodies(r: &Receiver) -> BTreeSet<String> {
    r.received().into_iter().map(|x| x.body).collect()
}

/// Applies the common world: Secrets, Gateway, Sink, Source, and waits until all is Ready.
async fn base_world(h: &Harness, receiver: &Receiver, replicas: i32, max_attempts: Option<u32>) {
    let gateway = gateway_yaml(h, replicas, max_attempts);
    orders_world(h, receiver, &[("old", GH_OLD)], &[], &gateway, &[]).await;
}

/// The world most scenarios run in, applied in this order: Secret `github` with
/// `github_keys`, the signing Secret, `secrets`, `gateway`, Sink `receiver` delivering to
/// `receiver`, Source `orders` (verified with key `old`), `sources`; then waits until the
/// Gateway and `orders` are Ready.
async fn orders_world(
    h: &Harness,
    receiver: &Receiver,
    github_keys: &[(&str, &str)],
    secrets: &[&str],
    gateway: &str,
    sources: &[&str],
) {
    let github = github_secret_yaml(github_keys);
    let sink = sink_yaml("receiver", &receiver.url());
    let orders = source_yaml("orders", &["old"], "receiver");
    let docs = [github.as_str(), SIGNING_SECRET]
        .into_iter()
        .chain(secrets.iter().copied())
        .chain([gateway, &sink, &orders])
        .chain(sources.iter().copied());
    for doc in docs {
        h.apply(doc)
            .await
            .unwrap_or_else(|e| panic!("kubectl apply: {e}"));
    }
    wait_ready(h, "gateway/gw", "180s").await;
    wait_ready(h, "source/orders", "60s").await;
}

#[test]
fn a_three_pods_get_config_and_deliver() {
    scenario("a", async |h| {
        let receiver = Receiver::start("127.0.0.1").await.unwrap();
        base_world(h, &receiver, 3, None).await;

        // Every pod runs the config rendered for it.
        let gw = get_json(h, "gateway/gw").await;
        assert_eq!(gw["status"]["programmed"], "3/3", "{gw:#}");
        let pods = gw["status"]["pods"].as_array().unwrap();
        assert_eq!(pods.len(), 3);
        for p in pods {
            assert_eq!(p["programmed"], true, "{p}");
            assert_eq!(p["configHash"], p["desiredHash"]);
        }
        // A signed hook POSTed to each pod is delivered.
        let http = http();
        let mut sent = BTreeSet::new();
        for pod in 0..3u8 {
            let body = format!(r#"{{"hook":"a-{pod}"}}"#);
            assert_eq!(
                post_hook(&http, h, pod, "orders", GH_OLD, &body).await,
                201,
                "pod {pod}"
            );
            sent.insert(body);
        }
        assert!(
            receiver
                .wait_for(Duration::from_secs(20), |got| {
                    let got: BTreeSet<_> = got.iter().map(|r| r.body.clone()).collect();
                    sent.is_subset(&got)
                })
                .await,
            "delivered: {:?}",
            bodies(&receiver)
        );
        // A user's view.
        let out = h.kubectl(&["get", "sources"]).await.unwrap();
        eprintln!("$ kubectl get sources\n{out}");
        let row = out
            .lines()
            .find(|l| l.starts_with("orders"))
            .expect("orders row");
        assert!(row.contains("True") && row.contains("3/3"), "{row}");
        wait_ready(h, "sink/receiver", "30s").await;
        let out = h.kubectl(&["get", "sinks"]).await.unwrap();
        eprintln!("$ kubectl get sinks\n{out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("receiver") && l.contains("3/3")),
            "{out}"
        );
        let out = h.kubectl(&["get", "gateways"]).await.unwrap();
        eprintln!("$ kubectl get gateways\n{out}");
        let out = h.kubectl(&["get", "ankusa"]).await.unwrap();
        eprintln!("$ kubectl get ankusa\n{out}");
        // The operator's metrics count reconciles.
        let m = h.operator_metrics().await.unwrap();
        assert!(
            m.contains("ankusa_operator_reconcile_total{controller=\"gateway\"}"),
            "{m}"
        );
        assert!(m.contains("ankusa_operator_leader 1"), "{m}");

        // Changing a referenced Secret's value re-renders and reaches every pod (no spec change).
        h.apply(&github_secret_yaml(&[("old", "changed-in-place-0003")]))
            .await
            .unwrap();
        for pod in 0..3u8 {
            eventually(
                "the new Secret value verifies",
                Duration::from_secs(30),
                || async {
                    (post_hook(
                        &http,
                        h,
                        pod,
                        "orders",
                        "changed-in-place-0003",
                        r#"{"in":"place"}"#,
                    )
                    .await
                        == 201)
                        .then_some(())
                },
            )
            .await;
        }

        // A second replica stands by while the first holds the lease, and takes over when
        // the first stops.
        let (mut standby, standby_url) = h.spawn_operator("e2e-standby").await.unwrap();
        let leader_of = |url: String| async move {
            let m = reqwest::get(format!("{url}/metrics"))
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            m.lines()
                .find(|l| l.starts_with("ankusa_operator_leader "))
                .and_then(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        };
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            leader_of(standby_url.clone()).await,
            Some(0),
            "the standby does not lead"
        );
        let t0 = Instant::now();
        h.stop_operator().await;
        eventually(
            "the standby takes the lease",
            Duration::from_secs(40),
            || async { (leader_of(standby_url.clone()).await == Some(1)).then_some(()) },
        )
        .await;
        eprintln!(
            "[e2e] standby took over {:.1}s after the leader stopped",
            t0.elapsed().as_secs_f64()
        );
        // The new leader reconciles: a change made now is programmed.
        h.apply(
            &source_yaml("orders", &["old"], "receiver")
                .replace("  sinks:", "  tenant: acme\n  sinks:"),
        )
        .await
        .unwrap();
        wait_ready(h, "source/orders", "60s").await;
        ankusa_testkit::process::stop(&mut standby, Duration::from_secs(10)).await;
    });
}

/// The admin token the operator generated for the Gateway (as a user would read it).
async fn admin_token(h: &Harness) -> String {
    let b64 = h
        .kubectl(&[
            "get",
            "secret",
            "gw-admin-token",
            "-o",
            "jsonpath={.data.token}",
        ])
        .await
        .unwrap();
    use base64::Engine;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .unwrap(),
    )
    .unwrap()
}

/// `GET <path>` on a pod's admin API, over HTTPS verified with the Gateway's CA bundle (read
/// from the Secret the operator keeps, as a user would).
async fn admin_get(h: &Harness, pod: u8, token: &str, path: &str) -> Value {
    let ca = h
        .kubectl(&[
            "get",
            "secret",
            "gw-admin-tls",
            "-o",
            "jsonpath={.data.ca\\.crt}",
        ])
        .await
        .unwrap();
    use base64::Engine;
    let ca = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(ca.trim())
            .unwrap(),
    )
    .unwrap();
    let host = format!("gw-{pod}.gw-pods.{}.svc", h.ns);
    let ip: std::net::IpAddr = h.pod_ip("gw", pod).parse().unwrap();
    let client =
        ankusa_testkit::admin_client(&ca, &host, std::net::SocketAddr::new(ip, h.admin_port))
            .unwrap();
    let url = format!("https://{host}:{}{path}", h.admin_port);
    let r = client.get(&url).bearer_auth(token).send().await.unwrap();
    assert!(r.status().is_success(), "GET {url}: {}", r.status());
    r.json().await.unwrap()
}

/// Pod UIDs and restart counts, by name.
async fn pod_identities(h: &Harness) -> Vec<(String, String, i64)> {
    let pods = get_json(h, "pods").await;
    let mut out: Vec<(String, String, i64)> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                p["metadata"]["uid"].as_str().unwrap().to_string(),
                p["status"]["containerStatuses"][0]["restartCount"]
                    .as_i64()
                    .unwrap_or(0),
            )
        })
        .collect();
    out.sort();
    out
}

#[derive(Debug, Clone)]
struct Sent {
    secret: &'static str,
    at: Instant,
    status: u16,
}

/// Sends hooks signed with `secret` round-robin to the pods until `stop`.
fn sender(
    h: &Harness,
    secret: &'static str,
    stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<Vec<Sent>> {
    let urls: Vec<String> = (0..3u8)
        .map(|p| {
            format!(
                "http://{}:{}/webhooks/orders",
                h.pod_ip("gw", p),
                h.http_port
            )
        })
        .collect();
    tokio::spawn(async move {
        let http = http();
        let mut out = Vec::new();
        let mut i = 0usize;
        while !*stop.borrow() {
            let body = format!(r#"{{"rotation":"{secret}","n":{i}}}"#);
            let at = Instant::now();
            let status = match http
                .post(&urls[i % urls.len()])
                .header("x-hub-signature-256", sign::github(secret, body.as_bytes()))
                .body(body)
                .send()
                .await
            {
                Ok(r) => r.status().as_u16(),
                Err(_) => 0,
            };
            out.push(Sent { secret, at, status });
            i += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        out
    })
}

#[test]
fn b_secret_rotation_refuses_no_valid_hook() {
    scenario("b", async |h| {
        let receiver = Receiver::start("127.0.0.1").await.unwrap();
        base_world(h, &receiver, 3, None).await;
        let before = pod_identities(h).await;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let t_start = Instant::now();
        let old_sender = sender(h, GH_OLD, stop_rx.clone());
        let new_sender = sender(h, GH_NEW, stop_rx);
        tokio::time::sleep(Duration::from_secs(1)).await;

        // 1. The user adds the new secret to the Secret and puts it in front of the old one.
        h.apply(&github_secret_yaml(&[("old", GH_OLD), ("new", GH_NEW)]))
            .await
            .unwrap();
        h.apply(&source_yaml("orders", &["new", "old"], "receiver"))
            .await
            .unwrap();
        wait_ready(h, "source/orders", "60s").await;
        // From here on both secrets are valid (generation 2 is programmed on every pod).
        let t_new_valid = Instant::now();
        tokio::time::sleep(Duration::from_secs(2)).await;

        // 2. The provider signs with the new secret only; the user drops the old one.
        let t_old_invalid = Instant::now();
        h.apply(&source_yaml("orders", &["new"], "receiver"))
            .await
            .unwrap();
        wait_ready(h, "source/orders", "60s").await;
        h.apply(&github_secret_yaml(&[("new", GH_NEW)]))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        stop_tx.send(true).unwrap();
        let mut sent = old_sender.await.unwrap();
        sent.extend(new_sender.await.unwrap());

        let valid = |s: &Sent| match s.secret {
            GH_OLD => s.at < t_old_invalid,
            _ => s.at >= t_new_valid,
        };
        let wrongly_refused: Vec<_> = sent
            .iter()
            .filter(|s| valid(s) && s.status != 201)
            .collect();
        let odd: Vec<_> = sent
            .iter()
            .filter(|s| s.status != 201 && s.status != 401)
            .collect();
        let accepted_old = sent
            .iter()
            .filter(|s| s.secret == GH_OLD && s.status == 201)
            .count();
        let accepted_new = sent
            .iter()
            .filter(|s| s.secret == GH_NEW && s.status == 201)
            .count();
        eprintln!(
            "[e2e] rotation: {} hooks sent over {:.1}s; old accepted {accepted_old}, new accepted {accepted_new}; \
             new valid from +{:.1}s, old invalid from +{:.1}s",
            sent.len(),
            t_start.elapsed().as_secs_f64(),
            (t_new_valid - t_start).as_secs_f64(),
            (t_old_invalid - t_start).as_secs_f64()
        );
        assert!(odd.is_empty(), "statuses other than 201/401: {odd:?}");
        assert!(
            wrongly_refused.is_empty(),
            "validly signed hooks refused: {wrongly_refused:?}"
        );
        assert!(
            accepted_old > 20 && accepted_new > 20,
            "both senders got through"
        );

        // Afterwards: the old secret is refused on every pod, the new one accepted.
        let http = http();
        for pod in 0..3u8 {
            assert_eq!(
                post_hook(&http, h, pod, "orders", GH_OLD, r#"{"after":"old"}"#).await,
                401
            );
            assert_eq!(
                post_hook(&http, h, pod, "orders", GH_NEW, r#"{"after":"new"}"#).await,
                201
            );
        }
        // Hot reload only: no pod was recreated or restarted.
        assert_eq!(pod_identities(h).await, before);
    });
}

/// Dead-letter entries of a source on one pod.
async fn dlq_total(h: &Harness, pod: u8, token: &str, source: &str) -> i64 {
    admin_get(
        h,
        pod,
        token,
        &format!("/v1/dlq?source_id={source}&limit=1000"),
    )
    .await["total"]
        .as_i64()
        .unwrap_or(0)
}

/// Sends `per_pod` hooks to each of `pods` pods; returns the bodies.
async fn send_batch(
    h: &Harness,
    tag: &str,
    source: &str,
    pods: u8,
    per_pod: usize,
) -> BTreeSet<String> {
    let http = http();
    let mut sent = BTreeSet::new();
    for pod in 0..pods {
        for i in 0..per_pod {
            let body = format!(r#"{{"batch":"{tag}","pod":{pod},"i":{i}}}"#);
            assert_eq!(post_hook(&http, h, pod, source, GH_OLD, &body).await, 201);
            sent.insert(body);
        }
    }
    sent
}

/// While the sink fails: sends `per_pod` hooks of source `orders` to each of 3 pods and waits
/// until every one is in its pod's DLQ.
async fn dead_letter_batch(
    h: &Harness,
    token: &str,
    tag: &str,
    per_pod: usize,
) -> BTreeSet<String> {
    let sent = send_batch(h, tag, "orders", 3, per_pod).await;
    for pod in 0..3u8 {
        eventually(
            &format!("{per_pod} dead letters per pod"),
            Duration::from_secs(30),
            || async { (dlq_total(h, pod, token, "orders").await == per_pod as i64).then_some(()) },
        )
        .await;
    }
    sent
}

fn replay_yaml(name: &str, rate: u32) -> String {
    resource_yaml(
        "ReplayJob",
        name,
        &format!("  gatewayRef:\n    name: gw\n  filter:\n    source: orders\n  rate: {rate}\n"),
    )
}

#[test]
fn c_replay_after_a_sink_outage_with_and_without_a_pod_restart() {
    scenario("c", async |h| {
        let receiver = Receiver::start("127.0.0.1").await.unwrap();
        receiver.answer(500);
        base_world(h, &receiver, 3, Some(2)).await;
        let token = admin_token(h).await;

        // The sink fails: every hook dead-letters on its pod.
        let sent = dead_letter_batch(h, &token, "one", 8).await;
        assert!(bodies(&receiver).is_empty());
        // The sink is fixed; a ReplayJob brings every dead hook back.
        receiver.answer(200);
        h.apply(&replay_yaml("replay-1", 100)).await.unwrap();
        wait_ready(h, "replayjob/replay-1", "90s").await;
        let rj = get_json(h, "replayjob/replay-1").await;
        let st = &rj["status"];
        assert_eq!(st["phase"], "Succeeded", "{st:#}");
        assert_eq!(st["progress"], "3/3");
        assert_eq!(
            st["jobId"], rj["metadata"]["uid"],
            "job id derived from the UID"
        );
        for p in st["pods"].as_array().unwrap() {
            assert_eq!(
                (
                    p["moved"].as_i64(),
                    p["delivered"].as_i64(),
                    p["failed"].as_i64()
                ),
                (Some(8), Some(8), Some(0)),
                "{p}"
            );
            assert_eq!(p["state"], "completed");
        }
        assert!(
            sent.is_subset(&bodies(&receiver)),
            "every dead hook delivered"
        );
        let out = h.kubectl(&["get", "replayjobs"]).await.unwrap();
        eprintln!("$ kubectl get replayjobs\n{out}");
        assert!(out.contains("Succeeded") && out.contains("3/3"), "{out}");

        // Again, with gw-1 killed and recreated in the middle of its replay.
        receiver.answer(500);
        let sent2 = dead_letter_batch(h, &token, "two", 12).await;
        receiver.answer(200);
        h.apply(&replay_yaml("replay-2", 2)).await.unwrap();
        let uid_before = eventually(
            "gw-1 half-way through its replay",
            Duration::from_secs(30),
            || async {
                let rj = get_json(h, "replayjob/replay-2").await;
                let p = rj["status"]["pods"]
                    .as_array()?
                    .iter()
                    .find(|p| p["pod"] == "gw-1")?
                    .clone();
                let moved = p["moved"].as_i64()?;
                (2..12)
                    .contains(&moved)
                    .then(|| p["podUid"].as_str().map(String::from))?
            },
        )
        .await;
        eprintln!("[e2e] killing gw-1 (SIGKILL) and deleting its pod mid-replay");
        assert!(h.kubelet.as_ref().unwrap().kill("gw-1").await);
        h.kubectl(&["delete", "pod", "gw-1", "--wait=false"])
            .await
            .unwrap();
        wait_ready(h, "replayjob/replay-2", "120s").await;
        let rj = get_json(h, "replayjob/replay-2").await;
        let st = &rj["status"];
        assert_eq!(st["phase"], "Succeeded", "{st:#}");
        let gw1 = st["pods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pod"] == "gw-1")
            .unwrap();
        assert_ne!(
            gw1["podUid"].as_str(),
            Some(uid_before.as_str()),
            "asked again on the new pod"
        );
        for p in st["pods"].as_array().unwrap() {
            assert_eq!(
                (p["moved"].as_i64(), p["failed"].as_i64()),
                (Some(12), Some(0)),
                "{p}"
            );
        }
        assert!(
            receiver
                .wait_for(Duration::from_secs(10), |got| {
                    let got: BTreeSet<_> = got.iter().map(|r| r.body.clone()).collect();
                    sent2.is_subset(&got)
                })
                .await,
            "no hook missing: {} of {} delivered",
            sent2.intersection(&bodies(&receiver)).count(),
            sent2.len()
        );
        let events = events_where(h, "involvedObject.name=replay-2").await;
        eprintln!("$ kubectl get events (replay-2)\n{events}");
        assert!(events.contains("PodRestarted"), "{events}");

        // A replay whose deliveries keep dead-lettering pauses itself on each pod; once the sink
        // is fixed, the resume annotation sets it running again and the rest is delivered.
        receiver.answer(500);
        let sent3 = dead_letter_batch(h, &token, "three", 8).await;
        h.apply(&(replay_yaml("replay-3", 2) + "  pauseAfterDead: 2\n"))
            .await
            .unwrap();
        eventually(
            "replay-3 paused on every pod",
            Duration::from_secs(60),
            || async {
                let rj = get_json(h, "replayjob/replay-3").await;
                let pods = rj["status"]["pods"].as_array()?.clone();
                (pods.len() == 3 && pods.iter().all(|p| p["state"] == "paused")).then_some(())
            },
        )
        .await;
        let rj = get_json(h, "replayjob/replay-3").await;
        assert_eq!(rj["status"]["phase"], "Running", "{:#}", rj["status"]);
        let degraded = rj["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Degraded"))
            .cloned()
            .unwrap_or_default();
        let msg = degraded["message"].as_str().unwrap_or_default();
        assert!(
            degraded["status"] == "True"
                && msg.contains("paused on")
                && msg.contains("ankusa.dev/resume"),
            "{degraded}"
        );
        let before = bodies(&receiver);
        assert!(
            sent3.is_disjoint(&before),
            "nothing delivered while the sink fails"
        );
        receiver.answer(200);
        h.kubectl(&["annotate", "replayjob", "replay-3", "ankusa.dev/resume=now"])
            .await
            .unwrap();
        let st = eventually("replay-3 finished", Duration::from_secs(90), || async {
            let rj = get_json(h, "replayjob/replay-3").await;
            let phase = rj["status"]["phase"].as_str()?.to_string();
            (phase == "Succeeded" || phase == "Failed").then(|| rj["status"].clone())
        })
        .await;
        // Rows that died again before the pause are not taken twice by the same job (it touches
        // rows dead at or before its creation): they are its `failed`; every other row arrived.
        let mut failed = 0;
        for p in st["pods"].as_array().unwrap() {
            let (moved, delivered, f) = (
                p["moved"].as_i64().unwrap(),
                p["delivered"].as_i64().unwrap(),
                p["failed"].as_i64().unwrap(),
            );
            assert_eq!((moved, delivered + f), (8, 8), "{p}");
            assert!(f >= 2 && delivered >= 1, "{p}");
            assert_eq!(p["state"], "completed", "{p}");
            failed += f;
        }
        let got = bodies(&receiver);
        assert_eq!(
            sent3.intersection(&got).count() as i64,
            24 - failed,
            "every row not failed before the pause was delivered"
        );
        let rj = get_json(h, "replayjob/replay-3").await;
        assert!(
            rj["metadata"]["annotations"]
                .get("ankusa.dev/resume")
                .is_none(),
            "the operator removes the annotation once it resumed every pod: {:#}",
            rj["metadata"]
        );
        let events = events_where(h, "involvedObject.name=replay-3").await;
        assert!(events.contains("Resumed"), "{events}");

        // Terminal: deleting it is immediate (nothing to cancel).
        h.kubectl(&[
            "delete",
            "replayjob",
            "replay-1",
            "replay-2",
            "replay-3",
            "--timeout=30s",
        ])
        .await
        .unwrap();
    });
}

#[test]
fn d_deleting_a_source_waits_for_its_queued_deliveries() {
    scenario("d", async |h| {
        let receiver = Receiver::start("127.0.0.1").await.unwrap();
        base_world(h, &receiver, 3, None).await;
        h.apply(&source_yaml("billing", &["old"], "receiver"))
            .await
            .unwrap();
        wait_ready(h, "source/billing", "60s").await;
        let token = admin_token(h).await;

        // The receiver fails: deliveries stay queued (retrying) on every pod.
        receiver.answer(503);
        let sent = send_batch(h, "orders", "orders", 3, 4).await;
        for pod in 0..3u8 {
            let d = admin_get(h, pod, &token, "/v1/sources/orders/deliveries").await;
            assert_eq!(d["pending"], 4, "{d}");
        }
        h.kubectl(&["delete", "source", "orders", "--wait=false"])
            .await
            .unwrap();
        let drain = eventually("the drain status", Duration::from_secs(30), || async {
            let s = get_json(h, "source/orders").await;
            let d = s["status"]["drain"].clone();
            (s["metadata"]["deletionTimestamp"].is_string() && d["pending"] == 12).then_some(d)
        })
        .await;
        eprintln!("[e2e] drain status: {drain}");
        for p in drain["pods"].as_array().unwrap() {
            assert_eq!(p["pending"], 4, "{p}");
        }
        let out = h.kubectl(&["get", "source", "orders"]).await.unwrap();
        eprintln!("$ kubectl get source orders (terminating)\n{out}");
        // Still in the config meanwhile.
        assert_eq!(
            post_hook(&http(), h, 0, "orders", GH_OLD, r#"{"late":1}"#).await,
            201
        );
        // The receiver recovers: the deliveries drain and the Source goes.
        receiver.answer(200);
        h.kubectl(&["wait", "--for=delete", "source/orders", "--timeout=60s"])
            .await
            .unwrap();
        assert!(
            sent.is_subset(&bodies(&receiver)),
            "queued deliveries were delivered, not dropped"
        );
        eventually(
            "orders gone from the config",
            Duration::from_secs(20),
            || async {
                (post_hook(&http(), h, 1, "orders", GH_OLD, r#"{"gone":1}"#).await == 404)
                    .then_some(())
            },
        )
        .await;

        // The other way out: dead-letter them on request.
        receiver.answer(503);
        send_batch(h, "billing", "billing", 3, 3).await;
        h.kubectl(&["delete", "source", "billing", "--wait=false"])
            .await
            .unwrap();
        eventually("billing draining", Duration::from_secs(30), || async {
            let s = get_json(h, "source/billing").await;
            (s["status"]["drain"]["pending"] == 9).then_some(())
        })
        .await;
        h.kubectl(&[
            "annotate",
            "source",
            "billing",
            "ankusa.dev/deliveries=dead_letter",
        ])
        .await
        .unwrap();
        h.kubectl(&["wait", "--for=delete", "source/billing", "--timeout=60s"])
            .await
            .unwrap();
        for pod in 0..3u8 {
            let dlq = admin_get(h, pod, &token, "/v1/dlq?source_id=billing&limit=100").await;
            let entries = dlq["entries"].as_array().unwrap();
            assert_eq!(entries.len(), 3, "pod {pod}: {dlq}");
            for e in entries {
                let reason = e["reason"].as_str().unwrap_or_default();
                assert!(reason.contains("source_gone"), "{e}");
            }
        }
        let events = events_where(h, "involvedObject.name=billing").await;
        eprintln!("$ kubectl get events (billing)\n{events}");
        assert!(events.contains("Drained"), "{events}");
    });
}

#[test]
fn e_scaling_to_four_programs_the_new_pod() {
    scenario("e", async |h| {
        let receiver = Receiver::start("127.0.0.1").await.unwrap();
        base_world(h, &receiver, 3, None).await;
        h.kubectl(&["scale", "gateway/gw", "--replicas=4"])
            .await
            .unwrap();
        wait_ready(h, "gateway/gw", "120s").await;
        let gw = get_json(h, "gateway/gw").await;
        assert_eq!(gw["status"]["programmed"], "4/4", "{:#}", gw["status"]);
        assert_eq!(gw["status"]["replicas"], 4);
        eventually(
            "the Source programmed on 4/4",
            Duration::from_secs(30),
            || async {
                let s = get_json(h, "source/orders").await;
                (s["status"]["programmed"] == "4/4").then_some(())
            },
        )
        .await;
        let out = h.kubectl(&["get", "gateways,sources"]).await.unwrap();
        eprintln!("$ kubectl get gateways,sources\n{out}");
        let body = r#"{"hook":"on the new pod"}"#;
        assert_eq!(post_hook(&http(), h, 3, "orders", GH_OLD, body).await, 201);
        assert!(
            receiver
                .wait_for(Duration::from_secs(20), |got| got
                    .iter()
                    .any(|r| r.body == body))
                .await
        );
    });
}

#[test]
fn f_docs_examples_apply_and_become_ready() {
    scenario("docs", async |h| {
        let dir = ankusa_testkit::repo_root().join("docs/examples");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        assert_eq!(files.len(), 6, "{files:?}");
        for f in &files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            // The documented ports, moved to ones free on this machine; and no fleet: the
            // harness's pods are local processes sharing one host with no pod DNS (the
            // real-node suite runs a fleet, scenario j).
            let text = std::fs::read_to_string(f)
                .unwrap()
                .replace("http: 4000", &format!("http: {}", h.http_port))
                .replace("admin: 4002", &format!("admin: {}", h.admin_port))
                .replace(
                    "\n  replicas: 3\n",
                    "\n  replicas: 3\n  fleet:\n    dedupe: \"off\"\n",
                );
            if name == "01-gateway.yaml" {
                assert!(text.contains("dedupe: \"off\""), "{text}");
            }
            let out = h
                .apply(&text)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            eprintln!("$ kubectl apply -f docs/examples/{name}\n{out}");
            match name.as_str() {
                "01-gateway.yaml" => wait_ready(h, "gateway/webhooks", "180s").await,
                "03-source.yaml" => {
                    wait_ready(h, "source/github", "60s").await;
                    wait_ready(h, "sink/orders-service", "60s").await;
                }
                "04-rotate-add.yaml" | "05-rotate-drop.yaml" => {
                    wait_ready(h, "source/github", "60s").await
                }
                "06-replay.yaml" => wait_ready(h, "replayjob/github-outage-replay", "60s").await,
                _ => {}
            }
        }
        let out = h.kubectl(&["get", "ankusa"]).await.unwrap();
        eprintln!("$ kubectl get ankusa\n{out}");
        assert!(out.contains("Succeeded"), "{out}");
        // What the rotation left in the pods' config: only the new secret verifies.
        let http = http();
        let url = format!(
            "http://{}:{}/webhooks/github",
            h.pod_ip("webhooks", 0),
            h.http_port
        );
        for (secret, want) in [
            ("It's a Secret to Everybody", 401),
            ("a-brand-new-secret-2026", 201),
        ] {
            let body = r#"{"zen":"Keep it logically awesome."}"#;
            let status = http
                .post(&url)
                .header("x-hub-signature-256", sign::github(secret, body.as_bytes()))
                .header("x-github-delivery", format!("d-{want}"))
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            assert_eq!(status, want, "{secret}");
        }
    });
}

/// A Gateway named like an existing Service it does not own is refused with a status and an
/// Event, and the Service stays exactly as its owner left it (server-side apply would have taken
/// it over, and garbage collection would have deleted it with the Gateway). Once the Service is
/// gone, the Gateway comes up. Then a Sink naming a Secret without the opt-in label is refused
/// until the Secret is labelled.
#[test]
fn g_the_operator_takes_over_nothing_and_reads_only_opted_in_secrets() {
    scenario("g", async |h| {
        let foreign = "apiVersion: v1\nkind: Service\nmetadata:\n  name: gw\n  labels:\n    team: payments\nspec:\n  ports:\n  - name: web\n    port: 8080\n  selector:\n    app: payments-api\n";
        h.apply(foreign).await.unwrap();
        let before = get_json(h, "service/gw").await;
        h.apply(&gateway_yaml(h, 1, None)).await.unwrap();
        let degraded = gateway_degraded(h, "gw", "ForeignObject").await;
        let msg = degraded["message"].as_str().unwrap();
        assert!(
            msg.contains("Service gw ") && msg.contains("not owned"),
            "{msg}"
        );
        let events = events_where(h, "reason=ForeignObject").await;
        assert!(events.contains("Service gw"), "{events}");
        // Nothing was applied: the Service is untouched, no StatefulSet, no config Secret.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = get_json(h, "service/gw").await;
        assert_eq!(
            after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
            "{after:#}"
        );
        assert!(after["metadata"]["ownerReferences"].is_null(), "{after:#}");
        assert_eq!(after["spec"]["selector"], before["spec"]["selector"]);
        let sts = h
            .kubectl(&["get", "statefulsets,secrets", "-o", "name"])
            .await
            .unwrap();
        assert!(
            !sts.contains("statefulset.apps/gw") && !sts.contains("secret/gw-config"),
            "{sts}"
        );
        // The owner removes its Service: the Gateway is created in full.
        h.kubectl(&["delete", "service/gw"]).await.unwrap();
        wait_ready(h, "gateway/gw", "120s").await;
        let svc = get_json(h, "service/gw").await;
        assert_eq!(svc["metadata"]["ownerReferences"][0]["kind"], "Gateway");

        // A Sink naming a Secret that did not opt in is refused, and its value is never read;
        // the Secret's owner labels it, and the Sink becomes Ready without anything else.
        h.apply(&github_secret_yaml(&[("old", GH_OLD)]))
            .await
            .unwrap();
        h.apply("apiVersion: v1\nkind: Secret\nmetadata:\n  name: signing\nstringData:\n  whsec: whsec_dGhlLXNpZ25pbmcta2V5LWZvci10ZXN0cw==\n")
            .await
            .unwrap();
        h.apply(&sink_yaml("receiver", "http://127.0.0.1:9/never"))
            .await
            .unwrap();
        h.apply(&source_yaml("orders", &["old"], "receiver"))
            .await
            .unwrap();
        let refused = sink_refused(h, "not labelled ankusa.dev/usable=true").await;
        assert!(!refused.to_string().contains("whsec_dGhl"), "{refused:#}");
        h.kubectl(&["label", "secret", "signing", "ankusa.dev/usable=true"])
            .await
            .unwrap();
        wait_ready(h, "sink/receiver", "60s").await;
        wait_ready(h, "source/orders", "60s").await;
    });
}

/// The `Degraded` condition of Gateway `name` once it carries `reason`.
async fn gateway_degraded(h: &Harness, name: &str, reason: &str) -> Value {
    eventually(
        &format!("Gateway {name} Degraded with {reason}"),
        Duration::from_secs(60),
        || async {
            let gw = get_json(h, &format!("gateway/{name}")).await;
            let conds = gw["status"]["conditions"].as_array().cloned()?;
            conds
                .into_iter()
                .find(|c| c["type"] == "Degraded" && c["reason"] == reason)
        },
    )
    .await
}

/// The `Ready=False` condition of Sink `receiver` once its message contains `needle`.
async fn sink_refused(h: &Harness, needle: &str) -> Value {
    eventually(
        &format!("the Sink refused with {needle}"),
        Duration::from_secs(60),
        || async {
            let k = get_json(h, "sink/receiver").await;
            let conds = k["status"]["conditions"].as_array().cloned()?;
            conds.into_iter().find(|c| {
                c["type"] == "Ready"
                    && c["status"] == "False"
                    && c["message"].as_str().is_some_and(|m| m.contains(needle))
            })
        },
    )
    .await
}

/// Issue 12 on a real API server: a Secret mapped into a non-credential option is refused
/// without its value showing anywhere the operator writes (Sink, Source and Gateway status,
/// Events, its log); the admin API is HTTPS with the Gateway's own CA, plain HTTP is refused,
/// and a serving certificate swapped for one of another CA is repaired by the operator while
/// the pods stay programmed.
#[test]
fn h_secrets_stay_where_they_belong_and_the_admin_api_is_https() {
    scenario("h", async |h| {
        const VALUE: &str = "4711-secret-looking-like-a-number";
        h.apply(&gateway_yaml(h, 2, None)).await.unwrap();
        wait_ready(h, "gateway/gw", "120s").await;
        h.apply(&github_secret_yaml(&[("old", GH_OLD)]))
            .await
            .unwrap();
        h.apply(&format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: timing\n  labels:\n    ankusa.dev/usable: \"true\"\nstringData:\n  t: \"{VALUE}\"\n"
        ))
        .await
        .unwrap();
        h.apply(
            "apiVersion: ankusa.dev/v1alpha1\nkind: Sink\nmetadata:\n  name: receiver\nspec:\n  type: http\n  options:\n    url: http://127.0.0.1:9/never\n  secretRefs:\n    timeout_ms:\n    - name: timing\n      key: t\n",
        )
        .await
        .unwrap();
        h.apply(&source_yaml("orders", &["old"], "receiver"))
            .await
            .unwrap();
        let refused = sink_refused(h, "secretRefs[\"timeout_ms\"]").await;
        assert!(
            refused["message"]
                .as_str()
                .unwrap()
                .contains("not a credential option"),
            "{refused:#}"
        );
        // Let the other controllers write what they will, then look everywhere.
        tokio::time::sleep(Duration::from_secs(3)).await;
        for what in [
            vec!["get", "sinks,sources,gateways", "-o", "yaml"],
            vec!["get", "events", "-o", "yaml"],
        ] {
            let out = h.kubectl(&what).await.unwrap();
            assert!(!out.contains(VALUE), "{} shows the value:\n{out}", what[1]);
        }
        for entry in std::fs::read_dir(&h.dir).unwrap() {
            let p = entry.unwrap().path();
            if p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("operator-"))
            {
                let log = std::fs::read_to_string(&p).unwrap_or_default();
                assert!(!log.contains(VALUE), "{} shows the value", p.display());
            }
        }

        // The admin API: the Gateway's CA and serving certificate, owned by the Gateway.
        let tls = get_json(h, "secret/gw-admin-tls").await;
        let ca = get_json(h, "secret/gw-admin-ca").await;
        for s in [&tls, &ca] {
            assert_eq!(s["metadata"]["ownerReferences"][0]["kind"], "Gateway");
        }
        assert_eq!(tls["type"], "kubernetes.io/tls");
        // Plain HTTP to a pod's admin port is refused, and says why.
        let plain = http()
            .get(format!(
                "http://{}:{}/v1/status",
                h.pod_ip("gw", 0),
                h.admin_port
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(plain.status().as_u16(), 400);
        assert_eq!(plain.text().await.unwrap(), r#"{"error":"tls_required"}"#);
        // HTTPS verified with the bundle from the Secret, under the pod's name.
        let token = admin_token(h).await;
        let status = admin_get(h, 1, &token, "/v1/status").await;
        assert_eq!(status["instance"], "gw-1");

        // Someone swaps the serving certificate for one of their own CA: the operator puts
        // its own back, and the pods stay programmed by it.
        let planted = ankusa_operator::pki::ensure(
            None,
            None,
            "planted",
            &["gw-pods.x.svc".to_string()],
            time::OffsetDateTime::now_utc(),
        )
        .unwrap();
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let patch = serde_json::json!({"data": {
            "tls.crt": b64(&planted.leaf.cert_pem),
            "tls.key": b64(&planted.leaf.key_pem),
        }})
        .to_string();
        h.kubectl(&[
            "patch",
            "secret",
            "gw-admin-tls",
            "--type=merge",
            "-p",
            &patch,
        ])
        .await
        .unwrap();
        eventually(
            "the operator re-issues the serving certificate",
            Duration::from_secs(60),
            || async {
                let s = get_json(h, "secret/gw-admin-tls").await;
                let crt = s["data"]["tls.crt"].as_str()?;
                (crt != b64(&planted.leaf.cert_pem)).then_some(())
            },
        )
        .await;
        let events = h.kubectl(&["get", "events", "-o", "yaml"]).await.unwrap();
        assert!(!events.contains("PRIVATE KEY"));
        // The pods follow their volume (the kubelet rewrites it) and keep answering the
        // operator: a config change still reaches both.
        h.apply(&github_secret_yaml(&[("old", GH_OLD), ("new", GH_NEW)]))
            .await
            .unwrap();
        h.apply(SIGNING_SECRET).await.unwrap();
        h.apply(&sink_yaml("receiver", "http://127.0.0.1:9/never"))
            .await
            .unwrap();
        wait_ready(h, "sink/receiver", "60s").await;
        wait_ready(h, "source/orders", "60s").await;
        wait_ready(h, "gateway/gw", "60s").await;
        let status = admin_get(h, 0, &token, "/v1/status").await;
        assert!(
            status["sources"].as_array().is_some_and(|s| !s.is_empty()),
            "{status:#}"
        );
    });
}

/// `kubectl auth can-i ARGS --as=<who>`: true for "yes", false for "no" (kubectl exits 1).
async fn can_i(h: &Harness, who: &str, args: &[&str]) -> bool {
    let as_who = format!("--as={who}");
    let mut cmd = vec!["auth", "can-i"];
    cmd.extend_from_slice(args);
    cmd.push(&as_who);
    match h.kubectl_global(&cmd).await {
        Ok(out) => {
            assert_eq!(out.trim(), "yes", "kubectl {}", cmd.join(" "));
            true
        }
        Err(e) => {
            let msg = e.to_string();
            // kubectl prints its answer last, after any warning.
            let answer = msg.lines().last().unwrap_or_default().trim();
            let answer = answer.rsplit("failed: ").next().unwrap_or_default();
            assert!(answer.starts_with("no"), "kubectl {}: {msg}", cmd.join(" "));
            false
        }
    }
}

/// What the chart's operator may do, cluster-wide: `yes`/`no`, the verbs, then the rest of
/// `kubectl auth can-i`'s arguments; `{ns}` is the scenario's namespace.
const OPERATOR_RBAC: &str = "
    yes get,watch,create secrets -n {ns}
    yes patch statefulsets.apps -n {ns}
    yes create,delete networkpolicies.networking.k8s.io -n {ns}
    yes get,patch,delete poddisruptionbudgets.policy -n {ns}
    no list,watch poddisruptionbudgets.policy -n {ns}
    yes list pods -n {ns}
    yes patch gateways.ankusa.dev --subresource=status -n {ns}
    yes create events.events.k8s.io -n {ns}
    yes update leases.coordination.k8s.io -n {ns}
    yes list secrets --all-namespaces
    no update,delete secrets -n {ns}
    no delete statefulsets.apps -n {ns}
    no delete services -n {ns}
    no create pods -n {ns}
    no create pods --subresource=exec -n {ns}
    yes create,patch deployments.apps -n {ns}
    no delete deployments.apps -n {ns}
    yes list replicasets.apps -n {ns}
    no create,delete replicasets.apps -n {ns}
    yes create,delete horizontalpodautoscalers.autoscaling -n {ns}
    no create daemonsets.apps -n {ns}
    no create jobs.batch -n {ns}
    no get configmaps -n {ns}
    no create,delete gateways.ankusa.dev -n {ns}
    no create rolebindings.rbac.authorization.k8s.io -n {ns}
    no impersonate serviceaccounts -n {ns}
    no create serviceaccounts --subresource=token -n {ns}
    no get leases.coordination.k8s.io -n kube-system
    no create clusterrolebindings.rbac.authorization.k8s.io
";

/// What an operator with `watchNamespace: {apps}` may do: act in `{apps}` only, holding its
/// Lease in its release namespace `{ns}`.
const SCOPED_RBAC: &str = "
    yes get,list,watch secrets -n {apps}
    yes patch statefulsets.apps -n {apps}
    yes create networkpolicies.networking.k8s.io -n {apps}
    yes list gateways.ankusa.dev -n {apps}
    yes get leases.coordination.k8s.io -n {ns}
    no get,list,watch secrets -n {ns}
    no get secrets -n kube-system
    no get secrets -n default
    no list secrets --all-namespaces
    no list gateways.ankusa.dev --all-namespaces
    no create networkpolicies.networking.k8s.io -n {ns}
    no patch statefulsets.apps -n {ns}
    no delete secrets -n {apps}
    no create pods -n {apps}
    no get configmaps -n {apps}
    no get leases.coordination.k8s.io -n {apps}
";

/// Checks every case of `table` (lines `yes|no <verb>[,<verb>...] <the rest of kubectl auth
/// can-i's arguments>`, with `vars` replaced) for one ServiceAccount; fails naming every
/// mismatch.
async fn check_rbac(h: &Harness, who: &str, table: &str, vars: &[(&str, &str)]) {
    let mut wrong = Vec::new();
    for line in table.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let line = vars
            .iter()
            .fold(line.to_string(), |l, (k, v)| l.replace(k, v));
        let words: Vec<&str> = line.split_whitespace().collect();
        let (want, verbs, rest) = match words.as_slice() {
            ["yes", verbs, rest @ ..] => (true, verbs, rest),
            ["no", verbs, rest @ ..] => (false, verbs, rest),
            _ => panic!("RBAC case {line:?}: not `yes|no <verbs> <arguments>`"),
        };
        for verb in verbs.split(',') {
            let args: Vec<&str> = std::iter::once(verb).chain(rest.iter().copied()).collect();
            if can_i(h, who, &args).await != want {
                wrong.push(format!(
                    "{}: want {}",
                    args.join(" "),
                    if want { "yes" } else { "no" }
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{who}:\n{}", wrong.join("\n"));
}

/// The NetworkPolicy the operator renders for Gateway `gw`, once it exists.
async fn network_policy(h: &Harness, name: &str) -> Value {
    eventually(
        &format!("NetworkPolicy {name}"),
        Duration::from_secs(60),
        || async {
            let out = h
                .kubectl(&[
                    "get",
                    "networkpolicy",
                    name,
                    "-o",
                    "json",
                    "--ignore-not-found",
                ])
                .await
                .unwrap();
            (!out.trim().is_empty()).then(|| serde_json::from_str(&out).unwrap())
        },
    )
    .await
}

/// Issue 12, items 4, 7 and 8 on a real API server. A Gateway gets a NetworkPolicy it owns
/// (ingest open, admin from the operator's pods, claims from its namespace) that goes when the
/// Gateway switches it off and comes back with the namespaces it lists; a Gateway naming a
/// ServiceAccount the operator does not allow is refused with nothing created; and the chart's
/// RBAC, applied as rendered, lets the operator's ServiceAccount do what docs/operator.md lists
/// and nothing else (`kubectl auth can-i --as`), cluster-wide and with `watchNamespace`.
#[test]
fn i_network_policy_service_account_policy_and_rbac() {
    scenario("i", async |h| {
        h.apply(&gateway_yaml(h, 1, None)).await.unwrap();
        let np = network_policy(h, "gw").await;
        assert_eq!(np["metadata"]["ownerReferences"][0]["kind"], "Gateway");
        assert_eq!(np["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(
            np["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "ankusa-operator"
        );
        assert_eq!(
            np["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"],
            "gw"
        );
        assert_eq!(np["spec"]["policyTypes"], serde_json::json!(["Ingress"]));
        let rules = np["spec"]["ingress"].as_array().unwrap().clone();
        let port = |r: &Value| r["ports"][0]["port"].as_i64().unwrap();
        assert_eq!(rules.len(), 3, "{np:#}");
        assert_eq!(port(&rules[0]), i64::from(h.http_port));
        assert!(rules[0]["from"].is_null(), "ingest is open: {np:#}");
        assert_eq!(port(&rules[1]), i64::from(h.admin_port));
        // The harness runs the operator with --lease-namespace <ns> and no POD_NAMESPACE: its
        // namespace, and the default labels of its pods.
        assert_eq!(
            rules[1]["from"],
            serde_json::json!([{
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": h.ns}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "ankusa-operator"}},
            }])
        );
        assert_eq!(port(&rules[2]), 4001);
        assert_eq!(
            rules[2]["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"],
            serde_json::json!([h.ns])
        );

        // Switched off: the operator deletes its policy and says so.
        merge_patch_gw(h, r#"{"spec":{"networkPolicy":{"enabled":false}}}"#)
            .await
            .unwrap();
        eventually(
            "the NetworkPolicy deleted",
            Duration::from_secs(60),
            || async {
                let out = h
                    .kubectl(&["get", "networkpolicies", "-o", "name"])
                    .await
                    .unwrap();
                out.trim().is_empty().then_some(())
            },
        )
        .await;
        let events = events_where(h, "reason=NetworkPolicyRemoved").await;
        assert!(events.contains("NetworkPolicy gw deleted"), "{events}");
        // On again, with the claim port closed and a scraper namespace on the admin port.
        merge_patch_gw(h, r#"{"spec":{"networkPolicy":{"enabled":true,"claimCheckNamespaces":[],"metricsNamespaces":["monitoring"]}}}"#)
        .await
        .unwrap();
        let np = network_policy(h, "gw").await;
        let rules = np["spec"]["ingress"].as_array().unwrap().clone();
        assert_eq!(rules.len(), 2, "no rule for the closed claim port: {np:#}");
        assert_eq!(
            rules[1]["from"][1]["namespaceSelector"]["matchExpressions"][0]["values"],
            serde_json::json!(["monitoring"])
        );
        // The schema refuses a namespace that is no namespace name.
        let bad = merge_patch_gw(
            h,
            r#"{"spec":{"networkPolicy":{"metricsNamespaces":["Not A Namespace"]}}}"#,
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(bad.contains("metricsNamespaces"), "{bad}");

        // A ServiceAccount the operator does not allow: refused, nothing created.
        h.apply(
            "apiVersion: ankusa.dev/v1alpha1\nkind: Gateway\nmetadata:\n  name: other\nspec:\n  replicas: 1\n  podTemplate:\n    serviceAccountName: deployer\n",
        )
        .await
        .unwrap();
        let degraded = gateway_degraded(h, "other", "ServiceAccountNotAllowed").await;
        let msg = degraded["message"].as_str().unwrap();
        assert!(
            msg.contains("spec.podTemplate.serviceAccountName")
                && msg.contains("ServiceAccount deployer is not allowed"),
            "{msg}"
        );
        let events = events_where(h, "reason=ServiceAccountNotAllowed").await;
        assert!(events.contains("deployer"), "{events}");
        let made = h
            .kubectl(&[
                "get",
                "statefulsets,services,secrets,networkpolicies",
                "-o",
                "name",
            ])
            .await
            .unwrap();
        assert!(
            !made
                .lines()
                .any(|l| l.ends_with("/other") || l.contains("/other-")),
            "nothing of Gateway other may exist:\n{made}"
        );

        // The chart's RBAC, cluster-wide: the harness applied it for the operator it runs.
        let sa = format!("system:serviceaccount:{}:ankusa-ankusa-operator", h.ns);
        check_rbac(h, &sa, OPERATOR_RBAC, &[("{ns}", h.ns.as_str())]).await;

        // With watchNamespace: a second release whose operator may act in `<ns>-apps` only,
        // holding its Lease in the release namespace.
        let apps = format!("{}-apps", h.ns);
        h.kubectl_global(&["create", "namespace", &apps])
            .await
            .unwrap();
        let out = tokio::process::Command::new(ankusa_testkit::helm_bin())
            .args(["template", "scoped"])
            .arg(ankusa_testkit::repo_root().join("charts/ankusa"))
            .args(["--namespace", &h.ns])
            .args(["--set", &format!("watchNamespace={apps}")])
            .args([
                "--set",
                "crds.enabled=false",
                "--set",
                "metrics.service=false",
            ])
            .output()
            .await
            .expect("helm template");
        assert!(
            out.status.success(),
            "helm template: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let docs = ankusa_testkit::harness::rbac_docs(&text);
        // The objects name their own namespaces (the Role lives in `apps`), so no `-n`.
        let file = h.dir.join("scoped-rbac.yaml");
        std::fs::write(&file, docs.join("\n---\n")).unwrap();
        h.kubectl_global(&["apply", "-f", &file.display().to_string()])
            .await
            .unwrap();
        let sa = format!("system:serviceaccount:{}:scoped-ankusa-operator", h.ns);
        check_rbac(
            h,
            &sa,
            SCOPED_RBAC,
            &[("{ns}", h.ns.as_str()), ("{apps}", apps.as_str())],
        )
        .await;
    });
}

/// moto_server's S3 API (started by `tests/brokers/start.sh`).
const MOTO: &str = "http://127.0.0.1:5000";

/// Creates a bucket on moto (path style; moto takes any or no credentials).
async fn create_bucket(bucket: &str) {
    let r = http()
        .put(format!("{MOTO}/{bucket}"))
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "moto_server is not answering on {MOTO} (start it with tests/brokers/start.sh): {e}"
            )
        });
    assert!(
        r.status().is_success(),
        "create bucket {bucket}: {}",
        r.status()
    );
}

/// The scenario's Gateway archiving to `bucket` on moto with credentials from Secret
/// `archive-s3`.
fn archiving_gateway_yaml(h: &Harness, bucket: &str) -> String {
    gateway_yaml(h, 3, Some(2))
        + &format!(
            r#"  archive:
    type: s3
    bucket: {bucket}
    endpoint: {MOTO}
    region: us-east-1
    forcePathStyle: true
    rollMs: 300
    intervalMs: 100
    credentials:
      accessKeyId: {{name: archive-s3, key: access-key-id}}
      secretAccessKey: {{name: archive-s3, key: secret-access-key}}
"#
        )
}

const ARCHIVE_SECRET: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: archive-s3
  labels:
    ankusa.dev/usable: "true"
stringData:
  access-key-id: AKIAE2ETESTKEY000001
  secret-access-key: e2e-secret-access-key-for-moto
"#;

/// Source `quar` quarantining what fails verification with Secret `github` key `key`.
fn quarantining_source_yaml(key: &str) -> String {
    source_yaml("quar", &[key], "receiver")
        .replace("  verify:\n", "  onVerifyFailure: quarantine\n  verify:\n")
}

fn replay_of_kind_yaml(name: &str, kind: &str, rest: &str) -> String {
    resource_yaml(
        "ReplayJob",
        name,
        &format!("  gatewayRef:\n    name: gw\n  kind: {kind}\n  rate: 200\n{rest}"),
    )
}

/// Waits until ReplayJob `name` succeeded; its status.
async fn replay_succeeded(h: &Harness, name: &str) -> Value {
    let st = replay_finished(h, name).await;
    assert_eq!(st["phase"], "Succeeded", "{st:#}");
    assert_eq!(st["progress"], "3/3", "{st:#}");
    st
}

/// Waits until ReplayJob `name` reached a final phase; its status.
async fn replay_finished(h: &Harness, name: &str) -> Value {
    let t0 = Instant::now();
    let st = eventually(
        &format!("replayjob/{name} finished"),
        Duration::from_secs(90),
        || async {
            let rj = get_json(h, &format!("replayjob/{name}")).await;
            let phase = rj["status"]["phase"].as_str()?.to_string();
            (phase == "Succeeded" || phase == "Failed" || phase == "Cancelled")
                .then(|| rj["status"].clone())
        },
    )
    .await;
    eprintln!(
        "[e2e] replayjob/{name} {} after {:.1}s",
        st["phase"],
        t0.elapsed().as_secs_f64()
    );
    st
}

/// `(pod, field)` of every pod record of a ReplayJob status, as integers.
fn per_pod(st: &Value, fields: &[&str]) -> Vec<(String, Vec<Option<i64>>)> {
    let mut out: Vec<(String, Vec<Option<i64>>)> = st["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pod"].as_str().unwrap().to_string(),
                fields.iter().map(|f| p[*f].as_i64()).collect(),
            )
        })
        .collect();
    out.sort();
    out
}

/// How many times each body arrived.
fn arrivals(r: &Receiver) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for x in r.received() {
        *m.entry(x.body).or_insert(0) += 1;
    }
    m
}

/// RFC 3339 of a unix second.
fn rfc3339(secs: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .unwrap()
        .to_string()
}

fn unix_now() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

/// Issue 14 on a real control plane: a Gateway of 3 pods archiving to S3 (moto) with
/// credentials from a Secret, and a ReplayJob of each kind across the 3 pods reaching
/// `Succeeded` with per-pod counts: `dlq` (a sink outage), `archive` (a window of hooks sent
/// again to a named Sink), `quarantine` (a rotation done wrong, fixed, released; forged hooks
/// stay). The Source shows its quarantined hooks per pod, the Gateway each pod's archive.
#[test]
fn j_replay_jobs_of_every_kind_across_three_pods() {
    scenario("j", async |h| {
        let bucket = format!("ankusa-e2e-{:016x}", fastrand::u64(..));
        create_bucket(&bucket).await;
        let t_start = unix_now() - 1;
        let receiver = Receiver::start("127.0.0.1").await.unwrap();
        receiver.answer(500);
        orders_world(
            h,
            &receiver,
            &[("old", GH_OLD), ("wrong", "wrong-secret-0003")],
            &[ARCHIVE_SECRET],
            &archiving_gateway_yaml(h, &bucket),
            &[&quarantining_source_yaml("wrong")],
        )
        .await;
        wait_ready(h, "source/quar", "60s").await;
        let token = admin_token(h).await;
        let cfg = admin_get(h, 0, &token, "/v1/config").await.to_string();
        assert!(
            cfg.contains(&bucket) && !cfg.contains("e2e-secret-access-key-for-moto"),
            "the pod runs the archive, its credentials redacted in what it shows: {cfg}"
        );

        // 1. dlq: the sink fails, every hook dead-letters on its pod; fixed, a dlq job brings
        // them back.
        let t = Instant::now();
        let sent = dead_letter_batch(h, &token, "dlq", 4).await;
        receiver.answer(200);
        h.apply(&replay_of_kind_yaml(
            "replay-dlq",
            "dlq",
            "  filter:\n    source: orders\n",
        ))
        .await
        .unwrap();
        let st = replay_succeeded(h, "replay-dlq").await;
        for (pod, counts) in per_pod(&st, &["moved", "delivered", "failed"]) {
            assert_eq!(counts, [Some(4), Some(4), Some(0)], "{pod}: {st:#}");
        }
        assert!(
            st.get("released").is_none() && st.get("corruptSegments").is_none(),
            "{st:#}"
        );
        assert!(
            sent.is_subset(&bodies(&receiver)),
            "every dead hook delivered"
        );
        eprintln!("[e2e] dlq replay done in {:.1}s", t.elapsed().as_secs_f64());

        // 2. archive: every hook is archived on its pod; a window replay sends them again to
        // the Sink it names.
        let t = Instant::now();
        for pod in 0..3u8 {
            eventually(
                &format!("gw-{pod}'s 4 hooks archived"),
                Duration::from_secs(60),
                || async {
                    let s = admin_get(h, pod, &token, "/v1/status").await;
                    let a = &s["archive"];
                    (a["pending"].as_i64() == Some(0) && a["archived"].as_i64() >= Some(4))
                        .then_some(())
                },
            )
            .await;
        }
        let before = arrivals(&receiver);

        // A dry run over the same window: each pod tries a filter on its archived hooks, the
        // status sums what the Sink would get, nothing is sent.
        let window = format!(
            "  archive:\n    from: \"{}\"\n    to: \"{}\"\n",
            rfc3339(t_start),
            rfc3339(unix_now() + 1)
        );
        h.apply(&replay_of_kind_yaml(
            "replay-dry",
            "archive",
            &format!(
                "  dryRun: true\n  filter:\n    source: orders\n{window}  dryRunSinks:\n  - name: receiver\n    filter: 'body.i % 2 == 0 && body.batch == \"dlq\"'\n"
            ),
        ))
        .await
        .unwrap();
        let st = replay_succeeded(h, "replay-dry").await;
        assert_eq!(st["phase"], "Succeeded", "{st:#}");
        assert_eq!(st["progress"], "3/3", "{st:#}");
        let d = &st["dryRun"];
        assert_eq!(d["examined"], 12, "{st:#}");
        assert_eq!(d["sinks"][0]["name"], "receiver");
        assert_eq!(
            (
                d["sinks"][0]["matched"].as_i64(),
                d["sinks"][0]["filtered"].as_i64()
            ),
            (Some(6), Some(6)),
            "{st:#}"
        );
        for (pod, counts) in per_pod(&st, &["scanned"]) {
            assert_eq!(counts, [Some(4)], "{pod}: {st:#}");
        }
        // A bad expression fails the job before any pod is asked, naming the field.
        h.apply(&replay_of_kind_yaml(
            "replay-dry-bad",
            "archive",
            &format!(
                "  dryRun: true\n  filter:\n    source: orders\n{window}  dryRunSinks:\n  - name: receiver\n    filter: 'body.i %'\n"
            ),
        ))
        .await
        .unwrap();
        let st = replay_finished(h, "replay-dry-bad").await;
        assert_eq!(st["phase"], "Failed", "{st:#}");
        assert!(
            st["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("dryRunSinks[0].filter")),
            "{st:#}"
        );
        assert!(st.get("pods").is_none(), "no pod was asked: {st:#}");
        assert_eq!(arrivals(&receiver), before, "a dry run sends nothing");

        h.apply(&replay_of_kind_yaml(
            "replay-archive",
            "archive",
            &format!(
                "  filter:\n    source: orders\n  archive:\n    from: \"{}\"\n    to: \"{}\"\n    sinks: [receiver]\n",
                rfc3339(t_start),
                rfc3339(unix_now() + 1)
            ),
        ))
        .await
        .unwrap();
        let st = replay_succeeded(h, "replay-archive").await;
        for (pod, counts) in per_pod(
            &st,
            &[
                "released",
                "moved",
                "delivered",
                "failed",
                "skipped",
                "corruptSegments",
            ],
        ) {
            assert_eq!(
                counts,
                [Some(4), Some(4), Some(4), Some(0), Some(0), Some(0)],
                "{pod}: {st:#}"
            );
        }
        assert_eq!(
            st["request"]["sinks"],
            serde_json::json!([0]),
            "the Sink by its position"
        );
        let after = arrivals(&receiver);
        for b in &sent {
            assert_eq!(
                after.get(b).copied().unwrap_or(0),
                before.get(b).copied().unwrap_or(0) + 1,
                "{b} sent again exactly once"
            );
        }
        eprintln!(
            "[e2e] archive replay done in {:.1}s",
            t.elapsed().as_secs_f64()
        );

        // 3. quarantine: the provider signs with a secret the Source does not have: 202, held
        // in each pod's pen, shown on the Source per pod. One forged hook per pod as well.
        let t = Instant::now();
        let http = http();
        let mut held = BTreeSet::new();
        for pod in 0..3u8 {
            for i in 0..3 {
                let body = format!(r#"{{"quarantined":{pod},"i":{i}}}"#);
                assert_eq!(post_hook(&http, h, pod, "quar", GH_OLD, &body).await, 202);
                held.insert(body);
            }
            let forged = format!(r#"{{"forged":{pod}}}"#);
            assert_eq!(
                post_hook(&http, h, pod, "quar", "forged-secret", &forged).await,
                202
            );
        }
        let q = eventually(
            "Source quar shows 12 quarantined hooks on 3 pods",
            Duration::from_secs(60),
            || async {
                let s = get_json(h, "source/quar").await;
                let q = s["status"]["quarantine"].clone();
                (q["entries"].as_i64() == Some(12)).then_some(q)
            },
        )
        .await;
        assert_eq!(q["podsWithEntries"], 3, "{q:#}");
        for p in q["pods"].as_array().unwrap() {
            assert_eq!(p["entries"], 4, "{p}");
            assert!(
                p["oldest"].is_string() && p["penBytes"].as_i64() > Some(0),
                "{p}"
            );
        }
        let src = get_json(h, "source/quar").await;
        let near = src["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "QuarantineNearFull")
            .cloned()
            .unwrap_or_default();
        assert_eq!(near["status"], "False", "{near}");
        assert!(
            bodies(&receiver).is_disjoint(&held),
            "nothing quarantined was delivered"
        );
        let out = h.kubectl(&["get", "sources", "-o", "wide"]).await.unwrap();
        eprintln!("$ kubectl get sources -o wide\n{out}");
        let column = out
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().position(|c| c == "QUARANTINED"))
            .unwrap_or_else(|| panic!("a QUARANTINED column: {out}"));
        let quar = out
            .lines()
            .find(|l| l.starts_with("quar "))
            .unwrap_or_default();
        assert_eq!(quar.split_whitespace().nth(column), Some("12"), "{out}");
        let events = events_where(h, "involvedObject.name=quar").await;
        assert!(events.contains("Quarantined"), "{events}");

        // The Source's secret is fixed; a quarantine job releases what now verifies.
        h.apply(&quarantining_source_yaml("old")).await.unwrap();
        eventually(
            "Source quar generation 2 programmed on every pod",
            Duration::from_secs(60),
            || async {
                let s = get_json(h, "source/quar").await;
                let generation = s["metadata"]["generation"].as_i64()?;
                let ready = s["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == "Ready")?
                    .clone();
                (ready["status"] == "True"
                    && ready["observedGeneration"].as_i64() == Some(generation))
                .then_some(())
            },
        )
        .await;
        h.apply(&replay_of_kind_yaml(
            "replay-quarantine",
            "quarantine",
            "  filter:\n    source: quar\n",
        ))
        .await
        .unwrap();
        let st = replay_succeeded(h, "replay-quarantine").await;
        for (pod, counts) in per_pod(
            &st,
            &["released", "skipped", "moved", "delivered", "failed"],
        ) {
            assert_eq!(
                counts,
                [Some(3), Some(1), Some(3), Some(3), Some(0)],
                "{pod}: {st:#}"
            );
        }
        assert_eq!(
            (st["released"].as_i64(), st["skipped"].as_i64()),
            (Some(9), Some(3)),
            "{st:#}"
        );
        assert!(
            receiver
                .wait_for(Duration::from_secs(10), |got| {
                    let got: BTreeSet<_> = got.iter().map(|r| r.body.clone()).collect();
                    held.is_subset(&got)
                })
                .await,
            "every released hook delivered"
        );
        for pod in 0..3u8 {
            let pen = admin_get(h, pod, &token, "/v1/quarantine?source_id=quar").await;
            let left = pen["entries"].as_array().map_or(0, Vec::len);
            assert_eq!(left, 1, "gw-{pod}: only the forged hook stays: {pen}");
        }
        eprintln!(
            "[e2e] quarantine replay done in {:.1}s",
            t.elapsed().as_secs_f64()
        );

        // `kubectl get replayjobs` lists each with its kind, phase and progress.
        let out = h.kubectl(&["get", "replayjobs"]).await.unwrap();
        eprintln!("$ kubectl get replayjobs\n{out}");
        let header = out.lines().next().unwrap_or_default();
        assert!(
            header.contains("KIND") && header.contains("PHASE") && header.contains("PROGRESS"),
            "{out}"
        );
        for (name, kind) in [
            ("replay-dlq", "dlq"),
            ("replay-archive", "archive"),
            ("replay-quarantine", "quarantine"),
        ] {
            let line = out
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_default();
            let cols: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(
                cols.get(2..5),
                Some(&[kind, "Succeeded", "3/3"][..]),
                "{out}"
            );
        }
        // The Gateway shows each pod's archive (refreshed at most every 20 s).
        eventually(
            "the Gateway's pods show their archive",
            Duration::from_secs(60),
            || async {
                let g = get_json(h, "gateway/gw").await;
                let pods = g["status"]["pods"].as_array()?.clone();
                (pods.len() == 3
                    && pods.iter().all(|p| {
                        p["archive"]["archived"].as_i64() >= Some(4)
                            && p["archive"]["failures"].as_i64() == Some(0)
                            && p["dlq"]["full"] == false
                    }))
                .then_some(())
            },
        )
        .await;
    });
}

/// Creates a JetStream stream taking `<subject>.>` on the nats-server of
/// `tests/brokers/start.sh` (127.0.0.1:4222).
async fn create_stream(name: &str, subject: &str) {
    ankusa_testkit::scenario::create_stream("127.0.0.1:4222", name, subject)
        .await
        .unwrap_or_else(|e| {
            panic!("JetStream stream {name} (nats-server from tests/brokers/start.sh): {e:#}")
        });
}

const BACKUP_SECRET: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: backup-s3
  labels:
    ankusa.dev/usable: "true"
stringData:
  access-key-id: AKIAE2EBACKUPKEY0001
  secret-access-key: e2e-backup-secret-key-for-moto
"#;

const INTAKE_TOKEN: &str = "e2e-intake-nats-token-0001";

fn intake_secret_yaml() -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: intake-nats\n  labels:\n    ankusa.dev/usable: \"true\"\nstringData:\n  token: {INTAKE_TOKEN}\n"
    )
}

/// The scenario's Gateway with `durability`: dual on a JetStream intake log (its token from
/// Secret `intake-nats`), backups every second to `bucket` on moto (keys from `backup-s3`).
fn durable_gateway_yaml(h: &Harness, bucket: &str, subject: &str) -> String {
    gateway_yaml(h, 3, None)
        + &format!(
            r#"  durability:
    mode: dual
    intake:
      type: jetstream
      jetstream:
        servers: ["nats://127.0.0.1:4222"]
        subject: {subject}
      secretRefs:
        auth.token: [{{name: intake-nats, key: token}}]
      reconcileIntervalMs: 200
    backup:
      intervalMs: 1000
      keep: 2
      store:
        type: s3
        bucket: {bucket}
        endpoint: {MOTO}
        region: us-east-1
        forcePathStyle: true
        credentials:
          accessKeyId: {{name: backup-s3, key: access-key-id}}
          secretAccessKey: {{name: backup-s3, key: secret-access-key}}
"#
        )
}

/// `(uid, claim uid)` of a pod and its data volume claim, when both exist.
async fn pod_and_claim(h: &Harness, pod: &str) -> Option<(String, String)> {
    let p = h
        .kubectl(&["get", "pod", pod, "-o", "jsonpath={.metadata.uid}"])
        .await
        .ok()?;
    let c = h
        .kubectl(&[
            "get",
            "pvc",
            &format!("data-{pod}"),
            "-o",
            "jsonpath={.metadata.uid}",
        ])
        .await
        .ok()?;
    (!p.is_empty() && !c.is_empty()).then_some((p, c))
}

#[test]
fn k_durability_renders_reports_and_survives_a_lost_volume_under_load() {
    scenario("k", async |h| {
        let bucket = format!("ankusa-e2e-backup-{:08x}", fastrand::u32(..));
        create_bucket(&bucket).await;
        let suffix = format!("{:08x}", fastrand::u32(..));
        let subject = format!("e2e-intake-{suffix}");
        create_stream(&format!("E2E_INTAKE_{suffix}"), &subject).await;
        let receiver = Receiver::start("127.0.0.1").await.unwrap();
        orders_world(
            h,
            &receiver,
            &[("old", GH_OLD)],
            &[BACKUP_SECRET, &intake_secret_yaml()],
            &durable_gateway_yaml(h, &bucket, &subject),
            &[],
        )
        .await;

        // 1. Each pod's config: wal dual, the intake log with its token read from the Secret,
        // backups with the keys read from theirs; the pods' template carries the digest.
        let secret = get_json(h, "secret/gw-config").await;
        for pod in ["gw-0", "gw-1", "gw-2"] {
            let b64 = secret["data"][format!("{pod}.yaml")].as_str().unwrap();
            let yaml = String::from_utf8(
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64).unwrap(),
            )
            .unwrap();
            let c = ankusa_config::from_rendered_yaml(&yaml).expect("a config the gateway reads");
            assert_eq!(c.node.instance, pod);
            assert_eq!(c.wal.wal_type, ankusa_config::WalType::Dual);
            let i = c.intake.as_ref().expect("intake");
            assert_eq!(i.node, None, "the pod name, by default");
            let js = i.jetstream.as_ref().expect("jetstream");
            assert_eq!(js.subject, subject);
            assert_eq!(
                js.auth
                    .as_ref()
                    .and_then(|a| a.token.as_ref())
                    .map(|t| t.expose()),
                Some(INTAKE_TOKEN)
            );
            assert!(c.backup.enabled);
            assert_eq!(c.backup.interval_ms, 1000);
            assert_eq!(
                c.backup.key_prefix.as_deref(),
                Some(format!("{}/gw", h.ns).as_str())
            );
            let s3 = c
                .backup
                .store
                .as_ref()
                .and_then(|s| s.s3.as_ref())
                .expect("s3");
            assert_eq!(s3.bucket, bucket);
            assert_eq!(
                s3.secret_access_key.as_ref().map(|s| s.expose()),
                Some("e2e-backup-secret-key-for-moto")
            );
        }
        let sts = get_json(h, "statefulset/gw").await;
        let fp = sts["spec"]["template"]["metadata"]["annotations"]["ankusa.dev/durability"]
            .as_str()
            .expect("the durability digest on the pod template")
            .to_string();
        assert!(!sts.to_string().contains(INTAKE_TOKEN));

        // 2. Status: every pod reports its backups and intake log (their real GET /v1/status).
        eventually(
            "every pod's backups and intake in the Gateway's status",
            Duration::from_secs(60),
            || async {
                let gw = get_json(h, "gateway/gw").await;
                let pods = gw["status"]["pods"].as_array()?.clone();
                (pods.len() == 3
                    && pods.iter().all(|p| {
                        p["intakeState"] == "ready"
                            && p["lastBackupAt"].is_string()
                            && p["backupAgeSeconds"].is_i64()
                            && p["intakePending"].is_i64()
                    }))
                .then_some(())
            },
        )
        .await;
        let gw = get_json(h, "gateway/gw").await;
        eprintln!("[e2e] pods: {}", gw["status"]["pods"]);

        // 3. A rotated intake Secret re-renders and rolls the pods (new digest).
        let before_roll: Vec<String> = pod_identities(h).await.into_iter().map(|p| p.1).collect();
        h.apply(&intake_secret_yaml().replace(INTAKE_TOKEN, "e2e-intake-nats-token-0002"))
            .await
            .unwrap();
        eventually(
            "a new durability digest",
            Duration::from_secs(30),
            || async {
                let sts = get_json(h, "statefulset/gw").await;
                let now =
                    sts["spec"]["template"]["metadata"]["annotations"]["ankusa.dev/durability"]
                        .as_str()
                        .map(str::to_string);
                (now.is_some() && now.as_deref() != Some(fp.as_str())).then_some(())
            },
        )
        .await;
        let t_roll = Instant::now();
        eventually(
            "the roll-out of the new digest",
            Duration::from_secs(240),
            || async {
                let sts = get_json(h, "statefulset/gw").await;
                let st = &sts["status"];
                let rolled: Vec<String> =
                    pod_identities(h).await.into_iter().map(|p| p.1).collect();
                (st["observedGeneration"] == sts["metadata"]["generation"]
                    && st["updateRevision"] == st["currentRevision"]
                    && st["updatedReplicas"] == 3
                    && st["readyReplicas"] == 3
                    && rolled.len() == 3
                    && rolled.iter().all(|u| !before_roll.contains(u)))
                .then_some(())
            },
        )
        .await;
        eprintln!(
            "[e2e] pods rolled in {:.1}s",
            t_roll.elapsed().as_secs_f64()
        );
        wait_ready(h, "gateway/gw", "240s").await;

        // 4. The drill: deliveries held back so every pod holds acked, undelivered hooks; under
        // load, gw-0 and its volume claim are deleted. It comes back on a new, empty claim,
        // restores its backup, replays the intake log, and every hook ever answered 201 is
        // delivered.
        let (old_pod, old_claim) = pod_and_claim(h, "gw-0").await.expect("gw-0 and its claim");
        receiver.answer(503);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let load = sender(h, GH_OLD, stop_rx);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let t_drill = Instant::now();
        h.kubectl(&["delete", "pvc", "data-gw-0", "--wait=false"])
            .await
            .unwrap();
        h.kubectl(&["delete", "pod", "gw-0", "--wait=false"])
            .await
            .unwrap();
        let (new_pod, new_claim) = eventually(
            "gw-0 back on a new claim",
            Duration::from_secs(180),
            || async {
                let (p, c) = pod_and_claim(h, "gw-0").await?;
                (p != old_pod && c != old_claim).then_some((p, c))
            },
        )
        .await;
        eprintln!(
            "[e2e] gw-0 recreated ({new_pod}) on claim {new_claim} after {:.1}s",
            t_drill.elapsed().as_secs_f64()
        );
        let restored = eventually(
            "gw-0 restored and ready",
            Duration::from_secs(180),
            || async {
                let gw = get_json(h, "gateway/gw").await;
                let p = gw["status"]["pods"]
                    .as_array()?
                    .iter()
                    .find(|p| p["name"] == "gw-0" && p["uid"] == new_pod.as_str())?
                    .clone();
                (p["ready"] == true && p["restoredFrom"].is_string()).then_some(p)
            },
        )
        .await;
        eprintln!(
            "[e2e] gw-0 ready after {:.1}s, restored from {}",
            t_drill.elapsed().as_secs_f64(),
            restored["restoredFrom"]
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let _ = stop_tx.send(true);
        let sent = load.await.unwrap();
        receiver.answer(200);
        let acked: BTreeSet<String> = sent
            .iter()
            .enumerate()
            .filter(|(_, s)| s.status == 201)
            .map(|(i, _)| format!(r#"{{"rotation":"{GH_OLD}","n":{i}}}"#))
            .collect();
        assert!(
            acked.len() > 50,
            "load: {} acked of {}",
            acked.len(),
            sent.len()
        );
        let all = receiver
            .wait_for(Duration::from_secs(120), |got| {
                let have: BTreeSet<&str> = got.iter().map(|r| r.body.as_str()).collect();
                acked.iter().all(|b| have.contains(b.as_str()))
            })
            .await;
        let got = bodies(&receiver);
        let missing: Vec<&String> = acked.iter().filter(|b| !got.contains(*b)).collect();
        let deliveries = receiver.received().len();
        eprintln!(
            "[e2e] drill: sent {}, acked {}, delivered {} distinct ({} deliveries, {} redelivered), missing {}",
            sent.len(),
            acked.len(),
            got.len(),
            deliveries,
            deliveries.saturating_sub(got.len()),
            missing.len()
        );
        assert!(
            all && missing.is_empty(),
            "missing {}: {:?}",
            missing.len(),
            missing.iter().take(10).collect::<Vec<_>>()
        );
        let replaced = "reason=VolumeReplaced";
        let events = h
            .kubectl(&["get", "events", "--field-selector", replaced, "-o", "name"])
            .await
            .unwrap_or_default();
        eprintln!("[e2e] VolumeReplaced events: {}", events.lines().count());
    });
}

/// Issue 25's scenario (`l`): no file from a Sink, no planted admin token.
#[path = "e2e/ownership.rs"]
mod ownership;

#[path = "e2e/api_truth.rs"]
mod api_truth;

#[path = "e2e/operate.rs"]
mod operate;

#[path = "e2e/direct.rs"]
mod direct;
