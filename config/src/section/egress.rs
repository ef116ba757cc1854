//! `egress`: where sinks may connect (the address classes allowed, extra CIDRs, plain HTTP,
//! insecure TLS, the hosts a metadata token may go to) and the HTTP connection pools. The
//! policy built from it, and the classifier, are the crate root's `egress.rs` (which imports
//! this file, never the reverse). Imports only the leaves.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{at_least, err, parse_cidr};

/// Where sinks may connect: HTTP receivers, brokers and queue endpoints. Checked on the
/// resolved addresses of every attempt (HTTP) or every connect (queue sinks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
#[derive(Default)]
pub struct EgressConfig {
    /// Allow `http://` destinations (default: https only).
    pub allow_http: bool,
    /// Allow loopback addresses (127.0.0.0/8, ::1).
    pub allow_loopback: bool,
    /// Allow private ranges (10/8, 172.16/12, 192.168/16, fc00::/7, 100.64/10).
    pub allow_private: bool,
    /// Allow link-local ranges, the cloud metadata address included (169.254/16, fe80::/10).
    pub allow_link_local: bool,
    /// CIDRs allowed whatever their range (e.g. one private receiver).
    pub allow_cidrs: Vec<String>,
    /// Let a queue sink's `tls.insecure_skip_verify` turn certificate checks off (default:
    /// refused at load).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_insecure_tls: bool,
    /// Hosts other than Google's (`googleapis.com` and its subdomains) that a Pub/Sub sink with
    /// `auth: metadata` may send the node's service-account token to (a Private Service Connect
    /// name, a proxy you run). A sink's `endpoint` alone cannot send it anywhere else.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub metadata_token_hosts: Vec<String>,
    pub pools: PoolConfig,
}

/// HTTP connection pools, one per receiver address and TLS profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct PoolConfig {
    /// Connections per pool.
    pub pool_size: u32,
    /// Live pools per instance.
    pub max_pools: u32,
    /// Live pools per tenant.
    pub max_pools_per_tenant: u32,
    /// A pool with nothing in flight for this long is closed.
    pub pool_max_idle_ms: u64,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            pool_size: 32,
            max_pools: 1024,
            max_pools_per_tenant: 256,
            pool_max_idle_ms: 60_000,
        }
    }
}

impl EgressConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        for (i, c) in self.allow_cidrs.iter().enumerate() {
            if parse_cidr(c).is_none() {
                return Err(err(
                    format!("{path}.allow_cidrs[{i}]"),
                    "must be an address or addr/prefix",
                ));
            }
        }
        for (i, h) in self.metadata_token_hosts.iter().enumerate() {
            let ok = !h.is_empty()
                && h.len() <= 253
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            if !ok {
                return Err(err(
                    format!("{path}.metadata_token_hosts[{i}]"),
                    "must be a host name (no scheme, port or path)",
                ));
            }
        }
        self.pools.validate(&format!("{path}.pools"))
    }
}

impl PoolConfig {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        at_least(&f("pool_size"), self.pool_size, 1)?;
        at_least(&f("max_pools"), self.max_pools, 1)?;
        at_least(&f("max_pools_per_tenant"), self.max_pools_per_tenant, 1)?;
        at_least(&f("pool_max_idle_ms"), self.pool_max_idle_ms, 1)
    }
}
