//! A fake kubelet for the local control plane (which has no kubelet and no scheduler).
//!
//! It registers a Node, binds the namespace's pods to it, and for each bound pod runs the
//! container's command as a real process: the configured binary (the `ankusa` gateway)
//! with the container's `args` (`$(VAR)` expanded, mount paths mapped to local dirs) and
//! environment (`value`, `fieldRef`, `secretKeyRef`). Each pod gets its own 127.0.0.N
//! (from its ordinal) which the gateway binds through `ANKUSA_*_IP`, and its own persistent
//! dir per PVC (by claim uid: a recreated pod keeps its store, a claim deleted and made anew
//! starts empty; a pod whose claim is gone or being deleted stays pending, as on a kubelet). Secret volumes are written
//! the way the kubelet's AtomicWriter does (a timestamped dir, `..data` symlink swapped by
//! rename, one symlink per key) and rewritten when the Secret changes. The readiness probe
//! (`httpGet`, HTTP or HTTPS without verification, as the kubelet does) is polled and the pod's status patched (Running, podIP, Ready); a process
//! that exits is restarted (restartPolicy Always, `restartCount` counted). A pod being
//! deleted gets SIGTERM, SIGKILL after its grace period, then is removed from the API.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Node, PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::{Mutex, Notify, watch};
use tokio::task::JoinHandle;

use crate::kubelet_ip::{now, pod_ip};
use crate::process;

#[derive(Debug, Clone)]
pub struct KubeletConfig {
    pub namespace: String,
    /// Name of the fake Node the pods are bound to.
    pub node: String,
    /// Pod dirs, volumes, PVC dirs and logs go here.
    pub root: PathBuf,
    /// What every container runs (the image is ignored).
    pub bin: PathBuf,
    /// Pod `<name>-<ordinal>` gets 127.0.0.(ip_base + ordinal); others, see `pod_ip`.
    pub ip_base: u8,
    /// Extra environment for every process (e.g. `RUST_LOG`).
    pub env: Vec<(String, String)>,
    /// Longest grace given on deletion (pods ask for up to `terminationGracePeriodSeconds`).
    pub max_grace: Duration,
}

struct PodRt {
    uid: String,
    stop: watch::Sender<bool>,
    kill: Arc<Notify>,
    task: JoinHandle<()>,
    /// (Secret name, local dir) of each Secret volume.
    secret_volumes: Vec<(String, PathBuf)>,
    log: PathBuf,
}

