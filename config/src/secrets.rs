//! A secret that may be one value or a rotation list.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

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
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets([{} redacted])", self.0.len())
    }
}

impl<'de> Deserialize<'de> for Secrets {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::scalar::one_or_many(d).map(Secrets)
    }
}
