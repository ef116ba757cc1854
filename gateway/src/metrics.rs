//! Prometheus metrics (`ankusa_*`). Labels come only from bounded sets (outcome and reason
//! codes, sink types, error classes); never from a source id or path of a request. The one
//! tenant label, on `ankusa_dispatch_tenant_inflight`, is capped at the 100 tenants holding the
//! most rows.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    pub registry: Registry,
    pub ingest_requests: IntCounterVec,
    pub ingest_refused: IntCounterVec,
    pub ingest_duration_seconds: Histogram,
    pub wal_sync_seconds: Histogram,
    pub commit_batch_records: Histogram,
    pub commit_expired: IntCounter,
    pub commit_queued: IntGauge,
    pub rate_limit_rejected: IntCounter,
    pub verify_failures: IntCounterVec,
    pub config_reloads: IntCounterVec,
    pub config_generation: IntGauge,
    pub store_write_failures: IntCounterVec,
    pub store_reopen: IntCounterVec,
    pub store_corrupt_rows: IntCounter,
    pub store_hooks: IntGauge,
    pub store_hook_bytes: IntGauge,
    pub store_disk_bytes: IntGauge,
    pub queue_pending: IntGauge,
    pub queue_dead: IntGauge,
    pub queue_oldest_due_age_seconds: prometheus::Gauge,
    pub dispatch_running: IntGauge,
    pub dispatch_claimed: IntGauge,
    pub dispatch_claimed_bytes: IntGauge,
    pub dispatch_attempt_duration_seconds: HistogramVec,
    pub dispatch_dead_lettered: IntCounterVec,
    pub dispatch_config_errors: IntCounterVec,
    pub dispatch_attempt_timeouts: IntCounterVec,
    pub dispatch_tenant_inflight: IntGaugeVec,
    pub dispatch_breakers_open: IntGauge,
    pub dispatch_breaker_transitions: IntCounterVec,
    pub dispatch_lanes: IntGauge,
    pub dispatch_lanes_blocked: IntGauge,
    pub dispatch_lane_key_missing: IntCounterVec,
    pub sink_headers_dropped: IntCounterVec,
    pub sink_batch_requests: IntCounterVec,
    pub sink_batch_entries: IntCounterVec,
    pub sink_batch_bisections: IntCounterVec,
    pub sink_batch_refused: IntCounterVec,
    pub http_pools: IntGauge,
    pub http_pool_closed: IntCounterVec,
    pub http_pool_refused: IntCounterVec,
    pub replay_moved: IntCounterVec,
    pub replay_throttled: IntCounterVec,
    pub quarantine_pending: IntGauge,
    pub quarantine_bytes: IntGauge,
    pub quarantine_entries: IntGauge,
    pub http_connections: IntGaugeVec,
    pub http_connections_refused: IntCounterVec,
    pub http_timeouts: IntCounterVec,
    pub archive_pending: IntGauge,
    pub archive_oldest_unarchived_age_seconds: prometheus::Gauge,
    pub archive_failures: IntCounter,
    pub archive_segments: IntCounter,
    pub archive_hooks: IntCounter,
    pub archive_upload_seconds: Histogram,
    pub dlq_rows: IntGauge,
    pub dlq_bytes: IntGauge,
    pub dlq_full: IntGauge,
    pub dlq_oldest_age_seconds: prometheus::Gauge,
    pub dlq_evicted: IntCounterVec,
    pub backup_runs: IntCounterVec,
    pub backup_age_seconds: prometheus::Gauge,
    pub backup_refused: IntCounterVec,
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    r.register(Box::new(g.clone())).expect("unique metric");
    g
}

fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    r.register(Box::new(c.clone())).expect("unique metric");
    c
}

fn counter(r: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric");
    r.register(Box::new(c.clone())).expect("unique metric");
    c
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("valid metric");
    r.register(Box::new(g.clone())).expect("unique metric");
    g
}

fn float_gauge(r: &Registry, name: &str, help: &str) -> prometheus::Gauge {
    let g = prometheus::Gauge::new(name, help).expect("valid metric");
    r.register(Box::new(g.clone())).expect("unique metric");
    g
}

fn histogram(r: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .expect("valid metric");
    r.register(Box::new(h.clone())).expect("unique metric");
    h
}

const LATENCY: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

