//! What every case of the sink bench shares: the hook and delivery context it sends, running
//! `n` operations a number at a time while counting failures, building a sink through the
//! factory as the gateway does, and the JSON line each case prints. Imports no other module of
//! the bench.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ankusa_config::{Config, SinkConfig, SourceConfig};
use ankusa_core::{DeliveryCtx, Envelope, Sink, Verification, VerifyStatus};
use ankusa_sinks::SinkBuilder;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;

/// Deliveries in flight: dispatch's default concurrency.
pub const CONCURRENCY: usize = 32;
/// Body bytes of every hook.
pub const BODY: usize = 1024;

pub type BoxErr = Box<dyn std::error::Error + Send + Sync>;

/// A measured run: (operations acknowledged per second, operations failed).
pub type Rate = (f64, u64);

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
        traceparent: None,
        original_sha256: None,
    }
}

/// Runs `n` operations, `CONCURRENCY` at a time.
pub async fn rate<F, Fut>(n: u64, op: F) -> Rate
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    rate_at(n, CONCURRENCY, op).await
}

/// Runs `n` operations, `concurrency` at a time; the first failures are printed.
pub async fn rate_at<F, Fut>(n: u64, concurrency: usize, op: F) -> Rate
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

/// `n` messages sent as requests of `per` messages, `in_flight` requests at a time: messages
/// per second and messages failed.
pub async fn rate_batches<F, Fut>(n: u64, per: u64, in_flight: usize, op: F) -> Rate
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let (requests_per_s, failed) = rate_at(n / per, in_flight, op).await;
    (requests_per_s * per as f64, failed * per)
}

pub async fn through_sink(sink: Arc<dyn Sink>, n: u64) -> Rate {
    through_sink_at(sink, n, CONCURRENCY).await
}

pub async fn through_sink_at(sink: Arc<dyn Sink>, n: u64, concurrency: usize) -> Rate {
    // Warm up: the first delivery opens the connection.
    let _ = sink.deliver(&hook(0), &ctx()).await;
    rate_at(n, concurrency, |i| {
        let sink = sink.clone();
        async move {
            let env = hook(i);
            sink.deliver(&env, &ctx()).await.map_err(|e| e.to_string())
        }
    })
    .await
}

/// One sink built through the factory, as the gateway builds it (the builder holds its
/// connections: keep it while the sink runs); the brokers and emulators of the bench listen on
/// loopback.
pub fn build(builder: &SinkBuilder, sink: SinkConfig) -> Arc<dyn Sink> {
    let mut cfg = Config::default();
    cfg.dispatch.sink_concurrency = Some(8);
    cfg.egress.allow_loopback = true;
    // The HTTP cases' plaintext receiver (`http://`).
    cfg.egress.allow_http = true;
    let source = SourceConfig::with_sinks(vec![sink.clone()]);
    builder
        .build(&cfg, &source, "bench", &sink)
        .expect("sink builds")
}

/// The line of a sink next to its broker driven alone (`alone_how`); `batched`: the same sink
/// with more deliveries in flight (dispatch admits more for a batching sink: its
/// sink_concurrency counts requests, not messages).
pub fn line(
    name: &str,
    n: u64,
    sink: Rate,
    alone: Rate,
    alone_how: &str,
    batched: Option<(usize, Rate)>,
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

/// The line of a sink over TLS next to the same sink over plaintext.
pub fn tls_line(name: &str, n: u64, p: Rate, t: Rate, how: &str) {
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

/// A short random suffix for topic, queue and stream names.
pub fn suffix() -> String {
    format!("{:08x}", fastrand::u32(..))
}

/// A payload as large as a sink's message for a `BODY` hook (the JSON envelope around base64).
pub fn message_payload() -> Vec<u8> {
    vec![b'x'; BODY + 500]
}

pub fn http_client() -> &'static reqwest::Client {
    static C: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    C.get_or_init(reqwest::Client::new)
}
