//! The Google Pub/Sub sink: publishes each hook to a topic with REST `topics.publish`, batched.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use super::shared::{BatchLimits, d_5000, d_inline, inline, max, min, non_empty};
use super::tls::SinkTls;
use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::rules::{err, url_with_scheme};
use crate::secrets::{Secret, SecretUrl};

/// Where the sink publishes when `endpoint` is not set.
pub const DEFAULT_PUBSUB_ENDPOINT: &str = "https://pubsub.googleapis.com";

/// Where the Pub/Sub sink gets its bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PubsubAuth {
    /// The GCE/GKE metadata server's default service account (`GCE_METADATA_HOST` overrides
    /// the address).
    #[default]
    Metadata,
    /// The static `token` of this sink.
    Token,
    /// No `Authorization` header (the emulator).
    None,
}

/// `topics.publish`'s ceilings: 1 000 messages and 10 MB per request, of which 7.5 MB of data
/// (room for base64 and attributes).
pub const PUBSUB_BATCH: BatchLimits = BatchLimits {
    max_entries: 1_000,
    default_entries: 1_000,
    max_bytes: 7_500_000,
    default_bytes: 7_500_000,
};

sink_config! {
    /// Publishes each hook to a Pub/Sub topic with REST `topics.publish`, batched; a batch refused
    /// with `INVALID_ARGUMENT` is bisected to find the bad message.
    pub struct GooglePubsubSinkConfig {
        /// The Google Cloud project id that owns the topic.
        pub project: String,
        /// The topic id (not `projects/.../topics/...`); the sink never creates topics.
        pub topic: String,
        /// Where the bearer token comes from: `metadata` (default), `token` or `none`.
        #[serde(default)]
        pub auth: PubsubAuth,
        /// The bearer token for `auth: token`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub token: Option<Secret>,
        /// Default `https://pubsub.googleapis.com`; a regional endpoint or an emulator
        /// (`http://127.0.0.1:8085`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub endpoint: Option<SecretUrl>,
        /// A static `orderingKey` on every message (Ankusa's own deliveries stay unordered).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub message_ordering_key: Option<String>,
        /// Largest body carried inline (base64), in bytes (default 65536); a larger one
        /// travels as a claim check.
        #[serde(default = "d_inline")]
        pub inline_max_bytes: u64,
        /// Data plus attributes plus ordering key above this is dead-lettered at once.
        #[serde(default = "d_pubsub_max")]
        pub max_message_bytes: u64,
        /// Timeout of one `topics.publish` request, in ms (default 5000).
        #[serde(default = "d_5000")]
        pub timeout_ms: u64,
        /// How the `https://` endpoint is verified: a private CA bundle (a private endpoint or
        /// a proxy in front of Google's), a client certificate, the name to check; absent: the
        /// system's roots and the URL's host.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tls: Option<SinkTls>,
    }
    batched by PUBSUB_BATCH, then {
    }
}

fn d_pubsub_max() -> u64 {
    10_000_000
}

/// Pub/Sub resource ids: 3-255 characters, start with a letter, then `[A-Za-z0-9-_.~+%]`,
/// not starting with `goog`.
fn pubsub_id(s: &str) -> bool {
    s.len() >= 3
        && s.len() <= 255
        && s.as_bytes()[0].is_ascii_alphabetic()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.~+%".contains(&b))
        && !s.starts_with("goog")
}

impl GooglePubsubSinkConfig {
    pub fn new(project: impl Into<String>, topic: impl Into<String>) -> Self {
        GooglePubsubSinkConfig {
            project: project.into(),
            topic: topic.into(),
            auth: PubsubAuth::Metadata,
            token: None,
            endpoint: None,
            message_ordering_key: None,
            inline_max_bytes: d_inline(),
            max_message_bytes: d_pubsub_max(),
            timeout_ms: d_5000(),
            tls: None,
            batch: super::shared::d_true(),
            batch_linger_ms: super::shared::d_linger(),
            batch_max_entries: default_batch_max_entries(),
            batch_max_bytes: default_batch_max_bytes(),
            batch_queue_max: super::shared::d_queue_max(),
            batch_queue_max_bytes: super::shared::d_queue_max_bytes(),
            batch_queue_tenant_max: super::shared::d_queue_tenant_max(),
            batch_max_inflight: None,
            ordered: false,
            ordering_key: None,
            filter: None,
            on_filter_error: Default::default(),
            transform: None,
        }
    }

    /// Where requests go: `endpoint` when set, else Google's (`pubsub.googleapis.com:443`).
    pub fn egress_targets(&self) -> Vec<EgressTarget> {
        let target = match &self.endpoint {
            Some(e) => EgressTarget::from_url("endpoint".into(), e.expose(), 443),
            None => EgressTarget::from_url("endpoint".into(), DEFAULT_PUBSUB_ENDPOINT, 443),
        };
        target.into_iter().collect()
    }

    pub(super) fn validate(&self, p: &str) -> Result<(), ConfigError> {
        // Project ids are 6-30 of [a-z0-9-]; the emulator takes any, so only the charset is
        // checked.
        if self.project.is_empty()
            || !self
                .project
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b))
        {
            return Err(err(format!("{p}.project"), "must be a project id"));
        }
        if !pubsub_id(&self.topic) {
            return Err(err(
                format!("{p}.topic"),
                "must be a topic id (3-255 of [A-Za-z0-9-_.~+%], starting with a letter)",
            ));
        }
        match (self.auth, &self.token) {
            (PubsubAuth::Token, None) => {
                return Err(err(format!("{p}.token"), "is required with auth: token"));
            }
            (PubsubAuth::Token, Some(t)) if t.expose().trim().is_empty() => {
                return Err(err(format!("{p}.token"), "must not be empty"));
            }
            (PubsubAuth::Metadata | PubsubAuth::None, Some(_)) => {
                return Err(err(format!("{p}.token"), "is only used with auth: token"));
            }
            _ => {}
        }
        if let Some(e) = &self.endpoint {
            let u = url_with_scheme(&format!("{p}.endpoint"), e.expose(), &["https", "http"])?;
            if !u.username().is_empty() || u.password().is_some() {
                return Err(err(format!("{p}.endpoint"), "must not carry credentials"));
            }
            // Settings a plaintext endpoint (the emulator) would silently ignore are a mistake
            // worth naming.
            if self.tls.is_some() && u.scheme() != "https" {
                return Err(err(
                    format!("{p}.tls"),
                    "is read only with an https:// endpoint",
                ));
            }
        }
        if let Some(k) = &self.message_ordering_key {
            non_empty(p, "message_ordering_key", k)?;
            max(p, "message_ordering_key", k.len() as u64, 1024)?;
        }
        inline(p, self.inline_max_bytes)?;
        min(p, "max_message_bytes", self.max_message_bytes, 1024)?;
        max(p, "max_message_bytes", self.max_message_bytes, 10_000_000)?;
        min(p, "timeout_ms", self.timeout_ms, 1)?;
        self.validate_batch(p)
    }
}
