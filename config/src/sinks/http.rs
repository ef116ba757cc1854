//! The HTTP sink: POSTs the raw body to a URL, signed per Standard Webhooks.

use crate::file_paths::FilePath;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{at_least, err, valid_header_name};
use crate::secrets::{Secret, Secrets};

/// The HTTP sink's request method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum HttpMethod {
    #[default]
    Post,
    Put,
    Patch,
}

/// The HTTP version the sink speaks to its receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum HttpVersion {
    /// `https://`: HTTP/2 when the receiver offers it in the TLS handshake (ALPN), else
    /// HTTP/1.1; `http://`: HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/1.1 only (ALPN offers only `http/1.1`).
    Http1,
    /// HTTP/2 only: `http://` is h2c with prior knowledge, `https://` offers only `h2`; a
    /// receiver without HTTP/2 fails the attempt (transient).
    Http2,
}

impl HttpVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpVersion::Auto => "auto",
            HttpVersion::Http1 => "http1",
            HttpVersion::Http2 => "http2",
        }
    }
}

sink_config! {
    pub struct HttpSinkConfig {
        /// The receiver: an `http` or `https` URL with a host and no userinfo (`http://` also
        /// needs `egress.allow_http`).
        pub url: String,
        /// Request method: `post` (default), `put` or `patch`.
        #[serde(default)]
        pub method: HttpMethod,
        /// Timeout of one request, in ms (default 5000).
        #[serde(default = "default_http_timeout")]
        pub timeout_ms: u64,
        /// Extra request headers (values are treated as secrets in `print-config`).
        #[serde(
            default,
            skip_serializing_if = "BTreeMap::is_empty",
            deserialize_with = "crate::scalar::secret_map"
        )]
        pub headers: BTreeMap<String, Secret>,
        /// Standard Webhooks signing secret(s), `whsec_<base64>`; required unless `allow_unsigned`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub secret: Option<Secrets>,
        /// Send without `webhook-*` signature headers when there is no `secret` (default
        /// false).
        #[serde(default)]
        pub allow_unsigned: bool,
        /// Most bytes of a response read before the connection is dropped (default 65536).
        #[serde(default = "default_max_response_bytes")]
        pub max_response_bytes: u64,
        /// PEM file of a private CA to trust for this receiver.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cacertfile: Option<FilePath>,
        /// Accept any server certificate from this receiver (default false).
        #[serde(default)]
        pub allow_insecure_tls: bool,
        /// Connections to this receiver (defaults to `egress.pools.pool_size`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub pool_size: Option<u32>,
        /// `auto` (default: HTTP/2 where a TLS receiver offers it, else HTTP/1.1), `http1`,
        /// or `http2` (h2c with prior knowledge on `http://`).
        #[serde(default, skip_serializing_if = "is_auto")]
        pub http_version: HttpVersion,
    }
}

fn is_auto(v: &HttpVersion) -> bool {
    *v == HttpVersion::Auto
}

fn default_http_timeout() -> u64 {
    5_000
}

fn default_max_response_bytes() -> u64 {
    65_536
}

impl HttpSinkConfig {
    pub fn new(url: impl Into<String>) -> Self {
        HttpSinkConfig {
            url: url.into(),
            method: HttpMethod::Post,
            timeout_ms: default_http_timeout(),
            headers: BTreeMap::new(),
            secret: None,
            allow_unsigned: false,
            max_response_bytes: default_max_response_bytes(),
            cacertfile: None,
            allow_insecure_tls: false,
            pool_size: None,
            http_version: HttpVersion::Auto,
            ordered: false,
            ordering_key: None,
            filter: None,
            on_filter_error: Default::default(),
            transform: None,
        }
    }

    pub(super) fn validate(&self, p: &str) -> Result<(), ConfigError> {
        let url = url::Url::parse(&self.url)
            .map_err(|e| err(format!("{p}.url"), format!("is not a URL ({e})")))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(err(format!("{p}.url"), "must use the scheme http or https"));
        }
        if url.host().is_none() {
            return Err(err(format!("{p}.url"), "must name a host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(err(
                format!("{p}.url"),
                "must not carry credentials; use headers",
            ));
        }
        match &self.secret {
            Some(s) => s.validate(&format!("{p}.secret"), true)?,
            None if !self.allow_unsigned => {
                return Err(err(
                    format!("{p}.secret"),
                    "is required: deliveries are signed (Standard Webhooks); set allow_unsigned: true to send unsigned",
                ));
            }
            None => {}
        }
        at_least(&format!("{p}.timeout_ms"), self.timeout_ms, 1)?;
        at_least(
            &format!("{p}.max_response_bytes"),
            self.max_response_bytes,
            1,
        )?;
        for name in self.headers.keys() {
            if !valid_header_name(name) {
                return Err(err(
                    format!("{p}.headers"),
                    format!("{name:?} is not a header name"),
                ));
            }
            if name.to_ascii_lowercase().starts_with("x-ankusa-")
                || name.eq_ignore_ascii_case("host")
            {
                return Err(err(
                    format!("{p}.headers"),
                    format!("{name} is set by the gateway"),
                ));
            }
        }
        if let Some(n) = self.pool_size {
            at_least(&format!("{p}.pool_size"), n, 1)?;
        }
        Ok(())
    }
}
