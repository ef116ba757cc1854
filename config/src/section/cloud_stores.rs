//! The Google Cloud Storage (`gcs`) and Azure Blob Storage (`azure`) sections of a blob store,
//! beside `storage.rs`'s `local` and `s3`, shared by `storage` and `backup.store`. Each has one
//! auth mode, chosen by which fields are set:
//!
//! | store | set | auth |
//! |---|---|---|
//! | gcs | `credentials` | a service-account key (a file path, or the key's JSON inline) |
//! | gcs | `anonymous: true` | none (emulators only: needs `endpoint`) |
//! | gcs | neither | the GCE/GKE metadata server (workload identity) |
//! | azure | `sas_token` | the SAS appended to each request |
//! | azure | `account_key` | Shared Key (HMAC-SHA256 of each request) |
//! | azure | neither | Entra workload identity (`AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`) |
//!
//! Errors name the field and never quote a value (every credential here is a `Secret`).
//! A leaf beside `storage.rs`: imports only `error`, `rules` and `secrets`.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, in_range, url_with_scheme};
use crate::secrets::{Secret, SecretUrl};

/// The JSON API's endpoint when none is given.
pub const DEFAULT_GCS_ENDPOINT: &str = "https://storage.googleapis.com";

/// A blob store in a Google Cloud Storage bucket, over the JSON API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GcsStoreConfig {
    /// The bucket name: 3-63 characters of `[a-z0-9-_.]` (up to 222 with dots, 63 between
    /// two), starting and ending with a letter or digit.
    pub bucket: String,
    /// Another endpoint (an emulator, a Private Service Connect name); default
    /// `https://storage.googleapis.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<SecretUrl>,
    /// A service-account key: the absolute path of its JSON file, or the JSON itself. Absent:
    /// the metadata server's (GCE, GKE workload identity), unless `anonymous`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<Secret>,
    /// No `Authorization` at all: for an emulator (`endpoint` required), never Google's.
    #[serde(default)]
    pub anonymous: bool,
    /// Per request, connect to response (ms).
    #[serde(default = "d_timeout_ms")]
    pub timeout_ms: u64,
}

/// A blob store in an Azure Storage account's blob container, over the Blob REST API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AzureStoreConfig {
    /// The storage account: 3-24 lowercase letters and digits.
    pub account: String,
    /// The container: 3-63 characters of `[a-z0-9-]`, starting and ending with a letter or
    /// digit, no two dashes in a row.
    pub container: String,
    /// Another endpoint, the account's blob service root (Azurite:
    /// `http://127.0.0.1:10000/devstoreaccount1`); default
    /// `https://<account>.blob.core.windows.net`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<SecretUrl>,
    /// A SAS token (`sv=...&sig=...`, with or without the leading `?`), appended to every
    /// request. It needs read, add/create, write, delete and list on the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sas_token: Option<Secret>,
    /// The account's base64 access key, for Shared Key auth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_key: Option<Secret>,
    /// Per request, connect to response (ms).
    #[serde(default = "d_timeout_ms")]
    pub timeout_ms: u64,
}

fn d_timeout_ms() -> u64 {
    30_000
}

/// What a GCS `credentials` value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcsCredentials<'a> {
    /// The absolute path of a key file.
    File(&'a str),
    /// The key's JSON itself.
    Inline(&'a str),
}

impl GcsStoreConfig {
    /// `credentials` read as a file path or inline JSON (a value starting with `{`).
    pub fn credentials(&self) -> Option<GcsCredentials<'_>> {
        self.credentials.as_ref().map(|c| {
            let v = c.expose().trim();
            if v.starts_with('{') {
                GcsCredentials::Inline(v)
            } else {
                GcsCredentials::File(v)
            }
        })
    }

    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        if !gcs_bucket_ok(&self.bucket) {
            return Err(err(
                f("bucket"),
                "must be a GCS bucket name: 3-63 characters of [a-z0-9-_.] (up to 222 with dots, at most 63 between two), starting and ending with a letter or digit, not starting with goog",
            ));
        }
        if let Some(ep) = &self.endpoint {
            endpoint(&f("endpoint"), ep)?;
        }
        match self.credentials() {
            Some(_) if self.anonymous => {
                return Err(err(
                    f("anonymous"),
                    "anonymous: true and credentials exclude each other: give one auth mode",
                ));
            }
            Some(GcsCredentials::File(p)) if !p.starts_with('/') => {
                return Err(err(
                    f("credentials"),
                    "must be the absolute path of a service-account key file, or the key's JSON",
                ));
            }
            Some(GcsCredentials::Inline(json)) => service_account_shape(&f("credentials"), json)?,
            _ => {}
        }
        if self.anonymous && self.endpoint.is_none() {
            return Err(err(
                f("anonymous"),
                "is for emulators only: it needs an endpoint",
            ));
        }
        in_range(&f("timeout_ms"), self.timeout_ms, 1, 600_000)
    }
}

