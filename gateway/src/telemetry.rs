//! OpenTelemetry traces (`telemetry.otlp`, docs/tracing.md). Off by default: without
//! `telemetry.otlp.endpoint` no provider is built, no OpenTelemetry layer is installed, and
//! the spans below are disabled at their call sites (their target, `TARGET`, is enabled only
//! for the OpenTelemetry layer, never for the log lines).
//!
//! With an endpoint: `provider` builds an SDK tracer provider (parent-based ratio sampling,
//! `service.name`, a batch processor on its own thread posting OTLP/HTTP protobuf with
//! reqwest's blocking client); `cli` installs its layer and shuts it down (flushing what is
//! queued) after a graceful stop. `check` builds the same exporter for `check-config`.
//!
//! The spans: `ingest` (edge; children `verify`, `commit`), `deliver` (one per attempt,
//! dispatch), `replay_page` (one per replay step). A request's W3C `traceparent` is the
//! `ingest` span's parent (`set_remote_parent`); the `ingest` span's own context is stored with
//! the hook (`Envelope::traceparent`), so a `deliver` span, however much later and after
//! however many restarts, is its child in the same trace; the `deliver` span's context is what
//! the sink sends on (`traceparent_of` → `DeliveryCtx::traceparent`).
//!
//! A leaf: imports only `ankusa_config`.

use std::collections::HashMap;
use std::time::Duration;

use ankusa_config::{Config, ConfigError, OtlpConfig};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of every span exported over OTLP: enabled for the OpenTelemetry layer only.
pub const TARGET: &str = "ankusa_otel";

/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a graceful stop waits for the queued spans to be sent.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// `check-config`'s part: builds the exporter `run` builds (nothing is contacted).
pub fn check(c: &Config) -> Result<(), ConfigError> {
    exporter(&c.telemetry.otlp).map(|_| ())
}

/// The exporter of `otlp`, `None` when export is off.
fn exporter(otlp: &OtlpConfig) -> Result<Option<opentelemetry_otlp::SpanExporter>, ConfigError> {
    let Some(url) = otlp.traces_url() else {
        return Ok(None);
    };
    let headers: HashMap<String, String> = otlp
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.expose().to_string()))
        .collect();
    opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .with_headers(headers)
        .build()
        .map(Some)
        // The builder's error may quote the endpoint or a header: a fixed message instead.
        .map_err(|_| {
            ConfigError::field(
                "telemetry.otlp.endpoint",
                "the OTLP exporter cannot be built from it",
            )
        })
}

/// The tracer provider `telemetry.otlp` asks for; `None` when export is off. Called before
/// the runtime starts (the exporter's blocking client must not be built inside it).
pub fn provider(c: &Config) -> Result<Option<SdkTracerProvider>, ConfigError> {
    let otlp = &c.telemetry.otlp;
    let Some(exporter) = exporter(otlp)? else {
        return Ok(None);
    };
    let resource = Resource::builder_empty()
        .with_service_name(otlp.service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new(
            "service.instance.id",
            c.node.instance.clone(),
        ))
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Ok(Some(
        SdkTracerProvider::builder()
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                otlp.sampling_ratio,
            ))))
            .with_resource(resource)
            .with_batch_exporter(exporter)
            .build(),
    ))
}

/// The `tracing` layer that turns the spans of `TARGET` into OpenTelemetry spans.
pub fn layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S> + Send + Sync
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    use tracing_subscriber::Layer as _;
    let filter =
        tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::TRACE);
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("ankusa"))
        .with_filter(filter)
}

/// Sends what is queued and stops the exporter (after a graceful stop). A failure is logged,
/// never fatal: the gateway is already stopping.
pub fn shutdown(provider: SdkTracerProvider) {
    if let Err(e) = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
        tracing::warn!(error = %e, "telemetry: the span exporter did not shut down cleanly");
    }
}

/// Makes `span` a child of the remote span a W3C `traceparent` (with its `tracestate`) names.
/// Nothing happens when the span is disabled (export off) or the header is not a valid one.
pub fn set_remote_parent(span: &Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    let Some(tp) = traceparent else {
        return;
    };
    if span.is_disabled() {
        return;
    }
    let mut carrier = HashMap::with_capacity(2);
    carrier.insert("traceparent".to_string(), tp.to_string());
    if let Some(ts) = tracestate {
        carrier.insert("tracestate".to_string(), ts.to_string());
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// The W3C `traceparent` of `span` (`00-<trace id>-<span id>-<flags>`): what is stored with a
/// hook and sent to a sink. `None` when the span is disabled (export off).
pub fn traceparent_of(span: &Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier: HashMap<String, String> = HashMap::with_capacity(2);
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    const PROVIDERS: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn without_a_layer_spans_carry_no_context() {
        let span = tracing::info_span!(target: TARGET, "ingest");
        set_remote_parent(&span, Some(PROVIDERS), None);
        assert_eq!(traceparent_of(&span), None);
    }

    /// A span whose parent is the provider's `traceparent` keeps the provider's trace id under
    /// a span id of its own; a child of it stays in the trace; an unsampled parent is followed.
    #[test]
    fn a_remote_parent_gives_its_trace_id() {
        let provider = SdkTracerProvider::builder()
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                0.0,
            ))))
            .build();
        let subscriber = tracing_subscriber::registry().with(layer(&provider));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: TARGET, "ingest");
            set_remote_parent(&span, Some(PROVIDERS), Some("congo=t61rcWkgMzE"));
            let tp = traceparent_of(&span).expect("a context");
            let parts: Vec<&str> = tp.split('-').collect();
            assert_eq!(parts[1], "4bf92f3577b34da6a3ce929d0e0e4736");
            assert_ne!(parts[2], "00f067aa0ba902b7", "a span id of its own");
            assert_eq!(parts[3], "01", "the provider's sampled flag is honoured");
            let child = span.in_scope(|| tracing::info_span!(target: TARGET, "deliver"));
            let ctp = traceparent_of(&child).expect("a context");
            assert!(ctp.contains("4bf92f3577b34da6a3ce929d0e0e4736"));

            let unsampled = tracing::info_span!(target: TARGET, "ingest");
            set_remote_parent(
                &unsampled,
                Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"),
                None,
            );
            let tp = traceparent_of(&unsampled).expect("a context");
            assert!(tp.starts_with("00-0af7651916cd43dd8448eb211c80319c-"));
            assert!(tp.ends_with("-00"), "unsampled stays unsampled: {tp}");

            let bad = tracing::info_span!(target: TARGET, "ingest");
            set_remote_parent(&bad, Some("00-xyz-1-01"), None);
            let tp = traceparent_of(&bad).expect("a root of its own");
            assert!(!tp.contains("4bf92f35"));
        });
    }

    #[test]
    fn check_builds_the_exporter_only_when_enabled() {
        let mut c = Config::default();
        check(&c).expect("off");
        assert!(provider(&c).expect("off").is_none());
        c.telemetry.otlp.endpoint = Some("http://127.0.0.1:4318".into());
        check(&c).expect("an exporter");
    }
}
