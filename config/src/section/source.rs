//! `sources.<id>`: one source — its tenant, how it verifies (`verify.rs`) and what it does
//! with a failure, its dedupe key (`dedupe.rs`), the headers it forwards, its retry overrides
//! and its sinks (`crate::sinks`, one file per sink type).
//!
//! The rules here look at the source alone, each sink's own included. What depends on other
//! sections (the id against `http.prefix`, `http.routing: tenant_path`, the retry overrides
//! over `dispatch.retry`, each sink against `egress`) is `validate.rs`'s. Imports the leaves,
//! `sinks` and the source's parts (`verify`, `dedupe`, `dispatch`'s `RetryOverride`).

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, header_name, valid_id};
use crate::section::dedupe::DedupeConfig;
use crate::section::dispatch::RetryOverride;
use crate::section::verify::VerifyConfig;
use crate::sinks::SinkConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnVerifyFailure {
    /// `401`, nothing stored.
    #[default]
    Reject,
    /// Stored and delivered with `flagged: true`.
    AcceptFlag,
    /// `202`, held in the node's quarantine pen until a `quarantine` replay job releases it
    /// (once the source verifies it) or an operator purges it.
    Quarantine,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// The tenant of this source's hooks. A source pinned to a tenant other than `default`
    /// answers only routes naming that tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Accept the URL's tenant on a shared source without verification (`tenant_path` only).
    #[serde(default)]
    pub trust_url_tenant: bool,
    #[serde(default)]
    pub verify: VerifyConfig,
    #[serde(default)]
    pub on_verify_failure: OnVerifyFailure,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe: Option<DedupeConfig>,
    /// Request headers forwarded to sinks; absent forwards all but auth, framing, hop-by-hop
    /// and `x-ankusa-*` headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_headers: Option<Vec<String>>,
    #[serde(default = "default_max_headers")]
    pub max_headers: u32,
    #[serde(default = "default_forward_headers_max_bytes")]
    pub forward_headers_max_bytes: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryOverride>,
    pub sinks: Vec<SinkConfig>,
    /// A name for each entry of `sinks`, by position (empty: none). Only reported, in
    /// `GET /v1/status` next to a sink's delivery failures: the operator fills it with the
    /// `Sink` objects' names so it can tell which Sink a failure belongs to. A list beside
    /// `sinks` rather than a key of each entry, so the sink types' own structs stay as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sink_names: Vec<String>,
}

fn default_max_headers() -> u32 {
    64
}

fn default_forward_headers_max_bytes() -> u32 {
    16_384
}

impl SourceConfig {
    /// A source with the given sinks and every other key at its default.
    pub fn with_sinks(sinks: Vec<SinkConfig>) -> Self {
        SourceConfig {
            tenant: None,
            trust_url_tenant: false,
            verify: VerifyConfig::None,
            on_verify_failure: OnVerifyFailure::Reject,
            dedupe: None,
            forward_headers: None,
            max_headers: default_max_headers(),
            forward_headers_max_bytes: default_forward_headers_max_bytes(),
            retry: None,
            sinks,
            sink_names: Vec::new(),
        }
    }

    /// Whether the source is shared by every tenant (no tenant, or `default`).
    pub(crate) fn is_shared(&self) -> bool {
        self.tenant.as_deref().is_none_or(|t| t == "default")
    }

    /// `path` is `sources.<id>`.
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(t) = &self.tenant
            && !valid_id(t)
        {
            return Err(err(
                format!("{path}.tenant"),
                "must match [A-Za-z0-9_-]{1,64}",
            ));
        }
        self.verify.validate(&format!("{path}.verify"))?;
        // Nothing fails verification without a scheme: the pen would never hold anything.
        if self.verify == VerifyConfig::None {
            let what = match self.on_verify_failure {
                OnVerifyFailure::Reject => None,
                OnVerifyFailure::AcceptFlag => Some("accept_flag"),
                OnVerifyFailure::Quarantine => Some("quarantine"),
            };
            if let Some(what) = what {
                return Err(err(
                    format!("{path}.on_verify_failure"),
                    format!("{what} needs a verify scheme (verify.type is none)"),
                ));
            }
        }
        if let Some(d) = &self.dedupe {
            d.validate(&format!("{path}.dedupe"))?;
        }
        for (i, h) in self.forward_headers.iter().flatten().enumerate() {
            header_name(format!("{path}.forward_headers[{i}]"), h)?;
        }
        if self.sinks.is_empty() {
            return Err(err(format!("{path}.sinks"), "must list at least one sink"));
        }
        self.validate_sink_names(path)?;
        for (i, sink) in self.sinks.iter().enumerate() {
            sink.validate(&format!("{path}.sinks[{i}]"))?;
        }
        Ok(())
    }

    /// `sink_names`, when given, names every sink once: it is reported back (`GET /v1/status`),
    /// so a name must be short plain text.
    fn validate_sink_names(&self, path: &str) -> Result<(), ConfigError> {
        if self.sink_names.is_empty() {
            return Ok(());
        }
        if self.sink_names.len() != self.sinks.len() {
            return Err(err(
                format!("{path}.sink_names"),
                format!(
                    "must name each of the {} sinks (got {} names)",
                    self.sinks.len(),
                    self.sink_names.len()
                ),
            ));
        }
        for (i, n) in self.sink_names.iter().enumerate() {
            if n.is_empty() || n.len() > MAX_SINK_NAME || n.chars().any(char::is_control) {
                return Err(err(
                    format!("{path}.sink_names[{i}]"),
                    format!("must be 1 to {MAX_SINK_NAME} bytes without control characters"),
                ));
            }
        }
        Ok(())
    }
}

/// Longest entry of `sink_names` (a Kubernetes object name is at most 253 bytes).
const MAX_SINK_NAME: usize = 253;

#[cfg(test)]
mod tests;
