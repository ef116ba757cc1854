//! What the three listeners share (`http`, `admin`, `claim_check`): the limits of one
//! listener's connections (`<section>.connections`; see `serve.rs` in the gateway), and the
//! rule that a listener answering without a token binds loopback only. Imports only the
//! leaves.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{at_least, at_most, err};

/// Limits of one listener's connections (see `serve.rs` in the gateway).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionLimits {
    /// Open connections at most; past it a new one is answered `503 overload` and closed.
    pub max_connections: u32,
    /// Time a request's head (request line and headers) may take to arrive, from its first
    /// byte (from the accept, for a connection's first request).
    pub header_read_timeout_ms: u64,
    /// A keep-alive connection waiting this long for its next request is closed.
    pub idle_timeout_ms: u64,
    /// Headers in one request at most (more is `431`).
    pub max_headers: u32,
    /// Size of a request's head at most, in bytes (more is `431`).
    pub max_header_bytes: u32,
}

impl ConnectionLimits {
    /// The defaults of a listener that serves operators, not the internet.
    pub fn internal() -> Self {
        ConnectionLimits {
            max_connections: 256,
            ..Self::default()
        }
    }

    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        at_least(&f("max_connections"), self.max_connections, 1)?;
        at_least(
            &f("header_read_timeout_ms"),
            self.header_read_timeout_ms,
            100,
        )?;
        at_least(&f("idle_timeout_ms"), self.idle_timeout_ms, 100)?;
        at_least(&f("max_headers"), self.max_headers, 8)?;
        at_most(&f("max_headers"), self.max_headers, 1000)?;
        at_least(&f("max_header_bytes"), self.max_header_bytes, 8192)?;
        at_most(&f("max_header_bytes"), self.max_header_bytes, 1 << 20)
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 10_000,
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            max_headers: 100,
            max_header_bytes: 64 << 10,
        }
    }
}

/// A listener whose token list is empty answers anyone: allowed only on a loopback address.
/// `path` is the section (`admin`); `why` ends the message (`: the port serves hook bodies`).
pub(crate) fn tokens_off_loopback(
    path: &str,
    enabled: bool,
    ip: IpAddr,
    no_tokens: bool,
    why: &str,
) -> Result<(), ConfigError> {
    if enabled && no_tokens && !ip.is_loopback() {
        return Err(err(
            format!("{path}.tokens"),
            format!(
                "must hold at least one token when {path}.ip is not a loopback address (got {ip}){why}"
            ),
        ));
    }
    Ok(())
}
