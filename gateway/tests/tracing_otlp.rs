//! OpenTelemetry traces through the real binary (`telemetry.otlp`, docs/tracing.md): a small
//! OTLP/HTTP receiver here decodes the `ExportTraceServiceRequest`s the gateway posts (with
//! the `opentelemetry-proto` prost types) and the test HTTP receiver is the sink.
//!
//! - One hook sent with a provider's `traceparent`, whose first delivery fails and whose
//!   retry succeeds only after a restart: the `ingest` span (with `verify` and `commit`
//!   children) and every `deliver` span carry the provider's trace id, the delivered attempt
//!   (run by the second process, from what was stored with the hook) is a child of the
//!   `ingest` span, and the sink receives a `traceparent` in that trace naming that attempt.
//! - Without `telemetry.otlp.endpoint` (even with the SDK's `OTEL_EXPORTER_OTLP_ENDPOINT` set)
//!   nothing is exported and the sink gets the provider's `traceparent` as it came.
//! - `check-config` and `run` refuse a bad endpoint and a ratio out of range naming the field,
//!   and never print an export header's value.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use common::receiver::{Receiver, Reply};
use common::*;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PROVIDER_SPAN: &str = "00f067aa0ba902b7";
const EXPORT_TOKEN: &str = "Bearer otlp-collector-token-7f3a";

/// One span as the collector got it.
#[derive(Debug, Clone)]
struct GotSpan {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent: String,
    attrs: BTreeMap<String, String>,
}

impl GotSpan {
    fn attr(&self, k: &str) -> &str {
        self.attrs.get(k).map(String::as_str).unwrap_or("")
    }
}

#[derive(Clone, Default)]
struct Collected {
    spans: Arc<Mutex<Vec<GotSpan>>>,
    requests: Arc<AtomicUsize>,
    /// The `authorization` header of every export request.
    auth: Arc<Mutex<Vec<Option<String>>>>,
}

impl Collected {
    fn spans(&self) -> Vec<GotSpan> {
        self.spans.lock().unwrap().clone()
    }

    async fn wait_for(&self, what: &str, pred: impl Fn(&[GotSpan]) -> bool) -> Vec<GotSpan> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.spans();
            if pred(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "never got {what}; spans: {s:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        _ => String::new(),
    }
}

async fn export(
    State(c): State<Collected>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Vec<u8>) {
    c.requests.fetch_add(1, Ordering::SeqCst);
    c.auth.lock().unwrap().push(
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    );
    let Ok(req) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    let mut got = Vec::new();
    for rs in req.resource_spans {
        let service = rs
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .find(|kv| kv.key == "service.name")
            .map(|kv| text(&kv.value))
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                got.push(GotSpan {
                    service: service.clone(),
                    name: s.name.clone(),
                    trace_id: hex::encode(&s.trace_id),
                    span_id: hex::encode(&s.span_id),
                    parent: hex::encode(&s.parent_span_id),
                    attrs: s
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text(&kv.value)))
                        .collect(),
                });
            }
        }
    }
    c.spans.lock().unwrap().extend(got);
    (
        StatusCode::OK,
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

/// An OTLP/HTTP collector on a free loopback port: its base URL and what it got.
async fn collector() -> (String, Collected) {
    let c = Collected::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(export))
        .with_state(c.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), c)
}

fn config(sink_url: &str, telemetry: &str) -> String {
    format!(
        "egress: {{allow_http: true, allow_loopback: true}}\n\
         dispatch:\n  retry: {{base_ms: 200, max_ms: 400, jitter: false}}\n\
         {telemetry}\
         sources:\n  gh:\n    tenant: acme\n    sinks:\n      - type: http\n        url: {sink_url}\n        allow_unsigned: true\n        timeout_ms: 2000\n"
    )
}

