//! The Redis sink: PUBLISHes each hook to a pub/sub channel.

use super::shared::{d_5000, d_idle, d_inline, inline, min, non_empty};
use super::tls::SinkTls;
use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::rules::{err, url_with_scheme};
use crate::secrets::SecretUrl;

sink_config! {
    /// PUBLISHes each hook to a Redis channel; zero subscribers is an error (`no_subscribers`).
    /// Not durable: pub/sub keeps no copy.
    pub struct RedisSinkConfig {
        /// `redis://[[user]:password@]host:6379/0` (`rediss://` for TLS); the userinfo is the
        /// ACL user and password (`AUTH`); redacted in `print-config`.
        pub url: SecretUrl,
        /// The pub/sub channel PUBLISHed to.
        pub channel: String,
        /// Largest body carried inline (base64), in bytes (default 65536); a larger one
        /// travels as a claim check.
        #[serde(default = "d_inline")]
        pub inline_max_bytes: u64,
        /// How long a PUBLISH waits for the server's reply, in ms (default 5000).
        #[serde(default = "d_5000")]
        pub publish_timeout_ms: u64,
        /// A server connection with no delivery through it for this long (ms) is closed;
        /// default 600000, 0 keeps it open.
        #[serde(default = "d_idle")]
        pub idle_timeout_ms: u64,
        /// How a `rediss://` connection is verified (CA bundle, client certificate, server
        /// name); absent: the system's roots and the URL's host.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tls: Option<SinkTls>,
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
            tls: None,
            ordered: false,
            ordering_key: None,
            filter: None,
            on_filter_error: Default::default(),
            transform: None,
        }
    }

    /// The server, `url` (port 6379 when the URL has none).
    pub fn egress_targets(&self) -> Vec<EgressTarget> {
        EgressTarget::from_url("url".into(), self.url.expose(), 6379)
            .into_iter()
            .collect()
    }

    pub(super) fn validate(&self, p: &str) -> Result<(), ConfigError> {
        let url = url_with_scheme(&format!("{p}.url"), self.url.expose(), &["redis", "rediss"])?;
        // Settings a plaintext connection would silently ignore are a mistake worth naming.
        if self.tls.is_some() && url.scheme() != "rediss" {
            return Err(err(
                format!("{p}.tls"),
                "is read only with a rediss:// url (TLS)",
            ));
        }
        non_empty(p, "channel", &self.channel)?;
        inline(p, self.inline_max_bytes)?;
        min(p, "publish_timeout_ms", self.publish_timeout_ms, 1)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::SinkConfig;

    fn check(r: RedisSinkConfig, allow_insecure_tls: bool) -> Result<(), ConfigError> {
        crate::testing::check_sink(SinkConfig::Redis(r), allow_insecure_tls)
    }

    fn with_tls(url: &str, tls: SinkTls) -> RedisSinkConfig {
        let mut r = RedisSinkConfig::new(url, "ch");
        r.tls = Some(tls);
        r
    }

    #[test]
    fn tls_reads_from_yaml_and_needs_rediss() {
        let y = "type: redis\nurl: rediss://hooks:pw@cache.example:6380/0\nchannel: ch\n\
                 tls: {ca_file: /etc/ca.pem, server_name: cache.internal}\n";
        let s: SinkConfig = serde_yaml_ng::from_str(y).expect("parses");
        let SinkConfig::Redis(r) = s else {
            panic!("a redis sink")
        };
        let t = r.tls.clone().expect("tls");
        assert_eq!(
            t.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/ca.pem"))
        );
        assert_eq!(t.server_name.as_deref(), Some("cache.internal"));
        check(r, false).expect("valid");

        let plain = with_tls("redis://127.0.0.1:6379/0", SinkTls::default());
        let e = check(plain, false)
            .expect_err("tls without rediss")
            .to_string();
        assert!(
            e.contains("sources.src.sinks[0].tls") && e.contains("rediss://"),
            "{e}"
        );

        let y = "type: redis\nurl: rediss://h:6380\nchannel: ch\ntls: {ca_fil: x}\n";
        assert!(
            serde_yaml_ng::from_str::<SinkConfig>(y).is_err(),
            "unknown key"
        );
    }

    #[test]
    fn insecure_skip_verify_needs_egress_allow_insecure_tls() {
        let r = with_tls(
            "rediss://127.0.0.1:6380/0",
            SinkTls {
                insecure_skip_verify: true,
                ..SinkTls::default()
            },
        );
        let e = check(r.clone(), false).expect_err("refused").to_string();
        assert!(
            e.contains("sources.src.sinks[0].tls.insecure_skip_verify")
                && e.contains("egress.allow_insecure_tls"),
            "{e}"
        );
        check(r, true).expect("allowed by egress");

        let half = with_tls(
            "rediss://127.0.0.1:6380/0",
            SinkTls {
                cert_file: Some("/etc/client.crt".into()),
                ..SinkTls::default()
            },
        );
        let e = check(half, false)
            .expect_err("a certificate without its key")
            .to_string();
        assert!(e.contains("tls.key_file"), "{e}");
    }
}
