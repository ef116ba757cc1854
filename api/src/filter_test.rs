//! `POST /v1/sources/{id}/filters/test`: a dry run of sink filters and transforms over a
//! sample hook or over the hooks the archive holds from a window. Nothing is delivered or
//! stored; the answer counts what each sink would get and shows a few transformed outputs.

use std::collections::BTreeMap;

use ankusa_config::{OnFilterError, Transform};
use serde::{Deserialize, Serialize};

/// Most archived hooks one dry run examines (`limit`).
pub const MAX_FILTER_TEST_LIMIT: u64 = 100_000;
/// Default of `limit`.
pub const DEFAULT_FILTER_TEST_LIMIT: u64 = 1_000;
/// Most transformed outputs shown per sink (`samples`).
pub const MAX_FILTER_TEST_SAMPLES: usize = 20;

/// The request. Exactly one of `hook` and `archive`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterTest {
    /// The routing to try, one entry per sink of the source (by position); absent: the source's
    /// sinks as configured now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sinks: Option<Vec<SinkRoutingTry>>,
    /// A sample hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<SampleHook>,
    /// A window of archived traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<FilterTestWindow>,
    /// Transformed outputs shown per sink (default 3, at most 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<usize>,
}

/// One sink's routing to try.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkRoutingTry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    #[serde(default)]
    pub on_filter_error: OnFilterError,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<Transform>,
}

/// A hook to try the expressions on, as if the source had received it now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleHook {
    /// The body: a JSON value (sent as its JSON text), or `body_text` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// The body as raw text (when it is not JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_text: Option<String>,
    /// Request headers (names are lower-cased).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The tenant; default: the source's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// Archived hooks of the source received in `[from, to)` (unix ms), at most `limit` of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterTestWindow {
    pub from: u64,
    pub to: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Only this tenant's hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// The answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FilterTestResult {
    pub source: String,
    /// Hooks the expressions ran on.
    pub examined: u64,
    /// The window held more hooks than `limit` (or more segments than one run reads).
    #[serde(default)]
    pub truncated: bool,
    /// Archived segments that failed their check and were not read.
    #[serde(default)]
    pub corrupt_segments: u64,
    pub sinks: Vec<SinkTestResult>,
}

/// What one sink would get.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SinkTestResult {
    pub index: u16,
    /// The sink's name (`sink_names`), or `sinks[<i>]`.
    pub name: String,
    /// Hooks it would get: the filter matched (or failed with `on_filter_error: deliver`).
    pub matched: u64,
    /// Hooks its filter turned away (or failed with `on_filter_error: skip`).
    pub filtered: u64,
    /// Filter failures by error class (counted in `matched` or `filtered` as the policy says).
    #[serde(default)]
    pub filter_errors: BTreeMap<String, u64>,
    /// Transform failures by error class (a delivery would be dead-lettered).
    #[serde(default)]
    pub transform_errors: BTreeMap<String, u64>,
    /// The first outputs of the transform (or the bodies as received, without one).
    #[serde(default)]
    pub samples: Vec<TestSample>,
}

/// One output a sink would send.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestSample {
    /// The archived hook's id (none for a sample hook).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_id: Option<String>,
    /// The body it would send: JSON when it is JSON, else `null` with `body_text`.
    pub body: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_text: Option<String>,
    /// Headers the transform adds.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}
