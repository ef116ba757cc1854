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

use std::time::{Duration, Instant};

use ankusa_config::{GooglePubsubSinkConfig, PubsubAuth, SinkConfig, SinkTls, SqsSinkConfig};
use std::sync::Arc;

use ankusa_core::{Envelope, Sink, SinkError};
use ankusa_sinks::SinkBuilder;
use ankusa_testkit::pki::{self, Ca};
use ankusa_testkit::tls_proxy::TlsProxy;
use common::*;
use serde_json::{Value, json};

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
    sqs_call(MOTO, target, body).await
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

/// moto behind a TLS proxy of the test's own (a certificate for `names`; with `mtls` it
/// demands a client certificate from the CA), a queue of its own, one builder (a reload builds
/// the fixed sink through it).
struct SqsTls {
    ca: Ca,
    proxy: TlsProxy,
    q: String,
    builder: SinkBuilder,
}

async fn sqs_tls(names: &[&str], mtls: bool) -> SqsTls {
    init();
    require("moto_server (SQS)", 5000);
    let ca = Ca::new("ankusa test CA");
    let client_ca = mtls.then_some(ca.pem.as_str());
    let proxy = TlsProxy::start(&ca.server(names, false), client_ca, 5000).await;
    let q = create_queue(&format!("tls-{}", suffix())).await;
    SqsTls {
        ca,
        proxy,
        q,
        builder: SinkBuilder::new(),
    }
}

impl SqsTls {
    fn config(&self, tls: SinkTls) -> SqsSinkConfig {
        let SinkConfig::Sqs(cfg) = sqs_sink(&via(&self.proxy, &self.q), tls) else {
            unreachable!()
        };
        cfg
    }

    fn sink(&self, tls: SinkTls) -> Arc<dyn Sink> {
        build(&self.builder, SinkConfig::Sqs(self.config(tls)))
    }
}

