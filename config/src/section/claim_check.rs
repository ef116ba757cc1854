//! `claim_check`: the port that serves checked-in bodies to queue consumers, its retention and
//! its readers' tokens (`claim_token.rs`: a token for every tenant or for some). Imports the
//! leaves and `listener`.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::claim_token::ClaimToken;
use crate::error::ConfigError;
use crate::section::listener::{ConnectionLimits, tokens_off_loopback};

/// Where large bodies are checked in for queue sinks, and the port that serves them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct ClaimCheckConfig {
    pub enabled: bool,
    pub ip: IpAddr,
    pub port: u16,
    /// Days a checked-in body is kept (absent: kept until deleted by hand).
    pub retention_days: Option<u32>,
    /// Bearer tokens readers must present, each for every tenant or for some
    /// (`crate::claim_token`); empty means the claim port is open (it binds loopback by
    /// default).
    pub tokens: Vec<ClaimToken>,
    pub connections: ConnectionLimits,
}

impl Default for ClaimCheckConfig {
    fn default() -> Self {
        ClaimCheckConfig {
            enabled: true,
            ip: IpAddr::from([127, 0, 0, 1]),
            port: 4001,
            retention_days: None,
            tokens: Vec::new(),
            connections: ConnectionLimits {
                max_connections: 1024,
                ..ConnectionLimits::default()
            },
        }
    }
}

impl ClaimCheckConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        self.connections.validate(&format!("{path}.connections"))?;
        for (i, t) in self.tokens.iter().enumerate() {
            t.validate(&format!("{path}.tokens[{i}]"))?;
        }
        tokens_off_loopback(
            path,
            self.enabled,
            self.ip,
            self.tokens.is_empty(),
            ": the port serves hook bodies",
        )
    }
}
