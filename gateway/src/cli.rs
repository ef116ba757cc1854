//! The `ankusa` command line. Exit codes: 0 success, 78 (EX_CONFIG) a config refused,
//! 1 anything else (a store that will not open, a port in use, missing ids).

use std::io::BufRead;
use std::path::PathBuf;

use ankusa_config::{ConfigError, EXIT_CONFIG, Loaded};
use ankusa_store::store_path;
use clap::{Parser, Subcommand};

use crate::app::{ConfigSource, EMBEDDED_CONFIG};

#[derive(Parser)]
#[command(name = "ankusa", version, about = "Ankusa webhook ingestion gateway")]
struct Cli {
    /// Config file; without it (and without ANKUSA_CONFIG) the embedded demo config runs.
    #[arg(long, short, env = "ANKUSA_CONFIG", global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the gateway (the default).
    Run,
    /// Load and validate the config, print a summary; exit 78 if it is refused.
    CheckConfig,
    /// Print the effective config with secrets redacted.
    PrintConfig {
        #[arg(long, default_value = "yaml", value_parser = ["yaml", "json"])]
        format: String,
    },
    /// Offline store tools (the gateway must not be running on the same data dir).
    Store {
        #[command(subcommand)]
        cmd: StoreCmd,
    },
}

#[derive(Subcommand)]
enum StoreCmd {
    /// Reads hook ids (one per line) from FILE and reports those not stored; exit 1 if any.
    CheckIds { file: PathBuf },
    /// Prints counters of the store.
    Stats,
    /// Reads every row and reports those that do not decode (JSON on stdout); exit 1 if any.
    /// Changes nothing unless `--repair`, which moves them to the corrupt index.
    Check {
        #[arg(long)]
        repair: bool,
    },
}

fn load(path: Option<&PathBuf>) -> Result<(Loaded, ConfigSource), ConfigError> {
    match path {
        Some(p) => ankusa_config::load_file(p).map(|l| (l, ConfigSource::File(p.clone()))),
        None => {
            let lookup = ankusa_config::interpolate::SystemLookup;
            let file = ankusa_config::from_yaml_str(EMBEDDED_CONFIG, &lookup)?;
            let file_hash = file.hash();
            let mut config = file;
            ankusa_config::apply_env_overrides(&mut config, &lookup)?;
            ankusa_config::validate(&config)?;
            Ok((Loaded { config, file_hash }, ConfigSource::Embedded))
        }
    }
}

/// The log lines (`log`), and with `telemetry.otlp` the OpenTelemetry layer of `provider`. The
/// spans exported over OTLP (`telemetry::TARGET`) never reach the log lines.
fn init_tracing(
    c: &ankusa_config::Config,
    provider: Option<&opentelemetry_sdk::trace::SdkTracerProvider>,
) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer, Registry};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::try_new(&c.log.level).unwrap_or_else(|_| EnvFilter::new("info"))
    });
    let filter = match format!("{}=off", crate::telemetry::TARGET).parse() {
        Ok(d) => filter.add_directive(d),
        Err(_) => filter,
    };
    // Colours only on a terminal: a container's log (kubectl logs, a log shipper) gets plain text.
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = Vec::with_capacity(2);
    layers.push(match c.log.format {
        ankusa_config::LogFormat::Json => fmt.json().with_filter(filter).boxed(),
        ankusa_config::LogFormat::Text => fmt.with_filter(filter).boxed(),
    });
    if let Some(p) = provider {
        layers.push(crate::telemetry::layer(p).boxed());
    }
    let _ = tracing_subscriber::registry().with(layers).try_init();
}

