//! A one-node cluster with a REAL kubelet (`e2e/node/start.sh`: the control plane, a private
//! Docker daemon, kube-scheduler, kubelet with dockershim, kube-proxy, local PersistentVolumes),
//! stopped on drop (a watchdog stops it too if this process dies first), the images under test
//! loaded into the node's Docker, and `kubectl`/`helm`/`docker` bound to it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::{helm_bin, k8s_assets, kubectl_bin, repo_root};

pub struct RealNode {
    /// Held while the node runs: one real node per machine (a fixed bridge and Docker socket).
    _lock: std::fs::File,
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub docker_host: String,
    /// `<dir>/env` (ANKUSA_CP_*, ANKUSA_NODE_*).
    pub env: HashMap<String, String>,
    stopped: bool,
}

/// What the real-node suite needs; false (after a loud message) when it should be skipped,
/// a panic naming the fix when `ANKUSA_REQUIRE_CONTROL_PLANE=1`.
pub fn available(test: &str) -> bool {
    let mut missing = Vec::new();
    for b in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubelet",
        "kube-proxy",
        "pause",
    ] {
        if !k8s_assets().join(b).exists() {
            missing.push(format!(
                "{} (run e2e/controlplane/build.sh)",
                k8s_assets().join(b).display()
            ));
        }
    }
    for tool in ["dockerd", "docker", "iptables"] {
        if crate::which(tool).is_none() {
            missing.push(format!("{tool} (run e2e/node/install.sh)"));
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        missing.push("root (a kubelet and a Docker daemon)".into());
    }
    if !helm_bin().exists() {
        missing.push("helm (run charts/fetch-helm.sh)".into());
    }
    if !kubectl_bin().exists() {
        missing.push("kubectl".into());
    }
    for b in ["ankusa", "ankusa-operator", "ankusa-e2e-receiver"] {
        let p = crate::gateway_bin().with_file_name(b);
        if !p.exists() {
            missing.push(format!(
                "{} (cargo build --workspace --all-targets)",
                p.display()
            ));
        }
    }
    if missing.is_empty() {
        return true;
    }
    let msg = format!("{test}: missing {}", missing.join("; "));
    if crate::control_plane_required() {
        panic!("{msg} -- ANKUSA_REQUIRE_CONTROL_PLANE=1 forbids skipping");
    }
    eprintln!("\n######## SKIPPED {msg}\n");
    false
}

impl RealNode {
    /// Starts the cluster in `dir` (about 20–40 s).
    pub fn start(dir: &Path) -> anyhow::Result<RealNode> {
        std::fs::create_dir_all(dir)?;
        let lock_path = std::env::temp_dir().join("ankusa-real-node.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)?;
        // SAFETY: flock on a file descriptor we own; blocks until another run's node is gone.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) } != 0 {
            bail!(
                "flock {}: {}",
                lock_path.display(),
                std::io::Error::last_os_error()
            );
        }
        let t0 = Instant::now();
        let stdout = crate::run_start_script(&repo_root().join("e2e/node/start.sh"), dir)?;
        let value = |k: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(k).map(str::to_string))
        };
        let kubeconfig: PathBuf = value("KUBECONFIG=")
            .context("start.sh printed no KUBECONFIG=")?
            .into();
        let docker_host = value("DOCKER_HOST=").context("start.sh printed no DOCKER_HOST=")?;
        let env = std::fs::read_to_string(dir.join("env"))?
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        eprintln!(
            "[testkit] real node up in {:.1}s ({})",
            t0.elapsed().as_secs_f64(),
            dir.display()
        );
        Ok(RealNode {
            _lock: lock,
            dir: dir.to_path_buf(),
            kubeconfig,
            docker_host,
            env,
            stopped: false,
        })
    }

    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        crate::controlplane::client_from(&self.kubeconfig).await
    }

    fn command(&self, program: &Path) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(program);
        c.env("KUBECONFIG", &self.kubeconfig)
            .env("DOCKER_HOST", &self.docker_host)
            .env("HELM_CACHE_HOME", self.dir.join("helm/cache"))
            .env("HELM_CONFIG_HOME", self.dir.join("helm/config"))
            .env("HELM_DATA_HOME", self.dir.join("helm/data"))
            .kill_on_drop(true);
        if program == kubectl_bin() {
            // kubectl caches discovery and OpenAPI per host:port under ~/.kube/cache; a later
            // run's server on a reused port would be validated against an old run's schemas.
            c.arg(format!(
                "--cache-dir={}",
                self.dir.join("kubectl-cache").display()
            ));
        }
        c
    }

    async fn run(
        &self,
        program: &Path,
        args: &[&str],
        stdin: Option<&str>,
    ) -> anyhow::Result<String> {
        let mut cmd = self.command(program);
        cmd.args(args);
        let out = crate::process::output_with_input(cmd, stdin)
            .await
            .with_context(|| format!("running {}", program.display()))?;
        if !out.status.success() {
            bail!(
                "{} {}: {}{}",
                program.display(),
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    pub async fn kubectl(&self, args: &[&str]) -> anyhow::Result<String> {
        self.run(&kubectl_bin(), args, None).await
    }

    /// `kubectl ARGS` left running (e.g. `logs -f`), its stdout piped.
    pub fn spawn_kubectl(&self, args: &[&str]) -> anyhow::Result<tokio::process::Child> {
        let mut cmd = self.command(&kubectl_bin());
        cmd.args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        Ok(cmd.spawn()?)
    }

    pub async fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> anyhow::Result<String> {
        self.run(&kubectl_bin(), args, Some(stdin)).await
    }

    pub async fn helm(&self, args: &[&str]) -> anyhow::Result<String> {
        self.run(&helm_bin(), args, None).await
    }

    pub async fn docker(&self, args: &[&str]) -> anyhow::Result<String> {
        self.run(Path::new("docker"), args, None).await
    }

    /// Builds an image into the node's Docker from binaries of this test run's target dir
    /// (debug builds, stripped), with the same script `scripts/images` uses for release ones.
    pub async fn build_image(&self, tag: &str, bins: &[&str]) -> anyhow::Result<()> {
        let t0 = Instant::now();
        let dir = crate::gateway_bin()
            .parent()
            .map(Path::to_path_buf)
            .context("binary dir")?;
        let mut args: Vec<String> = vec!["--tag".into(), tag.into(), "--strip".into()];
        args.extend(bins.iter().map(|b| dir.join(b).display().to_string()));
        let script = repo_root().join("scripts/lib/assemble-image");
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.run(&script, &a, None).await?;
        let size = self
            .docker(&["image", "inspect", "-f", "{{.Size}}", tag])
            .await?;
        eprintln!(
            "[testkit] image {tag} built in {:.1}s ({} MB) {out}",
            t0.elapsed().as_secs_f64(),
            size.trim().parse::<u64>().unwrap_or(0) / 1_000_000
        );
        Ok(())
    }

    /// Stops the cluster and restores the machine; keeps the workdir when `keep` or
    /// `ANKUSA_E2E_KEEP=1` and says where.
    pub fn stop(&mut self, keep: bool) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let out = Command::new(repo_root().join("e2e/node/stop.sh"))
            .arg(&self.dir)
            .env("ANKUSA_CP_STOP_GRACE", "5")
            .output();
        if let Ok(o) = out
            && !o.status.success()
        {
            eprintln!(
                "[testkit] e2e/node/stop.sh: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        crate::keep_or_remove(&self.dir, keep);
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.stop(std::thread::panicking());
    }
}

/// Polls `f` every 200 ms until it returns `Some`, or fails after `timeout` naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if Instant::now() > end {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
