//! A local control plane started with `e2e/controlplane/start.sh` and stopped with
//! `stop.sh` on drop (a watchdog stops it too if this process dies first).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;

use crate::repo_root;

pub struct ControlPlane {
    workdir: PathBuf,
    kubeconfig: PathBuf,
    stopped: bool,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and kube-controller-manager in `workdir` (6–10 s).
    pub fn start(workdir: &Path) -> anyhow::Result<ControlPlane> {
        std::fs::create_dir_all(workdir)?;
        let t0 = Instant::now();
        let stdout =
            crate::run_start_script(&repo_root().join("e2e/controlplane/start.sh"), workdir)?;
        let kubeconfig = stdout
            .lines()
            .find_map(|l| l.strip_prefix("KUBECONFIG="))
            .context("start.sh printed no KUBECONFIG=")?
            .into();
        eprintln!(
            "[testkit] control plane up in {:.1}s ({})",
            t0.elapsed().as_secs_f64(),
            workdir.display()
        );
        Ok(ControlPlane {
            workdir: workdir.to_path_buf(),
            kubeconfig,
            stopped: false,
        })
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// A client authenticated as the cluster admin.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        client_from(&self.kubeconfig).await
    }

    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let _ = Command::new(repo_root().join("e2e/controlplane/stop.sh"))
            .arg(&self.workdir)
            .env("ANKUSA_CP_STOP_GRACE", "5")
            .output();
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A client from a kubeconfig file.
pub async fn client_from(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}
