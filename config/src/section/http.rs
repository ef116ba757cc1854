//! `http`: the ingest listener (address, routing, body limits, the per-client rate limit and
//! the proxies trusted to name the client). Imports the leaves and the shapes it shares with
//! other sections (`listener`, `rate_limits`' `RateLimit`).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{at_least, at_most, err, parse_cidr};
use crate::section::listener::ConnectionLimits;
use crate::section::rate_limits::RateLimit;

/// How an ingest URL names its source (and tenant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// `POST {prefix}/:source`
    Path,
    /// `POST {prefix}/:tenant/:source`
    TenantPath,
}

/// The ingest listener: address, routing, body limits, the per-client rate limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Address the ingest listener binds (default `0.0.0.0`).
    pub ip: IpAddr,
    /// Ingest port (default 4000).
    pub port: u16,
    /// Largest accepted request body, in bytes (default 8000000); a larger declared
    /// `Content-Length` is `413` unread.
    pub max_body_bytes: u64,
    /// `path` (default: `POST {prefix}/:source`) or `tenant_path`
    /// (`POST {prefix}/:tenant/:source`).
    pub routing: Routing,
    /// Path prefix of ingest URLs (default `/webhooks`): starts with `/`, does not end with one.
    pub prefix: String,
    /// Time allowed to receive the whole request body, in ms (default 30000).
    pub body_timeout_ms: u64,
    /// Request bodies being read at once, in bytes, across all connections (a declared
    /// `Content-Length` is reserved before the body is read, `max_body_bytes` for a chunked
    /// one). Past it a request is `503 overload` before its body is read.
    pub max_inflight_body_bytes: u64,
    /// A rate limit per client IP, applied before the body is read (absent: none).
    pub client_rate_limit: Option<RateLimit>,
    /// Proxies (CIDRs) whose `X-Forwarded-For` names the client for `client_rate_limit`; the
    /// header of anyone else is ignored.
    pub trusted_proxies: Vec<String>,
    /// Connection limits of the ingest listener.
    pub connections: ConnectionLimits,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            ip: IpAddr::from([0, 0, 0, 0]),
            port: 4000,
            max_body_bytes: 8_000_000,
            routing: Routing::Path,
            prefix: "/webhooks".into(),
            body_timeout_ms: 30_000,
            max_inflight_body_bytes: 256 << 20,
            client_rate_limit: None,
            trusted_proxies: Vec::new(),
            connections: ConnectionLimits::default(),
        }
    }
}

impl HttpConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        at_least(&f("max_body_bytes"), self.max_body_bytes, 1)?;
        at_most(&f("max_body_bytes"), self.max_body_bytes, 1 << 30)?;
        at_least(&f("body_timeout_ms"), self.body_timeout_ms, 1)?;
        let prefix = &self.prefix;
        if !prefix.starts_with('/') || (prefix.len() > 1 && prefix.ends_with('/')) {
            return Err(err(f("prefix"), "must start with / and not end with /"));
        }
        if prefix.contains(|ch: char| ch.is_whitespace() || ch == '?' || ch == '#' || ch == '%') {
            return Err(err(f("prefix"), "must be a plain path"));
        }
        at_least(
            &f("max_inflight_body_bytes"),
            self.max_inflight_body_bytes,
            self.max_body_bytes,
        )?;
        if let Some(l) = &self.client_rate_limit {
            l.validate(&f("client_rate_limit"))?;
        }
        for (i, cidr) in self.trusted_proxies.iter().enumerate() {
            if parse_cidr(cidr).is_none() {
                return Err(err(
                    format!("{path}.trusted_proxies[{i}]"),
                    "must be an address or a CIDR (10.0.0.0/8, 2001:db8::/32)",
                ));
            }
        }
        self.connections.validate(&f("connections"))
    }
}