async fn post_hook(g: &Gateway, traceparent: &str) -> String {
    let resp = client()
        .post(g.url("/webhooks/gh"))
        .header("content-type", "application/json")
        .header("traceparent", traceparent)
        .header("tracestate", "congo=t61rcWkgMzE")
        .body(r#"{"event":"push"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let v: serde_json::Value = resp.json().await.unwrap();
    v["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn one_hook_is_one_trace_from_the_providers_traceparent_to_the_sink_across_a_restart() {
    let (otlp, got) = collector().await;
    // The sink refuses until `up`: the first process's attempts fail, the retry after the
    // restart succeeds.
    let up = Arc::new(AtomicBool::new(false));
    let up2 = up.clone();
    let rx = Receiver::start(move |_, _| {
        Reply::status(if up2.load(Ordering::SeqCst) { 200 } else { 503 })
    })
    .await;
    let telemetry = format!(
        "telemetry:\n  otlp:\n    endpoint: {otlp}\n    service_name: gw-under-test\n    \
         headers: {{authorization: \"{EXPORT_TOKEN}\"}}\n"
    );
    let mut g = Gateway::start(&config(&rx.url("/hooks"), &telemetry));
    let provider = format!("00-{TRACE_ID}-{PROVIDER_SPAN}-01");
    let id = post_hook(&g, &provider).await;
    rx.wait_for(Duration::from_secs(10), |r| !r.is_empty())
        .await;
    // A graceful stop sends what is queued.
    g.terminate();
    let spans = got
        .wait_for("the ingest span", |s| s.iter().any(|s| s.name == "ingest"))
        .await;
    let ingest = spans.iter().find(|s| s.name == "ingest").unwrap().clone();
    assert_eq!(ingest.service, "gw-under-test");
    assert_eq!(ingest.trace_id, TRACE_ID, "the provider's trace");
    assert_eq!(
        ingest.parent, PROVIDER_SPAN,
        "the provider's span is the parent"
    );
    assert_eq!(ingest.attr("source"), "gh");
    assert_eq!(ingest.attr("tenant"), "acme");
    assert_eq!(ingest.attr("outcome"), "accepted");
    assert_eq!(ingest.attr("hook_id"), id);
    assert_eq!(ingest.attr("http.response.status_code"), "201");
    for child in ["verify", "commit"] {
        let c = spans
            .iter()
            .find(|s| s.name == child)
            .unwrap_or_else(|| panic!("no {child} span: {spans:#?}"));
        assert_eq!(c.trace_id, TRACE_ID);
        assert_eq!(c.parent, ingest.span_id, "{child} is a child of ingest");
    }
    let failed: Vec<&GotSpan> = spans.iter().filter(|s| s.name == "deliver").collect();
    assert!(!failed.is_empty(), "the failed attempt's span: {spans:#?}");
    for d in &failed {
        assert_eq!(d.trace_id, TRACE_ID);
        assert_eq!(d.parent, ingest.span_id);
        assert_eq!(d.attr("outcome"), "transient");
        assert_eq!(d.attr("sink.type"), "http");
    }
    // The export carried its header; the logs never show it.
    assert!(
        got.auth
            .lock()
            .unwrap()
            .iter()
            .all(|a| a.as_deref() == Some(EXPORT_TOKEN))
    );
    assert!(!g.log().contains("otlp-collector-token"), "{}", g.log());

    // After the restart the hook's trace is recovered from what was stored with it.
    // The first process is gone: every request from here on is the second's, answered 200.
    up.store(true, Ordering::SeqCst);
    let before = rx.count();
    g.spawn_again();
    g.wait_ready(Duration::from_secs(30));
    let got_rx = rx
        .wait_for(Duration::from_secs(15), |r| r.len() > before)
        .await;
    let last = got_rx[before].clone();
    let tp = last
        .header("traceparent")
        .expect("a traceparent to the sink");
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!(parts.len(), 4, "{tp}");
    assert_eq!(parts[1], TRACE_ID, "the sink is told the provider's trace");
    assert_eq!(
        last.header("tracestate").as_deref(),
        Some("congo=t61rcWkgMzE")
    );
    g.terminate();
    let spans = got
        .wait_for("the delivered attempt", |s| {
            s.iter()
                .any(|s| s.name == "deliver" && s.attr("outcome") == "delivered")
        })
        .await;
    let ok = spans
        .iter()
        .find(|s| s.name == "deliver" && s.attr("outcome") == "delivered")
        .unwrap();
    assert_eq!(ok.trace_id, TRACE_ID);
    assert_eq!(
        ok.parent, ingest.span_id,
        "a child of the hook's ingest span"
    );
    assert_eq!(
        ok.span_id, parts[2],
        "the sink's traceparent names this attempt"
    );
    assert_eq!(ok.attr("hook_id"), id);
    assert_eq!(ok.attr("sink.type"), "http");
    assert_eq!(ok.attr("sink.name"), "sinks[0]");
    assert_eq!(ok.attr("source"), "gh");
    let attempt: u64 = ok.attr("attempt").parse().unwrap();
    assert!(attempt >= 2, "a retry: {attempt}");
    // Only the exported target: no log event or library span became a span.
    for s in &spans {
        assert!(
            ["ingest", "verify", "commit", "deliver", "replay_page"].contains(&s.name.as_str()),
            "unexpected span {}",
            s.name
        );
    }
}

#[tokio::test]
async fn without_an_endpoint_nothing_is_exported() {
    let (otlp, got) = collector().await;
    let rx = Receiver::start(|_, _| Reply::status(200)).await;
    // The SDK's own variable does not turn export on: only `telemetry.otlp.endpoint` does.
    let mut g = Gateway::start_with(
        &config(&rx.url("/hooks"), ""),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str())],
    );
    let provider = format!("00-{TRACE_ID}-{PROVIDER_SPAN}-01");
    post_hook(&g, &provider).await;
    let got_rx = rx
        .wait_for(Duration::from_secs(10), |r| !r.is_empty())
        .await;
    assert_eq!(
        got_rx[0].header("traceparent").as_deref(),
        Some(provider.as_str()),
        "the provider's traceparent, as it came"
    );
    g.terminate();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(got.requests.load(Ordering::SeqCst), 0, "nothing exported");
}

