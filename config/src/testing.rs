//! Fixtures the unit tests of several modules share: a config with one source, and a sink
//! validated as the only sink of a source. Test-only (`#[cfg(test)]` in lib.rs).

use crate::{Config, ConfigError, LogSinkConfig, SinkConfig, SourceConfig, validate};

/// A default config whose one source is `s`, at `sources.s`.
pub(crate) fn with_source(s: SourceConfig) -> Config {
    let mut c = Config::default();
    c.sources.insert("s".into(), s);
    c
}

/// A source whose one sink is the log sink, every other key at its default.
pub(crate) fn log_source() -> SourceConfig {
    SourceConfig::with_sinks(vec![SinkConfig::Log(LogSinkConfig::default())])
}

/// Validates `sink` as the only sink of `sources.src`. The brokers of the sink tests are on
/// loopback, so the egress policy allows loopback (its refusals are validate.rs's tests);
/// `allow_insecure_tls` is `egress.allow_insecure_tls`.
pub(crate) fn check_sink(sink: SinkConfig, allow_insecure_tls: bool) -> Result<(), ConfigError> {
    let mut c = Config::default();
    c.egress.allow_loopback = true;
    c.egress.allow_insecure_tls = allow_insecure_tls;
    c.sources
        .insert("src".into(), SourceConfig::with_sinks(vec![sink]));
    validate(&c)
}
