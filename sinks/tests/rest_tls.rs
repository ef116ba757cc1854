//! The SQS and Pub/Sub sinks over `https://` with the shared `tls:` settings, against the real
//! emulators (moto_server on 5000, the Pub/Sub emulator on 8085) behind a TLS-terminating
//! proxy the test runs itself, with certificates from a private CA the test makes: delivery
//! with that CA (file or PEM), with a client certificate where the proxy demands one, and with
//! a `server_name` override; without the CA (the system's roots) or with a certificate for
//! another name the attempt fails at `tls_handshake`, naming the certificate's subject,
//! transient (dispatch retries it, the hook stays queued) and the same hook lands once the
//! config is fixed through the same builder (a hot reload: the fixed `tls:` gets its own
//! client and batcher).

mod common;
#[path = "support/redis_tls.rs"]
mod pki;
#[path = "support/tls_proxy.rs"]
mod tls_proxy;

use std::time::{Duration, Instant};

use ankusa_config::{GooglePubsubSinkConfig, PubsubAuth, SinkConfig, SinkTls, SqsSinkConfig};
use ankusa_core::{Envelope, SinkError};
use ankusa_sinks::SinkBuilder;
use ankusa_sinks::aws::sign_headers;
use aws_credential_types::Credentials;
use base64::Engine;
use common::*;
use pki::Ca;
use serde_json::{Value, json};
use tls_proxy::TlsProxy;

const MOTO: &str = "http://127.0.0.1:5000";
const EMULATOR: &str = "http://127.0.0.1:8085";
const PROJECT: &str = "ankusa-test";

fn ca_file(path: &std::path::Path) -> SinkTls {
    SinkTls {
        ca_file: Some(path.to_path_buf().into()),
        ..SinkTls::default()
    }
}

fn ca_pem(ca: &Ca) -> SinkTls {
    SinkTls {
        ca_pem: Some(ca.pem.clone().into()),
        ..SinkTls::default()
    }
}

// ---- SQS -------------------------------------------------------------------------------

