//! Shared by the sink integration tests: hooks and contexts, the message checker, broker
//! reachability (a missing broker fails the test, it never skips it), unique names, sinks
//! built through the factory, and (`restart`) the driver of the restart tests. Broker
//! processes, ports, the private CA and TLS relays are the test kit's (`ankusa-testkit`,
//! feature `brokers`), re-exported here where every test uses them.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

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
        traceparent: None,
        original_sha256: None,
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

/// The hook id of a received message.
pub fn message_id(raw: &[u8]) -> String {
    let v: Value = serde_json::from_slice(raw).expect("the message is JSON");
    v["id"].as_str().expect("an id").to_string()
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

mod emulators;
mod kafka;
mod restart;
// Each test binary uses some of these.
#[allow(unused_imports)]
pub use emulators::*;
#[allow(unused_imports)]
pub use kafka::*;
#[allow(unused_imports)]
pub use restart::*;

#[allow(unused_imports)]
pub use ankusa_testkit::brokers::{Owned, rabbit_node, rabbit_node_with, tansu, tansu_bin};
#[allow(unused_imports)]
pub use ankusa_testkit::ports::{free_port, port_open, wait_port};

/// One attempt that must fail transient (retried, not dead-lettered) naming every `needle`,
/// never showing key material.
pub async fn fails_with<N: AsRef<str> + std::fmt::Debug>(
    sink: &Arc<dyn Sink>,
    env: &Envelope,
    needles: &[N],
) -> String {
    let m = match sink.deliver(env, &ctx()).await {
        Err(SinkError::Transient(m)) => m,
        other => panic!("expected a transient failure naming {needles:?}, got {other:?}"),
    };
    for n in needles {
        assert!(m.contains(n.as_ref()), "{m:?} lacks {n:?}");
    }
    assert!(!m.contains("BEGIN"), "{m:?} shows PEM");
    eprintln!("failed as expected: {m}");
    m
}

/// What a refused handshake names when no trusted CA issued the server's certificate (subject
/// `CN=cn`).
pub fn untrusted(cn: &str) -> Vec<String> {
    vec![
        "not_connected: tls_handshake:".into(),
        "not issued by a trusted CA".into(),
        format!("subject CN={cn}"),
    ]
}

/// What a refused handshake names when the server's certificate (subject `CN=cn`) does not
/// name the host dialed.
pub fn misnamed(cn: &str) -> Vec<String> {
    vec![
        "not_connected: tls_handshake:".into(),
        "not valid for the server name".into(),
        format!("subject CN={cn}"),
    ]
}

/// The retry of `env` (attempt 2) through `sink` lands.
pub async fn retry_lands(sink: &Arc<dyn Sink>, env: &Envelope) {
    let mut c = ctx();
    c.attempt = 2;
    sink.deliver(env, &c).await.expect("delivered once fixed");
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
