//! NATS JetStream sink against a real nats-server with JetStream (127.0.0.1:4222, and a
//! throwaway one for the restart test). The tests create the streams; the sink never does.

mod common;

use std::collections::HashSet;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ankusa_config::{EgressConfig, NatsSinkConfig, PoolConfig, SinkConfig};
use ankusa_core::SinkError;
use ankusa_sinks::SinkBuilder;
use ankusa_sinks::egress::Resolve;
use ankusa_sinks::http::HttpPools;
use async_nats::jetstream::{self, stream};
use common::*;
use futures::future::BoxFuture;

const SERVER: &str = "nats://127.0.0.1:4222";

async fn stream_for(server: &str, name: &str, subjects: &str, max_msg_size: i32) -> stream::Stream {
    let client = async_nats::connect(server).await.expect("connect to NATS");
    let js = jetstream::new(client);
    js.create_stream(stream::Config {
        name: name.to_string(),
        subjects: vec![subjects.to_string()],
        storage: stream::StorageType::File,
        max_message_size: max_msg_size,
        ..Default::default()
    })
    .await
    .expect("create stream (is JetStream enabled? nats-server -js)")
}

/// A stream of its own on the machine's server, `ANKUSA_<sfx>` over `ankusa.<sfx>.>`, messages
/// of at most `max_msg_size` bytes (-1: the server's limit); and the subject
/// `ankusa.<sfx>.<leaf>` it covers.
async fn fresh_stream(leaf: &str, max_msg_size: i32) -> (stream::Stream, String) {
    let sfx = suffix();
    let st = stream_for(
        SERVER,
        &format!("ANKUSA_{sfx}"),
        &format!("ankusa.{sfx}.>"),
        max_msg_size,
    )
    .await;
    (st, format!("ankusa.{sfx}.{leaf}"))
}

/// The hook ids of every message in stream `name` on `server`.
async fn ids_in(server: &str, name: &str) -> HashSet<String> {
    let client = async_nats::connect(server).await.unwrap();
    let st = jetstream::new(client).get_stream(name).await.unwrap();
    let n = st.get_info().await.unwrap().state.messages;
    let mut ids = HashSet::new();
    for seq in 1..=n {
        if let Ok(m) = st.get_raw_message(seq).await {
            ids.insert(message_id(&m.payload));
        }
    }
    ids
}

/// A nats-server of the test's own (file-backed JetStream in `dir/js`) on `port`, restartable.
async fn own_server(dir: &std::path::Path, port: u16) -> Restartable {
    let dir = dir.to_path_buf();
    Restartable::start(port, Duration::from_secs(10), move || {
        Owned::spawn(
            "nats",
            &dir,
            Command::new("nats-server")
                .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
                .arg(dir.join("js")),
        )
    })
    .await
}

fn sink_cfg(server: &str, subject: &str) -> NatsSinkConfig {
    NatsSinkConfig::new(vec![server.to_string()], subject)
}

#[tokio::test]
async fn nats_end_to_end_every_field_and_msg_id() {
    init();
    require("NATS", 4222);
    let (st, subject) = fresh_stream("events", -1).await;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::Nats(sink_cfg(SERVER, &subject)));
    assert!(sink.durable());
    let env = hook(br#"{"id":"evt_1"}"#);
    let c = ctx();
    sink.deliver(&env, &c).await.expect("delivered");
    let m = st.get_raw_message(1).await.expect("stored");
    assert_eq!(m.subject.as_str(), subject);
    check_message(&m.payload, &env, &c);
    let h = m.headers.clone();
    let get = |k: &str| h.get(k).map(|v| v.as_str().to_string());
    check_attributes(get, &env, &c);
    assert_eq!(
        m.headers.get("Nats-Msg-Id").map(|v| v.as_str().to_string()),
        Some(env.id.to_string())
    );
    // A re-send of the same delivery collapses in the duplicate window (still Ok) ...
    sink.deliver(&env, &c).await.expect("duplicate acked");
    // ... while a replay has its own Nats-Msg-Id and is stored.
    let mut r = ctx();
    r.replay_id = Some("0192f1c0-bbbb-7000-8000-000000000002".into());
    sink.deliver(&env, &r).await.expect("replay delivered");
    let info = st.get_info().await.unwrap();
    assert_eq!(info.state.messages, 2, "the duplicate was collapsed");
    let m2 = st.get_raw_message(2).await.unwrap();
    assert_eq!(
        m2.headers
            .get("Nats-Msg-Id")
            .map(|v| v.as_str().to_string()),
        Some(format!(
            "{}:replay:{}",
            env.id,
            r.replay_id.as_deref().unwrap()
        ))
    );
    check_message(&m2.payload, &env, &r);
}

