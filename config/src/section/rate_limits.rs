//! `rate_limits`: a token bucket per tenant (a default and per-tenant entries), and the
//! `RateLimit` shape `http.client_rate_limit` reuses. Imports only the leaves.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{at_least, tenant_key};

/// A token bucket: `rate` requests per second, `burst` back to back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Sustained requests per second (may be fractional).
    pub rate: f64,
    /// Requests allowed back to back.
    pub burst: u32,
}

/// Per-tenant request limits at the ingest edge, kept per node; absent: unlimited.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitsConfig {
    /// Limit for every tenant without its own entry; absent means unlimited.
    pub default: Option<RateLimit>,
    /// Per-tenant limits, by tenant id (default none).
    pub tenants: BTreeMap<String, RateLimit>,
}

impl RateLimit {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(ConfigError::general(format!(
                "{path}.rate must be > 0, got {}",
                self.rate
            )));
        }
        at_least(&format!("{path}.burst"), self.burst, 1)
    }
}

impl RateLimitsConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if let Some(d) = &self.default {
            d.validate(&format!("{path}.default"))?;
        }
        for (t, l) in &self.tenants {
            let at = format!("{path}.tenants.{t}");
            tenant_key(&at, t)?;
            l.validate(&at)?;
        }
        Ok(())
    }
}
