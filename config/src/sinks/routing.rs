//! What every sink entry may add to decide which hooks it gets and how they look: `filter`
//! (a CEL expression over the hook, run once at commit; false: no delivery row),
//! `on_filter_error` (what a filter that cannot be evaluated does) and `transform` (CEL
//! expressions for the body and headers the sink sends, run at each delivery). The
//! expressions are compiled here, at load, by `ankusa-filter`: a config with an expression
//! that does not compile, or does not produce the right type, is refused with the source, the
//! sink and the position in the expression. docs/filters.md describes the language.
//!
//! A leaf of `sinks/`: imported by `sinks/mod.rs` (the `sink_config!` fields) only.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use ankusa_filter::{Kind, Program};

use crate::error::ConfigError;
use crate::rules::err;

/// What a sink's filter does when it cannot be evaluated for a hook (a missing key, a type
/// mismatch, the cost limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnFilterError {
    /// The sink gets the hook, as if the filter had matched: nothing is lost by a filter bug.
    #[default]
    Deliver,
    /// The sink gets no delivery row, as if the filter had not matched.
    Skip,
}

impl OnFilterError {
    pub fn is_default(&self) -> bool {
        *self == OnFilterError::Deliver
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OnFilterError::Deliver => "deliver",
            OnFilterError::Skip => "skip",
        }
    }
}

/// A sink's reshaping of what it sends: each expression is optional; the stored hook never
/// changes, and a replay applies the transform configured then.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Transform {
    /// A CEL expression whose value, as JSON, is the body the sink sends (`content-type:
    /// application/json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// A CEL expression producing a map of header names to string values, added to what the
    /// sink sends (HTTP request headers; the queue message's `headers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<String>,
}

/// A sink entry's `filter`, `on_filter_error` and `transform`, owned: what the operator sets
/// on a rendered sink.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingKeys {
    pub filter: Option<String>,
    pub on_filter_error: OnFilterError,
    pub transform: Option<Transform>,
}

/// A sink entry's `filter`, `on_filter_error` and `transform`, read together.
#[derive(Debug, Clone, Copy)]
pub struct SinkRouting<'a> {
    pub filter: Option<&'a str>,
    pub on_filter_error: OnFilterError,
    pub transform: Option<&'a Transform>,
}

impl SinkRouting<'_> {
    /// Whether the entry has neither a filter nor a transform.
    pub fn is_plain(&self) -> bool {
        self.filter.is_none() && self.transform.is_none()
    }

    /// Compiles each expression; an error names the field (`<p>.filter`,
    /// `<p>.transform.body`, ...) and the line and column in the expression.
    pub fn compile(&self, p: &str) -> Result<CompiledRouting, ConfigError> {
        let one = |field: String, src: Option<&str>, kind: Kind| {
            src.map(|s| Program::compile(s, kind).map_err(|e| err(field, e.to_string())))
                .transpose()
        };
        if self.filter.is_none() && !self.on_filter_error.is_default() {
            return Err(err(
                format!("{p}.on_filter_error"),
                "is only read with a filter",
            ));
        }
        let t = self.transform;
        if let Some(t) = t
            && t.body.is_none()
            && t.headers.is_none()
        {
            return Err(err(
                format!("{p}.transform"),
                "must set body, headers or both",
            ));
        }
        Ok(CompiledRouting {
            filter: one(format!("{p}.filter"), self.filter, Kind::Filter)?,
            on_filter_error: self.on_filter_error,
            body: one(
                format!("{p}.transform.body"),
                t.and_then(|t| t.body.as_deref()),
                Kind::Value,
            )?,
            headers: one(
                format!("{p}.transform.headers"),
                t.and_then(|t| t.headers.as_deref()),
                Kind::Headers,
            )?,
        })
    }
}

/// A sink entry's expressions, compiled: what the gateway evaluates (default: none).
#[derive(Debug, Clone, Default)]
pub struct CompiledRouting {
    pub filter: Option<Program>,
    pub on_filter_error: OnFilterError,
    /// `transform.body`.
    pub body: Option<Program>,
    /// `transform.headers`.
    pub headers: Option<Program>,
}

impl CompiledRouting {
    /// Whether any expression reads `body` (the hook's JSON is parsed only then).
    pub fn reads_body(&self) -> bool {
        [&self.filter, &self.body, &self.headers]
            .into_iter()
            .flatten()
            .any(Program::reads_body)
    }

    /// Whether the entry transforms what it sends.
    pub fn transforms(&self) -> bool {
        self.body.is_some() || self.headers.is_some()
    }
}