struct Inner {
    client: Client,
    cfg: KubeletConfig,
    pods: Mutex<HashMap<String, PodRt>>,
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

pub struct FakeKubelet {
    inner: Arc<Inner>,
    tasks: Vec<JoinHandle<()>>,
}

impl FakeKubelet {
    pub async fn start(client: Client, cfg: KubeletConfig) -> anyhow::Result<FakeKubelet> {
        std::fs::create_dir_all(cfg.root.join("logs"))?;
        let nodes: Api<Node> = Api::all(client.clone());
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": cfg.node, "labels": {"kubernetes.io/hostname": cfg.node}},
        });
        match nodes
            .create(&PostParams::default(), &serde_json::from_value(node)?)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        let inner = Arc::new(Inner {
            client: client.clone(),
            cfg: cfg.clone(),
            pods: Mutex::new(HashMap::new()),
            locks: Mutex::new(HashMap::new()),
        });
        let pods_task = {
            let inner = inner.clone();
            let api: Api<Pod> = Api::namespaced(client.clone(), &cfg.namespace);
            tokio::spawn(async move {
                let mut events = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .touched_objects()
                    .boxed();
                while let Some(ev) = events.next().await {
                    let Ok(pod) = ev else { continue };
                    let inner = inner.clone();
                    tokio::spawn(async move { inner.sync(pod.name_any()).await });
                }
            })
        };
        let secrets_task = {
            let inner = inner.clone();
            let api: Api<Secret> = Api::namespaced(client.clone(), &cfg.namespace);
            tokio::spawn(async move {
                let mut events = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
                    .boxed();
                while let Some(ev) = events.next().await {
                    if let Ok(secret) = ev {
                        inner.secret_changed(&secret).await;
                    }
                }
            })
        };
        // Resync now and then, as a kubelet would (missed events, pods left Pending).
        let resync_task = {
            let inner = inner.clone();
            let api: Api<Pod> = Api::namespaced(client, &cfg.namespace);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    if let Ok(list) = api.list(&Default::default()).await {
                        for p in list {
                            let inner = inner.clone();
                            tokio::spawn(async move { inner.sync(p.name_any()).await });
                        }
                    }
                }
            })
        };
        Ok(FakeKubelet {
            inner,
            tasks: vec![pods_task, secrets_task, resync_task],
        })
    }

    /// The IP a pod gets.
    pub fn pod_ip(&self, pod: &str) -> Option<String> {
        pod_ip(self.inner.cfg.ip_base, pod)
    }

    /// SIGKILLs the pod's process (a crash); the kubelet restarts it (same pod UID).
    pub async fn kill(&self, pod: &str) -> bool {
        match self.inner.pods.lock().await.get(pod) {
            Some(rt) => {
                rt.kill.notify_one();
                true
            }
            None => false,
        }
    }

    /// Log file of a pod's processes.
    pub async fn log(&self, pod: &str) -> Option<PathBuf> {
        self.inner
            .pods
            .lock()
            .await
            .get(pod)
            .map(|rt| rt.log.clone())
    }

    /// Stops every process (SIGTERM, then SIGKILL) and the watches.
    pub async fn shutdown(mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        let rts: Vec<PodRt> = self
            .inner
            .pods
            .lock()
            .await
            .drain()
            .map(|(_, v)| v)
            .collect();
        for rt in rts {
            let _ = rt.stop.send(true);
            let _ = rt.task.await;
        }
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Inner {
    async fn lock_for(&self, pod: &str) -> Arc<Mutex<()>> {
        self.locks
            .lock()
            .await
            .entry(pod.to_string())
            .or_default()
            .clone()
    }

    fn pods_api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.cfg.namespace)
    }

    /// Brings the local runtime of one pod in line with the API's current view of it.
    async fn sync(self: Arc<Self>, name: String) {
        let lock = self.lock_for(&name).await;
        let _g = lock.lock().await;
        let api = self.pods_api();
        let pod = match api.get_opt(&name).await {
            Ok(p) => p,
            Err(e) => {
                eprintln!("[kubelet] get pod {name}: {e}");
                return;
            }
        };
        let Some(pod) = pod else {
            if let Some(rt) = self.pods.lock().await.remove(&name) {
                Self::stop_rt(rt).await;
            }
            return;
        };
        let uid = pod.uid().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            if spec
                .node_name
                .as_deref()
                .is_some_and(|n| n != self.cfg.node)
            {
                return;
            }
            if let Some(rt) = self.pods.lock().await.remove(&name) {
                let grace = spec
                    .termination_grace_period_seconds
                    .map(|s| Duration::from_secs(s.max(0) as u64))
                    .unwrap_or(Duration::from_secs(30))
                    .min(self.cfg.max_grace);
                let _ = rt.stop.send(true);
                let _ = tokio::time::timeout(grace + Duration::from_secs(2), rt.task).await;
            }
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..Default::default()
            };
            let _ = api.delete(&name, &dp).await;
            return;
        }
        let Some(node) = spec.node_name.clone() else {
            let binding = json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": self.cfg.node},
            });
            if let Err(e) = api
                .create_subresource::<_, serde_json::Value>(
                    "binding",
                    &name,
                    &PostParams::default(),
                    &binding,
                )
                .await
            {
                eprintln!("[kubelet] bind {name}: {e}");
            }
            return;
        };
        if node != self.cfg.node {
            return;
        }
        let old = {
            let mut pods = self.pods.lock().await;
            match pods.get(&name) {
                Some(rt) if rt.uid == uid => return,
                Some(_) => pods.remove(&name),
                None => None,
            }
        };
        if let Some(rt) = old {
            Self::stop_rt(rt).await;
        }
        match self.clone().start_pod(&pod).await {
            Ok(rt) => {
                self.pods.lock().await.insert(name, rt);
            }
            Err(e) => eprintln!("[kubelet] start {name}: {e:#}"),
        }
    }

    async fn stop_rt(rt: PodRt) {
        let _ = rt.stop.send(true);
        let _ = rt.task.await;
    }

    async fn secret_changed(&self, secret: &Secret) {
        let name = secret.name_any();
        let dirs: Vec<PathBuf> = self
            .pods
            .lock()
            .await
            .values()
            .flat_map(|rt| rt.secret_volumes.iter())
            .filter(|(s, _)| *s == name)
            .map(|(_, d)| d.clone())
            .collect();
        for d in dirs {
            if let Err(e) = atomic_write(&d, &secret_files(secret)) {
                eprintln!("[kubelet] update volume {}: {e}", d.display());
            }
        }
    }

    async fn start_pod(self: Arc<Self>, pod: &Pod) -> anyhow::Result<PodRt> {
        let name = pod.name_any();
        let uid = pod.uid().unwrap_or_default();
        let ip = pod_ip(self.cfg.ip_base, &name).ok_or_else(|| anyhow::anyhow!("{name}: no IP"))?;
        let spec = pod.spec.clone().unwrap_or_default();
        let container = spec
            .containers
            .first()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("pod {name} has no container"))?;
        let pod_dir = self
            .cfg
            .root
            .join("pods")
            .join(format!("{name}-{}", &uid[..uid.len().min(8)]));
        // Volumes.
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let mut volume_dirs: HashMap<String, PathBuf> = HashMap::new();
        let mut secret_volumes = Vec::new();
        let mut pvc_dirs = Vec::new();
        for v in spec.volumes.clone().unwrap_or_default() {
            if let Some(s) = &v.secret {
                let sname = s.secret_name.clone().unwrap_or_default();
                let dir = pod_dir.join("volumes").join(&v.name);
                let files = match secrets.get_opt(&sname).await? {
                    Some(sec) => secret_files(&sec),
                    None => anyhow::bail!(
                        "Secret {sname} of volume {} not found (pod stays pending)",
                        v.name
                    ),
                };
                atomic_write(&dir, &files)?;
                secret_volumes.push((sname, dir.clone()));
                volume_dirs.insert(v.name.clone(), dir);
            } else if let Some(c) = &v.persistent_volume_claim {
                // As a kubelet: no start on a claim that is gone or being deleted; and the
                // data is the claim's (by uid), so a claim recreated under the same name
                // starts empty, as a new volume does.
                let claims: Api<PersistentVolumeClaim> =
                    Api::namespaced(self.client.clone(), &self.cfg.namespace);
                let claim = match claims.get_opt(&c.claim_name).await? {
                    Some(claim) if claim.metadata.deletion_timestamp.is_none() => claim,
                    Some(_) => anyhow::bail!(
                        "volume claim {} is being deleted (pod stays pending)",
                        c.claim_name
                    ),
                    None => anyhow::bail!(
                        "volume claim {} not found (pod stays pending)",
                        c.claim_name
                    ),
                };
                let claim_uid = claim.uid().unwrap_or_default();
                let dir = self.cfg.root.join("pvc").join(format!(
                    "{}-{}",
                    c.claim_name,
                    &claim_uid[..claim_uid.len().min(8)]
                ));
                std::fs::create_dir_all(&dir)?;
                pvc_dirs.push(v.name.clone());
                volume_dirs.insert(v.name.clone(), dir);
            } else {
                let dir = pod_dir.join("volumes").join(&v.name);
                std::fs::create_dir_all(&dir)?;
                volume_dirs.insert(v.name.clone(), dir);
            }
        }
        // Mounts: container path → local dir, longest first.
        let mut mounts: Vec<(String, PathBuf)> = container
            .volume_mounts
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| Some((m.mount_path.clone(), volume_dirs.get(&m.name)?.clone())))
            .collect();
        mounts.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        let data_dir = container
            .volume_mounts
            .clone()
            .unwrap_or_default()
            .into_iter()
            .find(|m| pvc_dirs.contains(&m.name))
            .and_then(|m| volume_dirs.get(&m.name).cloned());
        let env = self.resolve_env(pod, &container, &ip, &secrets).await?;
        let remap = |s: &str| -> String {
            for (p, local) in &mounts {
                if let Some(rest) = s.strip_prefix(p.as_str())
                    && (rest.is_empty() || rest.starts_with('/'))
                {
                    return format!("{}{rest}", local.display());
                }
            }
            s.to_string()
        };
        let args: Vec<String> = container
            .args
            .clone()
            .unwrap_or_default()
            .iter()
            .map(|a| remap(&expand(a, &env)))
            .collect();
        let mut env: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k, remap(&v))).collect();
        env.push(("ANKUSA_HTTP_IP".into(), ip.clone()));
        env.push(("ANKUSA_ADMIN_IP".into(), ip.clone()));
        env.push(("ANKUSA_CLAIM_CHECK_IP".into(), ip.clone()));
        if let Some(d) = &data_dir {
            env.push(("ANKUSA_DATA_DIR".into(), d.display().to_string()));
        }
        env.extend(self.cfg.env.iter().cloned());
        let probe = container
            .readiness_probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .map(|h| {
                let port = match &h.port {
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => *n,
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => {
                        container
                            .ports
                            .clone()
                            .unwrap_or_default()
                            .iter()
                            .find(|p| p.name.as_deref() == Some(s.as_str()))
                            .map(|p| p.container_port)
                            .unwrap_or(0)
                    }
                };
                let scheme = h.scheme.as_deref().unwrap_or("HTTP").to_ascii_lowercase();
                format!(
                    "{scheme}://{ip}:{port}{}",
                    h.path.clone().unwrap_or_else(|| "/".into())
                )
            });
        let log = self.cfg.root.join("logs").join(format!("{name}.log"));
        let (stop_tx, stop_rx) = watch::channel(false);
        let kill = Arc::new(Notify::new());
        let task = tokio::spawn(
            self.clone().run_container(RunSpec {
                pod: name.clone(),
                uid: uid.clone(),
                ip: ip.clone(),
                container: container.name.clone(),
                image: container.image.clone().unwrap_or_default(),
                args,
                env,
                probe,
                log: log.clone(),
                grace: spec
                    .termination_grace_period_seconds
                    .map(|s| Duration::from_secs(s.max(0) as u64))
                    .unwrap_or(Duration::from_secs(30))
                    .min(self.cfg.max_grace),
                stop: stop_rx,
                kill: kill.clone(),
            }),
        );
        Ok(PodRt {
            uid,
            stop: stop_tx,
            kill,
            task,
            secret_volumes,
            log,
        })
    }

    async fn resolve_env(
        &self,
        pod: &Pod,
        c: &Container,
        ip: &str,
        secrets: &Api<Secret>,
    ) -> anyhow::Result<Vec<(String, String)>> {
        let mut out: Vec<(String, String)> = Vec::new();
        for e in c.env.clone().unwrap_or_default() {
            let value = if let Some(v) = &e.value {
                expand(v, &out)
            } else if let Some(from) = &e.value_from {
                if let Some(f) = &from.field_ref {
                    match f.field_path.as_str() {
                        "metadata.name" => pod.name_any(),
                        "metadata.namespace" => pod.namespace().unwrap_or_default(),
                        "metadata.uid" => pod.uid().unwrap_or_default(),
                        "status.podIP" => ip.to_string(),
                        "spec.nodeName" => self.cfg.node.clone(),
                        other => anyhow::bail!("fieldRef {other} not emulated"),
                    }
                } else if let Some(s) = &from.secret_key_ref {
                    let sec = secrets
                        .get_opt(&s.name)
                        .await?
                        .ok_or_else(|| anyhow::anyhow!("Secret {} not found", s.name))?;
                    let bytes = sec
                        .data
                        .and_then(|d| d.get(&s.key).cloned())
                        .ok_or_else(|| anyhow::anyhow!("Secret {} has no key {}", s.name, s.key))?;
                    String::from_utf8(bytes.0)?
                } else {
                    anyhow::bail!("env {} source not emulated", e.name);
                }
            } else {
                String::new()
            };
            out.push((e.name.clone(), value));
        }
        Ok(out)
    }

    async fn patch_status(&self, r: &RunSpec, ready: bool, restarts: i32, running: bool) {
        let t = now();
        let b = if ready { "True" } else { "False" };
        let state = if running {
            json!({"running": {"startedAt": t}})
        } else {
            json!({"waiting": {"reason": "CrashLoopBackOff"}})
        };
        let body = json!({
            "status": {
                "phase": "Running",
                "hostIP": "127.0.0.1",
                "podIP": r.ip,
                "podIPs": [{"ip": r.ip}],
                "startTime": t,
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
                    {"type": "Initialized", "status": "True", "lastTransitionTime": t},
                    {"type": "ContainersReady", "status": b, "lastTransitionTime": t},
                    {"type": "Ready", "status": b, "lastTransitionTime": t},
                ],
                "containerStatuses": [{
                    "name": r.container, "ready": ready, "restartCount": restarts,
                    "image": r.image, "imageID": "", "started": running, "state": state,
                }],
            }
        });
        let api = self.pods_api();
        // Only patch the pod we run (a same-named successor must not get our status).
        match api.get_opt(&r.pod).await {
            Ok(Some(p)) if p.uid().as_deref() == Some(r.uid.as_str()) => {
                if let Err(e) = api
                    .patch_status(&r.pod, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                {
                    eprintln!("[kubelet] status of {}: {e}", r.pod);
                }
            }
            _ => {}
        }
    }

    async fn run_container(self: Arc<Self>, mut r: RunSpec) {
        // Like the kubelet, an HTTPS probe does not verify the pod's certificate.
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .no_proxy()
            .danger_accept_invalid_certs(true)
            .build()
            .expect("http client");
        let mut restarts = 0;
        loop {
            let mut cmd = tokio::process::Command::new(&self.cfg.bin);
            cmd.args(&r.args).env_clear();
            for k in ["PATH", "HOME", "TMPDIR"] {
                if let Some(v) = std::env::var_os(k) {
                    cmd.env(k, v);
                }
            }
            cmd.envs(r.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&r.log)
                .and_then(|mut f| {
                    use std::io::Write;
                    writeln!(
                        f,
                        "----- [kubelet] start {} ({}) on {} restart {restarts}: {:?}",
                        r.pod, r.uid, r.ip, r.args
                    )
                });
            let mut child = match process::spawn(cmd, &r.log) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("[kubelet] spawn {}: {e}", r.pod);
                    return;
                }
            };
            self.patch_status(&r, false, restarts, true).await;
            let mut ready = false;
            let mut failures = 0;
            loop {
                tokio::select! {
                    _ = r.stop.changed() => {
                        process::stop(&mut child, r.grace).await;
                        return;
                    }
                    _ = r.kill.notified() => {
                        process::kill9(&child);
                    }
                    _ = child.wait() => break,
                    _ = tokio::time::sleep(Duration::from_millis(300)) => {
                        let ok = match &r.probe {
                            Some(url) => http.get(url).send().await.is_ok_and(|x| x.status().is_success()),
                            None => true,
                        };
                        failures = if ok { 0 } else { failures + 1 };
                        let now_ready = if ready { failures < 3 } else { ok };
                        if now_ready != ready {
                            ready = now_ready;
                            self.patch_status(&r, ready, restarts, true).await;
                        }
                    }
                }
            }
            restarts += 1;
            self.patch_status(&r, false, restarts, false).await;
            tokio::select! {
                _ = r.stop.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }
}

