//! `Metrics::dispatch`: attempts, claims, breakers and ordering lanes of the scheduler.

use prometheus::{
    HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use super::register::{counter_vec, gauge};

pub struct DispatchMetrics {
    pub running: IntGauge,
    pub claimed: IntGauge,
    pub claimed_bytes: IntGauge,
    pub attempt_duration_seconds: HistogramVec,
    pub dead_lettered: IntCounterVec,
    pub config_errors: IntCounterVec,
    pub attempt_timeouts: IntCounterVec,
    pub tenant_inflight: IntGaugeVec,
    pub breakers_open: IntGauge,
    pub breaker_transitions: IntCounterVec,
    pub lanes: IntGauge,
    pub lanes_blocked: IntGauge,
    pub tenants_waiting: IntGauge,
    pub lane_key_missing: IntCounterVec,
}

impl DispatchMetrics {
    pub fn new(r: &Registry) -> DispatchMetrics {
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
        DispatchMetrics {
            running: gauge(r, "ankusa_dispatch_running", "Attempts running"),
            claimed: gauge(r, "ankusa_dispatch_claimed", "Claimed, unfinished rows"),
            claimed_bytes: gauge(
                r,
                "ankusa_dispatch_claimed_bytes",
                "Stored size of claimed, unfinished rows",
            ),
            attempt_duration_seconds: attempt,
            dead_lettered: counter_vec(
                r,
                "ankusa_dispatch_dead_lettered_total",
                "Rows dead-lettered by sink type",
                &["sink"],
            ),
            config_errors: counter_vec(
                r,
                "ankusa_dispatch_config_errors_total",
                "Permanent config failures by sink type",
                &["sink"],
            ),
            attempt_timeouts: counter_vec(
                r,
                "ankusa_dispatch_attempt_timeouts_total",
                "Attempts cut at dispatch.attempt_timeout_ms",
                &["sink"],
            ),
            tenant_inflight,
            breakers_open: gauge(
                r,
                "ankusa_dispatch_breakers_open",
                "Circuit breakers open now",
            ),
            breaker_transitions: counter_vec(
                r,
                "ankusa_dispatch_breaker_transitions_total",
                "Breaker transitions",
                &["to"],
            ),
            lanes: gauge(r, "ankusa_dispatch_lanes", "Ordering lanes with a head"),
            lanes_blocked: gauge(
                r,
                "ankusa_dispatch_lanes_blocked",
                "Ordering lanes whose head is waiting for a retry",
            ),
            tenants_waiting: gauge(
                r,
                "ankusa_dispatch_tenants_waiting_destination",
                "Tenants with rows due that wait for a full shared destination",
            ),
            lane_key_missing: counter_vec(
                r,
                "ankusa_dispatch_lane_key_missing_total",
                "Hooks sent to the keyless lane of an ordered sink",
                &["sink"],
            ),
        }
    }
}
