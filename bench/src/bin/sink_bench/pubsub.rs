//! The Google Pub/Sub sink against the emulator (8085): `pubsub` (at 32 and at 512 deliveries
//! in flight, next to topics.publish of 32 messages alone, 8 in flight) and `pubsub-tls`
//! (`https://` with a private CA vs `http://`, each through a relay of the bench's own, 512 in
//! flight: where batching, not the linger, sets the rate). Imports `measure` and `tls`.

use ankusa_config::{GooglePubsubSinkConfig, PubsubAuth, SinkConfig};
use ankusa_sinks::SinkBuilder;
use base64::Engine;
use serde_json::{Value, json};

use crate::measure::{
    BoxErr, build, http_client, line, message_payload, rate_batches, suffix, through_sink,
    through_sink_at, tls_line,
};
use crate::tls::Relays;

const EMULATOR: &str = "http://127.0.0.1:8085";
const PROJECT: &str = "bench";

/// A fresh topic on the emulator and a subscription to it (the emulator drops what no
/// subscription would keep).
async fn fresh_topic() -> Result<String, BoxErr> {
    let topic = format!("bench-{}", suffix());
    let base = format!("{EMULATOR}/v1/projects/{PROJECT}");
    http_client()
        .put(format!("{base}/topics/{topic}"))
        .send()
        .await?
        .error_for_status()?;
    http_client()
        .put(format!("{base}/subscriptions/{topic}-sub"))
        .json(&json!({"topic": format!("projects/{PROJECT}/topics/{topic}")}))
        .send()
        .await?
        .error_for_status()?;
    Ok(topic)
}

/// The sink publishing to `topic` through `endpoint`, without credentials.
fn sink(endpoint: &str, topic: &str) -> GooglePubsubSinkConfig {
    let mut cfg = GooglePubsubSinkConfig::new(PROJECT, topic);
    cfg.auth = PubsubAuth::None;
    cfg.endpoint = Some(endpoint.into());
    cfg
}

pub async fn plain(n: u64) -> Result<(), BoxErr> {
    let topic = fresh_topic().await?;
    let builder = SinkBuilder::new();
    let sink = build(&builder, SinkConfig::GooglePubsub(sink(EMULATOR, &topic)));
    let s = through_sink(sink.clone(), n).await;
    let wide = through_sink_at(sink, n, 512).await;
    // Alone: publishes of 32 messages (what 32 deliveries in flight make a batch of), 8 in
    // flight.
    let data = base64::engine::general_purpose::STANDARD.encode(message_payload());
    let url = format!("{EMULATOR}/v1/projects/{PROJECT}/topics/{topic}:publish");
    let per = 32u64;
    let a = rate_batches(n, per, 8, |_| {
        let msgs: Vec<Value> = (0..per).map(|_| json!({"data": data})).collect();
        let url = url.clone();
        async move {
            http_client()
                .post(url)
                .json(&json!({"messages": msgs}))
                .send()
                .await
                .and_then(|r| r.error_for_status())
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    })
    .await;
    line(
        "google_pubsub",
        n,
        s,
        a,
        "reqwest topics.publish of 32 messages, 8 in flight, against the emulator",
        Some((512, wide)),
    );
    Ok(())
}

/// The Pub/Sub sink over `https://` with a private CA vs `http://`, each through its relay to
/// the emulator, 512 deliveries in flight.
pub async fn tls(n: u64) -> Result<(), BoxErr> {
    let topic = fresh_topic().await?;
    let relays = Relays::start(8085).await?;
    let mut rates = Vec::new();
    for origin in relays.origins() {
        let mut cfg = sink(&origin, &topic);
        if origin.starts_with("https:") {
            cfg.tls = Some(relays.pki.sink_tls());
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
    Ok(())
}
