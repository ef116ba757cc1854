//! A source's `dedupe`: where it finds the provider's event id (a preset, a header or a JSON
//! dot path) and how long a key collapses repeats. Written as a preset name or a map, hence
//! the hand-written `Deserialize`. Imports only the leaves.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{at_least, dot_path, err, header_name};

/// A preset dedupe key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DedupePreset {
    /// Header `x-github-delivery`.
    Github,
    /// Header `webhook-id`.
    StandardWebhooks,
    /// Header `svix-id`.
    Svix,
    /// Header `x-shopify-webhook-id`.
    Shopify,
    /// JSON field `id` of the body.
    Stripe,
}

/// Where a source finds the provider's event id. Written as a preset name (`dedupe: github`)
/// or a map with exactly one of `preset`, `header`, `json`, plus an optional `ttl_seconds`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DedupeConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<DedupePreset>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// A dot path into the JSON body (`data.object.id`); integers are stringified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
    /// How long a key collapses repeats (default 259200 = 72 h).
    #[serde(default = "default_dedupe_ttl")]
    pub ttl_seconds: u64,
}

pub fn default_dedupe_ttl() -> u64 {
    259_200
}

impl<'de> Deserialize<'de> for DedupeConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            #[serde(default)]
            preset: Option<DedupePreset>,
            #[serde(default)]
            header: Option<String>,
            #[serde(default)]
            json: Option<String>,
            #[serde(default = "default_dedupe_ttl")]
            ttl_seconds: u64,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Preset(DedupePreset),
            Full(Full),
        }
        match Either::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected a preset (github, standard_webhooks, svix, shopify, stripe) or a map \
                 with one of preset, header, json and an optional ttl_seconds",
            )
        })? {
            Either::Preset(p) => Ok(DedupeConfig {
                preset: Some(p),
                header: None,
                json: None,
                ttl_seconds: default_dedupe_ttl(),
            }),
            Either::Full(f) => Ok(DedupeConfig {
                preset: f.preset,
                header: f.header,
                json: f.json,
                ttl_seconds: f.ttl_seconds,
            }),
        }
    }
}

impl DedupeConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let n =
            self.preset.is_some() as u8 + self.header.is_some() as u8 + self.json.is_some() as u8;
        if n != 1 {
            return Err(err(path, "must name exactly one of preset, header, json"));
        }
        if let Some(h) = &self.header {
            header_name(format!("{path}.header"), h)?;
        }
        if let Some(j) = &self.json {
            dot_path(format!("{path}.json"), j)?;
        }
        at_least(&format!("{path}.ttl_seconds"), self.ttl_seconds, 1)
    }
}
