//! SQS sink against moto_server (127.0.0.1:5000, and a throwaway one for the restart test),
//! over the SQS JSON protocol with real SigV4 signatures. The tests create the queues; the
//! sink never does.

mod common;

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use ankusa_config::{EgressConfig, SinkConfig, SqsSinkConfig};
use ankusa_sinks::SinkBuilder;
use common::*;
use serde_json::{Value, json};

const MOTO: &str = "http://127.0.0.1:5000";

async fn sqs(endpoint: &str, target: &str, body: Value) -> Result<Value, String> {
    sqs_call(endpoint, target, body).await
}

async fn create_queue(endpoint: &str, name: &str) -> String {
    let mut attrs = json!({});
    if name.ends_with(".fifo") {
        attrs = json!({"FifoQueue": "true"});
    }
    let v = sqs(
        endpoint,
        "CreateQueue",
        json!({"QueueName": name, "Attributes": attrs}),
    )
    .await
    .expect("CreateQueue");
    v["QueueUrl"].as_str().unwrap().to_string()
}

/// Receives (and deletes) what is on the queue until `n` messages or `wait` passed.
async fn drain(endpoint: &str, queue: &str, n: usize, wait: Duration) -> Vec<Value> {
    let end = Instant::now() + wait;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < end {
        let Ok(v) = sqs(
            endpoint,
            "ReceiveMessage",
            json!({
                "QueueUrl": queue, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1,
                "MessageAttributeNames": ["All"], "MessageSystemAttributeNames": ["All"],
                "AttributeNames": ["All"]
            }),
        )
        .await
        else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        for m in v["Messages"].as_array().cloned().unwrap_or_default() {
            let _ = sqs(
                endpoint,
                "DeleteMessage",
                json!({"QueueUrl": queue, "ReceiptHandle": m["ReceiptHandle"]}),
            )
            .await;
            out.push(m);
        }
    }
    out
}

fn attr(m: &Value, k: &str) -> Option<String> {
    m["MessageAttributes"][k]["StringValue"]
        .as_str()
        .map(str::to_string)
}

fn sink_cfg(queue_url: &str) -> SqsSinkConfig {
    let mut c = SqsSinkConfig::new(queue_url);
    c.access_key_id = Some("test".into());
    c.secret_access_key = Some("test".into());
    c.region = Some("us-east-1".into());
    c
}

#[tokio::test]
async fn sqs_standard_end_to_end_every_field() {
    init();
    require("moto_server (SQS)", 5000);
    let q = create_queue(MOTO, &format!("hooks-{}", suffix())).await;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::Sqs(sink_cfg(&q)));
    assert_eq!(sink.type_name(), "sqs");
    let env = hook(br#"{"id":"evt_1"}"#);
    let c = ctx();
    sink.deliver(&env, &c).await.expect("stored");
    let msgs = drain(MOTO, &q, 1, Duration::from_secs(10)).await;
    assert_eq!(msgs.len(), 1);
    let m = &msgs[0];
    check_message(m["Body"].as_str().unwrap().as_bytes(), &env, &c);
    check_attributes(|k| attr(m, k), &env, &c);
    assert!(
        m["Attributes"].get("MessageGroupId").is_none(),
        "standard queue: no group"
    );
}

