//! The `quarantine` section: bounds of the pen where a source with `on_verify_failure:
//! quarantine` keeps the hooks that fail verification. Its bounds are the pen's whole defence
//! against a forged flood, and they come as a set that only makes sense together: a bucket per
//! source (`burst`, `rate`), a byte cap for the node (`max_bytes`) with a share of it per
//! source and per tenant (`max_bytes_per_source`, `max_bytes_per_tenant`: by default the node
//! cap split evenly, so no source or tenant can be crowded out of its own share by another), a
//! body cap (`max_body_bytes`) and an age past which entries are removed (`retention_hours`,
//! checked every `expire_interval_ms`). The schema, its defaults, the derived shares and the
//! validation are all here. Imports only the leaves.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::err;

/// Bounds of the quarantine pen, so a flood of forged requests can neither fill the disk nor
/// spend another source's (or tenant's) share: a bucket per source (`burst` back to back,
/// refilled at `rate` per second; over it `429 quarantine_rate_limited`), one byte cap for the
/// whole pen and a share of it per source and per tenant (a hook that would cross one is
/// `503 quarantine_full`; nothing answered `202` is evicted for room), a body cap (`413`), and
/// an age past which entries are removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct QuarantineConfig {
    /// Hooks one source may quarantine back to back.
    pub burst: u32,
    /// Hooks per second one source's bucket refills (may be fractional).
    pub rate: f64,
    /// Bytes the pen holds at most (stored envelopes: headers, body and metadata).
    pub max_bytes: u64,
    /// Bytes one source's entries may hold at most. Absent: `max_bytes` divided by the number
    /// of sources with `on_verify_failure: quarantine`, so each is sure of its share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes_per_source: Option<u64>,
    /// Bytes one tenant's entries may hold at most, over all its sources. Absent: `max_bytes`
    /// divided by the number of distinct tenants of those sources (a source without `tenant`
    /// counts as `default`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes_per_tenant: Option<u64>,
    /// Largest body the pen keeps; a hook that fails verification with a larger body is
    /// `413 payload_too_large` and nothing is stored.
    pub max_body_bytes: u64,
    /// Entries older than this (hours, may be fractional) are removed.
    pub retention_hours: f64,
    /// How often the expiry pass runs (ms).
    pub expire_interval_ms: u64,
}

/// `max_body_bytes` by default: 1 MiB, well below `http.max_body_bytes` (8 MB).
pub const DEFAULT_QUARANTINE_BODY_BYTES: u64 = 1 << 20;

impl Default for QuarantineConfig {
    fn default() -> Self {
        QuarantineConfig {
            burst: 100,
            rate: 20.0,
            max_bytes: 1 << 30,
            max_bytes_per_source: None,
            max_bytes_per_tenant: None,
            max_body_bytes: DEFAULT_QUARANTINE_BODY_BYTES,
            retention_hours: 72.0,
            expire_interval_ms: 60_000,
        }
    }
}

/// The byte shares in force (`Config::pen_shares`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PenShares {
    pub per_source: u64,
    pub per_tenant: u64,
}

/// The longest `retention_hours` accepted: a year.
const MAX_RETENTION_HOURS: f64 = 8760.0;

