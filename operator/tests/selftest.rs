//! `ankusa-operator selftest` (the chart's `helm test` pod) and `--log-format json`, with the
//! real binary: against the operator's own HTTP server, against nothing, and against a real
//! control plane (1.20, `e2e/controlplane/build.sh`) as the chart's test ServiceAccount with
//! exactly the RBAC the chart renders. The control-plane test is skipped loudly without the
//! binaries, or fails when `ANKUSA_REQUIRE_CONTROL_PLANE=1`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_operator::selftest::{EXIT_API, EXIT_CRD, EXIT_NOT_READY};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

const OPERATOR: &str = env!("CARGO_BIN_EXE_ankusa-operator");

/// Runs the operator binary with `args`, `env` and no in-cluster or kubeconfig fallback unless
/// `KUBECONFIG` is given in `env`.
fn operator(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(OPERATOR);
    cmd.args(args)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("ANKUSA_OPERATOR_LOG_FORMAT")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env("RUST_LOG", "info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run ankusa-operator")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every line of stderr as JSON (panics naming the first line that is not).
fn json_lines(o: &Output) -> Vec<Value> {
    let text = stderr(o);
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(!lines.is_empty(), "no log lines");
    lines
}

fn unused_url() -> String {
    format!(
        "http://127.0.0.1:{}/ready",
        ankusa_testkit::ports::free_port()
    )
}

#[test]
fn log_format_json_writes_one_json_object_per_line() {
    let url = unused_url();
    let args = [
        "--log-format",
        "json",
        "selftest",
        "--ready-url",
        &url,
        "--timeout-seconds",
        "1",
    ];
    let out = operator(&args, &[]);
    assert_eq!(out.status.code(), Some(EXIT_NOT_READY), "{}", stderr(&out));
    let lines = json_lines(&out);
    for l in &lines {
        assert!(l["timestamp"].is_string() && l["level"].is_string(), "{l}");
    }
    let last = lines.last().unwrap();
    assert_eq!(last["level"], "ERROR");
    assert_eq!(last["fields"]["message"], "selftest failed");
    assert_eq!(last["fields"]["exit_code"], EXIT_NOT_READY);
    let error = last["fields"]["error"].as_str().unwrap();
    assert!(
        error.contains("operator not ready") && error.contains(&url),
        "{error}"
    );

    // The same from the environment, and the flag after the subcommand.
    let out = operator(
        &["selftest", "--ready-url", &url, "--timeout-seconds", "1"],
        &[("ANKUSA_OPERATOR_LOG_FORMAT", "json")],
    );
    assert_eq!(out.status.code(), Some(EXIT_NOT_READY));
    json_lines(&out);
    let out = operator(
        &[
            "selftest",
            "--ready-url",
            &url,
            "--timeout-seconds",
            "1",
            "--log-format=json",
        ],
        &[],
    );
    json_lines(&out);

    // Text by default: human lines, not JSON.
    let out = operator(
        &["selftest", "--ready-url", &url, "--timeout-seconds", "1"],
        &[],
    );
    let text = stderr(&out);
    assert!(text.contains("selftest failed"), "{text}");
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<Value>(l).is_err()),
        "{text}"
    );

    // An unknown format is a usage error naming the flag.
    let out = operator(&["--log-format", "xml", "selftest"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(
        text.contains("--log-format") && text.contains("xml"),
        "{text}"
    );
}

/// Serves `router` on a free 127.0.0.1 port on its own runtime thread.
fn serve(router: axum::Router) -> SocketAddr {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    addr
}

#[test]
fn selftest_reaches_the_operators_ready_endpoint_then_the_api() {
    // The operator's own server answers ready: the check passes and the next step (the
    // Kubernetes client) is what fails, with its own exit code.
    let metrics = Arc::new(ankusa_operator::metrics::Metrics::default());
    let addr = serve(ankusa_operator::server::router(metrics));
    let url = format!("http://{addr}/ready");
    let out = operator(&["--log-format=json", "selftest", "--ready-url", &url], &[]);
    assert_eq!(out.status.code(), Some(EXIT_API), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "operator ready" && l["fields"]["url"] == url),
        "{lines:?}"
    );
    let last = lines.last().unwrap();
    assert!(
        last["fields"]["error"]
            .as_str()
            .unwrap()
            .contains("Kubernetes client"),
        "{last}"
    );

    // A server that answers, but not 200: not ready, naming the status.
    let addr = serve(axum::Router::new().route(
        "/ready",
        axum::routing::get(|| async { (axum::http::StatusCode::SERVICE_UNAVAILABLE, "no\n") }),
    ));
    let url = format!("http://{addr}/ready");
    let t0 = Instant::now();
    let out = operator(
        &["selftest", "--ready-url", &url, "--timeout-seconds", "2"],
        &[],
    );
    assert_eq!(out.status.code(), Some(EXIT_NOT_READY), "{}", stderr(&out));
    assert!(t0.elapsed() >= Duration::from_secs(2), "gave up early");
    let text = stderr(&out);
    assert!(text.contains("status 503") && text.contains(&url), "{text}");
}

