//! `dispatch`: the delivery scheduler's windows (global and per tenant), the retry policy a
//! source's `retry:` overrides, and the per-sink breakers. Imports only the leaves.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{at_least, at_most, tenant_key};

/// The exponential retry policy. Every field of a source's `retry:` overrides this one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Delay before the second attempt, in ms (default 100); it doubles per failed attempt
    /// up to `max_ms`.
    pub base_ms: u64,
    /// Ceiling of a delay before jitter.
    pub max_ms: u64,
    /// Attempts before the dead letter; absent means the horizon is the only bound.
    pub max_attempts: Option<u32>,
    /// Multiply each delay by a random factor in [0.5, 1.0].
    pub jitter: bool,
    /// The horizon: a delivery still failing this long after its first attempt is dead-lettered.
    pub max_elapsed_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            base_ms: 100,
            max_ms: 300_000,
            max_attempts: None,
            jitter: true,
            max_elapsed_ms: 86_400_000,
        }
    }
}

/// A source's overrides of `dispatch.retry`; absent fields keep the instance's values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RetryOverride {
    /// Delay before the second attempt, in ms (default: `dispatch.retry.base_ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_ms: Option<u64>,
    /// Ceiling of a delay before jitter, in ms (default: `dispatch.retry.max_ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<u64>,
    /// Attempts before the dead letter (default: `dispatch.retry.max_attempts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Multiply each delay by a random factor in [0.5, 1.0] (default: `dispatch.retry.jitter`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<bool>,
    /// The horizon, in ms after the first attempt (default: `dispatch.retry.max_elapsed_ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_elapsed_ms: Option<u64>,
}

impl RetryConfig {
    /// This policy with a source's overrides laid over it.
    pub fn with_override(&self, o: Option<&RetryOverride>) -> RetryConfig {
        let Some(o) = o else { return self.clone() };
        RetryConfig {
            base_ms: o.base_ms.unwrap_or(self.base_ms),
            max_ms: o.max_ms.unwrap_or(self.max_ms),
            max_attempts: o.max_attempts.or(self.max_attempts),
            jitter: o.jitter.unwrap_or(self.jitter),
            max_elapsed_ms: o.max_elapsed_ms.unwrap_or(self.max_elapsed_ms),
        }
    }

    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        at_least(&format!("{path}.base_ms"), self.base_ms, 1)?;
        if self.max_ms < self.base_ms {
            return Err(ConfigError::general(format!(
                "{path}.max_ms must be >= {path}.base_ms ({}), got {}",
                self.base_ms, self.max_ms
            )));
        }
        if let Some(n) = self.max_attempts {
            at_least(&format!("{path}.max_attempts"), n, 1)?;
        }
        at_least(&format!("{path}.max_elapsed_ms"), self.max_elapsed_ms, 1)
    }
}

/// Per-tenant dispatch windows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct TenantWindow {
    /// Claimed, unfinished delivery rows of one tenant (default `dispatch.max_inflight / 4`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_inflight: Option<u32>,
    /// Stored bytes of those rows (default `dispatch.max_inflight_bytes / 4`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_inflight_bytes: Option<u64>,
    /// Attempts of one tenant running at once (default `dispatch.concurrency / 2`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

impl TenantWindow {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(n) = self.max_inflight {
            at_least(&format!("{path}.max_inflight"), n, 1)?;
        }
        if let Some(n) = self.max_inflight_bytes {
            at_least(&format!("{path}.max_inflight_bytes"), n, 1)?;
        }
        if let Some(n) = self.concurrency {
            at_least(&format!("{path}.concurrency"), n, 1)?;
        }
        Ok(())
    }
}

/// Per-tenant dispatch windows: a default for every tenant and per-tenant overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct TenantWindows {
    /// Every tenant's window; absent fields default to a quarter of the global window and
    /// half of the global concurrency.
    pub default: TenantWindow,
    /// Per-tenant overrides of `default`.
    pub overrides: BTreeMap<String, TenantWindow>,
}

/// Delivery of stored hooks to their sinks: the global and per-tenant windows, the retry
/// policy and the per-sink circuit breakers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct DispatchConfig {
    /// Attempts running at once.
    pub concurrency: u32,
    /// Claimed, unfinished delivery rows.
    pub max_inflight: u32,
    /// Sum of the stored sizes of claimed, unfinished rows.
    pub max_inflight_bytes: u64,
    /// Rows claimed per store scan.
    pub batch: u32,
    /// A hung attempt is cut after this long and counts as a failure.
    pub attempt_timeout_ms: u64,
    /// Ceiling for a destination's `Retry-After`.
    pub max_retry_after_ms: u64,
    /// The retry policy of every source; a source's `retry:` overrides single keys.
    pub retry: RetryConfig,
    /// Per-tenant windows (`default`, `overrides`) within the global one.
    pub tenants: TenantWindows,
    /// Attempts one sink key (tenant, source, sink) runs at once; absent means no cap.
    pub sink_concurrency: Option<u32>,
    /// Consecutive non-permanent failures that open a sink key's breaker (0 disables).
    pub breaker_failures: u32,
    /// First open period of a breaker, in ms (default 30000); it doubles with each
    /// consecutive open.
    pub breaker_open_ms: u64,
    /// Longest open period of a breaker, in ms (default 300000; at least `breaker_open_ms`).
    pub breaker_max_open_ms: u64,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        DispatchConfig {
            concurrency: 32,
            max_inflight: 4096,
            max_inflight_bytes: 134_217_728,
            batch: 128,
            attempt_timeout_ms: 30_000,
            max_retry_after_ms: 3_600_000,
            retry: RetryConfig::default(),
            tenants: TenantWindows::default(),
            sink_concurrency: Some(8),
            breaker_failures: 5,
            breaker_open_ms: 30_000,
            breaker_max_open_ms: 300_000,
        }
    }
}

impl DispatchConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        at_least(&f("concurrency"), self.concurrency, 1)?;
        at_most(&f("concurrency"), self.concurrency, 65_536)?;
        at_least(&f("max_inflight"), self.max_inflight, 1)?;
        at_least(&f("max_inflight_bytes"), self.max_inflight_bytes, 1)?;
        at_least(&f("batch"), self.batch, 1)?;
        at_most(&f("batch"), self.batch, 10_000)?;
        at_least(&f("attempt_timeout_ms"), self.attempt_timeout_ms, 1)?;
        at_least(&f("max_retry_after_ms"), self.max_retry_after_ms, 1)?;
        self.retry.validate(&f("retry"))?;
        self.tenants.default.validate(&f("tenants.default"))?;
        for (t, w) in &self.tenants.overrides {
            let at = format!("{path}.tenants.overrides.{t}");
            tenant_key(&at, t)?;
            w.validate(&at)?;
        }
        if let Some(n) = self.sink_concurrency {
            at_least(&f("sink_concurrency"), n, 1)?;
        }
        at_least(&f("breaker_open_ms"), self.breaker_open_ms, 1)?;
        if self.breaker_max_open_ms < self.breaker_open_ms {
            return Err(ConfigError::general(format!(
                "{path}.breaker_max_open_ms must be >= {path}.breaker_open_ms ({}), got {}",
                self.breaker_open_ms, self.breaker_max_open_ms
            )));
        }
        Ok(())
    }
}
