//! The SQS sink against moto_server (5000): `sqs` (next to the same signed SendMessageBatch of
//! 10 alone, 8 requests in flight) and `sqs-tls` (`https://` with a private CA vs `http://`,
//! each through a relay of the bench's own). moto slows as a queue fills, so each measurement
//! gets a fresh queue. Imports `measure` and `tls`.

use ankusa_config::{SinkConfig, SqsSinkConfig};
use ankusa_sinks::SinkBuilder;
use serde_json::{Value, json};

use crate::measure::{
    BoxErr, build, http_client, line, message_payload, rate_batches, suffix, through_sink, tls_line,
};
use crate::tls::Relays;

const MOTO: &str = "http://127.0.0.1:5000/";

/// One SQS JSON-protocol call to moto, signed as the sink signs.
async fn sqs_call(target: &str, body: &Value) -> Result<Value, String> {
    let bytes = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    let target = format!("AmazonSQS.{target}");
    let base = [
        ("content-type", "application/x-amz-json-1.0"),
        ("x-amz-target", target.as_str()),
    ];
    let creds = aws_credential_types::Credentials::new("test", "test", None, None, "bench");
    let signed =
        ankusa_sinks::aws::sign_headers(creds, "us-east-1", "sqs", "POST", MOTO, &base, &bytes)?;
    let mut req = http_client().post(MOTO).body(bytes);
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

/// A fresh queue on moto: its URL as moto names it.
async fn fresh_queue() -> Result<String, String> {
    let v = sqs_call(
        "CreateQueue",
        &json!({"QueueName": format!("bench-{}", suffix())}),
    )
    .await?;
    v["QueueUrl"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| "no QueueUrl".to_string())
}

fn sink(queue_url: String) -> SqsSinkConfig {
    let mut cfg = SqsSinkConfig::new(queue_url);
    cfg.access_key_id = Some("test".into());
    cfg.secret_access_key = Some("test".into());
    cfg.region = Some("us-east-1".into());
    cfg.timeout_ms = 30_000;
    cfg
}

pub async fn plain(n: u64) -> Result<(), BoxErr> {
    let builder = SinkBuilder::new();
    let s = through_sink(
        build(&builder, SinkConfig::Sqs(sink(fresh_queue().await?))),
        n,
    )
    .await;
    let q = fresh_queue().await?;
    // Alone: the same signed SendMessageBatch of 10, 8 requests in flight (the sink's default).
    let body = String::from_utf8_lossy(&message_payload()).into_owned();
    let a = rate_batches(n, 10, 8, |_| {
        let entries: Vec<Value> = (0..10)
            .map(|i| json!({"Id": i.to_string(), "MessageBody": body}))
            .collect();
        let payload = json!({"QueueUrl": q, "Entries": entries});
        async move { sqs_call("SendMessageBatch", &payload).await.map(|_| ()) }
    })
    .await;
    line(
        "sqs",
        n,
        s,
        a,
        "reqwest + aws-sigv4 SendMessageBatch of 10, 8 in flight, against moto_server",
        None,
    );
    Ok(())
}

/// The SQS sink over `https://` with a private CA vs `http://`, each through its relay to moto
/// (a fresh queue per run).
pub async fn tls(n: u64) -> Result<(), BoxErr> {
    let relays = Relays::start(5000).await?;
    let mut rates = Vec::new();
    for origin in relays.origins() {
        let path = url::Url::parse(&fresh_queue().await?)?.path().to_string();
        let mut cfg = sink(format!("{origin}{path}"));
        if origin.starts_with("https:") {
            cfg.tls = Some(relays.pki.sink_tls());
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
    Ok(())
}
