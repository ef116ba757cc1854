//! `telemetry`: OpenTelemetry trace export (`telemetry.otlp`). Off unless `otlp.endpoint` is
//! set; read once at start (a reload keeps the start's values and reports the key as needing
//! a restart). What the gateway does with it is `gateway/src/telemetry.rs`; the spans and how
//! to use them are docs/tracing.md. Imports only the leaves.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, url_with_scheme, valid_header_name};
use crate::secrets::Secret;

/// Telemetry the gateway exports besides `/metrics`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Traces sent to an OpenTelemetry collector over OTLP.
    pub otlp: OtlpConfig,
}

/// The OTLP wire protocol. Only HTTP with protobuf bodies is built in (the gRPC exporter's
/// tonic stack is left out of the binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
pub enum OtlpProtocol {
    /// `http/protobuf`: `POST <endpoint>/v1/traces` with an `ExportTraceServiceRequest`.
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

/// The service name spans are reported under when none is set.
pub const DEFAULT_SERVICE_NAME: &str = "ankusa-gateway";

/// OTLP trace export. Absent `endpoint`: nothing is exported and no span is built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct OtlpConfig {
    /// The collector's base URL (`http://otel-collector:4318`); `/v1/traces` is appended.
    /// Absent (the default): tracing export is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The wire protocol: `http/protobuf` (the default and only one).
    pub protocol: OtlpProtocol,
    /// Share of new traces sampled, 0.0 to 1.0 (default 1.0). A request with a `traceparent`
    /// follows its sampled flag instead (parent-based sampling).
    pub sampling_ratio: f64,
    /// The `service.name` resource attribute (default `ankusa-gateway`).
    pub service_name: String,
    /// Headers sent with every export (a collector's credentials); never logged or printed.
    #[serde(
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "crate::scalar::secret_map"
    )]
    pub headers: BTreeMap<String, Secret>,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig {
            endpoint: None,
            protocol: OtlpProtocol::HttpProtobuf,
            sampling_ratio: 1.0,
            service_name: DEFAULT_SERVICE_NAME.into(),
            headers: BTreeMap::new(),
        }
    }
}

impl TelemetryConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        self.otlp.validate(&format!("{path}.otlp"))
    }
}

impl OtlpConfig {
    /// Whether traces are exported.
    pub fn enabled(&self) -> bool {
        self.endpoint.is_some()
    }

    /// Where spans are posted: `endpoint` with `/v1/traces` appended to its path. `None`
    /// when export is off.
    pub fn traces_url(&self) -> Option<String> {
        let e = self.endpoint.as_deref()?;
        let mut u = url::Url::parse(e).ok()?;
        let path = format!("{}/v1/traces", u.path().trim_end_matches('/'));
        u.set_path(&path);
        Some(u.to_string())
    }

    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(e) = &self.endpoint {
            let field = format!("{path}.endpoint");
            let u = url_with_scheme(&field, e, &["http", "https"])?;
            if !u.username().is_empty() || u.password().is_some() {
                return Err(err(field, "must not carry credentials; use headers"));
            }
            if u.query().is_some() || u.fragment().is_some() {
                return Err(err(field, "must not have a query or fragment"));
            }
        }
        let r = self.sampling_ratio;
        if !(0.0..=1.0).contains(&r) {
            return Err(err(
                format!("{path}.sampling_ratio"),
                format!("must be 0.0..=1.0, got {r}"),
            ));
        }
        let name = self.service_name.trim();
        if name.is_empty() || self.service_name.len() > 255 {
            return Err(err(
                format!("{path}.service_name"),
                "must be 1 to 255 characters",
            ));
        }
        for (name, value) in &self.headers {
            let field = format!("{path}.headers");
            if !valid_header_name(name) {
                return Err(err(field, "a key is not a header name"));
            }
            // What an HTTP header value may hold (visible ASCII, space, tab); the message
            // names the header, never the value.
            let ok = value
                .expose()
                .bytes()
                .all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
            if !ok {
                return Err(err(
                    format!("{field}.{name}"),
                    "must be visible ASCII (a header value)",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: impl FnOnce(&mut OtlpConfig)) -> Result<(), ConfigError> {
        let mut c = OtlpConfig {
            endpoint: Some("http://collector:4318".into()),
            ..OtlpConfig::default()
        };
        f(&mut c);
        TelemetryConfig { otlp: c }.validate("telemetry")
    }

    fn field(r: Result<(), ConfigError>) -> String {
        r.expect_err("refused").field.unwrap_or_default()
    }

    #[test]
    fn defaults_are_off_and_valid() {
        let c = TelemetryConfig::default();
        assert!(!c.otlp.enabled());
        assert_eq!(c.otlp.traces_url(), None);
        assert_eq!(c.otlp.sampling_ratio, 1.0);
        assert_eq!(c.otlp.service_name, "ankusa-gateway");
        c.validate("telemetry").expect("the default passes");
        assert_eq!(with(|_| {}), Ok(()));
    }

    #[test]
    fn refusals_name_the_field() {
        assert_eq!(
            field(with(|c| c.endpoint = Some("not a url".into()))),
            "telemetry.otlp.endpoint"
        );
        assert_eq!(
            field(with(|c| c.endpoint = Some("ftp://collector".into()))),
            "telemetry.otlp.endpoint"
        );
        assert_eq!(
            field(with(|c| c.endpoint = Some("http://u:p@collector".into()))),
            "telemetry.otlp.endpoint"
        );
        for r in [-0.1, 1.5, f64::NAN] {
            let e = with(|c| c.sampling_ratio = r).expect_err("refused");
            assert_eq!(e.field.as_deref(), Some("telemetry.otlp.sampling_ratio"));
        }
        assert_eq!(
            field(with(|c| c.service_name = " ".into())),
            "telemetry.otlp.service_name"
        );
        let e = with(|c| {
            c.headers
                .insert("authorization".into(), Secret::new("Bearer a\nb"));
        })
        .expect_err("refused");
        assert_eq!(
            e.field.as_deref(),
            Some("telemetry.otlp.headers.authorization")
        );
        assert!(!e.to_string().contains("Bearer"), "never the value: {e}");
        assert_eq!(
            field(with(|c| {
                c.headers.insert("bad header".into(), Secret::new("x"));
            })),
            "telemetry.otlp.headers"
        );
        assert_eq!(with(|c| c.sampling_ratio = 0.0), Ok(()));
    }

    #[test]
    fn traces_url_appends_the_signal_path() {
        let url = |e: &str| {
            OtlpConfig {
                endpoint: Some(e.into()),
                ..OtlpConfig::default()
            }
            .traces_url()
        };
        assert_eq!(
            url("http://c:4318").as_deref(),
            Some("http://c:4318/v1/traces")
        );
        assert_eq!(
            url("https://c/otlp/").as_deref(),
            Some("https://c/otlp/v1/traces")
        );
    }
}
