//! What the sink types share, written once: the defaults of the keys several sinks have
//! (`inline_max_bytes`, `idle_timeout_ms`, the `batch*` keys), the ordering keys every sink
//! has (`OrderingKey` and its rules), a batching sink's `BatchOptions` and its destination's
//! `BatchLimits`, and the validation helpers the sink files call with the sink's path.
//!
//! A leaf of `sinks/`: each sink file imports it, and it imports only `egress` (for
//! `EgressTarget`) and the crate's leaves, never a sink file or `sinks/mod.rs`.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::egress::EgressTarget;
use crate::error::ConfigError;
use crate::rules::{at_least, at_most, dot_path, err, header_name};

/// Largest body a queue message carries inline (base64); larger bodies travel as a claim.
pub const DEFAULT_INLINE_MAX_BYTES: u64 = 65_536;
/// A broker connection with no delivery through it for this long is closed (0 keeps it).
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 600_000;

pub(super) fn d_inline() -> u64 {
    DEFAULT_INLINE_MAX_BYTES
}
pub(super) fn d_idle() -> u64 {
    DEFAULT_IDLE_TIMEOUT_MS
}
pub(super) fn d_5000() -> u64 {
    5_000
}

/// Where the key of an ordering lane comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OrderingKey {
    /// A request header whose value is the lane key (set exactly one of `header`, `json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// A dot path into the JSON body (its first 1 MiB) whose value is the lane key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
}

/// The lane rules every sink's config follows (`ordered`, `ordering_key`).
pub(super) fn check_ordering(
    p: &str,
    ordered: bool,
    key: Option<&OrderingKey>,
) -> Result<(), ConfigError> {
    let Some(k) = key else {
        return Ok(());
    };
    if !ordered {
        return Err(err(
            format!("{p}.ordering_key"),
            "is only read with ordered: true",
        ));
    }
    match (&k.header, &k.json) {
        (Some(h), None) => header_name(format!("{p}.ordering_key.header"), h),
        (None, Some(j)) => dot_path(format!("{p}.ordering_key.json"), j),
        _ => Err(err(
            format!("{p}.ordering_key"),
            "must name exactly one of header, json",
        )),
    }
}

/// What differs between the batching sinks: the destination's ceilings on one request, and
/// the defaults that fill one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most entries one request takes.
    pub max_entries: u32,
    /// The default of `batch_max_entries`.
    pub default_entries: u32,
    /// Most bytes one request takes.
    pub max_bytes: u64,
    /// The default of `batch_max_bytes`.
    pub default_bytes: u64,
}

pub(super) fn d_true() -> bool {
    true
}
pub(super) fn d_linger() -> u64 {
    20
}
pub(super) fn d_queue_max() -> u32 {
    4_096
}
pub(super) fn d_queue_max_bytes() -> u64 {
    134_217_728
}
pub(super) fn d_queue_tenant_max() -> u32 {
    1_024
}

/// A batching sink's `batch*` keys (SQS `SendMessageBatch`, Pub/Sub `topics.publish`),
/// read together: what the sinks build their batcher from, and what two sinks must share to
/// share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BatchOptions {
    /// `batch`.
    pub enabled: bool,
    /// `batch_linger_ms`.
    pub linger_ms: u64,
    /// `batch_max_entries`.
    pub max_entries: u32,
    /// `batch_max_bytes`.
    pub max_bytes: u64,
    /// `batch_queue_max`.
    pub queue_max: u32,
    /// `batch_queue_max_bytes`.
    pub queue_max_bytes: u64,
    /// `batch_queue_tenant_max`.
    pub queue_tenant_max: u32,
    /// `batch_max_inflight`.
    pub max_inflight: Option<u32>,
}

impl BatchOptions {
    /// The ranges, within the destination's ceilings.
    pub(super) fn validate(&self, p: &str, limits: &BatchLimits) -> Result<(), ConfigError> {
        max(p, "batch_linger_ms", self.linger_ms, 10_000)?;
        min(p, "batch_max_entries", self.max_entries as u64, 1)?;
        max(
            p,
            "batch_max_entries",
            self.max_entries as u64,
            limits.max_entries as u64,
        )?;
        min(p, "batch_max_bytes", self.max_bytes, 1)?;
        max(p, "batch_max_bytes", self.max_bytes, limits.max_bytes)?;
        min(p, "batch_queue_max", self.queue_max as u64, 1)?;
        min(p, "batch_queue_max_bytes", self.queue_max_bytes, 1)?;
        min(p, "batch_queue_tenant_max", self.queue_tenant_max as u64, 1)?;
        if let Some(n) = self.max_inflight {
            min(p, "batch_max_inflight", n as u64, 1)?;
        }
        Ok(())
    }
}

// Validation helpers. Each gets the sink's path (`sources.x.sinks[2]`) and names the field and
// the constraint in its errors.

/// `<p>.<name> must be >= <lo>, got <v>`.
pub(super) fn min(p: &str, name: &str, v: u64, lo: u64) -> Result<(), ConfigError> {
    at_least(&format!("{p}.{name}"), v, lo)
}

/// `<p>.<name> must be <= <hi>, got <v>`.
pub(super) fn max(p: &str, name: &str, v: u64, hi: u64) -> Result<(), ConfigError> {
    at_most(&format!("{p}.{name}"), v, hi)
}

pub(super) fn non_empty(p: &str, name: &str, v: &str) -> Result<(), ConfigError> {
    if v.trim().is_empty() {
        return Err(err(format!("{p}.{name}"), "must not be empty"));
    }
    Ok(())
}

/// A `host:port` or `scheme://host:port` entry without userinfo.
pub(super) fn server_entry(
    p: &str,
    name: &str,
    i: usize,
    s: &str,
    schemes: &[&str],
) -> Result<(), ConfigError> {
    let f = format!("{p}.{name}[{i}]");
    if s.contains('@') {
        return Err(err(
            f,
            "must not carry credentials; use the sink's credential keys",
        ));
    }
    let (scheme, rest) = match s.split_once("://") {
        Some((sc, rest)) => (Some(sc), rest),
        None => (None, s),
    };
    // The message never quotes the value: a Secret may fill it, and even its scheme part
    // would be a piece of that Secret.
    if let Some(sc) = scheme
        && !schemes.contains(&sc)
    {
        return Err(err(
            f,
            format!("must use one of the schemes {}", schemes.join(", ")),
        ));
    }
    let rest = rest.trim_end_matches('/');
    let ok = match rest.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|n| n > 0),
        None => !rest.is_empty() && scheme.is_some(),
    };
    if !ok {
        return Err(err(f, "must be host:port"));
    }
    Ok(())
}

/// The targets of a list of `host:port` entries, `<name>[i]`.
pub(super) fn entries(name: &str, list: &[String], default_port: u16) -> Vec<EgressTarget> {
    list.iter()
        .enumerate()
        .filter_map(|(i, e)| EgressTarget::from_entry(format!("{name}[{i}]"), e, default_port))
        .collect()
}

pub(super) fn inline(p: &str, v: u64) -> Result<(), ConfigError> {
    min(p, "inline_max_bytes", v, 1)
}