impl AzureStoreConfig {
    /// The blob service root requests go under (no trailing `/`).
    pub fn service_url(&self) -> String {
        match &self.endpoint {
            Some(ep) => ep.expose().trim_end_matches('/').to_string(),
            None => format!("https://{}.blob.core.windows.net", self.account),
        }
    }

    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        let a = &self.account;
        if !(3..=24).contains(&a.len())
            || !a
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            return Err(err(
                f("account"),
                "must be a storage account name: 3-24 lowercase letters and digits",
            ));
        }
        if !azure_container_ok(&self.container) {
            return Err(err(
                f("container"),
                "must be a container name: 3-63 characters of [a-z0-9-], starting and ending with a letter or digit, no two dashes in a row",
            ));
        }
        if let Some(ep) = &self.endpoint {
            endpoint(&f("endpoint"), ep)?;
        }
        if self.sas_token.is_some() && self.account_key.is_some() {
            return Err(err(
                f("account_key"),
                "sas_token and account_key exclude each other: give one (or neither, for Entra workload identity)",
            ));
        }
        if let Some(sas) = &self.sas_token {
            let q = sas.expose().trim_start_matches('?');
            let has_sig = q.split('&').any(|p| p.starts_with("sig=") && p.len() > 4);
            if !has_sig || q.bytes().any(|b| b.is_ascii_whitespace() || b == b'#') {
                return Err(err(
                    f("sas_token"),
                    "must be a SAS token: a query string with sv=... and sig=..., without spaces",
                ));
            }
        }
        if let Some(key) = &self.account_key {
            use base64::Engine;
            let ok = base64::engine::general_purpose::STANDARD
                .decode(key.expose().trim())
                .is_ok_and(|k| !k.is_empty());
            if !ok {
                return Err(err(f("account_key"), "must be the account's base64 key"));
            }
        }
        in_range(&f("timeout_ms"), self.timeout_ms, 1, 600_000)
    }
}

/// An endpoint: `http(s)` with a host, no userinfo, query or fragment (a path is kept: Azurite
/// names its account there).
fn endpoint(field: &str, ep: &SecretUrl) -> Result<(), ConfigError> {
    let url = url_with_scheme(field, ep.expose(), &["http", "https"])?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(err(field, "must not carry a query or a fragment"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(err(
            field,
            "must not carry credentials: give them in their own fields",
        ));
    }
    Ok(())
}

fn gcs_bucket_ok(b: &str) -> bool {
    let dotted = b.contains('.');
    let max = if dotted { 222 } else { 63 };
    (3..=max).contains(&b.len())
        && b.bytes().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_' || c == b'.'
        })
        && b.starts_with(|c: char| c.is_ascii_alphanumeric())
        && b.ends_with(|c: char| c.is_ascii_alphanumeric())
        && !b.starts_with("goog")
        && b.split('.').all(|part| (1..=63).contains(&part.len()))
}

fn azure_container_ok(c: &str) -> bool {
    (3..=63).contains(&c.len())
        && c.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !c.starts_with('-')
        && !c.ends_with('-')
        && !c.contains("--")
}

/// Inline credentials are a service-account key: a JSON object of `type: service_account` with
/// `client_email` and `private_key`. (The key itself is parsed where the store is built.)
fn service_account_shape(field: &str, json: &str) -> Result<(), ConfigError> {
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|_| err(field, "inline credentials are not valid JSON"))?;
    if v.get("type").and_then(|t| t.as_str()) != Some("service_account") {
        return Err(err(
            field,
            "must be a service-account key (type: service_account)",
        ));
    }
    for key in ["client_email", "private_key"] {
        if v.get(key)
            .and_then(|t| t.as_str())
            .is_none_or(str::is_empty)
        {
            return Err(err(field, format!("the service-account key has no {key}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_and_container_names() {
        for ok in ["abc", "my-bucket_1", "a.b.c", "x9"] {
            assert_eq!(gcs_bucket_ok(ok), ok.len() >= 3, "{ok}");
        }
        for bad in ["Bad", "-ab", "ab-", "goog-x", "a..b", &"a".repeat(64)] {
            assert!(!gcs_bucket_ok(bad), "{bad}");
        }
        assert!(azure_container_ok("ankusa-archive-1"));
        for bad in ["ab", "a--b", "-ab", "ab-", "Abc", "a_b"] {
            assert!(!azure_container_ok(bad), "{bad}");
        }
    }
}
