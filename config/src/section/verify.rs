//! A source's `verify`: how it checks the provider's signature (a preset scheme or a custom
//! body HMAC), its secrets and its timestamp window. The signed-string template is parsed here
//! (`signed_tokens`), so the gateway's verifier and validation read it one way. Imports only
//! the leaves (`secrets` checks a rotation list).

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{at_least, at_most, err, header_name, valid_header_name};
use crate::secrets::Secrets;

/// How a source verifies the provider's signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum VerifyConfig {
    /// Nothing verified; deliveries say `skipped`.
    #[default]
    None,
    /// `Stripe-Signature: t=..,v1=..` over `{t}.{body}`.
    Stripe(TimedPreset),
    /// `X-Hub-Signature-256: sha256=<hex>` over the body.
    Github(Preset),
    /// `X-Shopify-Hmac-SHA256: <base64>` over the body.
    Shopify(Preset),
    /// `X-Slack-Signature: v0=<hex>` over `v0:{ts}:{body}`.
    Slack(TimedPreset),
    /// `webhook-id` / `webhook-timestamp` / `webhook-signature` (or the `svix-*` names).
    StandardWebhooks(TimedPreset),
    /// A custom body HMAC.
    Hmac(HmacVerify),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// One secret, or up to 8 newest first while rotating; each is tried.
    pub secret: Secrets,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TimedPreset {
    pub secret: Secrets,
    /// Largest accepted distance between the signed timestamp and now.
    #[serde(default = "default_tolerance")]
    pub tolerance_seconds: u64,
}

