//! `ankusa-operator`: runs the Gateway, Source, Sink and ReplayJob controllers (while holding
//! the leader lease) and serves `/metrics` and `/health`; `ankusa-operator selftest` is what
//! the chart's `helm test` pod runs (`ankusa_operator::selftest`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ankusa_operator::context::{Ctx, Settings};
use ankusa_operator::logging::{self, LogFormat};
use ankusa_operator::{controllers, leader, metrics::Metrics, selftest, server};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "ankusa-operator",
    version,
    about = "Kubernetes operator for Ankusa gateways"
)]
struct Args {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Log line format: `text` or `json` (one JSON object per line).
    #[arg(
        long,
        env = "ANKUSA_OPERATOR_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        global = true
    )]
    log_format: LogFormat,
    /// Image of gateway pods whose Gateway names none.
    #[arg(long, env = "ANKUSA_GATEWAY_IMAGE")]
    gateway_image: Option<String>,
    /// Address of /metrics and /health.
    #[arg(
        long,
        env = "ANKUSA_OPERATOR_METRICS_ADDR",
        default_value = "0.0.0.0:8080"
    )]
    metrics_addr: SocketAddr,
    /// Watch only this namespace (default: all).
    #[arg(long, env = "ANKUSA_WATCH_NAMESPACE")]
    watch_namespace: Option<String>,
    /// Run without leader election (a single replica).
    #[arg(long, env = "ANKUSA_NO_LEADER_ELECTION")]
    no_leader_election: bool,
    #[arg(long, env = "ANKUSA_LEASE_NAME", default_value = "ankusa-operator")]
    lease_name: String,
    /// Namespace of the Lease (default: POD_NAMESPACE, else the client's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    lease_namespace: Option<String>,
    /// This replica's identity in the Lease (default: POD_NAME, else host name + random).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    #[arg(long, default_value_t = 15)]
    lease_duration_seconds: u64,
    #[arg(long, default_value_t = 5)]
    lease_grace_seconds: u64,
    /// Namespace of the operator's own pods: the Gateways' NetworkPolicies admit the admin
    /// port from there (default: POD_NAMESPACE, else the Lease's namespace, else the client's).
    #[arg(long, env = "POD_NAMESPACE")]
    operator_namespace: Option<String>,
    /// Labels of the operator's own pods, `key=value,...`: with --operator-namespace, who may
    /// reach the admin port (the chart passes its pods' selector labels).
    #[arg(
        long,
        env = "ANKUSA_OPERATOR_POD_LABELS",
        default_value = "app.kubernetes.io/name=ankusa-operator",
        value_parser = parse_labels
    )]
    operator_pod_labels: BTreeMap<String, String>,
    /// ServiceAccounts a Gateway may name in spec.podTemplate.serviceAccountName (comma
    /// separated); any other name refuses the Gateway. Default: none (leave it unset).
    #[arg(long, env = "ANKUSA_ALLOWED_SERVICE_ACCOUNTS", value_delimiter = ',')]
    allowed_service_accounts: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Check an installed operator (the chart's `helm test` pod): it answers ready, and the four
    /// CRDs are established, served and discovered. Exit codes: 0 passed, 2 usage, 3 not ready, 4 a
    /// CRD missing or not served, 5 the API server refused or is unreachable.
    Selftest {
        /// The operator's `/ready` URL, e.g. `http://ankusa-ankusa-operator-metrics.ankusa-system.svc:8080/ready`.
        #[arg(long)]
        ready_url: Option<String>,
        /// How long to wait for the operator to answer ready.
        #[arg(long, default_value_t = 60)]
        timeout_seconds: u64,
    },
}

/// `key=value,...` into a map; at least one pair, as an empty pod selector matches every pod.
fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!("{pair:?} is not key=value"));
        };
        if k.trim().is_empty() {
            return Err(format!("{pair:?} has an empty key"));
        }
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    if out.is_empty() {
        return Err("at least one key=value label is needed".into());
    }
    Ok(out)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let args = Args::parse();
    logging::init(args.log_format);
    if let Some(Cmd::Selftest {
        ready_url,
        timeout_seconds,
    }) = &args.cmd
    {
        let opts = selftest::Options {
            ready_url: ready_url.clone(),
            timeout: Duration::from_secs(*timeout_seconds),
        };
        match selftest::run(&opts).await {
            Ok(()) => {
                tracing::info!("selftest passed");
                return Ok(());
            }
            Err(e) => {
                let code = e.exit_code();
                tracing::error!(error = %e, exit_code = code, "selftest failed");
                std::process::exit(code);
            }
        }
    }
    let client = kube::Client::try_default().await?;
    let metrics = Arc::new(Metrics::default());
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "operator".into());
        format!("{host}-{:08x}", fastrand::u32(..))
    });
    let mut settings = Settings::default();
    if let Some(img) = args.gateway_image.clone() {
        settings.gateway_image = img;
    }
    settings.policy = ankusa_operator::resources::Policy {
        operator_namespace: args
            .operator_namespace
            .clone()
            .or_else(|| args.lease_namespace.clone())
            .unwrap_or_else(|| client.default_namespace().to_string()),
        operator_pod_labels: args.operator_pod_labels.clone(),
        allowed_service_accounts: args
            .allowed_service_accounts
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    };
    let ctx = Arc::new(Ctx::new(
        client.clone(),
        metrics.clone(),
        settings,
        identity.clone(),
    ));
    let server = tokio::spawn(server::serve(args.metrics_addr, metrics.clone()));
    let ns = args.watch_namespace.clone();
    tracing::info!(%identity, namespace = ?ns, "ankusa-operator starting");
    if args.no_leader_election {
        metrics.leader.set(1);
        controllers::run(ctx, ns, shutdown_signal()).await;
    } else {
        let lease = leader::LeaseSettings {
            name: args.lease_name.clone(),
            namespace: args
                .lease_namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string()),
            identity,
            duration: args.lease_duration_seconds,
            grace: args.lease_grace_seconds,
        };
        leader::run_when_leader(
            client,
            lease,
            metrics,
            move |stop| {
                let ctx = ctx.clone();
                let ns = ns.clone();
                async move { controllers::run(ctx, ns, leader::stopped(stop)).await }
            },
            shutdown_signal(),
        )
        .await?;
    }
    server.abort();
    // Give in-flight event writes a moment.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}
