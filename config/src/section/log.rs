//! `log`: the `tracing` filter and the output format. The filter is checked in the forms a
//! `tracing` env filter accepts, without depending on `tracing`. Imports only the leaves.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::err;

/// The format of log lines (written to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The gateway's logging: the `tracing` filter and the line format (read once at start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A `tracing` filter: `info`, `debug`, `ankusa_gateway=debug,info`, ...
    pub level: String,
    /// Log line format, `text` (default) or `json`; logs go to stderr.
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

impl LogConfig {
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        check_level(&self.level).map_err(|e| err(format!("{path}.level"), e))
    }
}

const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// Accepts what a `tracing` env filter accepts, in the common forms: a level, or a list of
/// `target=level` directives and levels.
fn check_level(s: &str) -> Result<(), &'static str> {
    if s.trim().is_empty() {
        return Err("must not be empty");
    }
    for directive in s.split(',') {
        let level = directive
            .rsplit('=')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let known = LEVELS.contains(&level.as_str());
        if directive.contains('=') {
            if !known {
                return Err(
                    "a target=level directive names an unknown level (expected trace, debug, info, warn, error or off)",
                );
            }
        } else if !known {
            return Err(
                "must be a level (trace, debug, info, warn, error, off) or target=level list",
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_directives() {
        for ok in ["info", "DEBUG", "ankusa_gateway=debug,info", " warn "] {
            assert_eq!(check_level(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_level(" "), Err("must not be empty"));
        assert!(
            check_level("verbose")
                .unwrap_err()
                .starts_with("must be a level")
        );
        assert!(check_level("a=loud").unwrap_err().contains("unknown level"));
    }
}