impl QuarantineConfig {
    /// The per-source and per-tenant shares: the configured ones, or the node cap split evenly
    /// over the sources with `on_verify_failure: quarantine` and over their distinct tenants.
    /// `tenants` has one item per such source: its tenant (`default` when it has none).
    pub fn shares<'a>(&self, tenants: impl IntoIterator<Item = &'a str>) -> PenShares {
        let mut n = 0u64;
        let mut distinct = BTreeSet::new();
        for t in tenants {
            n += 1;
            distinct.insert(t);
        }
        let split = |parts: u64| (self.max_bytes / parts.max(1)).max(1);
        PenShares {
            per_source: self.max_bytes_per_source.unwrap_or_else(|| split(n)),
            per_tenant: self
                .max_bytes_per_tenant
                .unwrap_or_else(|| split(distinct.len() as u64)),
        }
    }

    /// `retention_hours` in milliseconds (at least 1).
    pub fn retention_ms(&self) -> u64 {
        ((self.retention_hours * 3_600_000.0).round() as u64).max(1)
    }

    /// Ranges and the shares' relation to the node cap. Messages name the field and the
    /// constraint, never the value.
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let f = |key: &str| format!("{path}.{key}");
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(err(f("rate"), "must be a number > 0"));
        }
        if self.burst == 0 {
            return Err(err(f("burst"), "must be >= 1, got 0"));
        }
        if self.max_bytes == 0 {
            return Err(err(f("max_bytes"), "must be >= 1, got 0"));
        }
        if self.max_body_bytes == 0 {
            return Err(err(f("max_body_bytes"), "must be >= 1"));
        }
        for (key, v) in [
            ("max_bytes_per_source", self.max_bytes_per_source),
            ("max_bytes_per_tenant", self.max_bytes_per_tenant),
        ] {
            match v {
                Some(0) => return Err(err(f(key), "must be >= 1")),
                Some(v) if v > self.max_bytes => {
                    return Err(err(f(key), format!("must be <= {path}.max_bytes")));
                }
                _ => {}
            }
        }
        if !(self.retention_hours.is_finite()
            && self.retention_hours > 0.0
            && self.retention_hours <= MAX_RETENTION_HOURS)
        {
            return Err(err(
                f("retention_hours"),
                "must be a number > 0 and <= 8760",
            ));
        }
        if !(100..=3_600_000).contains(&self.expire_interval_ms) {
            return Err(err(f("expire_interval_ms"), "must be 100..=3600000"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, OnVerifyFailure, SourceConfig};
    use std::collections::BTreeMap;

    fn with(q: &QuarantineConfig, sources: &BTreeMap<String, SourceConfig>) -> Config {
        Config {
            quarantine: q.clone(),
            sources: sources.clone(),
            ..Default::default()
        }
    }

    fn source(tenant: Option<&str>, on_failure: OnVerifyFailure) -> SourceConfig {
        let mut s = SourceConfig::with_sinks(vec![]);
        s.tenant = tenant.map(String::from);
        s.on_verify_failure = on_failure;
        s
    }

    #[test]
    fn defaults_and_yaml() {
        let c: Config = serde_yaml_ng::from_str("quarantine: {burst: 5}").unwrap();
        let q = &c.quarantine;
        assert_eq!((q.burst, q.rate, q.max_bytes), (5, 20.0, 1 << 30));
        assert_eq!(
            (q.max_bytes_per_source, q.max_bytes_per_tenant),
            (None, None)
        );
        assert_eq!(q.max_body_bytes, 1 << 20);
        assert_eq!(q.retention_hours, 72.0);
        assert_eq!(q.retention_ms(), 72 * 3_600_000);
        assert_eq!(q.expire_interval_ms, 60_000);
        q.validate("quarantine").unwrap();
        assert!(serde_yaml_ng::from_str::<Config>("quarantine: {brust: 5}").is_err());
        let c: Config = serde_yaml_ng::from_str(
            "quarantine: {max_bytes_per_source: 7, max_bytes_per_tenant: 9, retention_hours: 0.0003, expire_interval_ms: 100}",
        )
        .unwrap();
        assert_eq!(c.quarantine.max_bytes_per_source, Some(7));
        assert_eq!(c.quarantine.retention_ms(), 1080);
        c.quarantine.validate("quarantine").unwrap();
        // Absent shares stay absent when written back (the derived value is not pinned).
        let back = serde_yaml_ng::to_string(&QuarantineConfig::default()).unwrap();
        assert!(!back.contains("per_source"), "{back}");
    }

    #[test]
    fn shares_split_the_cap_over_quarantine_sources_and_their_tenants() {
        let q = QuarantineConfig {
            max_bytes: 1000,
            ..Default::default()
        };
        let mut sources = BTreeMap::new();
        // None quarantine: the whole cap (there is nothing to share it with).
        assert_eq!(
            with(&q, &sources).pen_shares(),
            PenShares {
                per_source: 1000,
                per_tenant: 1000
            }
        );
        sources.insert("a".into(), source(None, OnVerifyFailure::Quarantine));
        sources.insert(
            "b".into(),
            source(Some("default"), OnVerifyFailure::Quarantine),
        );
        sources.insert(
            "c".into(),
            source(Some("acme"), OnVerifyFailure::Quarantine),
        );
        sources.insert("d".into(), source(Some("beta"), OnVerifyFailure::Reject));
        // Three quarantine sources; tenants default (a, b) and acme: d never writes the pen.
        assert_eq!(
            with(&q, &sources).pen_shares(),
            PenShares {
                per_source: 333,
                per_tenant: 500
            }
        );
        let q = QuarantineConfig {
            max_bytes: 1000,
            max_bytes_per_source: Some(600),
            max_bytes_per_tenant: Some(700),
            ..Default::default()
        };
        assert_eq!(
            with(&q, &sources).pen_shares(),
            PenShares {
                per_source: 600,
                per_tenant: 700
            }
        );
        // A cap smaller than the number of sources still leaves each a byte (and refuses).
        let q = QuarantineConfig {
            max_bytes: 2,
            ..Default::default()
        };
        assert_eq!(with(&q, &sources).pen_shares().per_source, 1);
    }

    #[test]
    fn validation_names_the_field_and_never_the_value() {
        let ok = QuarantineConfig::default();
        let cases: Vec<(QuarantineConfig, &str, &str)> = vec![
            (
                QuarantineConfig {
                    rate: 0.0,
                    ..ok.clone()
                },
                "quarantine.rate",
                "must be a number > 0",
            ),
            (
                QuarantineConfig {
                    rate: f64::NAN,
                    ..ok.clone()
                },
                "quarantine.rate",
                "must be a number > 0",
            ),
            (
                QuarantineConfig {
                    burst: 0,
                    ..ok.clone()
                },
                "quarantine.burst",
                "must be >= 1, got 0",
            ),
            (
                QuarantineConfig {
                    max_bytes: 0,
                    ..ok.clone()
                },
                "quarantine.max_bytes",
                "must be >= 1, got 0",
            ),
            (
                QuarantineConfig {
                    max_bytes_per_source: Some(0),
                    ..ok.clone()
                },
                "quarantine.max_bytes_per_source",
                "must be >= 1",
            ),
            (
                QuarantineConfig {
                    max_bytes_per_source: Some((1 << 30) + 1),
                    ..ok.clone()
                },
                "quarantine.max_bytes_per_source",
                "must be <= quarantine.max_bytes",
            ),
            (
                QuarantineConfig {
                    max_bytes_per_tenant: Some(123_456_789_000),
                    ..ok.clone()
                },
                "quarantine.max_bytes_per_tenant",
                "must be <= quarantine.max_bytes",
            ),
            (
                QuarantineConfig {
                    max_body_bytes: 0,
                    ..ok.clone()
                },
                "quarantine.max_body_bytes",
                "must be >= 1",
            ),
            (
                QuarantineConfig {
                    retention_hours: 0.0,
                    ..ok.clone()
                },
                "quarantine.retention_hours",
                "must be a number > 0 and <= 8760",
            ),
            (
                QuarantineConfig {
                    retention_hours: 9000.5,
                    ..ok.clone()
                },
                "quarantine.retention_hours",
                "must be a number > 0 and <= 8760",
            ),
            (
                QuarantineConfig {
                    retention_hours: f64::INFINITY,
                    ..ok.clone()
                },
                "quarantine.retention_hours",
                "must be a number > 0 and <= 8760",
            ),
            (
                QuarantineConfig {
                    expire_interval_ms: 99,
                    ..ok.clone()
                },
                "quarantine.expire_interval_ms",
                "must be 100..=3600000",
            ),
        ];
        for (q, field, message) in cases {
            let e = q.validate("quarantine").unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{e}");
            assert_eq!(e.message, message, "{e}");
            for v in ["123456789000", "1073741825", "9000.5", "1001", "NaN", "inf"] {
                assert!(!e.to_string().contains(v), "echoes a value: {e}");
            }
        }
        // The bounds themselves pass; a body cap above the node cap is allowed (such a body
        // cannot fit anyway), so a small pen needs no body cap of its own.
        QuarantineConfig {
            max_bytes: 10,
            max_bytes_per_source: Some(10),
            max_bytes_per_tenant: Some(1),
            max_body_bytes: 1 << 20,
            retention_hours: 8760.0,
            expire_interval_ms: 3_600_000,
            ..ok
        }
        .validate("quarantine")
        .unwrap();
    }
}
