//! The operator's log output: a `tracing` filter (`RUST_LOG`, else a default that keeps kube's
//! chatter at `warn`) and the line format, `text` (default) or `json` (one object per line),
//! as the gateway's `log.format`. Logs go to stderr; colours only on a terminal.

/// The format of log lines (`--log-format`, env `ANKUSA_OPERATOR_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields`, `target`, ...).
    Json,
}

/// The filter used when `RUST_LOG` is unset or unparsable.
pub const DEFAULT_FILTER: &str = "info,kube=warn,kube_lease_manager=warn";

/// Installs the global subscriber (once; a second call does nothing).
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
