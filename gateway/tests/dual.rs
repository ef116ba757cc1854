//! `wal.type: dual` against real brokers: Tansu (Kafka protocol, 127.0.0.1:9092) and
//! nats-server with JetStream (127.0.0.1:4222), both started by `tests/brokers/start.sh` or the
//! machine, and a nats-server of the test's own for the broker-down case.
//!
//! - Losing the node: under load of signed hooks with dedupe (and provider retries), `kill -9`
//!   the gateway AND delete its data dir, restart it empty: every acked id is delivered
//!   (missing 0), and no provider event is delivered under two hook ids (duplicate hooks 0);
//!   redeliveries of one id are counted and printed, not failures.
//! - The intake log down: new hooks are `503 intake_unavailable`, `/ready` is `503`, every
//!   id ever answered 201 is in the log; the log back: hooks are taken again without a
//!   restart, and a provider retry of a hook left pending is `503 intake_pending` until the
//!   reconciler published it, then `201` with the first id.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use ankusa_testkit::nats_server::{NatsServer, Spec};
use common::receiver::{Received, Receiver, Reply};
use common::*;
use serde_json::Value;

const SECRET: &str = "gh-secret";

fn require(what: &str, port: u16) {
    let ok = std::net::TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_secs(2),
    )
    .is_ok();
    assert!(
        ok,
        "{what} is not reachable on 127.0.0.1:{port}: run `tests/brokers/start.sh <statedir>` first"
    );
}

fn suffix() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_000
    )
}

fn config(receiver: &str, intake: &str) -> String {
    format!(
        r#"
egress: {{allow_http: true, allow_loopback: true}}
dispatch: {{breaker_failures: 0}}
wal: {{type: dual}}
{intake}
sources:
  s:
    verify: {{type: github, secret: {SECRET}}}
    dedupe: github
    retry: {{base_ms: 20, max_ms: 200}}
    sinks:
      - type: http
        url: {receiver}
        secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
"#
    )
}

async fn create_kafka_topic(topic: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", "127.0.0.1:9092")
        .create()
        .expect("admin client");
    let r = admin
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .expect("create_topics");
    for t in r {
        t.expect("topic created");
    }
}

async fn create_stream(url: &str, name: &str, subject: &str, dir: Option<&str>) {
    let client = async_nats::connect(url).await.expect("nats");
    let js = async_nats::jetstream::new(client);
    let mut cfg = async_nats::jetstream::stream::Config {
        name: name.into(),
        subjects: vec![format!("{subject}.>")],
        ..Default::default()
    };
    if dir.is_some() {
        cfg.storage = async_nats::jetstream::stream::StorageType::File;
    }
    js.get_or_create_stream(cfg).await.expect("stream");
}

/// One provider event: its delivery id (the dedupe key), and the signed request.
async fn post_event(c: &reqwest::Client, url: &str, event: &str) -> Option<(u16, Value)> {
    let body = format!("{{\"event\":\"{event}\",\"pad\":\"{}\"}}", "x".repeat(300));
    let r = c
        .post(url)
        .header("x-github-delivery", event)
        .header("x-github-event", "push")
        .header(
            "x-hub-signature-256",
            github_signature(SECRET, body.as_bytes()),
        )
        .body(body)
        .send()
        .await
        .ok()?;
    let status = r.status().as_u16();
    let v = r.json::<Value>().await.unwrap_or(Value::Null);
    Some((status, v))
}

