//! Test support shared by the workspace's Kubernetes tests:
//!
//! - [`controlplane`]: a real etcd + kube-apiserver + kube-controller-manager (1.20, built from
//!   Debian's source package by `e2e/controlplane/build.sh`) on 127.0.0.1, stopped on drop;
//! - [`kubelet`]: a fake kubelet that binds pods to a fake node, starts one real `ankusa`
//!   gateway process per pod on its own 127.0.0.N with a persistent data dir per pod name,
//!   materialises Secret volumes the way the kubelet does (`..data` symlink swap, kept
//!   current), probes readiness and patches pod status;
//! - [`scripted`]: the test HTTP receiver (records every request, answers what the test's
//!   script says, over HTTP or TLS), the webhook consumer of the gateway's black-box tests;
//!   [`receiver`] is the operator scenarios' fixed-answer view of it;
//! - [`harness`]: all of it plus the operator process, a namespace and `kubectl`;
//! - [`sign`]: provider signatures for test hooks;
//! - [`scenario`]: the runtime and JetStream stream of the operator's scenario suites;
//! - [`ports`]: loopback ports below the ephemeral range for servers that restart.
//!
//! With the feature `brokers`, the fixtures of the sink and broker tests (`sinks/tests`,
//! `gateway/tests`) and of the sink bench (`bench`, `sink-bench`):
//! - [`pki`]: a private CA (rcgen) and its server, client and leaf certificates;
//! - [`tls_proxy`]: a relay on loopback, plain or terminating TLS, in front of a broker or an
//!   emulator;
//! - [`nats_server`], [`redis_server`]: a nats-server (plaintext or TLS, users) and a TLS
//!   redis-server of a test's own;
//! - [`brokers`]: broker processes a test owns (killed as a crash), Tansu, a RabbitMQ node.
//!
//! It lives in its own crate (not in `operator/tests`) because more than one test target
//! uses it (the operator's scenarios, the docs examples, the chart, the gateway's and the
//! sinks' tests, the sink bench) and it must not be compiled into any shipped binary. It
//! depends on no crate of the gateway (the sinks' tests and the bench link no RocksDB through
//! it).

#[cfg(feature = "brokers")]
pub mod brokers;
pub mod controlplane;
pub mod harness;
pub mod kubelet;
mod kubelet_ip;
#[cfg(feature = "brokers")]
pub mod nats_server;
pub mod node;
#[cfg(feature = "brokers")]
pub mod pki;
pub mod ports;
pub mod process;
pub mod receiver;
#[cfg(feature = "brokers")]
pub mod redis_server;
pub mod scenario;
pub mod scripted;
pub mod sign;
#[cfg(feature = "brokers")]
pub mod tls_proxy;

use std::path::PathBuf;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .expect("repo root")
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/root".into())
}

/// The gateway binary: `ANKUSA_BIN`, else `$HOME/.cache/ankusa/target/debug/ankusa`.
pub fn gateway_bin() -> PathBuf {
    std::env::var_os("ANKUSA_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache/ankusa/target/debug/ankusa"))
}

/// The control-plane binaries' directory (`ANKUSA_K8S_ASSETS`, default as in build.sh).
pub fn k8s_assets() -> PathBuf {
    std::env::var_os("ANKUSA_K8S_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache/ankusa/k8s-1.20.2"))
}

/// The helm binary fetched by `charts/fetch-helm.sh` (`ANKUSA_HELM`, default in the cache).
pub fn helm_bin() -> PathBuf {
    std::env::var_os("ANKUSA_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache/ankusa/helm/helm"))
}

/// kubectl: `ANKUSA_KUBECTL`, else the one on PATH, else the one `charts/fetch-helm.sh` put
/// next to helm.
pub fn kubectl_bin() -> PathBuf {
    if let Some(k) = std::env::var_os("ANKUSA_KUBECTL") {
        return PathBuf::from(k);
    }
    which("kubectl").unwrap_or_else(|| helm_bin().with_file_name("kubectl"))
}

/// Runs `script` (an `e2e/*/start.sh`) on `dir` with this process as its watchdog's charge
/// (it stops what it started if this process dies first); its stdout.
fn run_start_script(script: &std::path::Path, dir: &std::path::Path) -> anyhow::Result<String> {
    use anyhow::Context;
    let out = std::process::Command::new(script)
        .arg(dir)
        .env("ANKUSA_CP_WATCH_PID", std::process::id().to_string())
        .env("ANKUSA_K8S_ASSETS", k8s_assets())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        anyhow::bail!(
            "{} failed ({}):\n{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Removes a scenario's `dir`, or keeps it (a failure: `keep`, or `ANKUSA_E2E_KEEP=1`) and
/// says where.
fn keep_or_remove(dir: &std::path::Path, keep: bool) {
    if keep || std::env::var("ANKUSA_E2E_KEEP").is_ok_and(|v| v == "1") {
        eprintln!("[testkit] logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Whether tests that need the control plane must run (CI sets `ANKUSA_REQUIRE_CONTROL_PLANE=1`).
pub fn control_plane_required() -> bool {
    std::env::var("ANKUSA_REQUIRE_CONTROL_PLANE").is_ok_and(|v| v == "1")
}

/// Checks what a real-control-plane test needs. Returns false (after a loud message) when it
/// should be skipped; panics with the fix when `ANKUSA_REQUIRE_CONTROL_PLANE=1`.
pub fn control_plane_available(test: &str) -> bool {
    let mut missing = Vec::new();
    for b in ["kube-apiserver", "kube-controller-manager", "etcd"] {
        if !k8s_assets().join(b).exists() {
            missing.push(format!(
                "{} (run e2e/controlplane/build.sh)",
                k8s_assets().join(b).display()
            ));
        }
    }
    if !gateway_bin().exists() {
        missing.push(format!(
            "{} (build it: CARGO_TARGET_DIR=$HOME/.cache/ankusa/target cargo build -p ankusa-gateway, or set ANKUSA_BIN)",
            gateway_bin().display()
        ));
    }
    if !kubectl_bin().exists() {
        missing.push("kubectl (on PATH, or run charts/fetch-helm.sh)".into());
    }
    if missing.is_empty() {
        return true;
    }
    let msg = format!("{test}: missing {}", missing.join("; "));
    if control_plane_required() {
        panic!("{msg} -- ANKUSA_REQUIRE_CONTROL_PLANE=1 forbids skipping");
    }
    eprintln!(
        "\n######## SKIPPED {msg}\n######## (set ANKUSA_REQUIRE_CONTROL_PLANE=1 to make this a failure)\n"
    );
    false
}

pub fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(cmd))
            .find(|f| f.is_file())
    })
}

/// Serialises the tests of one process that start a control plane (2-core machines).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A client of one gateway pod's admin API as a user reaches it: HTTPS trusting only the
/// Gateway's CA bundle (`ca.crt` of `<gateway>-admin-tls`), the pod dialled at `addr` under
/// `host`, a name its certificate carries (`<pod>.<gateway>-pods.<namespace>.svc`).
pub fn admin_client(
    ca_pem: &str,
    host: &str,
    addr: std::net::SocketAddr,
) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .timeout(std::time::Duration::from_secs(10))
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(ca_pem.as_bytes())?)
        .resolve(host, addr)
        .build()?)
}