/// Requests obey the egress policy on connect. By name (the queue URL's origin), the client's
/// resolver refuses a loopback answer (transient, naming the class and the field, nothing
/// sent); as an IP literal the URL is refused before the request; with
/// `egress.allow_loopback` the name is resolved by the same resolver and the hook is stored.
#[tokio::test]
async fn sqs_egress_checks_the_endpoint_on_connect() {
    init();
    require("moto_server (SQS)", 5000);
    let q = create_queue(MOTO, &format!("egress-{}", suffix())).await;
    let path = url::Url::parse(&q).unwrap().path().to_string();
    let by_name = format!("http://localhost:5000{path}");
    let literal = format!("http://127.0.0.1:5000{path}");
    let builder = SinkBuilder::new();
    let sink = build_with(
        &builder,
        SinkConfig::Sqs(sink_cfg(&by_name)),
        EgressConfig::default(),
    );
    refused_by_name(sink, "(endpoint)", &builder).await;
    let sink = build_with(
        &builder,
        SinkConfig::Sqs(sink_cfg(&literal)),
        EgressConfig::default(),
    );
    assert_transient(
        sink.deliver(&hook(b"x"), &ctx()).await,
        "egress_denied: loopback (queue_url)",
    );
    assert!(
        drain(MOTO, &q, 1, Duration::from_secs(1)).await.is_empty(),
        "nothing was sent while refused"
    );
    let sink = build(&builder, SinkConfig::Sqs(sink_cfg(&by_name)));
    let env = hook(br#"{"id":"evt_by_name"}"#);
    sink.deliver(&env, &ctx()).await.expect("stored by name");
    let msgs = drain(MOTO, &q, 1, Duration::from_secs(10)).await;
    assert_eq!(msgs.len(), 1);
    check_message(msgs[0]["Body"].as_str().unwrap().as_bytes(), &env, &ctx());
}

#[tokio::test]
async fn sqs_fifo_group_dedup_and_replay() {
    init();
    require("moto_server (SQS)", 5000);
    let q = create_queue(MOTO, &format!("hooks-{}.fifo", suffix())).await;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::Sqs(sink_cfg(&q)));
    let env = hook(b"fifo");
    let c = ctx();
    sink.deliver(&env, &c).await.expect("stored");
    // The same delivery again (a retry after a lost reply) collapses on its dedup id.
    sink.deliver(&env, &c).await.expect("duplicate accepted");
    let mut r = ctx();
    r.replay_id = Some("0192f1c0-cccc-7000-8000-000000000003".into());
    sink.deliver(&env, &r).await.expect("replay stored");
    let msgs = drain(MOTO, &q, 3, Duration::from_secs(4)).await;
    assert_eq!(
        msgs.len(),
        2,
        "original + replay; the duplicate collapsed: {msgs:?}"
    );
    assert_eq!(msgs[0]["Attributes"]["MessageGroupId"], "acme/stripe");
    assert_eq!(
        msgs[0]["Attributes"]["MessageDeduplicationId"],
        env.id.to_string()
    );
    assert_eq!(
        msgs[1]["Attributes"]["MessageDeduplicationId"],
        format!("{}:replay:{}", env.id, r.replay_id.as_deref().unwrap())
    );
    check_message(msgs[1]["Body"].as_str().unwrap().as_bytes(), &env, &r);
    check_attributes(|k| attr(&msgs[1], k), &env, &r);
    // A static group id.
    let mut cfg = sink_cfg(&q);
    cfg.message_group_id = Some("stripe".into());
    let sink = build(&builder, SinkConfig::Sqs(cfg));
    let mut e2 = hook(b"g");
    e2.tenant = "default".into();
    sink.deliver(&e2, &ctx()).await.unwrap();
    let msgs = drain(MOTO, &q, 1, Duration::from_secs(4)).await;
    assert_eq!(msgs[0]["Attributes"]["MessageGroupId"], "stripe");
    assert_eq!(
        attr(&msgs[0], "ankusa_tenant_id"),
        None,
        "no tenant attribute without a tenant"
    );
}

#[tokio::test]
async fn sqs_direct_send_message_without_batching() {
    init();
    require("moto_server (SQS)", 5000);
    let q = create_queue(MOTO, &format!("direct-{}", suffix())).await;
    let builder = SinkBuilder::new();
    let mut cfg = sink_cfg(&q);
    cfg.batch = false;
    let sink = build(&builder, SinkConfig::Sqs(cfg));
    let env = hook(b"direct");
    sink.deliver(&env, &ctx()).await.expect("stored");
    assert_eq!(
        builder
            .sqs_stats
            .requests
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    let msgs = drain(MOTO, &q, 1, Duration::from_secs(5)).await;
    check_message(msgs[0]["Body"].as_str().unwrap().as_bytes(), &env, &ctx());
}

#[tokio::test]
async fn sqs_missing_queue_is_permanent_config() {
    init();
    require("moto_server (SQS)", 5000);
    let q = format!("{MOTO}/123456789012/missing-{}", suffix());
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::Sqs(sink_cfg(&q)));
    assert_config(sink.deliver(&hook(b"x"), &ctx()).await, "QueueDoesNotExist");
    let mut cfg = sink_cfg(&q);
    cfg.batch = false;
    let sink = build(&builder, SinkConfig::Sqs(cfg));
    assert_config(sink.deliver(&hook(b"x"), &ctx()).await, "QueueDoesNotExist");
}

