//! Values that must not reach a log: one credential (`Secret`), a URL that may carry one
//! (`SecretUrl`), and a secret that may be a rotation list (`Secrets`).
//!
//! All three serialise to the plain value: the operator renders the gateway's config by
//! serialising these types and the gateway parses the text back, so the wire form is the
//! value itself. Only `Debug` and `Display` hide it, which is what a config, a sink or an
//! error that ends up in `tracing` output or a panic message prints.
//!
//! Also here, because these types need them: `redact_url` (how a `SecretUrl` prints, reused
//! by `print-config`'s redaction) and the checks of a rotation list (`Secrets::validate`).
//! Imports only the leaves `scalar` and `rules`.

use base64::Engine;
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::ConfigError;
use crate::rules::err;

#[cfg(feature = "schema")]
use schemars::JsonSchema;

const REDACTED: &str = "[redacted]";

/// One credential (a password, a token, an access key, a header value). Read as a YAML string;
/// a field that also takes a number or boolean as its text says so (`scalar::secret_map`).
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value itself, for the one place that uses it (a client's credential setting).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s)
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret(s.to_string())
    }
}

impl PartialEq<str> for Secret {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Secret {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// A URL that may carry credentials in its userinfo (`amqp://user:password@host/`) or its
/// query. `Debug` and `Display` show it without them (`redact_url`).
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(transparent)]
pub struct SecretUrl(String);

impl SecretUrl {
    pub fn new(url: impl Into<String>) -> Self {
        SecretUrl(url.into())
    }

    /// The URL as written, credentials included.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", redact_url(&self.0))
    }
}

impl std::fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact_url(&self.0))
    }
}

impl From<&str> for SecretUrl {
    fn from(s: &str) -> Self {
        SecretUrl(s.to_string())
    }
}

impl From<String> for SecretUrl {
    fn from(s: String) -> Self {
        SecretUrl(s)
    }
}

/// One secret or a list of up to 8, newest first. Every one is tried, so a rotation has a
/// window in which hooks signed with the old and the new secret both verify.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(transparent)]
pub struct Secrets(pub Vec<String>);

/// Most secrets a rotation list may hold.
pub const MAX_SECRETS: usize = 8;

impl Secrets {
    pub fn one(s: impl Into<String>) -> Self {
        Secrets(vec![s.into()])
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks the list at `field`: 1..=8 entries, none empty. `whsec` says each must be a
    /// Standard Webhooks secret (`whsec_<base64>` or raw bytes) whose base64 part decodes.
    pub(crate) fn validate(&self, field: &str, whsec: bool) -> Result<(), ConfigError> {
        if self.is_empty() {
            return Err(err(field, "must hold at least one secret"));
        }
        if self.len() > MAX_SECRETS {
            return Err(err(
                field,
                format!(
                    "must hold at most {MAX_SECRETS} secrets, got {}",
                    self.len()
                ),
            ));
        }
        for (i, v) in self.iter().enumerate() {
            let f = if self.len() == 1 {
                field.to_string()
            } else {
                format!("{field}[{i}]")
            };
            if v.is_empty() {
                return Err(err(
                    f,
                    "must not be empty (an empty HMAC key would verify anything; is a ${VAR:-} unset?)",
                ));
            }
            if whsec && let Some(b64) = v.strip_prefix("whsec_") {
                match base64::engine::general_purpose::STANDARD.decode(b64) {
                    Ok(k) if !k.is_empty() => {}
                    _ => return Err(err(f, "must be whsec_ followed by base64 of the key")),
                }
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets([{} redacted])", self.0.len())
    }
}

impl<'de> Deserialize<'de> for Secrets {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::scalar::one_or_many(d).map(Secrets)
    }
}

/// A URL without userinfo and with every query value replaced.
pub fn redact_url(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            if u.query().is_some() {
                let pairs: Vec<String> = u
                    .query_pairs()
                    .map(|(k, _)| format!("{k}={REDACTED}"))
                    .collect();
                u.set_query(Some(&pairs.join("&")));
            }
            u.to_string()
        }
        Err(_) => REDACTED.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_plain_and_prints_redacted() {
        let s = Secret::new("hunter2");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"hunter2\"");
        assert_eq!(format!("{s:?} {s}"), "[redacted] [redacted]");
        let back: Secret = serde_json::from_str("\"123456\"").unwrap();
        assert_eq!(back, "123456");
        let u = SecretUrl::new("amqp://user:pw@host:5672/%2f?token=abc");
        assert_eq!(
            serde_json::to_string(&u).unwrap(),
            "\"amqp://user:pw@host:5672/%2f?token=abc\""
        );
        let shown = format!("{u:?} {u}");
        assert!(!shown.contains("pw") && !shown.contains("abc"), "{shown}");
        assert!(shown.contains("host:5672"), "{shown}");
    }
}