impl Metrics {
    pub fn new() -> Metrics {
        let r = Registry::new();
        let attempt = HistogramVec::new(
            HistogramOpts::new(
                "ankusa_dispatch_attempt_duration_seconds",
                "Duration of delivery attempts by sink type and result",
            )
            .buckets(vec![0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0]),
            &["sink", "result"],
        )
        .expect("valid metric");
        r.register(Box::new(attempt.clone()))
            .expect("unique metric");
        let tenant_inflight = IntGaugeVec::new(
            Opts::new(
                "ankusa_dispatch_tenant_inflight",
                "Claimed rows of the 100 tenants holding the most",
            ),
            &["tenant"],
        )
        .expect("valid metric");
        r.register(Box::new(tenant_inflight.clone()))
            .expect("unique metric");
        let oldest = prometheus::Gauge::new(
            "ankusa_queue_oldest_due_age_seconds",
            "How late the oldest due delivery row is",
        )
        .expect("valid metric");
        r.register(Box::new(oldest.clone())).expect("unique metric");
        Metrics {
            ingest_requests: counter_vec(
                &r,
                "ankusa_ingest_requests_total",
                "Ingest requests by outcome",
                &["outcome"],
            ),
            ingest_refused: counter_vec(
                &r,
                "ankusa_ingest_refused_total",
                "Ingest requests refused before the body was read or verified",
                &["reason"],
            ),
            ingest_duration_seconds: histogram(
                &r,
                "ankusa_ingest_duration_seconds",
                "Time from request to answer",
                LATENCY.to_vec(),
            ),
            wal_sync_seconds: histogram(
                &r,
                "ankusa_wal_sync_duration_seconds",
                "Duration of a synced group commit (the fsync every ack waits for)",
                LATENCY.to_vec(),
            ),
            commit_batch_records: histogram(
                &r,
                "ankusa_store_commit_batch_records",
                "Records per group commit",
                vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0],
            ),
            commit_expired: counter(
                &r,
                "ankusa_batcher_expired_total",
                "Records refused for waiting past batcher.max_wait_ms",
            ),
            commit_queued: gauge(
                &r,
                "ankusa_batcher_queued",
                "Records waiting for or in a group commit",
            ),
            rate_limit_rejected: counter(
                &r,
                "ankusa_rate_limit_rejected_total",
                "Requests refused by a tenant rate limit",
            ),
            verify_failures: counter_vec(
                &r,
                "ankusa_verify_failures_total",
                "Signature verification failures by scheme",
                &["scheme"],
            ),
            config_reloads: counter_vec(
                &r,
                "ankusa_config_reloads_total",
                "Config reloads by result",
                &["result"],
            ),
            config_generation: gauge(
                &r,
                "ankusa_config_generation",
                "Generation of the loaded config",
            ),
            store_write_failures: counter_vec(
                &r,
                "ankusa_store_write_failures_total",
                "Failed store writes by class",
                &["class"],
            ),
            store_reopen: counter_vec(
                &r,
                "ankusa_store_reopen_total",
                "Store reopens by result",
                &["result"],
            ),
            store_corrupt_rows: counter(
                &r,
                "ankusa_store_corrupt_rows_total",
                "Stored rows that did not decode and were moved to the corrupt index",
            ),
            store_hooks: gauge(
                &r,
                "ankusa_store_hooks",
                "Hooks stored (awaiting delivery or dead-lettered)",
            ),
            store_hook_bytes: gauge(&r, "ankusa_store_hook_bytes", "Body bytes of stored hooks"),
            store_disk_bytes: gauge(
                &r,
                "ankusa_store_disk_bytes",
                "Store size on disk (SST files and memtables)",
            ),
            queue_pending: gauge(
                &r,
                "ankusa_queue_pending",
                "Delivery rows pending or in flight",
            ),
            queue_dead: gauge(&r, "ankusa_queue_dead", "Dead-lettered delivery rows"),
            queue_oldest_due_age_seconds: oldest,
            dispatch_running: gauge(&r, "ankusa_dispatch_running", "Attempts running"),
            dispatch_claimed: gauge(&r, "ankusa_dispatch_claimed", "Claimed, unfinished rows"),
            dispatch_claimed_bytes: gauge(
                &r,
                "ankusa_dispatch_claimed_bytes",
                "Stored size of claimed, unfinished rows",
            ),
            dispatch_attempt_duration_seconds: attempt,
            dispatch_dead_lettered: counter_vec(
                &r,
                "ankusa_dispatch_dead_lettered_total",
                "Rows dead-lettered by sink type",
                &["sink"],
            ),
            dispatch_config_errors: counter_vec(
                &r,
                "ankusa_dispatch_config_errors_total",
                "Permanent config failures by sink type",
                &["sink"],
            ),
            dispatch_attempt_timeouts: counter_vec(
                &r,
                "ankusa_dispatch_attempt_timeouts_total",
                "Attempts cut at dispatch.attempt_timeout_ms",
                &["sink"],
            ),
            dispatch_tenant_inflight: tenant_inflight,
            dispatch_breakers_open: gauge(
                &r,
                "ankusa_dispatch_breakers_open",
                "Circuit breakers open now",
            ),
            dispatch_breaker_transitions: counter_vec(
                &r,
                "ankusa_dispatch_breaker_transitions_total",
                "Breaker transitions",
                &["to"],
            ),
            dispatch_lanes: gauge(&r, "ankusa_dispatch_lanes", "Ordering lanes with a head"),
            dispatch_lanes_blocked: gauge(
                &r,
                "ankusa_dispatch_lanes_blocked",
                "Ordering lanes whose head is waiting for a retry",
            ),
            dispatch_lane_key_missing: counter_vec(
                &r,
                "ankusa_dispatch_lane_key_missing_total",
                "Hooks sent to the keyless lane of an ordered sink",
                &["sink"],
            ),
            sink_headers_dropped: counter_vec(
                &r,
                "ankusa_sink_headers_dropped_total",
                "Forwarded headers dropped at the caps",
                &["reason"],
            ),
            sink_batch_requests: counter_vec(
                &r,
                "ankusa_sink_batch_requests_total",
                "Batch requests sent by batching sinks",
                &["sink"],
            ),
            sink_batch_entries: counter_vec(
                &r,
                "ankusa_sink_batch_entries_total",
                "Entries sent in batches",
                &["sink"],
            ),
            sink_batch_bisections: counter_vec(
                &r,
                "ankusa_sink_batch_bisections_total",
                "Batch splits to find a refused message (Pub/Sub)",
                &["sink"],
            ),
            sink_batch_refused: counter_vec(
                &r,
                "ankusa_sink_batch_refused_total",
                "Deliveries refused at a batcher's queue ceiling",
                &["sink", "reason"],
            ),
            http_pools: gauge(&r, "ankusa_http_pools", "Live HTTP connection pools"),
            http_connections: gauge_vec(
                &r,
                "ankusa_http_connections",
                "Open connections by listener (ingest, admin, claim_check)",
                &["listener"],
            ),
            http_connections_refused: counter_vec(
                &r,
                "ankusa_http_connections_refused_total",
                "Connections answered 503 and closed because the listener was full",
                &["listener"],
            ),
            http_timeouts: counter_vec(
                &r,
                "ankusa_http_timeouts_total",
                "Connections closed by a timeout: header_read (a request head too slow) or idle",
                &["listener", "kind"],
            ),
            http_pool_closed: counter_vec(
                &r,
                "ankusa_http_pool_closed_total",
                "HTTP pools closed",
                &["reason"],
            ),
            http_pool_refused: counter_vec(
                &r,
                "ankusa_http_pool_refused_total",
                "Deliveries refused at a pool ceiling",
                &["scope"],
            ),
            replay_moved: counter_vec(
                &r,
                "ankusa_replay_moved_total",
                "Rows moved back to due by replay jobs",
                &["kind"],
            ),
            replay_throttled: counter_vec(
                &r,
                "ankusa_replay_throttled_total",
                "Replay steps held back",
                &["reason"],
            ),
            quarantine_pending: gauge(
                &r,
                "ankusa_quarantine_pending",
                "Quarantine writes waiting for or in the pen's group commit",
            ),
            quarantine_bytes: gauge(
                &r,
                "ankusa_quarantine_bytes",
                "Bytes the quarantine pen holds (with writes admitted and not yet answered)",
            ),
            quarantine_entries: gauge(
                &r,
                "ankusa_quarantine_entries",
                "Entries the quarantine pen holds",
            ),
            archive_pending: gauge(
                &r,
                "ankusa_queue_archive_pending",
                "Hooks accepted while the archive is on and not yet in an uploaded segment",
            ),
            archive_oldest_unarchived_age_seconds: float_gauge(
                &r,
                "ankusa_archive_oldest_unarchived_age_seconds",
                "Age of the oldest hook waiting for the archive (0 when none waits)",
            ),
            archive_failures: counter(
                &r,
                "ankusa_archive_failures_total",
                "Segment uploads or catalogue commits that failed (retried with backoff)",
            ),
            archive_segments: counter(
                &r,
                "ankusa_archive_segments_total",
                "Segments uploaded and catalogued",
            ),
            archive_hooks: counter(
                &r,
                "ankusa_archive_hooks_total",
                "Hooks archived (in an uploaded, catalogued segment)",
            ),
            archive_upload_seconds: histogram(
                &r,
                "ankusa_archive_upload_seconds",
                "Time to upload one segment and its index",
                vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0],
            ),
            dlq_rows: gauge(&r, "ankusa_dlq_rows", "Dead rows (the DLQ)"),
            dlq_bytes: gauge(&r, "ankusa_dlq_bytes", "Body bytes of dead rows"),
            dlq_full: gauge(
                &r,
                "ankusa_dlq_full",
                "1 while the DLQ is over a queue.dlq bound with nothing archived to evict: new hooks get 503 dlq_full",
            ),
            dlq_oldest_age_seconds: float_gauge(
                &r,
                "ankusa_dlq_oldest_age_seconds",
                "Age of the oldest dead row (0 when none)",
            ),
            dlq_evicted: counter_vec(
                &r,
                "ankusa_dlq_evicted_total",
                "Dead rows evicted by the DLQ's bounds (their hooks archived)",
                &["reason"],
            ),
            backup_runs: counter_vec(
                &r,
                "ankusa_backup_runs_total",
                "Store backups by outcome (ok: LATEST written; failed: LATEST left on the previous one)",
                &["outcome"],
            ),
            backup_age_seconds: float_gauge(
                &r,
                "ankusa_backup_age_seconds",
                "Seconds since the last complete backup (since start when none yet)",
            ),
            backup_refused: counter_vec(
                &r,
                "ankusa_backup_refused_total",
                "Backups refused to protect another writer's backups (foreign_backup, prefix_shared)",
                &["reason"],
            ),
            registry: {
                // Counted inside the sinks' connect guards, read at each scrape.
                let _ = r.register(Box::new(crate::egress_metrics::EgressRefused::new()));
                r
            },
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
