//! The NATS JetStream sink: publishes each hook to a subject, answered on the stream's ack.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use super::{d_5000, d_idle, d_inline, entries, err, inline, min, non_empty, server_entry};
use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::secrets::Secret;

/// NATS credentials: `username` + `password`, or `token`, or `nkey_seed` (+ `jwt` for a
/// user JWT). Every field is a secret.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NatsAuth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<Secret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nkey_seed: Option<Secret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<Secret>,
}

sink_config! {
    /// Publishes each hook to a JetStream subject, answered on the stream's publish ack.
    pub struct NatsSinkConfig {
        /// `nats://host:4222` entries (no credentials here; use `auth`).
        pub servers: Vec<String>,
        /// A subject some stream covers; the sink never creates streams.
        pub subject: String,
        #[serde(default = "d_inline")]
        pub inline_max_bytes: u64,
        #[serde(default = "d_5000")]
        pub publish_timeout_ms: u64,
        /// Message plus headers above this is refused before publishing (`message_too_large`).
        #[serde(default = "d_nats_max")]
        pub max_message_bytes: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub auth: Option<NatsAuth>,
        /// Require TLS to the server.
        #[serde(default)]
        pub tls: bool,
        #[serde(default = "d_idle")]
        pub idle_timeout_ms: u64,
    }
}

fn d_nats_max() -> u64 {
    1_048_576
}

impl NatsSinkConfig {
    pub fn new(servers: Vec<String>, subject: impl Into<String>) -> Self {
        NatsSinkConfig {
            servers,
            subject: subject.into(),
            inline_max_bytes: d_inline(),
            publish_timeout_ms: d_5000(),
            max_message_bytes: d_nats_max(),
            auth: None,
            tls: false,
            idle_timeout_ms: d_idle(),
            ordered: false,
            ordering_key: None,
        }
    }

    /// The servers, `servers[i]` (port 4222 when an entry has none).
    pub fn egress_targets(&self) -> Vec<EgressTarget> {
        entries("servers", &self.servers, 4222)
    }

    pub(super) fn validate(&self, p: &str) -> Result<(), ConfigError> {
        if self.servers.is_empty() {
            return Err(err(format!("{p}.servers"), "must list at least one server"));
        }
        for (i, s) in self.servers.iter().enumerate() {
            server_entry(p, "servers", i, s, &["nats", "tls"])?;
        }
        non_empty(p, "subject", &self.subject)?;
        if self.subject.contains(['*', '>', ' ', '\t', '\r', '\n'])
            || self.subject.split('.').any(str::is_empty)
        {
            return Err(err(
                format!("{p}.subject"),
                "must be a literal subject (dot-separated tokens, no wildcards or spaces)",
            ));
        }
        inline(p, self.inline_max_bytes)?;
        min(p, "publish_timeout_ms", self.publish_timeout_ms, 1)?;
        min(p, "max_message_bytes", self.max_message_bytes, 1024)?;
        if let Some(a) = &self.auth {
            let user = a.username.is_some() || a.password.is_some();
            let kinds = user as u8 + a.token.is_some() as u8 + a.nkey_seed.is_some() as u8;
            if kinds != 1 {
                return Err(err(
                    format!("{p}.auth"),
                    "must set exactly one of username+password, token, nkey_seed (+ jwt)",
                ));
            }
            if user && (a.username.is_none() || a.password.is_none()) {
                return Err(err(
                    format!("{p}.auth"),
                    "username and password go together",
                ));
            }
            if a.jwt.is_some() && a.nkey_seed.is_none() {
                return Err(err(format!("{p}.auth.jwt"), "needs nkey_seed"));
            }
        }
        Ok(())
    }
}
