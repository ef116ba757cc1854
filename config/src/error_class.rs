//! `ErrorClass`: why a dead delivery died. One definition for the gateway's DLQ and the
//! operator's `ReplayJob` filter; not a config key, but shared through this crate because both
//! already depend on it. A leaf.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

/// Why a dead delivery died: `permanent` (the sink said it will never work, or the source, the
/// sink or the hook is gone), `throttled` (the destination asked for a pause and the retry
/// horizon ended it), `transient` (anything else that kept failing until the retry policy gave
/// up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    Permanent,
    Throttled,
    Transient,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Permanent => "permanent",
            ErrorClass::Throttled => "throttled",
            ErrorClass::Transient => "transient",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorClass> {
        match s {
            "permanent" => Some(ErrorClass::Permanent),
            "throttled" => Some(ErrorClass::Throttled),
            "transient" => Some(ErrorClass::Transient),
            _ => None,
        }
    }
}
