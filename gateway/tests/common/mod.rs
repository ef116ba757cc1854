//! Test support of the black-box tests: starts the real `ankusa` binary on free loopback ports
//! with a temp data dir, waits for readiness, kills it (`SIGKILL` or `SIGTERM`) and restarts it
//! on the same data (every child is killed on drop); the requests these tests make of it (a
//! hook posted, a delivery row awaited, the admin API) and of the brokers beside it. The test
//! HTTP receiver, free ports and broker fixtures are the test kit's (`ankusa-testkit`).
#![allow(dead_code)]

pub use ankusa_testkit::ports::free_port;
/// The test HTTP receiver (the webhook consumer of these tests).
#[allow(unused_imports)]
pub use ankusa_testkit::scripted as receiver;

/// Lifecycle events (CloudEvents) as a test receiver got them.
pub mod events;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_ankusa");

/// A temporary directory on tmpfs (`/dev/shm`) where there is one, else the usual temp dir:
/// for tests that measure scheduling latency, not the disk's.
pub fn tmpfs_tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("tempdir")
}

pub struct Gateway {
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub ingest: SocketAddr,
    pub admin: SocketAddr,
    pub claims: SocketAddr,
    pub env: Vec<(String, String)>,
    child: Option<Child>,
    pub log_path: PathBuf,
    starts: u32,
}

impl Gateway {
    /// Writes `config` (YAML; `node`, ports and data dir are set through the environment) and
    /// starts the gateway.
    pub fn start(config: &str) -> Gateway {
        Self::start_with(config, &[])
    }