#[tokio::test]
async fn sqs_refused_message_is_permanent_oversized_never_sent_and_claims() {
    init();
    require("moto_server (SQS)", 5000);
    let name = format!("small-{}", suffix());
    let v = sqs(
        MOTO,
        "CreateQueue",
        json!({"QueueName": name, "Attributes": {"MaximumMessageSize": "1024"}}),
    )
    .await
    .unwrap();
    let small = v["QueueUrl"].as_str().unwrap().to_string();
    let builder = SinkBuilder::new();
    // SQS refuses the message itself (the queue takes at most 1 KiB): permanent.
    let sink = build(&builder, SinkConfig::Sqs(sink_cfg(&small)));
    assert_permanent(
        sink.deliver(&hook(&[b'a'; 2000]), &ctx()).await,
        "InvalidParameterValue",
    );
    // Over max_message_bytes by itself: refused before any request.
    let q = create_queue(MOTO, &format!("big-{}", suffix())).await;
    let mut cfg = sink_cfg(&q);
    cfg.inline_max_bytes = 2_000_000;
    let sink = build(&builder, SinkConfig::Sqs(cfg));
    let env = hook(&vec![b'a'; 1_100_000]);
    let mut c = ctx();
    c.claim_check = Some(check_in_for(&env));
    let before = builder
        .sqs_stats
        .requests
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_permanent(sink.deliver(&env, &c).await, "message_too_large");
    assert_eq!(
        builder
            .sqs_stats
            .requests
            .load(std::sync::atomic::Ordering::Relaxed),
        before,
        "no request"
    );
    // A body over the inline limit travels as its claim.
    let sink = build(&builder, SinkConfig::Sqs(sink_cfg(&q)));
    let env = hook(&vec![b'c'; 100_000]);
    assert_transient(sink.deliver(&env, &ctx()).await, "claim check unavailable");
    let mut c = ctx();
    c.claim_check = Some(check_in_for(&env));
    sink.deliver(&env, &c).await.expect("claim stored");
    let msgs = drain(MOTO, &q, 1, Duration::from_secs(5)).await;
    let body = msgs[0]["Body"].as_str().unwrap();
    assert!(body.len() < 4000);
    check_message(body.as_bytes(), &env, &c);
}

#[tokio::test]
async fn sqs_batches_settle_each_entry() {
    init();
    require("moto_server (SQS)", 5000);
    let q = create_queue(MOTO, &format!("batch-{}", suffix())).await;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::Sqs(sink_cfg(&q)));
    let envs: Vec<_> = (0..25)
        .map(|i| {
            let mut e = hook(format!("{{\"n\":{i}}}").as_bytes());
            e.tenant = ["t1", "t2", "t3"][i % 3].into();
            e
        })
        .collect();
    let c = ctx();
    let results = futures::future::join_all(envs.iter().map(|e| sink.deliver(e, &c))).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let requests = builder
        .sqs_stats
        .requests
        .load(std::sync::atomic::Ordering::Relaxed);
    let entries = builder
        .sqs_stats
        .entries
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(entries, 25);
    assert!(
        (3..=6).contains(&requests),
        "25 entries in {requests} requests"
    );
    let msgs = drain(MOTO, &q, 25, Duration::from_secs(10)).await;
    let got: HashMap<String, Value> = msgs
        .iter()
        .map(|m| (attr(m, "ankusa_id").unwrap(), m.clone()))
        .collect();
    assert_eq!(got.len(), 25);
    for e in &envs {
        let m = &got[&e.id.to_string()];
        check_message(m["Body"].as_str().unwrap().as_bytes(), e, &c);
    }
}

/// moto keeps queues in memory, so its restart is staged around that: deliveries are held
/// while the consumer drains what was acknowledged, moto is SIGKILLed, deliveries run against
/// the dead endpoint (and fail), a new moto starts and the queue is recreated before
/// deliveries resume. Every acknowledged hook must reach the consumer.
#[tokio::test]
async fn sqs_restart_loses_no_hook() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let path = dir.path().to_path_buf();
    let server = Restartable::start(port, Duration::from_secs(30), move || {
        Owned::spawn(
            "moto",
            &path,
            Command::new("moto_server").args(["-H", "127.0.0.1", "-p", &port.to_string()]),
        )
    })
    .await;
    let q = create_queue(&endpoint, "restart").await;
    let received = Ids::default();
    let consumer = {
        let (endpoint, q) = (endpoint.clone(), q.clone());
        collect_ids(received.clone(), move || {
            let (endpoint, q) = (endpoint.clone(), q.clone());
            async move {
                let msgs = drain(&endpoint, &q, 10, Duration::from_millis(500)).await;
                msgs.iter().filter_map(|m| attr(m, "ankusa_id")).collect()
            }
        })
    };
    let builder = SinkBuilder::new();
    let mut cfg = sink_cfg(&q);
    cfg.timeout_ms = 1_000;
    let sink = build(&builder, SinkConfig::Sqs(cfg));
    let gate = Gate::default();
    let recreate = async move {
        create_queue(&endpoint, "restart").await;
    };
    let run = deliver_through_restart(
        sink,
        40,
        Duration::from_millis(20),
        Duration::from_secs(120),
        gate.clone(),
        server.crash_emulator(gate, received.clone(), recreate),
    )
    .await;
    run.all_received("sqs restart", &received).await;
    consumer.abort();
}