pub fn main() -> i32 {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let cli = Cli::parse();
    let (loaded, source) = match load(cli.config.as_ref()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("ankusa: config refused: {e}");
            return EXIT_CONFIG;
        }
    };
    // From here on no sink (nor the intake client) reads the gateway's own files: the config
    // file and its directory, the admin TLS directories, the data dir (`ankusa_sinks::files`).
    ankusa_sinks::files::protect(ankusa_config::OwnFiles::of(
        &loaded.config,
        cli.config.as_deref(),
    ));
    match cli.cmd.unwrap_or(Cmd::Run) {
        Cmd::CheckConfig => {
            // Build what `run` builds from the config, in check mode (`build_check`), so
            // anything `run` would refuse at start is refused here too.
            if let Err(e) = build_check(&loaded) {
                eprintln!("ankusa: config refused: {e}");
                return EXIT_CONFIG;
            }
            let c = &loaded.config;
            let sources: Vec<&str> = c.sources.keys().map(String::as_str).collect();
            let roles: Vec<String> = c
                .node
                .roles
                .iter()
                .map(|r| format!("{r:?}").to_lowercase())
                .collect();
            println!(
                "config OK: roles=[{}] sources={} store={} hash={}",
                roles.join(", "),
                sources.join(","),
                store_path(c).display(),
                loaded.file_hash
            );
            0
        }
        Cmd::PrintConfig { format } => {
            let v = ankusa_config::redacted_json(&loaded.config);
            if format == "json" {
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            } else {
                print!("{}", serde_yaml_ng::to_string(&v).unwrap_or_default());
            }
            0
        }
        Cmd::Store { cmd } => store_cmd(&loaded, cmd),
        Cmd::Run => {
            // Built before the runtime: the exporter's blocking client must not be made in it.
            let provider = match crate::telemetry::provider(&loaded.config) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("ankusa: config refused: {e}");
                    return EXIT_CONFIG;
                }
            };
            init_tracing(&loaded.config, provider.as_ref());
            // The checks `check-config` runs, first: a config error refuses the start before
            // the store is opened or anything contacted (a backup restore, a broker), so it is
            // never hidden behind a failure of those. The start builds the same components
            // again, through the same functions.
            if let Err(e) = build_check(&loaded) {
                tracing::error!(error = %e, "config refused");
                eprintln!("ankusa: config refused: {e}");
                return EXIT_CONFIG;
            }
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("ankusa: cannot start the runtime: {e}");
                    return 1;
                }
            };
            let result = rt.block_on(crate::app::run(loaded.config, loaded.file_hash, source));
            // After a graceful stop (or a failure): send the spans still queued.
            if let Some(p) = provider {
                crate::telemetry::shutdown(p);
            }
            match result {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!(error = %e, "ankusa failed");
                    eprintln!("ankusa: {e:#}");
                    if refused(&e) { EXIT_CONFIG } else { 1 }
                }
            }
        }
    }
}

/// `check-config`: builds, in check mode, everything `run` builds from the config, through
/// the same functions its start calls, stopping before anything is contacted or created on
/// disk: the OTLP span exporter (`telemetry::check`), the backup target (`backup::target`, also the boot restore's), the archive's and the claim
/// check's blob stores and its TokenReview client (CA bundle, API server address), the fleet's certificates (`fleet::check`), the intake log's client settings (`intake::check`; no client is created, nothing
/// connects), the sources' verifiers and sinks (`Live::build`), and the admin listener's TLS
/// acceptor. So whatever `run` refuses at start as a config error (exit 78, `refused`), this
/// refuses too: `gateway/tests/check_config_parity.rs` compares the two over generated configs.
fn build_check(loaded: &Loaded) -> Result<(), ConfigError> {
    let c = &loaded.config;
    crate::telemetry::check(c)?;
    crate::backup::check(c)?;
    if let Some(storage) = &c.storage {
        crate::archive::blob_store(storage)?;
    }
    if let (true, Some(block)) = (c.claim_check.enabled, &c.claim_check.store) {
        crate::claim_check::store_of(block)?;
    }
    if let (true, Some(review)) = (c.claim_check.enabled, &c.claim_check.token_review) {
        crate::claim_check::TokenReviewer::new(
            review,
            crate::metrics::ClaimMetrics::unregistered(),
        )?;
    }
    // `run` starts the intake log under these conditions only.
    if let (ankusa_config::WalType::Dual, Some(intake)) = (&c.wal.wal_type, &c.intake) {
        crate::intake::check(intake)?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ConfigError::general(e.to_string()))?;
    rt.block_on(async {
        let pools = ankusa_sinks::http::HttpPools::new(&c.egress.pools);
        let sinks = ankusa_sinks::SinkBuilder::with_pools(pools);
        crate::live::Live::build(c.clone(), loaded.file_hash.clone(), 1, &sinks).map(|_| ())
    })?;
    if c.admin.enabled
        && let Some(t) = &c.admin.tls
    {
        // The error names the field and the failure, never a file's content.
        crate::tls::ReloadingCert::load(t)
            .and_then(|cert| cert.acceptor())
            .map_err(|e| ConfigError::general(e.to_string()))?;
    }
    // `run` builds the fleet's client and listener under these conditions only.
    if let Some(f) = &c.fleet
        && c.has_role(ankusa_config::Role::Edge)
        && c.wal.wal_type != ankusa_config::WalType::None
    {
        crate::fleet::check(f).map_err(|e| ConfigError::general(e.to_string()))?;
    }
    Ok(())
}