struct RunSpec {
    pod: String,
    uid: String,
    ip: String,
    container: String,
    image: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    probe: Option<String>,
    log: PathBuf,
    grace: Duration,
    stop: watch::Receiver<bool>,
    kill: Arc<Notify>,
}

/// `$(VAR)` expansion as the kubelet does it (unknown references stay as written).
pub fn expand(s: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("$(") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find(')') {
            Some(j) => {
                let var = &after[..j];
                match env.iter().rev().find(|(k, _)| k == var) {
                    Some((_, v)) => out.push_str(v),
                    None => out.push_str(&rest[i..i + 3 + j]),
                }
                rest = &after[j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn secret_files(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    s.data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

/// Writes `files` into `dir` the way the kubelet's AtomicWriter does: a new `..<timestamp>`
/// dir, a `..data_tmp` symlink renamed over `..data`, one `<key> -> ..data/<key>` symlink per
/// key; stale keys and the previous timestamp dir are removed.
pub fn atomic_write(dir: &Path, files: &BTreeMap<String, Vec<u8>>) -> std::io::Result<()> {
    use std::os::unix::fs::symlink;
    std::fs::create_dir_all(dir)?;
    let stamp = format!(
        "..{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let ts = dir.join(&stamp);
    std::fs::create_dir(&ts)?;
    for (k, v) in files {
        std::fs::write(ts.join(k), v)?;
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(&stamp, &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))?;
    for k in files.keys() {
        let link = dir.join(k);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(format!("..data/{k}"), &link)?;
        }
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") {
            if name != stamp && name != "..data" {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        } else if !files.contains_key(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_like_the_kubelet() {
        let env = vec![("POD_NAME".to_string(), "gw-1".to_string())];
        assert_eq!(
            expand("/etc/ankusa/$(POD_NAME).yaml", &env),
            "/etc/ankusa/gw-1.yaml"
        );
        assert_eq!(expand("$(NOPE)-x", &env), "$(NOPE)-x");
    }

    #[test]
    fn atomic_write_swaps_data() {
        let d = tempfile::tempdir().unwrap();
        let mut files = BTreeMap::from([("a.yaml".to_string(), b"one".to_vec())]);
        atomic_write(d.path(), &files).unwrap();
        assert_eq!(std::fs::read(d.path().join("a.yaml")).unwrap(), b"one");
        files.insert("a.yaml".into(), b"two".to_vec());
        files.insert("b.yaml".into(), b"bee".to_vec());
        atomic_write(d.path(), &files).unwrap();
        assert_eq!(std::fs::read(d.path().join("a.yaml")).unwrap(), b"two");
        assert_eq!(std::fs::read(d.path().join("b.yaml")).unwrap(), b"bee");
        files.remove("a.yaml");
        atomic_write(d.path(), &files).unwrap();
        assert!(!d.path().join("a.yaml").exists());
        let stamps = std::fs::read_dir(d.path())
            .unwrap()
            .filter(|e| {
                let n = e
                    .as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .into_owned();
                n.starts_with("..") && n != "..data"
            })
            .count();
        assert_eq!(stamps, 1);
    }
}