#[tokio::test]
async fn sqs_over_https_with_a_private_ca_file_or_pem() {
    let f = sqs_tls(&["localhost"], false).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = pki::write(dir.path(), "ca.pem", &f.ca.pem);
    let sink = f.sink(ca_file(&file));
    let env = hook(br#"{"id":"evt_sqs_tls"}"#);
    let c = ctx();
    sink.deliver(&env, &c).await.expect("stored over TLS");
    let msgs = drain(&f.q, 1, Duration::from_secs(10)).await;
    assert_eq!(msgs.len(), 1);
    check_message(msgs[0]["Body"].as_str().expect("Body").as_bytes(), &env, &c);

    // The same CA as PEM text, unbatched (one SendMessage per delivery).
    let mut cfg = f.config(ca_pem(&f.ca));
    cfg.batch = false;
    let sink = build(&f.builder, SinkConfig::Sqs(cfg));
    let env = hook(br#"{"id":"evt_sqs_tls_pem"}"#);
    sink.deliver(&env, &ctx()).await.expect("stored over TLS");
    sqs_landed_once(&f.q, &env).await;
}

/// The system's roots (`tls: {}`) do not know the private CA: `tls_handshake`, the subject
/// named, transient; the same hook lands once a reload brings the CA.
#[tokio::test]
async fn sqs_without_the_ca_fails_at_the_handshake_then_lands_once_fixed() {
    let f = sqs_tls(&["localhost"], false).await;
    let env = hook(br#"{"id":"evt_sqs_no_ca"}"#);
    let m = fails_with(&f.sink(SinkTls::default()), &env, &untrusted("localhost")).await;
    eprintln!("system roots: {m}");
    // Another CA's bundle: the same step, the same subject.
    let other = f.sink(ca_pem(&Ca::new("another CA")));
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
    retry_lands(&f.sink(ca_pem(&f.ca)), &env).await;
    sqs_landed_once(&f.q, &env).await;
}

/// A certificate for another name: refused for the name, its subject and names shown; the
/// name it carries, set as `server_name`, fixes it.
#[tokio::test]
async fn sqs_wrong_name_fails_at_the_handshake_then_lands_with_server_name() {
    let f = sqs_tls(&["sqs.other.test"], false).await;
    let env = hook(br#"{"id":"evt_sqs_wrong_name"}"#);
    let wrong = f.sink(ca_pem(&f.ca));
    let mut needles = misnamed("sqs.other.test");
    needles.push("names sqs.other.test".into());
    let m = fails_with(&wrong, &env, &needles).await;
    eprintln!("wrong name: {m}");

    let mut tls = ca_pem(&f.ca);
    tls.server_name = Some("sqs.other.test".into());
    retry_lands(&f.sink(tls), &env).await;
    sqs_landed_once(&f.q, &env).await;
}

/// An endpoint that demands a client certificate: without one the attempt fails (transient);
/// with `cert_pem` + `key_pem` from the CA it lands.
#[tokio::test]
async fn sqs_presents_the_client_certificate() {
    let f = sqs_tls(&["localhost"], true).await;
    let env = hook(br#"{"id":"evt_sqs_mtls"}"#);

    let r = f.sink(ca_pem(&f.ca)).deliver(&env, &ctx()).await;
    eprintln!("no client certificate: {r:?}");
    assert!(matches!(r, Err(SinkError::Transient(_))), "{r:?}");

    let client = f.ca.client("ankusa-gateway");
    let mut tls = ca_pem(&f.ca);
    tls.cert_pem = Some(client.cert.into());
    tls.key_pem = Some(client.key.into());
    retry_lands(&f.sink(tls), &env).await;
    sqs_landed_once(&f.q, &env).await;
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

/// The Pub/Sub emulator behind a TLS proxy of the test's own (a certificate for `names`), a
/// topic and subscription of its own, one builder.
struct PubsubTls {
    ca: Ca,
    proxy: TlsProxy,
    topic: String,
    sub: String,
    builder: SinkBuilder,
}

async fn pubsub_tls(names: &[&str]) -> PubsubTls {
    init();
    require("Pub/Sub emulator", 8085);
    let ca = Ca::new("ankusa test CA");
    let proxy = TlsProxy::start(&ca.server(names, false), None, 8085).await;
    let topic = format!("tls-{}", suffix());
    let sub = pubsub_topic(EMULATOR, PROJECT, &topic).await;
    PubsubTls {
        ca,
        proxy,
        topic,
        sub,
        builder: SinkBuilder::new(),
    }
}

impl PubsubTls {
    fn sink(&self, tls: SinkTls) -> Arc<dyn Sink> {
        let mut c = GooglePubsubSinkConfig::new(PROJECT, &self.topic);
        c.auth = PubsubAuth::None;
        c.endpoint = Some(self.proxy.origin().into());
        c.tls = Some(tls);
        build(&self.builder, SinkConfig::GooglePubsub(c))
    }

    /// Exactly one message, `env`'s, is on the subscription.
    async fn landed_once(&self, env: &Envelope) -> Value {
        let msgs = pull(&self.sub, 1, Duration::from_secs(10)).await;
        assert_eq!(msgs.len(), 1, "one message: {msgs:?}");
        assert_eq!(message_id(&pubsub_data(&msgs[0])), env.id.to_string());
        msgs[0].clone()
    }
}

/// Pub/Sub through the proxy: the private CA delivers; the system's roots and a certificate
/// for another name fail at `tls_handshake` naming the subject, transient; the same hook lands
/// once fixed through the same builder.
#[tokio::test]
async fn pubsub_over_https_with_a_private_ca() {
    let f = pubsub_tls(&["localhost"]).await;
    let env = hook(br#"{"id":"evt_pubsub_tls"}"#);
    let c = ctx();
    f.sink(ca_pem(&f.ca))
        .deliver(&env, &c)
        .await
        .expect("published over TLS");
    let m = f.landed_once(&env).await;
    check_message(&pubsub_data(&m), &env, &c);

    let env = hook(br#"{"id":"evt_pubsub_no_ca"}"#);
    let m = fails_with(&f.sink(SinkTls::default()), &env, &untrusted("localhost")).await;
    eprintln!("pubsub, system roots: {m}");
    retry_lands(&f.sink(ca_pem(&f.ca)), &env).await;
    f.landed_once(&env).await;
}

#[tokio::test]
async fn pubsub_wrong_name_fails_at_the_handshake_then_lands_with_server_name() {
    let f = pubsub_tls(&["pubsub.other.test"]).await;
    let env = hook(br#"{"id":"evt_pubsub_wrong_name"}"#);
    fails_with(&f.sink(ca_pem(&f.ca)), &env, &misnamed("pubsub.other.test")).await;
    let mut tls = ca_pem(&f.ca);
    tls.server_name = Some("pubsub.other.test".into());
    retry_lands(&f.sink(tls), &env).await;
    f.landed_once(&env).await;
}