#[tokio::test]
async fn nats_no_stream_is_transient() {
    init();
    require("NATS", 4222);
    let builder = SinkBuilder::new();
    let subject = format!("nostream.{}.x", suffix());
    let sink = build(&builder, SinkConfig::Nats(sink_cfg(SERVER, &subject)));
    assert_transient(sink.deliver(&hook(b"x"), &ctx()).await, "no_stream");
}

#[tokio::test]
async fn nats_size_limits_are_permanent_without_a_server_call() {
    init();
    require("NATS", 4222);
    let (st, subject) = fresh_stream("big", -1).await;
    let builder = SinkBuilder::new();
    // A body over max_message_bytes by itself, with inline_max_bytes raised past it.
    let mut cfg = sink_cfg(SERVER, &subject);
    cfg.inline_max_bytes = 4_000_000;
    let sink = build(&builder, SinkConfig::Nats(cfg.clone()));
    let env = hook(&vec![b'a'; 1_100_000]);
    let mut c = ctx();
    c.claim_check = Some(check_in_for(&env));
    assert_permanent(sink.deliver(&env, &c).await, "message_too_large");
    // Over the server's max_payload (1 MiB by default) with max_message_bytes raised.
    cfg.max_message_bytes = 8_000_000;
    let sink = build(&builder, SinkConfig::Nats(cfg));
    let env = hook(&vec![b'a'; 900_000]);
    assert_permanent(sink.deliver(&env, &ctx()).await, "max_payload_exceeded");
    assert_eq!(st.get_info().await.unwrap().state.messages, 0);
}

#[tokio::test]
async fn nats_stream_refusal_is_an_error_not_an_ack() {
    init();
    require("NATS", 4222);
    // The stream takes messages of at most 512 bytes: its error ack carries seq 0.
    let (_st, subject) = fresh_stream("small", 512).await;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::Nats(sink_cfg(SERVER, &subject)));
    let r = sink.deliver(&hook(&[b'q'; 2000]), &ctx()).await;
    assert_transient(r, "publish refused");
}

#[tokio::test]
async fn nats_claim_over_inline_limit() {
    init();
    require("NATS", 4222);
    let (st, subject) = fresh_stream("claim_check", -1).await;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::Nats(sink_cfg(SERVER, &subject)));
    let env = hook(&vec![b'z'; 200_000]);
    assert_transient(sink.deliver(&env, &ctx()).await, "claim check unavailable");
    let mut c = ctx();
    c.claim_check = Some(check_in_for(&env));
    sink.deliver(&env, &c).await.expect("claim delivered");
    let m = st.get_raw_message(1).await.unwrap();
    assert!(m.payload.len() < 4000, "no inline bytes");
    check_message(&m.payload, &env, &c);
    assert_eq!(st.get_info().await.unwrap().state.messages, 1);
}

/// nats-server (file-backed JetStream) is SIGKILLed and restarted while hooks flow; every hook
/// is in the stream afterwards and some attempts failed in between.
#[tokio::test]
async fn nats_restart_loses_no_hook() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = own_server(dir.path(), port).await;
    let url = format!("nats://127.0.0.1:{port}");
    let st = stream_for(&url, "RESTART", "restart.>", -1).await;
    let builder = SinkBuilder::new();
    let mut cfg = sink_cfg(&url, "restart.events");
    cfg.publish_timeout_ms = 1_000;
    let sink = build(&builder, SinkConfig::Nats(cfg));
    let run = deliver_through_restart(
        sink,
        60,
        Duration::from_millis(20),
        Duration::from_secs(90),
        Gate::default(),
        // Down for longer than publish_timeout_ms (1 s): the client keeps a publish made while
        // disconnected and sends it on reconnect, so a shorter outage can end before any
        // attempt times out, and then nothing failed for the test to see retried.
        server.crash(Duration::from_millis(400), Duration::from_millis(2_500)),
    )
    .await;
    drop(st);
    run.none_lost("nats restart", &ids_in(&url, "RESTART").await);
}

/// `localhost` resolves to loopback, refused on connect by the default egress policy: a
/// transient refusal naming the class and the entry, nothing dialed.
#[tokio::test]
async fn nats_egress_refuses_a_loopback_name() {
    init();
    let builder = SinkBuilder::new();
    let cfg = sink_cfg("nats://localhost:4222", "ankusa.egress");
    let sink = build_with(&builder, SinkConfig::Nats(cfg), EgressConfig::default());
    refused_by_name(sink, "(servers[0])", &builder).await;
}