    pub fn start_with(config: &str, env: &[(&str, &str)]) -> Gateway {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir, config, env)
    }

    pub fn start_in(dir: tempfile::TempDir, config: &str, env: &[(&str, &str)]) -> Gateway {
        let config_path = dir.path().join("ankusa.yml");
        std::fs::write(&config_path, config).expect("write config");
        let mut g = Gateway {
            ingest: SocketAddr::from(([127, 0, 0, 1], free_port())),
            admin: SocketAddr::from(([127, 0, 0, 1], free_port())),
            claims: SocketAddr::from(([127, 0, 0, 1], free_port())),
            log_path: dir.path().join("gateway.log"),
            config_path,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            dir,
            child: None,
            starts: 0,
        };
        g.spawn();
        g.wait_ready(Duration::from_secs(30));
        g
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--config")
            .arg(&self.config_path)
            .env("ANKUSA_DATA_DIR", self.data_dir())
            .env("ANKUSA_HTTP_IP", "127.0.0.1")
            .env("ANKUSA_HTTP_PORT", self.ingest.port().to_string())
            .env("ANKUSA_ADMIN_IP", "127.0.0.1")
            .env("ANKUSA_ADMIN_PORT", self.admin.port().to_string())
            .env("ANKUSA_CLAIM_CHECK_IP", "127.0.0.1")
            .env("ANKUSA_CLAIM_CHECK_PORT", self.claims.port().to_string())
            .env_remove("ANKUSA_CONFIG")
            .env_remove("RUST_LOG");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("log file");
        let child = self
            .command()
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn ankusa");
        self.child = Some(child);
    }

    /// Runs a one-shot subcommand with this gateway's config and environment.
    pub fn run_subcommand(&self, args: &[&str]) -> std::process::Output {
        let mut c = self.command();
        c.args(args);
        c.output().expect("run ankusa")
    }

    /// Waits until `/ready` is `200` and every listener it names (`ingest`, `admin`,
    /// `claim_check`) accepts a connection: a test may use any of them right after.
    pub fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        // An HTTPS-only admin listener answers plain HTTP `400`; the ingest port has `/ready` too.
        let url = if self
            .env
            .iter()
            .any(|(k, _)| k == "ANKUSA_ADMIN_TLS_CERT_FILE")
        {
            format!("http://{}/ready", self.ingest)
        } else {
            format!("http://{}/ready", self.admin)
        };
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "gateway exited with {status} before ready:\n{}",
                    self.log_tail()
                );
            }
            if let Ok((200, body)) = blocking_get_text(&url)
                && self.listeners_accept(&body)
            {
                return;
            }
            if Instant::now() > deadline {
                panic!("gateway not ready after {timeout:?}:\n{}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Whether every listener a `/ready` answer names accepts a TCP connection.
    fn listeners_accept(&self, ready: &str) -> bool {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(ready) else {
            return false;
        };
        let Some(names) = v["listeners"].as_array() else {
            return false;
        };
        names.iter().all(|n| {
            let addr = match n.as_str() {
                Some("ingest") => self.ingest,
                Some("admin") => self.admin,
                Some("claim_check") => self.claims,
                // Its port is the test's config's (`fleet.port`), not one this helper picks.
                Some("fleet") => return true,
                _ => return false,
            };
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
        })
    }

    /// `kill -9`: no shutdown code runs.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for the exit.
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        unsafe_sigterm(c.id());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(s)) = c.try_wait() {
                return Some(s);
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                return c.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
        self.wait_ready(Duration::from_secs(30));
    }

    /// Starts again after `kill9`/`terminate` without waiting for readiness.
    pub fn spawn_again(&mut self) {
        self.spawn();
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.ingest, path)
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{}", self.admin, path)
    }

    /// `GET path` on the admin API, as JSON.
    pub async fn admin_json(&self, c: &reqwest::Client, path: &str) -> serde_json::Value {
        c.get(self.admin_url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `POST path` on the admin API with a JSON body.
    pub async fn admin_post(
        &self,
        c: &reqwest::Client,
        path: &str,
        body: &serde_json::Value,
    ) -> reqwest::Response {
        c.post(self.admin_url(path))
            .json(body)
            .send()
            .await
            .expect("admin request")
    }

    /// The admin API's Prometheus text (an open admin API: no `admin.tokens`).
    pub async fn metrics(&self, c: &reqwest::Client) -> String {
        self.scrape(c, None).await
    }

    /// The Prometheus text of a tokened admin API, read with `token` (`metrics:read` or `*`).
    pub async fn metrics_as(&self, c: &reqwest::Client, token: &str) -> String {
        self.scrape(c, Some(token)).await
    }

    async fn scrape(&self, c: &reqwest::Client, token: Option<&str>) -> String {
        let mut req = c.get(self.admin_url("/metrics"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.expect("scrape");
        assert_eq!(r.status(), 200, "GET /metrics (token: {})", token.is_some());
        r.text().await.expect("scrape body")
    }

    pub fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn write_config(&self, text: &str) {
        // Replace atomically, as an editor or the kubelet would.
        let tmp = self.config_path.with_extension("tmp");
        std::fs::write(&tmp, text).expect("write");
        std::fs::rename(&tmp, &self.config_path).expect("rename");
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn unsafe_sigterm(pid: u32) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
}

/// A tiny blocking GET for readiness polls (no runtime needed).
pub fn blocking_get(url: &str) -> std::io::Result<u16> {
    blocking_get_text(url).map(|(status, _)| status)
}

/// A plain HTTP GET: (status, body).
pub fn blocking_get_text(url: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = String::new();
    s.read_to_string(&mut buf)?;
    let status = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    Ok((status, body.to_string()))
}

/// Standard Webhooks headers for a body, signed with `secret` at `ts`.
pub fn standard_webhooks_headers(
    secret: &str,
    msg_id: &str,
    ts: i64,
    body: &[u8],
) -> Vec<(String, String)> {
    let key = ankusa_verify::standard_webhooks_key(secret).expect("secret");
    vec![
        ("webhook-id".into(), msg_id.into()),
        ("webhook-timestamp".into(), ts.to_string()),
        (
            "webhook-signature".into(),
            ankusa_verify::sign_standard_webhooks(&[key], msg_id, ts, body),
        ),
    ]
}

pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

pub fn github_signature(secret: &str, body: &[u8]) -> String {
    use hmac::{Mac, SimpleHmac};
    let mut m = SimpleHmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    m.update(body);
    format!("sha256={}", hex::encode(m.finalize().into_bytes()))
}

/// POSTs `body` to `url`.
pub async fn post_to(
    c: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    c.post(url).body(body).send().await.expect("request")
}

/// moto_server (S3), started by `tests/brokers/start.sh`.
pub const MOTO: &str = "http://127.0.0.1:5000";

/// A fresh bucket named `<prefix>-<random>` on moto; fails (never skips) when moto is not up.
pub async fn moto_bucket(c: &reqwest::Client, prefix: &str) -> String {
    let up = std::net::TcpStream::connect_timeout(
        &"127.0.0.1:5000".parse().expect("address"),
        Duration::from_secs(2),
    )
    .is_ok();
    assert!(
        up,
        "moto_server is not reachable on 127.0.0.1:5000: run `tests/brokers/start.sh <statedir>` first"
    );
    let bucket = format!("{prefix}-{:08x}", fastrand::u32(..));
    let made = c
        .put(format!("{MOTO}/{bucket}"))
        .send()
        .await
        .expect("moto");
    assert!(
        made.status().is_success(),
        "create bucket: {}",
        made.status()
    );
    bucket
}

/// The `s3:` block of `bucket` on moto, each line indented by `indent`.
pub fn moto_s3_yaml(bucket: &str, indent: &str) -> String {
    [
        "s3:".to_string(),
        format!("  bucket: {bucket}"),
        format!("  endpoint: {MOTO}"),
        "  region: us-east-1".into(),
        "  access_key_id: test".into(),
        "  secret_access_key: test".into(),
    ]
    .iter()
    .map(|l| format!("{indent}{l}\n"))
    .collect()
}

/// POSTs `{}` to `url` with the header `name: value`.
pub async fn post_with_header(
    c: &reqwest::Client,
    url: &str,
    name: &str,
    value: &str,
) -> reqwest::Response {
    c.post(url)
        .header(name, value)
        .body("{}")
        .send()
        .await
        .expect("request")
}

/// POSTs `body` to the gateway's `path`, answered `201`; the hook's id.
pub async fn post_hook(
    c: &reqwest::Client,
    g: &Gateway,
    path: &str,
    body: impl Into<reqwest::Body>,
) -> String {
    let r = post_to(c, &g.url(path), body).await;
    assert_eq!(r.status().as_u16(), 201, "a hook to {path}");
    let v: serde_json::Value = r.json().await.expect("JSON answer");
    v["id"].as_str().expect("an id").to_string()
}

/// Polls hook `id` until its first delivery row satisfies `done` (at most `within`, else
/// panics naming `what`); that row.
pub async fn wait_delivery_row(
    c: &reqwest::Client,
    g: &Gateway,
    id: &str,
    within: Duration,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let h = g.admin_json(c, &format!("/v1/hooks/{id}")).await;
        let row = h["deliveries"][0].clone();
        if done(&row) {
            return row;
        }
        assert!(Instant::now() < deadline, "{what}: {h}\n{}", g.log_tail());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A subscriber to `channel` on the machine's Redis (127.0.0.1:6379), subscribed.
pub async fn redis_subscriber(channel: &str) -> redis::aio::PubSub {
    let client = redis::Client::open("redis://127.0.0.1:6379/").expect("redis url");
    let mut pubsub = client
        .get_async_pubsub()
        .await
        .expect("Redis on 127.0.0.1:6379 (run tests/brokers/start.sh <statedir>)");
    pubsub.subscribe(channel).await.expect("subscribe");
    pubsub
}

/// The next message on `pubsub`, as JSON; panics with the log's tail when none comes within
/// `secs` seconds.
pub async fn next_message(
    pubsub: &mut redis::aio::PubSub,
    g: &Gateway,
    secs: u64,
) -> serde_json::Value {
    use futures::StreamExt;
    let msg = tokio::time::timeout(Duration::from_secs(secs), pubsub.on_message().next())
        .await
        .unwrap_or_else(|_| panic!("no message within {secs} s:\n{}", g.log_tail()))
        .expect("a message");
    serde_json::from_slice(msg.get_payload_bytes()).expect("a JSON message")
}

/// Waits (at most `secs` seconds) until hook `id`'s first delivery was attempted twice: a
/// failure retried, never dead-lettered; that row.
pub async fn retried_row(
    c: &reqwest::Client,
    g: &Gateway,
    id: &str,
    secs: u64,
) -> serde_json::Value {
    let within = Duration::from_secs(secs);
    let row = wait_delivery_row(c, g, id, within, "no retried attempt", |r| attempts(r) >= 2).await;
    assert_ne!(row["state"], "dead", "a failed delivery is retried: {row}");
    row
}

/// The number of attempts a delivery row counts.
pub fn attempts(row: &serde_json::Value) -> u64 {
    row["attempts"].as_u64().unwrap_or(0)
}

/// POSTs `n` hooks to `path` (body `i` from `body(i)`), each answered `201`; their ids in order.
pub async fn post_ids(
    c: &reqwest::Client,
    g: &Gateway,
    path: &str,
    n: usize,
    body: impl Fn(usize) -> String,
) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let r = c
            .post(g.url(path))
            .body(body(i))
            .send()
            .await
            .expect("post");
        assert_eq!(r.status().as_u16(), 201, "hook {i} to {path}");
        let v: serde_json::Value = r.json().await.expect("JSON answer");
        ids.push(v["id"].as_str().expect("an id").to_string());
    }
    ids
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Whether this process may mount filesystems (tests that need a full disk use tmpfs).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false)
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// The value of the first metric line starting with `line_prefix` (0 when absent).
pub fn metric(text: &str, line_prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(line_prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Polls a replay job until it is `done` (its scan is over and every row it queued settled).
pub async fn wait_job_done(c: &reqwest::Client, g: &Gateway, id: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let j = g.admin_json(c, &format!("/v1/replays/{id}")).await;
        if j["done"] == true {
            return j;
        }
        assert!(Instant::now() < deadline, "job never done: {j}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Fails (never skips) when nothing listens on 127.0.0.1:`port`.
fn assert_listening(port: u16, what: &str) {
    let up = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(2),
    )
    .is_ok();
    assert!(
        up,
        "{what} is not reachable on 127.0.0.1:{port}: run `tests/brokers/start.sh <statedir>` first"
    );
}

/// fake-gcs-server (the GCS JSON API), started by `tests/brokers/start.sh`.
pub const GCS_EMULATOR: &str = "http://127.0.0.1:9023";

/// A fresh bucket named `<prefix>-<random>` on the GCS emulator; fails when it is not up.
pub async fn gcs_bucket(c: &reqwest::Client, prefix: &str) -> String {
    assert_listening(9023, "the GCS emulator (fake-gcs-server)");
    let bucket = format!("{prefix}-{:08x}", fastrand::u32(..));
    let made = c
        .post(format!("{GCS_EMULATOR}/storage/v1/b?project=ankusa"))
        .json(&serde_json::json!({ "name": bucket }))
        .send()
        .await
        .expect("gcs emulator");
    assert!(
        made.status().is_success(),
        "create bucket: {}",
        made.status()
    );
    bucket
}

/// The `gcs:` block of `bucket` on the emulator (`anonymous`), each line indented by `indent`.
pub fn gcs_yaml(bucket: &str, indent: &str) -> String {
    [
        "gcs:".to_string(),
        format!("  bucket: {bucket}"),
        format!("  endpoint: {GCS_EMULATOR}"),
        "  anonymous: true".into(),
    ]
    .iter()
    .map(|l| format!("{indent}{l}\n"))
    .collect()
}

/// Azurite's blob service of its development account, started by `tests/brokers/start.sh`.
pub const AZURITE: &str = "http://127.0.0.1:10000/devstoreaccount1";
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
/// Azurite's published development key (in its documentation; not a secret).
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// An account SAS (version 2021-08-06: blob service; service, container and object; read,
/// add, create, write, delete, list; until 2099) signed with `AZURITE_KEY` here, apart from
/// the gateway's own Shared Key code.
pub fn azurite_sas() -> String {
    use base64::Engine;
    use hmac::Mac;
    let b64 = base64::engine::general_purpose::STANDARD;
    let (sp, ss, srt, se, spr, sv) = (
        "racwdl",
        "b",
        "sco",
        "2099-01-01T00:00:00Z",
        "https,http",
        "2021-08-06",
    );
    // account, permissions, services, resource types, start, expiry, IP, protocol, version,
    // encryption scope, each followed by a newline.
    let to_sign = format!("{AZURITE_ACCOUNT}\n{sp}\n{ss}\n{srt}\n\n{se}\n\n{spr}\n{sv}\n\n");
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&b64.decode(AZURITE_KEY).unwrap())
        .expect("hmac key");
    mac.update(to_sign.as_bytes());
    let sig = b64.encode(mac.finalize().into_bytes());
    let enc = |v: &str| url::form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>();
    format!(
        "sv={sv}&ss={ss}&srt={srt}&sp={sp}&se={}&spr={}&sig={}",
        enc(se),
        enc(spr),
        enc(&sig)
    )
}

/// A fresh container named `<prefix>-<random>` on Azurite (made with `azurite_sas`); fails
/// when Azurite is not up.
pub async fn azurite_container(c: &reqwest::Client, prefix: &str) -> String {
    assert_listening(10000, "Azurite");
    let container = format!("{prefix}-{:08x}", fastrand::u32(..));
    let made = c
        .put(format!(
            "{AZURITE}/{container}?restype=container&{}",
            azurite_sas()
        ))
        .header("x-ms-version", "2021-08-06")
        .send()
        .await
        .expect("azurite");
    assert!(
        made.status().is_success(),
        "create container: {}",
        made.status()
    );
    container
}

/// How a test's Azure store authorizes on Azurite.
#[derive(Clone, Copy, Debug)]
pub enum AzureAuth {
    Sas,
    SharedKey,
}

/// The `azure:` block of `container` on Azurite, each line indented by `indent`.
pub fn azure_yaml(container: &str, auth: AzureAuth, indent: &str) -> String {
    let cred = match auth {
        AzureAuth::Sas => format!("  sas_token: \"{}\"", azurite_sas()),
        AzureAuth::SharedKey => format!("  account_key: \"{AZURITE_KEY}\""),
    };
    [
        "azure:".to_string(),
        format!("  account: {AZURITE_ACCOUNT}"),
        format!("  container: {container}"),
        format!("  endpoint: {AZURITE}"),
        cred,
    ]
    .iter()
    .map(|l| format!("{indent}{l}\n"))
    .collect()
}

/// A throwaway RSA key generated here (never a real one), as a service-account key's JSON
/// naming `token_uri`, and its public half (PKCS#1 DER).
pub fn throwaway_service_account(token_uri: &str) -> (String, Vec<u8>) {
    use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
    use aws_lc_rs::signature::{KeyPair, RsaKeyPair};
    let key = RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let der: Pkcs8V1Der = key.as_der().unwrap();
    let b64 = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(der.as_ref())
    };
    let pem = format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n");
    let json = serde_json::json!({
        "type": "service_account",
        "project_id": "ankusa-test",
        "private_key_id": "throwaway",
        "private_key": pem,
        "client_email": "archive@ankusa-test.iam.gserviceaccount.com",
        "token_uri": token_uri,
    });
    (json.to_string(), key.public_key().as_ref().to_vec())
}