/// Runs `ankusa <args>` on a config file.
fn ankusa(config: &str, args: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ankusa.yml");
    std::fs::write(&path, config).unwrap();
    std::process::Command::new(BIN)
        .arg("--config")
        .arg(&path)
        .args(args)
        .env("ANKUSA_DATA_DIR", dir.path().join("data"))
        .env("ANKUSA_HTTP_PORT", free_port().to_string())
        .env("ANKUSA_ADMIN_PORT", free_port().to_string())
        .env("ANKUSA_CLAIM_CHECK_PORT", free_port().to_string())
        .env_remove("ANKUSA_CONFIG")
        .output()
        .unwrap()
}

#[test]
fn check_config_and_run_refuse_a_bad_otlp_section_naming_the_field() {
    let cases = [
        ("endpoint: ftp://collector:4318", "telemetry.otlp.endpoint"),
        ("endpoint: not a url", "telemetry.otlp.endpoint"),
        (
            "endpoint: http://user:pw@collector:4318",
            "telemetry.otlp.endpoint",
        ),
        (
            "{endpoint: http://collector:4318, sampling_ratio: 1.5}",
            "telemetry.otlp.sampling_ratio",
        ),
        (
            "{endpoint: http://collector:4318, sampling_ratio: -0.1}",
            "telemetry.otlp.sampling_ratio",
        ),
        ("{protocol: grpc}", "telemetry.otlp.protocol"),
    ];
    for (otlp, field) in cases {
        let otlp = if otlp.starts_with('{') {
            otlp.to_string()
        } else {
            format!("{{{otlp}}}")
        };
        let cfg = format!("telemetry:\n  otlp: {otlp}\n");
        for cmd in ["check-config", "run"] {
            let out = ankusa(&cfg, &[cmd]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(78), "{cmd} {otlp}: {err}");
            assert!(err.contains(field), "{cmd} {otlp} names {field}: {err}");
        }
    }
    // A good section passes; the export header's value is never printed.
    let cfg = format!(
        "telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n    sampling_ratio: 0.25\n    \
         headers: {{authorization: \"{EXPORT_TOKEN}\"}}\n"
    );
    let out = ankusa(&cfg, &["check-config"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ankusa(&cfg, &["print-config", "--format", "json"]);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("sampling_ratio"), "{printed}");
    assert!(!printed.contains("otlp-collector-token"), "{printed}");
    // A header value that is not a header value: named, not quoted.
    let cfg = "telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n    \
               headers: {authorization: \"tok\\nen-secret\"}\n";
    let out = ankusa(cfg, &["check-config"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains("telemetry.otlp.headers.authorization"),
        "{err}"
    );
    assert!(!err.contains("en-secret"), "{err}");
}
