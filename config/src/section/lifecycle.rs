//! `lifecycle`: the node's lifecycle and operational events (CloudEvents 1.0), where they go
//! (`sinks`, entries exactly like a source's) and how much of them is kept and sent: the audit
//! trail's bounds (`retention_days`, `max_events`) and the per-type rate ceiling
//! (`max_per_minute`) that keeps an outage from becoming an event storm. Absent: no event is
//! built, kept or sent. What the gateway does with it is `gateway/src/lifecycle/`; the events
//! are docs/lifecycle.md.
//!
//! The sinks' own rules are checked here; what they must agree with in `egress` (TLS, literal
//! addresses) and the refusal under `wal.type: none` are `validate.rs`'s. Imports the leaves
//! and `sinks`.

use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use schemars::JsonSchema;

use crate::error::ConfigError;
use crate::rules::{err, in_range};
use crate::sinks::SinkConfig;

/// Lifecycle events: where they are delivered and the trail's bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LifecycleConfig {
    /// Where each event is delivered, like a source's `sinks` (at least one).
    pub sinks: Vec<SinkConfig>,
    /// Days an event stays in the audit trail (1 to 3650, default 30).
    #[serde(default = "default_retention_days")]
    pub retention_days: u32,
    /// Most events the trail keeps; the oldest go first (1 000 to 10 000 000, default 100 000).
    #[serde(default = "default_max_events")]
    pub max_events: u64,
    /// Most events of one type built per minute (1 to 100 000, default 60); the rest are
    /// dropped and counted (`ankusa_lifecycle_dropped_total{reason="rate"}`).
    #[serde(default = "default_max_per_minute")]
    pub max_per_minute: u32,
    /// Seconds a quarantine count interval lasts (1 to 3600, default 60): the pen's `held`
    /// and `released` counts are emitted once per interval, one event per (tenant, source).
    #[serde(default = "default_count_interval_s")]
    pub count_interval_s: u32,
}

fn default_retention_days() -> u32 {
    30
}

fn default_max_events() -> u64 {
    100_000
}

fn default_max_per_minute() -> u32 {
    60
}

fn default_count_interval_s() -> u32 {
    60
}

impl LifecycleConfig {
    /// A section with these sinks and every bound at its default.
    pub fn with_sinks(sinks: Vec<SinkConfig>) -> Self {
        LifecycleConfig {
            sinks,
            retention_days: default_retention_days(),
            max_events: default_max_events(),
            max_per_minute: default_max_per_minute(),
            count_interval_s: default_count_interval_s(),
        }
    }

    /// `path` is `lifecycle`.
    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        if self.sinks.is_empty() {
            return Err(err(format!("{path}.sinks"), "must list at least one sink"));
        }
        if self.sinks.len() > MAX_SINKS {
            return Err(err(
                format!("{path}.sinks"),
                format!(
                    "must list at most {MAX_SINKS} sinks, got {}",
                    self.sinks.len()
                ),
            ));
        }
        for (i, sink) in self.sinks.iter().enumerate() {
            sink.validate(&format!("{path}.sinks[{i}]"))?;
        }
        in_range(
            &format!("{path}.retention_days"),
            self.retention_days.into(),
            1,
            3650,
        )?;
        in_range(
            &format!("{path}.max_events"),
            self.max_events,
            1_000,
            10_000_000,
        )?;
        in_range(
            &format!("{path}.max_per_minute"),
            self.max_per_minute.into(),
            1,
            100_000,
        )?;
        in_range(
            &format!("{path}.count_interval_s"),
            self.count_interval_s.into(),
            1,
            3600,
        )
    }
}

/// The lifecycle source's sinks share one hook's rows: a handful is plenty.
const MAX_SINKS: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::HttpSinkConfig;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn http() -> SinkConfig {
        let mut h = HttpSinkConfig::new("https://events.example.com/in");
        h.secret = Some(crate::Secrets::one(SECRET));
        SinkConfig::Http(h)
    }

    #[test]
    fn defaults_and_bounds() {
        let c: LifecycleConfig = serde_yaml_ng::from_str(&format!(
            "sinks: [{{type: http, url: 'https://e.example.com/', secret: {SECRET}}}]"
        ))
        .expect("parses");
        assert_eq!(c.retention_days, 30);
        assert_eq!(c.max_events, 100_000);
        assert_eq!(c.max_per_minute, 60);
        assert_eq!(c.count_interval_s, 60);
        c.validate("lifecycle").expect("defaults pass");

        let mut c = LifecycleConfig::with_sinks(vec![http()]);
        c.retention_days = 0;
        let e = c.validate("lifecycle").unwrap_err().to_string();
        assert!(e.contains("lifecycle.retention_days"), "{e}");
        let mut c = LifecycleConfig::with_sinks(vec![http()]);
        c.max_events = 10;
        let e = c.validate("lifecycle").unwrap_err().to_string();
        assert!(e.contains("lifecycle.max_events"), "{e}");
        let mut c = LifecycleConfig::with_sinks(vec![http()]);
        c.max_per_minute = 0;
        let e = c.validate("lifecycle").unwrap_err().to_string();
        assert!(e.contains("lifecycle.max_per_minute"), "{e}");
        let mut c = LifecycleConfig::with_sinks(vec![http()]);
        c.count_interval_s = 3601;
        let e = c.validate("lifecycle").unwrap_err().to_string();
        assert!(e.contains("lifecycle.count_interval_s"), "{e}");
        let c = LifecycleConfig::with_sinks(vec![]);
        let e = c.validate("lifecycle").unwrap_err().to_string();
        assert!(e.contains("lifecycle.sinks"), "{e}");
    }

    #[test]
    fn unknown_keys_are_refused() {
        let r: Result<LifecycleConfig, _> = serde_yaml_ng::from_str(
            "sinks: [{type: http, url: 'https://e.example.com/'}]\nretention: 3",
        );
        assert!(r.is_err());
    }
}