/// One SQS JSON-protocol call to moto directly (plain HTTP), signed like the sink signs.
async fn sqs(target: &str, body: Value) -> Result<Value, String> {
    let url = format!("{MOTO}/");
    let bytes = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
    let target = format!("AmazonSQS.{target}");
    let base = [
        ("content-type", "application/x-amz-json-1.0"),
        ("x-amz-target", target.as_str()),
    ];
    let creds = Credentials::new("test", "test", None, None, "test");
    let signed = sign_headers(creds, "us-east-1", "sqs", "POST", &url, &base, &bytes)?;
    let mut req = reqwest::Client::new().post(&url).body(bytes);
    for (k, v) in base {
        req = req.header(k, v);
    }
    for (k, v) in signed {
        req = req.header(k, v);
    }
    let resp = req.send().await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// Creates a queue on moto; returns its URL as moto names it (plain HTTP).
async fn create_queue(name: &str) -> String {
    let v = sqs("CreateQueue", json!({"QueueName": name}))
        .await
        .expect("CreateQueue");
    v["QueueUrl"].as_str().expect("QueueUrl").to_string()
}

/// Receives (and deletes) what is on the queue until `n` messages or `wait` passed; then
/// checks nothing more arrives for a moment (a hook lands once).
async fn drain(queue: &str, n: usize, wait: Duration) -> Vec<Value> {
    let end = Instant::now() + wait;
    let mut out = Vec::new();
    loop {
        let Ok(v) = sqs(
            "ReceiveMessage",
            json!({
                "QueueUrl": queue, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1,
                "MessageAttributeNames": ["All"]
            }),
        )
        .await
        else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let got = v["Messages"].as_array().cloned().unwrap_or_default();
        for m in &got {
            let _ = sqs(
                "DeleteMessage",
                json!({"QueueUrl": queue, "ReceiptHandle": m["ReceiptHandle"]}),
            )
            .await;
        }
        let empty = got.is_empty();
        out.extend(got);
        if (out.len() >= n && empty) || Instant::now() >= end {
            return out;
        }
    }
}

/// The queue URL the sink is given: moto's queue path behind the proxy's `https://` origin.
fn via(proxy: &TlsProxy, moto_url: &str) -> String {
    let path = url::Url::parse(moto_url)
        .expect("queue URL")
        .path()
        .to_string();
    format!("{}{path}", proxy.origin())
}

fn sqs_sink(queue_url: &str, tls: SinkTls) -> SinkConfig {
    let mut c = SqsSinkConfig::new(queue_url);
    c.access_key_id = Some("test".into());
    c.secret_access_key = Some("test".into());
    c.region = Some("us-east-1".into());
    c.tls = Some(tls);
    SinkConfig::Sqs(c)
}

/// Exactly one message, `env`'s, is on the queue.
async fn sqs_landed_once(queue: &str, env: &Envelope) {
    let msgs = drain(queue, 1, Duration::from_secs(10)).await;
    assert_eq!(msgs.len(), 1, "one message: {msgs:?}");
    let body: Value =
        serde_json::from_str(msgs[0]["Body"].as_str().expect("Body")).expect("JSON body");
    assert_eq!(body["id"], env.id.to_string());
}

#[tokio::test]
async fn sqs_over_https_with_a_private_ca_file_or_pem() {
    init();
    require("moto_server (SQS)", 5000);
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("ankusa test CA");
    let proxy = TlsProxy::start(&ca.server(&["localhost"], false), None, 5000).await;
    let q = create_queue(&format!("tls-{}", suffix())).await;
    let builder = SinkBuilder::new();

    let file = pki::write(dir.path(), "ca.pem", &ca.pem);
    let sink = build(&builder, sqs_sink(&via(&proxy, &q), ca_file(&file)));
    let env = hook(br#"{"id":"evt_sqs_tls"}"#);
    let c = ctx();
    sink.deliver(&env, &c).await.expect("stored over TLS");
    let msgs = drain(&q, 1, Duration::from_secs(10)).await;
    assert_eq!(msgs.len(), 1);
    check_message(msgs[0]["Body"].as_str().expect("Body").as_bytes(), &env, &c);

    // The same CA as PEM text, unbatched (one SendMessage per delivery).
    let SinkConfig::Sqs(mut cfg) = sqs_sink(&via(&proxy, &q), ca_pem(&ca)) else {
        unreachable!()
    };
    cfg.batch = false;
    let sink = build(&builder, SinkConfig::Sqs(cfg));
    let env = hook(br#"{"id":"evt_sqs_tls_pem"}"#);
    sink.deliver(&env, &ctx()).await.expect("stored over TLS");
    sqs_landed_once(&q, &env).await;
}

/// The system's roots (`tls: {}`) do not know the private CA: `tls_handshake`, the subject
/// named, transient; the same hook lands once a reload brings the CA.
#[tokio::test]
async fn sqs_without_the_ca_fails_at_the_handshake_then_lands_once_fixed() {
    init();
    require("moto_server (SQS)", 5000);
    let ca = Ca::new("ankusa test CA");
    let proxy = TlsProxy::start(&ca.server(&["localhost"], false), None, 5000).await;
    let q = create_queue(&format!("tls-noca-{}", suffix())).await;
    let builder = SinkBuilder::new();
    let env = hook(br#"{"id":"evt_sqs_no_ca"}"#);

    let wrong = build(&builder, sqs_sink(&via(&proxy, &q), SinkTls::default()));
    let m = fails_with(
        &wrong,
        &env,
        &[
            "not_connected: tls_handshake:",
            "not issued by a trusted CA",
            "subject CN=localhost",
        ],
    )
    .await;
    eprintln!("system roots: {m}");
    // Another CA's bundle: the same step, the same subject.
    let other = build(
        &builder,
        sqs_sink(&via(&proxy, &q), ca_pem(&Ca::new("another CA"))),
    );
    fails_with(
        &other,
        &env,
        &[
            "tls_handshake:",
            "not issued by a trusted CA",
            "CN=localhost",
        ],
    )
    .await;

    let fixed = build(&builder, sqs_sink(&via(&proxy, &q), ca_pem(&ca)));
    retry_lands(&fixed, &env).await;
    sqs_landed_once(&q, &env).await;
}

/// A certificate for another name: refused for the name, its subject and names shown; the
/// name it carries, set as `server_name`, fixes it.
#[tokio::test]
async fn sqs_wrong_name_fails_at_the_handshake_then_lands_with_server_name() {
    init();
    require("moto_server (SQS)", 5000);
    let ca = Ca::new("ankusa test CA");
    let proxy = TlsProxy::start(&ca.server(&["sqs.other.test"], false), None, 5000).await;
    let q = create_queue(&format!("tls-name-{}", suffix())).await;
    let builder = SinkBuilder::new();
    let env = hook(br#"{"id":"evt_sqs_wrong_name"}"#);

    let wrong = build(&builder, sqs_sink(&via(&proxy, &q), ca_pem(&ca)));
    let m = fails_with(
        &wrong,
        &env,
        &[
            "not_connected: tls_handshake:",
            "not valid for the server name",
            "subject CN=sqs.other.test",
            "names sqs.other.test",
        ],
    )
    .await;
    eprintln!("wrong name: {m}");

    let mut tls = ca_pem(&ca);
    tls.server_name = Some("sqs.other.test".into());
    let fixed = build(&builder, sqs_sink(&via(&proxy, &q), tls));
    retry_lands(&fixed, &env).await;
    sqs_landed_once(&q, &env).await;
}

/// An endpoint that demands a client certificate: without one the attempt fails (transient);
/// with `cert_pem` + `key_pem` from the CA it lands.
#[tokio::test]
async fn sqs_presents_the_client_certificate() {
    init();
    require("moto_server (SQS)", 5000);
    let ca = Ca::new("ankusa test CA");
    let proxy = TlsProxy::start(&ca.server(&["localhost"], false), Some(&ca.pem), 5000).await;
    let q = create_queue(&format!("tls-mtls-{}", suffix())).await;
    let builder = SinkBuilder::new();
    let env = hook(br#"{"id":"evt_sqs_mtls"}"#);

    let without = build(&builder, sqs_sink(&via(&proxy, &q), ca_pem(&ca)));
    let r = without.deliver(&env, &ctx()).await;
    eprintln!("no client certificate: {r:?}");
    assert!(matches!(r, Err(SinkError::Transient(_))), "{r:?}");

    let client = ca.client("ankusa-gateway");
    let mut tls = ca_pem(&ca);
    tls.cert_pem = Some(client.cert.into());
    tls.key_pem = Some(client.key.into());
    let with = build(&builder, sqs_sink(&via(&proxy, &q), tls));
    retry_lands(&with, &env).await;
    sqs_landed_once(&q, &env).await;
}

/// A CA file that is not there: `tls_setup` naming the key, transient, no request.
#[tokio::test]
async fn sqs_unreadable_ca_file_is_a_setup_failure() {
    init();
    let builder = SinkBuilder::new();
    let sink = build(
        &builder,
        sqs_sink(
            "https://localhost:1/123456789012/q",
            ca_file(std::path::Path::new("/nonexistent/ankusa-ca.pem")),
        ),
    );
    fails_with(
        &sink,
        &hook(b"{}"),
        &["not_connected: tls_setup: tls.ca_file: cannot read the file"],
    )
    .await;
}

// ---- Pub/Sub ---------------------------------------------------------------------------

/// Creates a topic and a subscription on it, on the emulator directly.
async fn topic(topic: &str) -> String {
    let http = reqwest::Client::new();
    let base = format!("{EMULATOR}/v1/projects/{PROJECT}");
    let r = http
        .put(format!("{base}/topics/{topic}"))
        .send()
        .await
        .expect("emulator");
    assert!(r.status().is_success(), "create topic: {}", r.status());
    let sub = format!("{topic}-sub");
    let r = http
        .put(format!("{base}/subscriptions/{sub}"))
        .json(&json!({"topic": format!("projects/{PROJECT}/topics/{topic}")}))
        .send()
        .await
        .expect("emulator");
    assert!(
        r.status().is_success(),
        "create subscription: {}",
        r.status()
    );
    sub
}

/// Pulls (and acks) until `n` messages or `wait` passed, then once more (a hook lands once).
async fn pull(sub: &str, n: usize, wait: Duration) -> Vec<Value> {
    let http = reqwest::Client::new();
    let base = format!("{EMULATOR}/v1/projects/{PROJECT}/subscriptions/{sub}");
    let end = Instant::now() + wait;
    let mut out = Vec::new();
    loop {
        let v: Value = match http
            .post(format!("{base}:pull"))
            .json(&json!({"maxMessages": 100, "returnImmediately": true}))
            .timeout(Duration::from_secs(3))
            .send()
            .await
        {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(_) => Value::Null,
        };
        let got = v["receivedMessages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !got.is_empty() {
            let acks: Vec<Value> = got.iter().map(|m| m["ackId"].clone()).collect();
            let _ = http
                .post(format!("{base}:acknowledge"))
                .json(&json!({"ackIds": acks}))
                .send()
                .await;
        }
        let empty = got.is_empty();
        out.extend(got.into_iter().map(|m| m["message"].clone()));
        if (out.len() >= n && empty) || Instant::now() >= end {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn pubsub_sink(proxy: &TlsProxy, topic: &str, tls: SinkTls) -> SinkConfig {
    let mut c = GooglePubsubSinkConfig::new(PROJECT, topic);
    c.auth = PubsubAuth::None;
    c.endpoint = Some(proxy.origin().into());
    c.tls = Some(tls);
    SinkConfig::GooglePubsub(c)
}

async fn pubsub_landed_once(sub: &str, env: &Envelope) -> Value {
    let msgs = pull(sub, 1, Duration::from_secs(10)).await;
    assert_eq!(msgs.len(), 1, "one message: {msgs:?}");
    let data = base64::engine::general_purpose::STANDARD
        .decode(msgs[0]["data"].as_str().unwrap_or(""))
        .expect("base64 data");
    let v: Value = serde_json::from_slice(&data).expect("JSON message");
    assert_eq!(v["id"], env.id.to_string());
    msgs[0].clone()
}

/// Pub/Sub through the proxy: the private CA delivers; the system's roots and a certificate
/// for another name fail at `tls_handshake` naming the subject, transient; the same hook lands
/// once fixed through the same builder.
#[tokio::test]
async fn pubsub_over_https_with_a_private_ca() {
    init();
    require("Pub/Sub emulator", 8085);
    let ca = Ca::new("ankusa test CA");
    let proxy = TlsProxy::start(&ca.server(&["localhost"], false), None, 8085).await;
    let t = format!("tls-{}", suffix());
    let sub = topic(&t).await;
    let builder = SinkBuilder::new();

    let sink = build(&builder, pubsub_sink(&proxy, &t, ca_pem(&ca)));
    let env = hook(br#"{"id":"evt_pubsub_tls"}"#);
    let c = ctx();
    sink.deliver(&env, &c).await.expect("published over TLS");
    let m = pubsub_landed_once(&sub, &env).await;
    let data = base64::engine::general_purpose::STANDARD
        .decode(m["data"].as_str().unwrap_or(""))
        .expect("base64 data");
    check_message(&data, &env, &c);

    let env = hook(br#"{"id":"evt_pubsub_no_ca"}"#);
    let wrong = build(&builder, pubsub_sink(&proxy, &t, SinkTls::default()));
    let m = fails_with(
        &wrong,
        &env,
        &[
            "not_connected: tls_handshake:",
            "not issued by a trusted CA",
            "subject CN=localhost",
        ],
    )
    .await;
    eprintln!("pubsub, system roots: {m}");
    let fixed = build(&builder, pubsub_sink(&proxy, &t, ca_pem(&ca)));
    retry_lands(&fixed, &env).await;
    pubsub_landed_once(&sub, &env).await;
}

#[tokio::test]
async fn pubsub_wrong_name_fails_at_the_handshake_then_lands_with_server_name() {
    init();
    require("Pub/Sub emulator", 8085);
    let ca = Ca::new("ankusa test CA");
    let proxy = TlsProxy::start(&ca.server(&["pubsub.other.test"], false), None, 8085).await;
    let t = format!("tls-name-{}", suffix());
    let sub = topic(&t).await;
    let builder = SinkBuilder::new();
    let env = hook(br#"{"id":"evt_pubsub_wrong_name"}"#);

    let wrong = build(&builder, pubsub_sink(&proxy, &t, ca_pem(&ca)));
    fails_with(
        &wrong,
        &env,
        &[
            "not_connected: tls_handshake:",
            "not valid for the server name",
            "subject CN=pubsub.other.test",
        ],
    )
    .await;
    let mut tls = ca_pem(&ca);
    tls.server_name = Some("pubsub.other.test".into());
    let fixed = build(&builder, pubsub_sink(&proxy, &t, tls));
    retry_lands(&fixed, &env).await;
    pubsub_landed_once(&sub, &env).await;
}
