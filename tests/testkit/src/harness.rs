//! One scenario's world: a control plane, the CRDs, a namespace, the fake kubelet running
//! real gateways, the operator process, and `kubectl` bound to all of it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use tokio::process::Child;

use crate::controlplane::ControlPlane;
use crate::kubelet::{FakeKubelet, KubeletConfig};
use crate::process;

pub struct Harness {
    pub cp: ControlPlane,
    pub client: kube::Client,
    pub ns: String,
    pub dir: PathBuf,
    pub kubelet: Option<FakeKubelet>,
    operator: Option<Child>,
    operator_bin: PathBuf,
    pub operator_metrics: String,
    /// The operator's credentials: the chart's ServiceAccount (least-privilege RBAC from
    /// `helm template`), or the admin's when helm is absent and not required.
    operator_kubeconfig: Option<PathBuf>,
    /// Pod `<gw>-<n>` listens on 127.0.0.(ip_base + n).
    pub ip_base: u8,
    /// Free ingest and admin ports on every pod IP.
    pub http_port: u16,
    pub admin_port: u16,
    started: Instant,
    done: bool,
}

fn random_u8(lo: u8, hi: u8) -> u8 {
    lo + (fastrand::u8(..) % (hi - lo))
}

impl Harness {
    /// Starts everything for scenario `name` (CRDs installed as a 1.20 server accepts them).
    pub async fn start(name: &str, operator_bin: &Path) -> anyhow::Result<Harness> {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let started = Instant::now();
        let dir = std::env::temp_dir().join(format!(
            "ankusa-e2e-{name}-{}-{:04x}",
            std::process::id(),
            fastrand::u16(..)
        ));
        std::fs::create_dir_all(&dir)?;
        let cp = ControlPlane::start(&dir.join("controlplane"))?;
        let client = cp.client().await?;
        let ns = format!("e2e-{name}");
        let mut h = Harness {
            cp,
            client,
            ns,
            dir,
            kubelet: None,
            operator: None,
            operator_bin: operator_bin.to_path_buf(),
            operator_metrics: String::new(),
            operator_kubeconfig: None,
            ip_base: 0,
            http_port: 0,
            admin_port: 0,
            started,
            done: false,
        };
        h.install_crds().await?;
        h.kubectl(&["create", "namespace", &h.ns.clone()]).await?;
        h.wait_default_service_account().await?;
        // Pod IPs and ports nobody else uses right now.
        let mut tries = 0;
        loop {
            tries += 1;
            let base = random_u8(20, 200);
            let ips: Vec<String> = (0..8).map(|i| format!("127.0.0.{}", base + i)).collect();
            let http = 20000 + fastrand::u16(..20000);
            let admin = http + 1;
            let claim_check = http + 2;
            if [http, admin, claim_check]
                .iter()
                .all(|p| process::port_free_on(&ips, *p))
            {
                h.ip_base = base;
                h.http_port = http;
                h.admin_port = admin;
                break;
            }
            if tries > 50 {
                bail!("no free pod IP/port range found");
            }
        }
        h.kubelet = Some(
            FakeKubelet::start(
                h.client.clone(),
                KubeletConfig {
                    namespace: h.ns.clone(),
                    node: format!("fake-node-{}", h.ns),
                    root: h.dir.join("kubelet"),
                    bin: crate::gateway_bin(),
                    ip_base: h.ip_base,
                    env: vec![
                        ("RUST_LOG".into(), "info".into()),
                        // In a pod the claim check listens on the pod's own 127.0.0.1:4001;
                        // here all pods share the host, so give it a free port too.
                        (
                            "ANKUSA_CLAIM_CHECK_PORT".into(),
                            (h.http_port + 2).to_string(),
                        ),
                    ],
                    max_grace: Duration::from_secs(15),
                },
            )
            .await?,
        );
        h.operator_kubeconfig = Some(h.install_operator_rbac().await?);
        h.start_operator().await?;
        eprintln!(
            "[testkit] {name}: world ready in {:.1}s (ns {}, pod IPs 127.0.0.{}+, ports {}/{}, dir {})",
            h.started.elapsed().as_secs_f64(),
            h.ns,
            h.ip_base,
            h.http_port,
            h.admin_port,
            h.dir.display()
        );
        Ok(h)
    }

