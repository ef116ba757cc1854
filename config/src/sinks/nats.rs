//! The NATS JetStream sink: publishes each hook to a subject, answered on the stream's ack.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::file_paths::FilePath;

use super::shared::{d_5000, d_idle, d_inline, entries, inline, min, non_empty, server_entry};
use super::tls::SinkTls;
use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::rules::err;
use crate::secrets::Secret;

/// NATS credentials: `username` + `password`, or `token`, or `nkey_seed` (+ `jwt` for a
/// user JWT), or `credentials_file` (a `.creds` file holding the user JWT and its NKey seed,
/// as `nsc` and Synadia Cloud hand them out). Every inline field is a secret.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NatsAuth {
    /// User name, with `password`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<Secret>,
    /// Password, with `username`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    /// An authentication token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// An NKey user's seed (`SU...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nkey_seed: Option<Secret>,
    /// A user JWT, signed with `nkey_seed` (which it needs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<Secret>,
    /// A `.creds` file (user JWT + NKey seed), read at every connect so a rotated file is
    /// picked up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_file: Option<FilePath>,
}

/// `tls:` on a NATS sink: the shared settings (`SinkTls`), or the older bare switch.
/// `true` requires TLS with the system's roots (the same as `tls: {}`); `false` (the default)
/// requires nothing, though the client still upgrades when a server asks for TLS or an entry
/// is `tls://`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(untagged)]
pub enum NatsTls {
    /// `true`: require TLS with the system's roots; `false`: require nothing.
    Enabled(bool),
    /// The shared TLS settings; TLS is required.
    Settings(SinkTls),
}

impl Default for NatsTls {
    fn default() -> Self {
        NatsTls::Enabled(false)
    }
}

impl NatsTls {
    /// The settings TLS is required with, or `None` when `tls` is off.
    pub fn settings(&self) -> Option<std::borrow::Cow<'_, SinkTls>> {
        match self {
            NatsTls::Enabled(false) => None,
            NatsTls::Enabled(true) => Some(std::borrow::Cow::Owned(SinkTls::default())),
            NatsTls::Settings(s) => Some(std::borrow::Cow::Borrowed(s)),
        }
    }

    fn is_off(&self) -> bool {
        *self == NatsTls::Enabled(false)
    }
}

/// By hand rather than `untagged`: a typo inside the map (`ca_flie`) then reads as the
/// unknown key it is, not as "did not match any variant".
impl<'de> Deserialize<'de> for NatsTls {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = NatsTls;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("true, false, or a map of TLS settings (ca_file, cert_file, ...)")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<NatsTls, E> {
                Ok(NatsTls::Enabled(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<NatsTls, A::Error> {
                SinkTls::deserialize(serde::de::value::MapAccessDeserializer::new(m))
                    .map(NatsTls::Settings)
            }
        }
        d.deserialize_any(V)
    }
}

sink_config! {
    /// Publishes each hook to a JetStream subject, answered on the stream's publish ack.
    pub struct NatsSinkConfig {
        /// `nats://host:4222` entries (no credentials here; use `auth`).
        pub servers: Vec<String>,
        /// A subject some stream covers; the sink never creates streams.
        pub subject: String,
        /// Largest body carried inline (base64), in bytes (default 65536); a larger one
        /// travels as a claim check.
        #[serde(default = "d_inline")]
        pub inline_max_bytes: u64,
        /// How long a publish waits for the stream's ack, in ms (default 5000).
        #[serde(default = "d_5000")]
        pub publish_timeout_ms: u64,
        /// Message plus headers above this is refused before publishing (`message_too_large`).
        #[serde(default = "d_nats_max")]
        pub max_message_bytes: u64,
        /// Credentials: exactly one of `username` + `password`, `token`, `nkey_seed` (+ `jwt`),
        /// `credentials_file`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub auth: Option<NatsAuth>,
        /// Require TLS to the server: `true`, or the shared TLS settings (CA, client
        /// certificate, `server_name`).
        #[serde(default, skip_serializing_if = "NatsTls::is_off")]
        pub tls: NatsTls,
        /// A server connection with no delivery through it for this long (ms) is closed;
        /// default 600000, 0 keeps it open.
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
            tls: NatsTls::default(),
            idle_timeout_ms: d_idle(),
            ordered: false,
            ordering_key: None,
            filter: None,
            on_filter_error: Default::default(),
            transform: None,
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
            let kinds = user as u8
                + a.token.is_some() as u8
                + a.nkey_seed.is_some() as u8
                + a.credentials_file.is_some() as u8;
            if kinds != 1 {
                return Err(err(
                    format!("{p}.auth"),
                    "must set exactly one of username+password, token, nkey_seed (+ jwt), \
                     credentials_file",
                ));
            }
            if a.credentials_file
                .as_ref()
                .is_some_and(|f| f.as_os_str().is_empty())
            {
                return Err(err(
                    format!("{p}.auth.credentials_file"),
                    "must name a .creds file",
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
