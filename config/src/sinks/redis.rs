//! The Redis sink: PUBLISHes each hook to a pub/sub channel.

use super::{d_5000, d_idle, d_inline, inline, min, non_empty, url_with_scheme};
use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::secrets::SecretUrl;

sink_config! {
    /// PUBLISHes each hook to a Redis channel; zero subscribers is an error (`no_subscribers`).
    /// Not durable: pub/sub keeps no copy.
    pub struct RedisSinkConfig {
        /// `redis://[:password@]host:6379/0` (`rediss://` for TLS); redacted in `print-config`.
        pub url: SecretUrl,
        pub channel: String,
        #[serde(default = "d_inline")]
        pub inline_max_bytes: u64,
        #[serde(default = "d_5000")]
        pub publish_timeout_ms: u64,
        #[serde(default = "d_idle")]
        pub idle_timeout_ms: u64,
    }
}

impl RedisSinkConfig {
    pub fn new(url: impl Into<String>, channel: impl Into<String>) -> Self {
        RedisSinkConfig {
            url: SecretUrl::new(url),
            channel: channel.into(),
            inline_max_bytes: d_inline(),
            publish_timeout_ms: d_5000(),
            idle_timeout_ms: d_idle(),
            ordered: false,
            ordering_key: None,
        }
    }

    /// The server, `url` (port 6379 when the URL has none).
    pub fn egress_targets(&self) -> Vec<EgressTarget> {
        EgressTarget::from_url("url".into(), self.url.expose(), 6379)
            .into_iter()
            .collect()
    }

    pub(super) fn validate(&self, p: &str) -> Result<(), ConfigError> {
        url_with_scheme(p, "url", self.url.expose(), &["redis", "rediss"])?;
        non_empty(p, "channel", &self.channel)?;
        inline(p, self.inline_max_bytes)?;
        min(p, "publish_timeout_ms", self.publish_timeout_ms, 1)?;
        Ok(())
    }
}