fn default_tolerance() -> u64 {
    300
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum HmacHash {
    Sha256,
    Sha512,
    Sha1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SigEncoding {
    Hex,
    Base64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SigParse {
    /// The whole header value (after `sig_prefix`) is the signature.
    #[default]
    Whole,
    /// `k=v,k=v` pairs; `sig_key` names the signature, `t` may carry the timestamp.
    CsvPairs,
    /// Space-separated `version,signature` entries; `version` selects them.
    SpaceVersions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SecretDecode {
    /// The secret's bytes are the key.
    #[default]
    Raw,
    /// `whsec_` followed by base64 of the key.
    WhsecBase64,
}

/// A custom body-HMAC scheme.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct HmacVerify {
    pub secret: Secrets,
    pub signature_header: String,
    /// The signed string: `{body}`, `{ts}` and `{header:<name>}` tokens and literal text.
    #[serde(default = "default_signed")]
    pub signed: String,
    #[serde(default = "default_hash")]
    pub hash: HmacHash,
    #[serde(default = "default_encoding")]
    pub encoding: SigEncoding,
    /// Text in front of the signature (`sha256=`), stripped before comparing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig_prefix: Option<String>,
    #[serde(default)]
    pub parse: SigParse,
    /// The pair holding the signature for `csv_pairs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig_key: Option<String>,
    /// The entry version for `space_versions` (e.g. `v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Header carrying the timestamp; with `csv_pairs` the `t` pair is used when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance_seconds: Option<u64>,
    #[serde(default)]
    pub secret_decode: SecretDecode,
}

fn default_signed() -> String {
    "{body}".into()
}

fn default_hash() -> HmacHash {
    HmacHash::Sha256
}

fn default_encoding() -> SigEncoding {
    SigEncoding::Hex
}

/// The widest signature window accepted: a captured request replays for this long.
pub const MAX_TOLERANCE_SECONDS: u64 = 3600;

fn tolerance(field: &str, t: u64) -> Result<(), ConfigError> {
    at_least(field, t, 1)?;
    at_most(field, t, MAX_TOLERANCE_SECONDS)
}

impl VerifyConfig {
    /// `path` is the `verify` key (`sources.x.verify`).
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let secret = format!("{path}.secret");
        let window = format!("{path}.tolerance_seconds");
        match self {
            VerifyConfig::None => Ok(()),
            VerifyConfig::Github(x) | VerifyConfig::Shopify(x) => x.secret.validate(&secret, false),
            VerifyConfig::Stripe(x) | VerifyConfig::Slack(x) => {
                x.secret.validate(&secret, false)?;
                tolerance(&window, x.tolerance_seconds)
            }
            VerifyConfig::StandardWebhooks(x) => {
                x.secret.validate(&secret, true)?;
                tolerance(&window, x.tolerance_seconds)
            }
            VerifyConfig::Hmac(h) => h.validate(path),
        }
    }
}

impl HmacVerify {
    fn validate(&self, v: &str) -> Result<(), ConfigError> {
        let whsec = self.secret_decode == SecretDecode::WhsecBase64;
        self.secret.validate(&format!("{v}.secret"), whsec)?;
        if whsec {
            for (i, s) in self.secret.iter().enumerate() {
                if !s.starts_with("whsec_") {
                    return Err(err(
                        format!("{v}.secret[{i}]"),
                        "secret_decode: whsec_base64 needs secrets starting with whsec_",
                    ));
                }
            }
        }
        if !valid_header_name(&self.signature_header) {
            return Err(err(format!("{v}.signature_header"), "is not a header name"));
        }
        let tokens = signed_tokens(&self.signed).map_err(|e| err(format!("{v}.signed"), e))?;
        let uses_ts = tokens.iter().any(|t| t == "ts");
        let has_ts_source = self.timestamp_header.is_some() || self.parse == SigParse::CsvPairs;
        if uses_ts && !has_ts_source {
            return Err(err(
                format!("{v}.signed"),
                "uses {ts} but there is no timestamp: set timestamp_header, or parse: csv_pairs with a t= pair",
            ));
        }
        if !tokens.iter().any(|t| t == "body") {
            return Err(err(format!("{v}.signed"), "must include {body}"));
        }
        if tokens
            .iter()
            .filter_map(|t| t.strip_prefix("header:"))
            .any(|name| !valid_header_name(name))
        {
            return Err(err(
                format!("{v}.signed"),
                "a {header:<name>} token names no valid header name",
            ));
        }
        match self.parse {
            SigParse::CsvPairs if self.sig_key.as_deref().is_none_or(str::is_empty) => {
                return Err(err(
                    format!("{v}.sig_key"),
                    "is required with parse: csv_pairs",
                ));
            }
            SigParse::SpaceVersions if self.version.as_deref().is_none_or(str::is_empty) => {
                return Err(err(
                    format!("{v}.version"),
                    "is required with parse: space_versions",
                ));
            }
            _ => {}
        }
        if let Some(th) = &self.timestamp_header {
            header_name(format!("{v}.timestamp_header"), th)?;
        }
        if uses_ts && self.tolerance_seconds.is_none() {
            return Err(err(
                format!("{v}.tolerance_seconds"),
                format!(
                    "is required when signed uses {{ts}}: without a window a captured request \
                     verifies forever (at most {MAX_TOLERANCE_SECONDS})"
                ),
            ));
        }
        if let Some(t) = self.tolerance_seconds {
            tolerance(&format!("{v}.tolerance_seconds"), t)?;
            if !has_ts_source {
                return Err(err(
                    format!("{v}.tolerance_seconds"),
                    "needs a timestamp (timestamp_header or csv_pairs)",
                ));
            }
        }
        Ok(())
    }
}

/// The `{...}` tokens of a signed-string template. Two tokens with no literal text between
/// them (`{header:x}{body}`) are refused: bytes could move from one value to the other and
/// the signature would still match. Messages never quote the template.
pub fn signed_tokens(tpl: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = tpl;
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else {
            return Err("a `{` without a closing `}`".to_string());
        };
        if start == 0 && !out.is_empty() {
            return Err(
                "has two tokens with no literal text between them: the boundary between \
                 their values is ambiguous (put a separator such as `.` between them)"
                    .to_string(),
            );
        }
        let tok = &rest[start + 1..start + end];
        if tok != "body" && tok != "ts" && !tok.starts_with("header:") {
            return Err("unknown token (expected {body}, {ts} or {header:<name>})".to_string());
        }
        out.push(tok.to_string());
        rest = &rest[start + end + 1..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
