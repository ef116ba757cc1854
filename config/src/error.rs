use std::fmt;

/// A configuration that cannot be used. The message names the field and the constraint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Dotted path of the offending key (`sources.stripe.verify.secret[1]`), when known.
    pub field: Option<String>,
    pub message: String,
}

impl ConfigError {
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            field: Some(field.into()),
            message: message.into(),
        }
    }

    pub fn general(message: impl Into<String>) -> Self {
        ConfigError {
            field: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}