/// Posts events from `clients` tasks until told to stop, retrying each one (as a provider
/// does) until a 201 or the stop; every tenth event is sent twice more after its 201. Returns
/// event → id for every 201, and panics if one event got two different ids.
async fn load(
    url: String,
    clients: usize,
    tag: &str,
    stop: tokio::sync::watch::Receiver<bool>,
) -> HashMap<String, String> {
    let acked: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let mut tasks = Vec::new();
    for i in 0..clients {
        let (url, acked, stop, tag) = (url.clone(), acked.clone(), stop.clone(), tag.to_string());
        tasks.push(tokio::spawn(async move {
            let mut c = client();
            let mut n = 0u64;
            'events: while !*stop.borrow() {
                n += 1;
                let event = format!("{tag}-{i}-{n}");
                let repeats = if n.is_multiple_of(10) { 3 } else { 1 };
                let mut got = 0;
                while got < repeats {
                    if *stop.borrow() {
                        break 'events;
                    }
                    match post_event(&c, &url, &event).await {
                        Some((201, v)) => {
                            let id = v["id"].as_str().expect("id").to_string();
                            let mut a = acked.lock().unwrap();
                            if let Some(first) = a.get(&event) {
                                assert_eq!(first, &id, "event {event} acked under two ids");
                            } else {
                                a.insert(event.clone(), id);
                            }
                            got += 1;
                        }
                        Some(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                        None => {
                            // The node is away (killed): a fresh client once it is back.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            c = client();
                        }
                    }
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    acked.lock().unwrap().clone()
}

/// Missing acked ids and duplicate hooks (one event delivered under two ids) over what the
/// receiver got; redeliveries of one id are counted.
fn tally(acked: &HashMap<String, String>, got: &[Received]) -> (usize, usize, usize) {
    let mut ids_of_event: HashMap<String, HashSet<String>> = HashMap::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for r in got {
        let id = r.header("x-ankusa-id").unwrap_or_default();
        let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        if let Some(e) = v["event"].as_str() {
            ids_of_event
                .entry(e.to_string())
                .or_default()
                .insert(id.clone());
        }
        *seen.entry(id).or_default() += 1;
    }
    let missing = acked.values().filter(|id| !seen.contains_key(*id)).count();
    let duplicate_hooks = ids_of_event.values().filter(|ids| ids.len() > 1).count();
    let redeliveries = seen.values().map(|n| n - 1).sum();
    (missing, duplicate_hooks, redeliveries)
}

/// `intake` (and `backup`, when set: the node is lost after its first backup, so the restore
/// brings the checkpoint back and the rebuild replays only the log's tail after it).
async fn lose_the_node_under_load(intake: String, backup: Option<String>, label: &str) -> Gateway {
    // A slow receiver, so hooks are still undelivered when the node is lost.
    let rx = Receiver::start(|_, _| Reply::status(200).delay(Duration::from_millis(30))).await;
    let extra = format!("{intake}\n{}", backup.as_deref().unwrap_or(""));
    let mut g = Gateway::start(&config(&rx.url("/hook"), &extra));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let tag = label.to_string();
    let g_url = g.url("/webhooks/s");
    let loader = tokio::spawn(async move { load(g_url, 16, &tag, stop_rx).await });
    tokio::time::sleep(Duration::from_millis(2500)).await;
    if backup.is_some() {
        let c = client();
        let t0 = Instant::now();
        loop {
            let st = g.admin_json(&c, "/v1/status").await;
            if st["backup"]["runs"].as_u64().unwrap_or(0) >= 1 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "no backup: {st}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Hooks acked after the backup: only the log has them once the node is lost.
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    g.kill9();
    std::fs::remove_dir_all(g.data_dir()).expect("delete the data dir");
    g.spawn_again();
    // Load goes on while the node rebuilds (503 until it is ready) and after.
    let t0 = Instant::now();
    loop {
        let ready = {
            let url = g.url("/ready");
            tokio::task::spawn_blocking(move || blocking_get(&url))
                .await
                .unwrap()
                .unwrap_or(0)
        };
        if ready == 200 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "not ready after the rebuild"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rebuild = t0.elapsed();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop_tx.send(true).unwrap();
    let acked = match loader.await {
        Ok(a) => a,
        Err(e) => {
            let log = g.log();
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("started") || l.contains("intake") || l.contains("store"))
                .collect();
            panic!("{e}\n{}", lines.join("\n"));
        }
    };
    assert!(acked.len() > 50, "too little load: {} acked", acked.len());
    let want: HashSet<String> = acked.values().cloned().collect();
    let t_wait = Instant::now();
    let got = loop {
        let r = rx.received();
        let ids: HashSet<String> = r.iter().filter_map(|x| x.header("x-ankusa-id")).collect();
        if want.is_subset(&ids) || t_wait.elapsed() > Duration::from_secs(90) {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (missing, duplicate_hooks, redeliveries) = tally(&acked, &got);
    if missing > 0 {
        let ids: HashSet<String> = got.iter().filter_map(|x| x.header("x-ankusa-id")).collect();
        let lost: Vec<&String> = want
            .iter()
            .filter(|id| !ids.contains(*id))
            .take(5)
            .collect();
        let log = g.log();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("started") || l.contains("intake") || l.contains("store"))
            .collect();
        panic!("missing {missing}, e.g. {lost:?}\n{}", lines.join("\n"));
    }
    println!(
        "{label}: acked {} events, delivered {} requests, missing {missing}, duplicate hooks {duplicate_hooks}, redeliveries of one id {redeliveries}, ready {rebuild:?} after the restart",
        acked.len(),
        got.len()
    );
    for l in g.log().lines().filter(|l| l.contains("past the end")) {
        println!("{label}: {l}");
    }
    assert_eq!(missing, 0);
    assert_eq!(duplicate_hooks, 0);
    let status = g.admin_json(&client(), "/v1/status").await;
    assert_eq!(status["intake"]["state"], "ready", "{status}");
    drop(rx);
    g
}

/// `read=N` of the rebuild's log line: how many of the node's records the rebuild read.
fn rebuild_read(log: &str) -> u64 {
    let at = log
        .rfind("store rebuilt from the log")
        .expect("the rebuild's log line");
    let line = log[at..].lines().next().unwrap_or("");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("read="))
        .and_then(|n| n.parse().ok())
        .expect("read=N")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_intake_rebuilds_every_acked_hook_after_the_data_dir_is_lost() {
    require("Kafka (Tansu)", 9092);
    let topic = format!("ankusa-intake-{}", suffix());
    create_kafka_topic(&topic).await;
    let intake = format!("intake:\n  kafka: {{brokers: [\"127.0.0.1:9092\"], topic: {topic}}}\n");
    let g = lose_the_node_under_load(intake, None, "kafka").await;
    assert!(rebuild_read(&g.log()) > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_intake_with_a_backup_restores_it_and_replays_only_the_tail() {
    require("Kafka (Tansu)", 9092);
    let topic = format!("ankusa-intake-{}", suffix());
    create_kafka_topic(&topic).await;
    let blobs = tempfile::tempdir().unwrap();
    let intake = format!("intake:\n  kafka: {{brokers: [\"127.0.0.1:9092\"], topic: {topic}}}\n");
    let backup = format!(
        "backup:\n  enabled: true\n  interval_ms: 1000\n  store:\n    type: local\n    local:\n      dir: {}\n",
        blobs.path().display()
    );
    let g = lose_the_node_under_load(intake, Some(backup), "kafka+backup").await;
    let log = g.log();
    assert!(log.contains("store restored from backup"), "not restored");
    // The restore brought the checkpoint back; the log was read from the backup's watermark,
    // not from its start.
    let st = g.admin_json(&client(), "/v1/status").await;
    assert!(st["backup"]["restored_from"].is_string(), "{st}");
    let read = rebuild_read(&log);
    let offset = st["intake"]["offset"].as_i64().unwrap_or(0);
    println!(
        "kafka+backup: the rebuild read {read} records; the log holds {} of this node's",
        offset + 1
    );
    assert!(
        (read as i64) < offset + 1,
        "the rebuild read the whole log ({read} records) instead of its tail"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jetstream_intake_rebuilds_every_acked_hook_after_the_data_dir_is_lost() {
    require("NATS", 4222);
    let s = suffix().replace('-', "_");
    let subject = format!("intake_{s}");
    create_stream(
        "nats://127.0.0.1:4222",
        &format!("INTAKE_{s}"),
        &subject,
        None,
    )
    .await;
    let intake = format!(
        "intake:\n  jetstream: {{servers: [\"nats://127.0.0.1:4222\"], subject: {subject}}}\n"
    );
    let g = lose_the_node_under_load(intake, None, "jetstream").await;
    assert!(rebuild_read(&g.log()) > 0);
}

/// The ids of every record the node published to `<subject>.gw`.
async fn ids_in_stream(url: &str, stream: &str) -> HashSet<String> {
    use futures::StreamExt;
    let client = async_nats::connect(url).await.expect("nats");
    let js = async_nats::jetstream::new(client);
    let stream = js.get_stream(stream).await.expect("stream");
    let last = stream.get_info().await.expect("info").state.last_sequence;
    let mut out = HashSet::new();
    if last == 0 {
        return out;
    }
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig::default())
        .await
        .expect("consumer");
    let mut msgs = consumer.messages().await.expect("messages");
    while let Ok(Some(Ok(m))) = tokio::time::timeout(Duration::from_secs(5), msgs.next()).await {
        let rec = ankusa_format::intake::decode_intake(&m.payload).expect("an intake record");
        out.insert(rec.envelope.id.to_string());
        if m.info().expect("info").stream_sequence >= last {
            break;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn intake_down_is_503_and_the_node_recovers_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut nats = NatsServer::start(dir.path(), free_port(), &Spec::plain());
    create_stream(&nats.url(), "INTAKE", "intake", Some("file")).await;
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let intake = format!(
        "intake:\n  node: gw\n  publish_timeout_ms: 500\n  breaker_failures: 3\n  retry_after_s: 1\n  reconcile_interval_ms: 200\n  jetstream: {{servers: [\"{}\"], subject: intake, publish_timeout_ms: 500}}\n",
        nats.url()
    );
    let g = Gateway::start(&config(&rx.url("/hook"), &intake));
    let url = g.url("/webhooks/s");
    let c = client();
    let mut acked: HashSet<String> = HashSet::new();
    for i in 0..20 {
        let (s, v) = post_event(&c, &url, &format!("up-{i}"))
            .await
            .expect("answer");
        assert_eq!(s, 201, "{v}");
        acked.insert(v["id"].as_str().unwrap().to_string());
    }

    // Deliveries fail while the log is down, so the hooks stored meanwhile stay stored.
    rx.set(|_, _| Reply::status(503));
    nats.kill();
    // The first failure answers 503 intake_unavailable with the hook stored here but not in
    // the log; the provider's retry of it is told to come back (intake_pending).
    let pending_event = "down-0".to_string();
    let (s, v) = post_event(&c, &url, &pending_event).await.expect("answer");
    assert_eq!(
        (s, v["error"].as_str()),
        (503, Some("intake_unavailable")),
        "{v}"
    );
    let (s, v) = post_event(&c, &url, &pending_event).await.expect("answer");
    assert_eq!(
        (s, v["error"].as_str()),
        (503, Some("intake_pending")),
        "{v}"
    );
    // After breaker_failures in a row, new hooks are refused before anything is written.
    for i in 1..12 {
        let (s, v) = post_event(&c, &url, &format!("down-{i}"))
            .await
            .expect("answer");
        assert_eq!(
            (s, v["error"].as_str()),
            (503, Some("intake_unavailable")),
            "hook {i}: {v}"
        );
    }
    let ready = {
        let url = g.url("/ready");
        tokio::task::spawn_blocking(move || blocking_get(&url))
            .await
            .unwrap()
            .unwrap()
    };
    assert_eq!(ready, 503, "/ready while the intake log is down");
    let st = g.admin_json(&c, "/v1/status").await;
    assert_eq!(st["intake"]["state"], "down", "{st}");
    assert!(st["intake"]["pending"].as_u64().unwrap() >= 1, "{st}");
    let m = g.metrics(&c).await;
    assert!(m.lines().any(|l| l == "ankusa_intake_ready 0"), "{m}");
    // The breaker counts every failed publish in a row: an ack's and the reconciler's.
    let failed = metric(&m, "ankusa_intake_failures_total{class=\"publish\"}")
        + metric(&m, "ankusa_intake_failures_total{class=\"reconcile\"}");
    assert!(failed >= 3.0, "{m}");

    nats.spawn();
    rx.set(|_, _| Reply::status(200));
    // Back without a restart: the reconciler publishes what was left pending, the breaker
    // half-opens and closes, new hooks are taken.
    let t0 = Instant::now();
    let first_id = loop {
        let (s, v) = post_event(&c, &url, &pending_event).await.expect("answer");
        if s == 201 {
            break v["id"].as_str().unwrap().to_string();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "not recovered: {v}\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    acked.insert(first_id.clone());
    let t0 = Instant::now();
    loop {
        let (s, v) = post_event(&c, &url, &format!("back-{}", t0.elapsed().as_millis()))
            .await
            .expect("answer");
        if s == 201 {
            acked.insert(v["id"].as_str().unwrap().to_string());
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "new hooks still refused: {v}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A second retry of the pending event gets the same first id.
    let (s, v) = post_event(&c, &url, &pending_event).await.expect("answer");
    assert_eq!((s, v["id"].as_str()), (201, Some(first_id.as_str())), "{v}");
    let st = g.admin_json(&c, "/v1/status").await;
    assert_eq!(st["intake"]["state"], "ready", "{st}");
    // Nothing answered 201 is missing from the log.
    let in_log = ids_in_stream(&nats.url(), "INTAKE").await;
    let not_in_log: Vec<&String> = acked.iter().filter(|id| !in_log.contains(*id)).collect();
    assert!(
        not_in_log.is_empty(),
        "acked but not in the log: {not_in_log:?}"
    );
    // The hook stored while the log was down was delivered too, under its first id.
    rx.wait_for(Duration::from_secs(30), |r| {
        r.iter()
            .any(|x| x.header("x-ankusa-id").as_deref() == Some(first_id.as_str()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_whose_log_is_away_at_start_waits_recovering_then_takes_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    let intake = format!(
        "intake:\n  node: gw\n  jetstream: {{servers: [\"nats://127.0.0.1:{port}\"], subject: intake, publish_timeout_ms: 500}}\n"
    );
    // The log comes up 3 s after the node: until then the node starts, answers /health and
    // says /ready 503 (recovering) instead of exiting.
    let path = dir.path().to_path_buf();
    let later = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        NatsServer::start(&path, port, &Spec::plain())
    });
    let cfg = config(&rx.url("/hook"), &intake);
    let starting = std::thread::spawn(move || {
        let t0 = Instant::now();
        let g = Gateway::start(&cfg);
        (g, t0.elapsed())
    });
    let nats = later.join().unwrap();
    create_stream(&nats.url(), "INTAKE", "intake", Some("file")).await;
    let (g, took) = starting.join().unwrap();
    assert!(
        took >= Duration::from_secs(3),
        "ready before the log was up: {took:?}"
    );
    let log = g.log();
    assert!(log.contains("rebuild from the log failed"), "{log}");
    let (s, v) = post_event(&client(), &g.url("/webhooks/s"), "first")
        .await
        .unwrap();
    assert_eq!(s, 201, "{v}");
}
