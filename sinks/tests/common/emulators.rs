//! The test's own calls to the emulators behind the SQS and Pub/Sub sinks (moto_server, the
//! Pub/Sub emulator), made directly over plain HTTP: a signed SQS JSON-protocol call, a topic
//! with a subscription, a message's data. Imports nothing of `common`.

use ankusa_sinks::aws::sign_headers;
use aws_credential_types::Credentials;
use base64::Engine;
use serde_json::{Value, json};

/// One SQS JSON-protocol call to `endpoint` (`http://host:port`), signed like the sink signs.
pub async fn sqs_call(endpoint: &str, target: &str, body: Value) -> Result<Value, String> {
    let url = format!("{endpoint}/");
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

/// Creates `topic` in `project` on the emulator at `endpoint` and a subscription to it
/// (`<topic>-sub`, ack deadline 30 s: the emulator drops what no subscription would keep);
/// returns the subscription's name.
pub async fn pubsub_topic(endpoint: &str, project: &str, topic: &str) -> String {
    let http = reqwest::Client::new();
    let base = format!("{endpoint}/v1/projects/{project}");
    let r = http
        .put(format!("{base}/topics/{topic}"))
        .send()
        .await
        .expect("emulator");
    assert!(r.status().is_success(), "create topic: {}", r.status());
    let sub = format!("{topic}-sub");
    let r = http
        .put(format!("{base}/subscriptions/{sub}"))
        .json(&json!({"topic": format!("projects/{project}/topics/{topic}"), "ackDeadlineSeconds": 30}))
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

/// The bytes of a pulled Pub/Sub message's `data`.
pub fn pubsub_data(m: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(m["data"].as_str().unwrap_or(""))
        .expect("base64 data")
}
