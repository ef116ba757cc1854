//! The TLS settings the queue sinks share (`tls:` on a Redis, NATS, RabbitMQ, Kafka, SQS or
//! Pub/Sub sink): which CA to trust, the client certificate, the name to check, and the
//! escape hatch. One shape for every sink, so a private CA or a client certificate is written
//! the same way whatever the broker. Key material is a `Secret` (never printed); on Kubernetes
//! `ca_pem`, `cert_pem` and `key_pem` come from a Sink's `secretRefs` (`tls.ca_pem`, ...).

use crate::file_paths::FilePath;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::err;
use crate::secrets::Secret;

/// The TLS settings a queue sink shares: the CA to trust, a client certificate, the name to
/// check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SinkTls {
    /// CA bundle (PEM file) trusted instead of the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<FilePath>,
    /// CA bundle (PEM text) trusted instead of the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<Secret>,
    /// Client certificate chain (PEM file), for brokers that authenticate clients by certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<FilePath>,
    /// Client certificate chain (PEM text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_pem: Option<Secret>,
    /// The client certificate's private key (PEM file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<FilePath>,
    /// The client certificate's private key (PEM text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_pem: Option<Secret>,
    /// The name the server's certificate must carry (default: the host the sink connects to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// Accept any server certificate. Refused unless `egress.allow_insecure_tls` is true.
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

impl SinkTls {
    /// `p` is the sink's path (`sources.s.sinks[0]`); errors name `p.tls.<key>`.
    pub(super) fn validate(&self, p: &str, allow_insecure: bool) -> Result<(), ConfigError> {
        let f = |k: &str| format!("{p}.tls.{k}");
        if self.ca_file.is_some() && self.ca_pem.is_some() {
            return Err(err(f("ca_pem"), "give ca_file or ca_pem, not both"));
        }
        if self.cert_file.is_some() && self.cert_pem.is_some() {
            return Err(err(f("cert_pem"), "give cert_file or cert_pem, not both"));
        }
        if self.key_file.is_some() && self.key_pem.is_some() {
            return Err(err(f("key_pem"), "give key_file or key_pem, not both"));
        }
        let has_cert = self.cert_file.is_some() || self.cert_pem.is_some();
        let has_key = self.key_file.is_some() || self.key_pem.is_some();
        if has_cert != has_key {
            let missing = if has_cert { "key_file" } else { "cert_file" };
            return Err(err(
                f(missing),
                "a client certificate needs both a certificate and its key",
            ));
        }
        for (k, v) in [
            ("ca_file", &self.ca_file),
            ("cert_file", &self.cert_file),
            ("key_file", &self.key_file),
        ] {
            if v.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                return Err(err(f(k), "must name a PEM file"));
            }
        }
        for (k, v) in [
            ("ca_pem", &self.ca_pem),
            ("cert_pem", &self.cert_pem),
            ("key_pem", &self.key_pem),
        ] {
            if v.as_ref()
                .is_some_and(|s| !s.expose().contains("-----BEGIN "))
            {
                return Err(err(f(k), "must hold PEM text (-----BEGIN ...)"));
            }
        }
        if let Some(n) = &self.server_name
            && (n.is_empty() || n.contains(['/', ' ', ':', '@']))
        {
            return Err(err(f("server_name"), "must be a DNS name or an IP address"));
        }
        if self.insecure_skip_verify && !allow_insecure {
            return Err(err(
                f("insecure_skip_verify"),
                "turns certificate checks off; refused unless egress.allow_insecure_tls is true",
            ));
        }
        Ok(())
    }
}