/// The control plane's binaries, or a loud skip (a failure when they are required).
fn control_plane_binaries() -> bool {
    let assets = ankusa_testkit::k8s_assets();
    let mut missing: Vec<String> = ["kube-apiserver", "kube-controller-manager", "etcd"]
        .iter()
        .map(|b| assets.join(b))
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    for (what, p) in [
        ("kubectl", ankusa_testkit::kubectl_bin()),
        ("helm", ankusa_testkit::helm_bin()),
    ] {
        if !p.exists() {
            missing.push(format!("{what} (charts/fetch-helm.sh)"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    let msg = format!(
        "selftest on a control plane: missing {} (run e2e/controlplane/build.sh)",
        missing.join(", ")
    );
    if ankusa_testkit::control_plane_required() {
        panic!("{msg} -- ANKUSA_REQUIRE_CONTROL_PLANE=1 forbids skipping");
    }
    eprintln!("\n######## SKIPPED {msg}\n");
    false
}

/// `kubectl apply` of `yaml` with `kubeconfig`.
fn kubectl_apply(kubeconfig: &Path, yaml: &str) {
    use std::io::Write;
    let mut child = Command::new(ankusa_testkit::kubectl_bin())
        .args(["apply", "-f", "-"])
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "kubectl apply: {}", stderr(&out));
}

/// The chart's `helm test` objects (ServiceAccount and RBAC) for release `ankusa` in `ns`.
fn chart_test_rbac(ns: &str) -> String {
    let out = Command::new(ankusa_testkit::helm_bin())
        .args(["template", "ankusa"])
        .arg(ankusa_testkit::repo_root().join("charts/ankusa"))
        .args(["--namespace", ns, "-s", "templates/selftest.yaml"])
        .output()
        .expect("helm template");
    assert!(out.status.success(), "helm template: {}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    ankusa_testkit::harness::rbac_docs(&text).join("\n---\n")
}

#[test]
fn selftest_on_a_control_plane_as_the_charts_test_service_account() {
    if !control_plane_binaries() {
        return;
    }
    let _serial = ankusa_testkit::serial();
    let dir = tempfile::tempdir().unwrap();
    let cp = ankusa_testkit::controlplane::ControlPlane::start(&dir.path().join("cp"))
        .expect("control plane");
    let admin = cp.kubeconfig().display().to_string();
    let selftest = |kubeconfig: &str| operator(&["selftest"], &[("KUBECONFIG", kubeconfig)]);

    // No CRDs yet: the first one is named.
    let out = selftest(&admin);
    assert_eq!(out.status.code(), Some(EXIT_CRD), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("CRD gateways.ankusa.dev is not installed"),
        "{}",
        stderr(&out)
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sa_kubeconfig = dir.path().join("test-sa.kubeconfig");
    rt.block_on(async {
        let client = cp.client().await.unwrap();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        // A 1.20 server: the CRDs without CEL rules, as the chart gives it.
        for (_, crd) in ankusa_crds::all() {
            let legacy: CustomResourceDefinition =
                serde_json::from_value(ankusa_crds::for_legacy_server(&crd)).unwrap();
            crds.create(&PostParams::default(), &legacy).await.unwrap();
        }
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        let ns_obj =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "ankusa-system"}}))
                .unwrap();
        ns.create(&PostParams::default(), &ns_obj).await.unwrap();
        kubectl_apply(cp.kubeconfig(), &chart_test_rbac("ankusa-system"));
        ankusa_testkit::harness::service_account_kubeconfig(
            &client,
            cp.kubeconfig(),
            "ankusa-system",
            "ankusa-ankusa-operator-test",
            &sa_kubeconfig,
        )
        .await
        .unwrap();
    });

    // As the admin, then as the chart's test ServiceAccount: passes once established.
    let sa = sa_kubeconfig.display().to_string();
    for kc in [&admin, &sa] {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let out = selftest(kc.as_str());
            if out.status.success() {
                assert!(stderr(&out).contains("selftest passed"), "{}", stderr(&out));
                break;
            }
            assert!(
                Instant::now() < end,
                "selftest as {kc} still fails: {}",
                stderr(&out)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    // Without its binding the ServiceAccount may not read the CRDs: an API failure naming
    // what it tried.
    let out = Command::new(ankusa_testkit::kubectl_bin())
        .args([
            "delete",
            "clusterrolebinding",
            "ankusa-ankusa-operator-test",
        ])
        .env("KUBECONFIG", cp.kubeconfig())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let end = Instant::now() + Duration::from_secs(15);
    let out = loop {
        let out = selftest(&sa);
        if !out.status.success() || Instant::now() > end {
            break out;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(out.status.code(), Some(EXIT_API), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("get customresourcedefinitions/gateways.ankusa.dev")
            && text.contains("forbidden"),
        "{text}"
    );
}