/// Answers every name with 127.0.0.1 (which the test's policy allows by CIDR) until flipped,
/// then with ::1 (loopback, refused): a name that rebinds while the client is connected.
struct Flip(Arc<AtomicBool>);
impl Resolve for Flip {
    fn resolve<'a>(
        &'a self,
        _: &'a str,
        port: u16,
    ) -> BoxFuture<'a, std::io::Result<Vec<std::net::SocketAddr>>> {
        let ip: std::net::IpAddr = if self.0.load(Ordering::SeqCst) {
            "::1".parse().unwrap()
        } else {
            "127.0.0.1".parse().unwrap()
        };
        Box::pin(async move { Ok(vec![(ip, port).into()]) })
    }
}

/// The client's own reconnects are checked too: a server name that turns into a refused
/// address while connected makes the reconnect connect nowhere, and deliveries fail transient
/// naming the class (the hook is retried, never dead-lettered); once the name is allowed
/// again the client reconnects by itself and the hook is delivered.
#[tokio::test]
async fn nats_reconnects_are_checked_against_the_egress_policy() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = own_server(dir.path(), port).await;
    let st = stream_for(
        &format!("nats://127.0.0.1:{port}"),
        "EGRESS",
        "egress.>",
        -1,
    )
    .await;
    // The policy's resolver is the flipping one; the client's own lookup of `localhost` keeps
    // finding the server on 127.0.0.1.
    let flipped = Arc::new(AtomicBool::new(false));
    let builder = SinkBuilder::with_pools(HttpPools::with_resolver(
        &PoolConfig::default(),
        Arc::new(Flip(flipped.clone())),
    ));
    let egress = EgressConfig {
        allow_cidrs: vec!["127.0.0.1/32".into()],
        ..EgressConfig::default()
    };
    let mut cfg = sink_cfg(&format!("nats://localhost:{port}"), "egress.events");
    cfg.publish_timeout_ms = 1_000;
    let sink = build_with(&builder, SinkConfig::Nats(cfg), egress);
    let first = hook(b"1");
    sink.deliver(&first, &ctx())
        .await
        .expect("delivered while allowed");

    flipped.store(true, Ordering::SeqCst);
    server.kill();
    server.respawn();
    wait_port(port, Duration::from_secs(10)).await;
    let second = hook(b"2");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut c = ctx();
    loop {
        match sink.deliver(&second, &c).await {
            Err(SinkError::Transient(m)) if m.contains("egress_denied: loopback (servers[0])") => {
                assert!(!m.contains("::1") && !m.contains("localhost"), "{m}");
                break;
            }
            Err(e) if !e.is_permanent() => {}
            other => panic!("expected transient failures while refused, got {other:?}"),
        }
        assert!(Instant::now() < deadline, "the reconnect was never refused");
        c.attempt += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    flipped.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        c.attempt += 1;
        match sink.deliver(&second, &c).await {
            Ok(()) => break,
            Err(e) => assert!(!e.is_permanent(), "{e}"),
        }
        assert!(
            Instant::now() < deadline,
            "the client never reconnected once allowed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(st);
    let ids = ids_in(&format!("nats://127.0.0.1:{port}"), "EGRESS").await;
    assert!(ids.contains(&first.id.to_string()) && ids.contains(&second.id.to_string()));
    drop(server);
}

/// The INFO line a NATS server sends a new client.
async fn info_line(port: u16) -> String {
    use tokio::io::AsyncReadExt;
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return String::new();
    };
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A cluster of two nats-servers of the test's own: `a` is the one the sink names; `b`
/// advertises its client address as `127.0.0.2:<advertised>` (`client_advertise`), so once the
/// route is up `a`'s INFO lists that address in `connect_urls`.
struct Cluster {
    dir: tempfile::TempDir,
    a_port: u16,
    a_conf: std::path::PathBuf,
    a: Option<Owned>,
    _b: Owned,
    advertised: String,
}

impl Cluster {
    async fn start(advertised_port: u16) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let (a_port, b_port, a_route, b_route) =
            (free_port(), free_port(), free_port(), free_port());
        let advertised = format!("127.0.0.2:{advertised_port}");
        let a_conf = dir.path().join("a.conf");
        std::fs::write(
            &a_conf,
            format!(
                "listen: 127.0.0.1:{a_port}\ncluster {{ name: egress, listen: 127.0.0.1:{a_route}, \
                 routes: [\"nats-route://127.0.0.1:{b_route}\"] }}\n"
            ),
        )
        .unwrap();
        let b_conf = dir.path().join("b.conf");
        std::fs::write(
            &b_conf,
            format!(
                "listen: 127.0.0.1:{b_port}\nclient_advertise: \"{advertised}\"\ncluster {{ name: \
                 egress, listen: 127.0.0.1:{b_route}, routes: [\"nats-route://127.0.0.1:{a_route}\"] }}\n"
            ),
        )
        .unwrap();
        let b = Owned::spawn(
            "nats-b",
            dir.path(),
            Command::new("nats-server").arg("-c").arg(&b_conf),
        );
        let mut c = Cluster {
            dir,
            a_port,
            a_conf,
            a: None,
            _b: b,
            advertised,
        };
        c.start_a().await;
        c
    }

    /// Starts `a` and waits until its INFO advertises `b`'s address.
    async fn start_a(&mut self) {
        self.a = Some(Owned::spawn(
            "nats-a",
            self.dir.path(),
            Command::new("nats-server").arg("-c").arg(&self.a_conf),
        ));
        wait_port(self.a_port, Duration::from_secs(10)).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if info_line(self.a_port).await.contains(&self.advertised) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the route never came up: {}",
                info_line(self.a_port).await
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn kill_a(&mut self) {
        if let Some(mut a) = self.a.take() {
            a.kill();
        }
    }
}

/// A server the cluster advertises (`connect_urls`) is never dialed, even when the configured
/// one goes away and the client reconnects: its address, which the policy refuses (127.0.0.2
/// is loopback; the policy allows 127.0.0.1 alone), sees no connection. The control half: a
/// client that follows advertised servers (async-nats' default) does connect there, so the
/// cluster does advertise it.
#[tokio::test]
async fn nats_advertised_servers_are_never_dialed() {
    init();
    let counter = Counter::start("127.0.0.2").await;
    let mut cluster = Cluster::start(counter.port).await;
    let builder = SinkBuilder::new();
    let egress = EgressConfig {
        allow_cidrs: vec!["127.0.0.1/32".into()],
        ..EgressConfig::default()
    };
    let mut cfg = sink_cfg(
        &format!("nats://127.0.0.1:{}", cluster.a_port),
        "egress.events",
    );
    cfg.publish_timeout_ms = 1_000;
    let sink = build_with(&builder, SinkConfig::Nats(cfg), egress);
    // Connected (no stream covers the subject: the publish itself is refused).
    assert_transient(sink.deliver(&hook(b"1"), &ctx()).await, "no_stream");
    assert_eq!(builder.open_connections(), 1);

    cluster.kill_a();
    // The client reconnects (250 ms, 500 ms, ... 2 s apart): several attempts in 5 s.
    let until = Instant::now() + Duration::from_secs(5);
    let mut c = ctx();
    while Instant::now() < until {
        let r = sink.deliver(&hook(b"2"), &c).await;
        assert!(matches!(r, Err(SinkError::Transient(_))), "{r:?}");
        c.attempt += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        counter.connections(),
        0,
        "the sink's client dialed a server the cluster advertised"
    );
    drop(sink);
    drop(builder);

    // Control: a client that follows advertised servers.
    cluster.start_a().await;
    let follower = async_nats::connect(format!("nats://127.0.0.1:{}", cluster.a_port))
        .await
        .expect("connect");
    cluster.kill_a();
    let deadline = Instant::now() + Duration::from_secs(15);
    while counter.connections() == 0 {
        assert!(
            Instant::now() < deadline,
            "a client following connect_urls never tried the advertised address: the test \
             shows nothing"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(follower);
}

/// The connection goes to the address the policy checked: the server is named by a name that
/// exists in no DNS, answered 127.0.0.1 by the policy's resolver; the client never resolves it
/// and connects (no stream covers the subject: `no_stream`).
#[tokio::test]
async fn nats_dials_the_address_it_checked() {
    init();
    require("NATS", 4222);
    let builder = builder_resolving_to("127.0.0.1");
    let cfg = sink_cfg("nats://nats.ankusa.invalid:4222", "ankusa.checked.none");
    let sink = build(&builder, SinkConfig::Nats(cfg));
    assert_transient(sink.deliver(&hook(b"x"), &ctx()).await, "no_stream");
}
