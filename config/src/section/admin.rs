//! `admin`: the admin API's listener, its bearer tokens and their scopes, and its TLS files.
//! Imports the leaves and `listener`.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, valid_id};
use crate::section::listener::{ConnectionLimits, tokens_off_loopback};

/// An admin API bearer token and what it may do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AdminToken {
    #[serde(deserialize_with = "crate::scalar::string")]
    pub token: String,
    /// `dlq:read` (dead letters, replay jobs, a source's deliveries), `dlq:write` (delete dead
    /// letters, dead-letter a source's queue), `replays:write`, `config:read` (status, config,
    /// wal), `config:write` (push or reload the config), `hooks:read`, `tenant:<id>` (limits the
    /// token to those tenants), `tenant:*`, or `*` for everything.
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    pub enabled: bool,
    pub ip: IpAddr,
    pub port: u16,
    /// Bearer tokens. Empty means the admin API is open, which is allowed only on loopback.
    pub tokens: Vec<AdminToken>,
    /// Serve the admin API over TLS only (HTTPS); plain HTTP is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<AdminTls>,
    pub connections: ConnectionLimits,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            enabled: true,
            ip: IpAddr::from([127, 0, 0, 1]),
            port: 4002,
            tokens: Vec::new(),
            tls: None,
            connections: ConnectionLimits::internal(),
        }
    }
}

/// The admin listener's certificate: PEM files, re-read when they change (a Kubernetes Secret
/// volume swaps them when the operator rotates the certificate), so no restart is needed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AdminTls {
    /// The certificate chain (leaf first), PEM.
    pub cert_file: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1), PEM.
    pub key_file: PathBuf,
}

/// Scopes an admin token may carry.
pub const ADMIN_SCOPES: &[&str] = &[
    "*",
    "dlq:read",
    "dlq:write",
    "replays:write",
    "config:read",
    "config:write",
    "hooks:read",
    "metrics:read",
    "tenant:*",
];

impl AdminConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        self.connections.validate(&format!("{path}.connections"))?;
        for (i, t) in self.tokens.iter().enumerate() {
            t.validate(&format!("{path}.tokens[{i}]"))?;
        }
        tokens_off_loopback(path, self.enabled, self.ip, self.tokens.is_empty(), "")?;
        if let Some(tls) = &self.tls {
            for (field, file) in [("cert_file", &tls.cert_file), ("key_file", &tls.key_file)] {
                if file.as_os_str().is_empty() {
                    return Err(err(format!("{path}.tls.{field}"), "must name a PEM file"));
                }
            }
        }
        Ok(())
    }
}

impl AdminToken {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if self.token.len() < 16 {
            return Err(err(
                format!("{path}.token"),
                format!("must be at least 16 characters, got {}", self.token.len()),
            ));
        }
        if self.scopes.is_empty() {
            return Err(err(
                format!("{path}.scopes"),
                "must list at least one scope",
            ));
        }
        for (j, s) in self.scopes.iter().enumerate() {
            let ok = ADMIN_SCOPES.contains(&s.as_str())
                || s.strip_prefix("tenant:").is_some_and(valid_id);
            if !ok {
                return Err(err(
                    format!("{path}.scopes[{j}]"),
                    format!(
                        "unknown scope (expected one of {}, or tenant:<id>)",
                        ADMIN_SCOPES.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}
