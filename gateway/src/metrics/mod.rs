//! Prometheus metrics (`ankusa_*`). Labels come only from bounded sets (outcome and reason
//! codes, sink types, error classes); never from a source id or path of a request. The one
//! tenant label, on `ankusa_dispatch_tenant_inflight`, is capped at the 100 tenants holding the
//! most rows.
//!
//! `Metrics` is the registry and one group of series per subsystem, each in a file named for it
//! (`ingest`, `commit`, `store`, `dispatch`, ...; `register` makes and registers a series);
//! `collect` refreshes, at scrape time, the series whose values are kept elsewhere.

mod archive;
mod backup;
mod claims;
pub mod collect;
mod commit;
mod config;
mod direct;
mod dispatch;
mod dlq;
mod filters;
mod fleet;
mod ingest;
mod lifecycle;
mod listeners;
pub mod node;
mod quarantine;
mod register;
mod replay;
mod sinks;
mod store;

use prometheus::{Encoder, Registry, TextEncoder};

pub use archive::ArchiveMetrics;
pub use backup::BackupMetrics;
pub use claims::ClaimMetrics;
pub use commit::CommitMetrics;
pub use config::ConfigMetrics;
pub use direct::DirectMetrics;
pub use dispatch::DispatchMetrics;
pub use dlq::DlqMetrics;
pub use filters::FilterMetrics;
pub use fleet::FleetMetrics;
pub use ingest::IngestMetrics;
pub use lifecycle::LifecycleMetrics;
pub use listeners::ListenerMetrics;
pub use node::NodeMetrics;
pub use quarantine::QuarantineMetrics;
pub use replay::ReplayMetrics;
pub use sinks::SinkMetrics;
pub use store::StoreMetrics;

/// The registry and every series, one struct per subsystem (the way `intake/metrics.rs` keeps
/// the intake's): a subsystem reads and writes its own group.
pub struct Metrics {
    pub registry: Registry,
    pub ingest: IngestMetrics,
    pub commit: CommitMetrics,
    pub config: ConfigMetrics,
    pub store: StoreMetrics,
    pub dispatch: DispatchMetrics,
    pub direct: DirectMetrics,
    pub sinks: SinkMetrics,
    pub listeners: ListenerMetrics,
    pub replay: ReplayMetrics,
    pub quarantine: QuarantineMetrics,
    pub archive: ArchiveMetrics,
    pub dlq: DlqMetrics,
    pub backup: BackupMetrics,
    pub node: NodeMetrics,
    pub lifecycle: LifecycleMetrics,
    pub fleet: FleetMetrics,
    pub claims: ClaimMetrics,
    pub filters: FilterMetrics,
}

impl Metrics {
    pub fn new() -> Metrics {
        let r = Registry::new();
        // Counted inside the sinks' connect guards, read at each scrape.
        let _ = r.register(Box::new(crate::egress_metrics::EgressRefused::new()));
        Metrics {
            ingest: IngestMetrics::new(&r),
            commit: CommitMetrics::new(&r),
            config: ConfigMetrics::new(&r),
            store: StoreMetrics::new(&r),
            dispatch: DispatchMetrics::new(&r),
            direct: DirectMetrics::new(&r),
            sinks: SinkMetrics::new(&r),
            listeners: ListenerMetrics::new(&r),
            replay: ReplayMetrics::new(&r),
            quarantine: QuarantineMetrics::new(&r),
            archive: ArchiveMetrics::new(&r),
            dlq: DlqMetrics::new(&r),
            backup: BackupMetrics::new(&r),
            node: NodeMetrics::new(&r),
            lifecycle: LifecycleMetrics::new(&r),
            fleet: FleetMetrics::new(&r),
            claims: ClaimMetrics::new(&r),
            filters: FilterMetrics::new(&r),
            registry: r,
        }
    }
    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