/// Whether `run` failed on its config (exit 78): what `check-config` refuses as well.
fn refused(e: &anyhow::Error) -> bool {
    e.downcast_ref::<ConfigError>().is_some()
        || e.downcast_ref::<crate::tls::TlsError>().is_some()
        || e.downcast_ref::<crate::backup::RestoreError>()
            .is_some_and(|r| r.is_config())
}

fn store_cmd(loaded: &Loaded, cmd: StoreCmd) -> i32 {
    let path = store_path(&loaded.config);
    let opened = match cmd {
        StoreCmd::Check { repair: false } => ankusa_store::Store::open_read_only(&path),
        _ => ankusa_store::Store::open(&path),
    };
    let store = match opened {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ankusa: {e}");
            return 1;
        }
    };
    match cmd {
        StoreCmd::Check { repair } => match store.check(repair) {
            Ok(report) => {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
                for d in &report.damaged {
                    eprintln!(
                        "damaged: {} {} ({}){}",
                        d.family,
                        d.key,
                        d.error,
                        if repair { ", set aside" } else { "" }
                    );
                }
                i32::from(!report.damaged.is_empty())
            }
            Err(e) => {
                eprintln!("ankusa: store check failed: {e}");
                2
            }
        },
        StoreCmd::Stats => {
            // A counter that cannot be read prints as -1; the rest is still worth seeing.
            let totals = store.totals().ok();
            let get = |f: fn(&ankusa_store::Totals) -> i64| totals.as_ref().map_or(-1, f);
            println!(
                "{}",
                serde_json::json!({
                    "next_seq": store.next_seq(),
                    "hooks": get(|t| t.hooks),
                    "pending": get(|t| t.pending),
                    "dead": get(|t| t.dead),
                    "rows": store.scan_row_states().ok(),
                })
            );
            0
        }
        StoreCmd::CheckIds { file } => {
            let f = match std::fs::File::open(&file) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("ankusa: cannot read {}: {e}", file.display());
                    return 1;
                }
            };
            let (mut checked, mut missing) = (0u64, 0u64);
            for line in std::io::BufReader::new(f).lines().map_while(Result::ok) {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                checked += 1;
                let found = uuid::Uuid::parse_str(line)
                    .ok()
                    .map(|id| store.get_hook_by_id(&id))
                    .transpose();
                match found {
                    Ok(Some(Some(_))) => {}
                    Ok(_) => {
                        missing += 1;
                        println!("missing {line}");
                    }
                    Err(e) => {
                        eprintln!("ankusa: store read failed: {e}");
                        return 1;
                    }
                }
            }
            println!("checked {checked} ids, {missing} missing");
            i32::from(missing > 0)
        }
    }
}