    async fn install_crds(&self) -> anyhow::Result<()> {
        let items: Vec<serde_json::Value> = ankusa_crds::all()
            .iter()
            .map(|(_, crd)| ankusa_crds::for_legacy_server(crd))
            .collect();
        let path = self.dir.join("crds-legacy.json");
        std::fs::write(
            &path,
            serde_json::to_vec(
                &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}),
            )?,
        )?;
        self.kubectl_global(&["apply", "--server-side", "-f", &path.display().to_string()])
            .await?;
        self.kubectl_global(&[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=60s",
        ])
        .await?;
        self.wait_openapi_published(&items).await
    }

    /// Waits until `/openapi/v2` holds a definition of every CRD's kind: the server publishes
    /// it some time after `Established`, and kubectl validates a manifest client-side only
    /// against a published definition (before that it accepts a misspelled field).
    async fn wait_openapi_published(&self, crds: &[serde_json::Value]) -> anyhow::Result<()> {
        let wanted: Vec<String> = crds
            .iter()
            .flat_map(|crd| {
                let group: Vec<&str> = crd["spec"]["group"]
                    .as_str()
                    .unwrap_or_default()
                    .split('.')
                    .rev()
                    .collect();
                let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
                crd["spec"]["versions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|v| v["served"] == true)
                    .filter_map(|v| v["name"].as_str())
                    .map(|v| format!("{}.{v}.{kind}", group.join(".")))
                    .collect::<Vec<_>>()
            })
            .collect();
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let req = http::Request::get("/openapi/v2").body(Vec::new())?;
            let doc: serde_json::Value = self.client.request(req).await?;
            let missing: Vec<&String> = wanted
                .iter()
                .filter(|d| doc["definitions"].get(d.as_str()).is_none())
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            if Instant::now() > end {
                bail!("/openapi/v2 still lacks {missing:?} 60 s after the CRDs were established");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    async fn wait_default_service_account(&self) -> anyhow::Result<()> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &self.ns);
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(sa) = api.get_opt("default").await?
                && sa.secrets.is_some_and(|s| !s.is_empty())
            {
                return Ok(());
            }
            if Instant::now() > end {
                bail!("namespace {} got no default ServiceAccount token", self.ns);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Applies the chart's ServiceAccount and RBAC (not its Deployment: the operator runs here
    /// as a process) and returns a kubeconfig holding that ServiceAccount's token.
    async fn install_operator_rbac(&self) -> anyhow::Result<PathBuf> {
        let helm = crate::helm_bin();
        if !helm.exists() {
            let msg = format!(
                "{} missing (run charts/fetch-helm.sh): the operator runs with admin rights instead of the chart's RBAC",
                helm.display()
            );
            if crate::control_plane_required() {
                bail!("{msg}");
            }
            eprintln!("######## {msg}");
            return Ok(self.cp.kubeconfig().to_path_buf());
        }
        let out = tokio::process::Command::new(&helm)
            .args(["template", "ankusa"])
            .arg(crate::repo_root().join("charts/ankusa"))
            .args([
                "--namespace",
                &self.ns,
                "--set",
                "crds.enabled=false",
                "--set",
                "metrics.service=false",
            ])
            .output()
            .await?;
        if !out.status.success() {
            bail!("helm template: {}", String::from_utf8_lossy(&out.stderr));
        }
        let text = String::from_utf8(out.stdout)?;
        let docs = rbac_docs(&text);
        self.kubectl_stdin(&["apply", "-f", "-"], &docs.join("\n---\n"))
            .await?;
        let path = self.dir.join("operator.kubeconfig");
        service_account_kubeconfig(
            &self.client,
            self.cp.kubeconfig(),
            &self.ns,
            "ankusa-ankusa-operator",
            &path,
        )
        .await?;
        Ok(path)
    }

    /// Starts (or restarts) the operator process.
    pub async fn start_operator(&mut self) -> anyhow::Result<()> {
        let (child, url) = self.spawn_operator("e2e-operator").await?;
        self.operator = Some(child);
        self.operator_metrics = url;
        Ok(())
    }

    /// Spawns an operator replica with `identity`; returns it and its /metrics base URL once
    /// it serves /health.
    pub async fn spawn_operator(&self, identity: &str) -> anyhow::Result<(Child, String)> {
        let metrics_port = process::free_port("127.0.0.1");
        let url = format!("http://127.0.0.1:{metrics_port}");
        let mut cmd = tokio::process::Command::new(&self.operator_bin);
        let kubeconfig = self
            .operator_kubeconfig
            .clone()
            .unwrap_or_else(|| self.cp.kubeconfig().to_path_buf());
        cmd.env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,ankusa_operator=debug,kube=warn")
            .env("ANKUSA_GATEWAY_IMAGE", "ankusa:e2e")
            .args([
                "--metrics-addr",
                &format!("127.0.0.1:{metrics_port}"),
                "--lease-namespace",
                &self.ns,
                "--identity",
                identity,
            ]);
        let child = process::spawn(cmd, &self.dir.join(format!("operator-{identity}.log")))?;
        let http = reqwest::Client::new();
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            if http.get(format!("{url}/health")).send().await.is_ok() {
                return Ok((child, url));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "operator {identity} did not serve /health (see its log in {})",
            self.dir.display()
        )
    }

    pub async fn stop_operator(&mut self) {
        if let Some(mut c) = self.operator.take() {
            process::stop(&mut c, Duration::from_secs(10)).await;
        }
    }

    /// The operator's /metrics text.
    pub async fn operator_metrics(&self) -> anyhow::Result<String> {
        Ok(reqwest::get(format!("{}/metrics", self.operator_metrics))
            .await?
            .text()
            .await?)
    }

    async fn run_kubectl(
        &self,
        args: &[&str],
        stdin: Option<&str>,
        namespaced: bool,
    ) -> anyhow::Result<String> {
        let mut cmd = tokio::process::Command::new(crate::kubectl_bin());
        cmd.env("KUBECONFIG", self.cp.kubeconfig());
        // A cache per control plane: kubectl keys ~/.kube/cache by host:port, and a reused
        // port would validate against an earlier control plane's OpenAPI.
        cmd.arg(format!(
            "--cache-dir={}",
            self.cp.workdir().join("kubectl-cache").display()
        ));
        if namespaced {
            cmd.args(["-n", &self.ns]);
        }
        cmd.args(args).kill_on_drop(true);
        let out = process::output_with_input(cmd, stdin)
            .await
            .context("running kubectl")?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // kubectl 1.3x warns about skew with the 1.20 server; that is expected noise.
        let stderr: String = stderr
            .lines()
            .filter(|l| !l.contains("version difference") && !l.contains("WARNING: version"))
            .collect::<Vec<_>>()
            .join("\n");
        if !out.status.success() {
            bail!("kubectl {} failed: {stderr}{stdout}", args.join(" "));
        }
        Ok(stdout)
    }

    /// `kubectl -n <ns> ARGS`; the output, or an error with kubectl's message.
    pub async fn kubectl(&self, args: &[&str]) -> anyhow::Result<String> {
        self.run_kubectl(args, None, true).await
    }

    /// `kubectl ARGS` without a namespace.
    pub async fn kubectl_global(&self, args: &[&str]) -> anyhow::Result<String> {
        self.run_kubectl(args, None, false).await
    }

    /// `kubectl -n <ns> apply -f -` of `yaml`.
    pub async fn apply(&self, yaml: &str) -> anyhow::Result<String> {
        self.run_kubectl(&["apply", "-f", "-"], Some(yaml), true)
            .await
    }

    /// `kubectl -n <ns> ARGS` with `stdin`.
    pub async fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> anyhow::Result<String> {
        self.run_kubectl(args, Some(stdin), true).await
    }

    pub fn pod_ip(&self, gateway: &str, ordinal: u8) -> String {
        let _ = gateway;
        format!("127.0.0.{}", self.ip_base + ordinal)
    }

    /// Stops everything; keeps the scenario dir when `keep` (a failure) or `ANKUSA_E2E_KEEP=1`,
    /// and says where.
    pub async fn shutdown(mut self, keep: bool) {
        self.stop_operator().await;
        if let Some(k) = self.kubelet.take() {
            k.shutdown().await;
        }
        self.cp.stop();
        self.done = true;
        crate::keep_or_remove(&self.dir, keep);
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if !self.done {
            // A panic: processes die with their handles (kill_on_drop / PDEATHSIG); the
            // control plane is stopped by its own Drop. Keep the logs.
            eprintln!(
                "[testkit] scenario failed; logs kept in {}",
                self.dir.display()
            );
        }
    }
}

/// The ServiceAccounts and RBAC objects of a `helm template` output (not the Deployment, the
/// PodDisruptionBudget or the `helm test` pod, which the operator run as a process does not need).
pub fn rbac_docs(rendered: &str) -> Vec<&str> {
    const KINDS: [&str; 5] = [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    ];
    rendered
        .split("\n---")
        .filter(|d| {
            d.lines().any(|l| {
                l.strip_prefix("kind: ")
                    .is_some_and(|k| KINDS.contains(&k.trim()))
            })
        })
        .collect()
}

/// Writes to `out` a copy of the admin kubeconfig that authenticates as ServiceAccount
/// `ns/sa` instead, with the token the token controller gives it (waits up to 30 s for it).
pub async fn service_account_kubeconfig(
    client: &kube::Client,
    admin_kubeconfig: &Path,
    ns: &str,
    sa_name: &str,
    out: &Path,
) -> anyhow::Result<()> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let end = Instant::now() + Duration::from_secs(30);
    let token = loop {
        let name = api
            .get_opt(sa_name)
            .await?
            .and_then(|sa| sa.secrets)
            .and_then(|s| s.first().and_then(|r| r.name.clone()));
        if let Some(name) = name
            && let Some(t) = secrets
                .get_opt(&name)
                .await?
                .and_then(|s| s.data)
                .and_then(|d| d.get("token").cloned())
        {
            break String::from_utf8(t.0)?;
        }
        if Instant::now() > end {
            bail!("ServiceAccount {sa_name} got no token");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let admin = std::fs::read_to_string(admin_kubeconfig)?;
    let kc: String = admin
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("token:") {
                format!("    token: {token}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(out, kc)?;
    Ok(())
}
