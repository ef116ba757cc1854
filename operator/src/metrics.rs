//! Prometheus metrics of the operator (`/metrics`): reconciles, their duration and errors
//! per controller, calls to the pods' admin API, leadership, and when each Gateway's admin CA
//! expires.

use std::time::Instant;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

pub struct Metrics {
    pub registry: Registry,
    pub reconciles: IntCounterVec,
    pub reconcile_errors: IntCounterVec,
    pub reconcile_duration: HistogramVec,
    pub pod_calls: IntCounterVec,
    pub leader: IntGauge,
    /// The notAfter of each Gateway's current admin CA, as unix seconds.
    pub admin_ca_expiry: IntGaugeVec,
}

impl Default for Metrics {
    fn default() -> Self {
        let registry = Registry::new();
        let reconciles = IntCounterVec::new(
            Opts::new(
                "ankusa_operator_reconcile_total",
                "Reconciles run, by controller",
            ),
            &["controller"],
        )
        .expect("metric");
        let reconcile_errors = IntCounterVec::new(
            Opts::new(
                "ankusa_operator_reconcile_errors_total",
                "Reconciles that failed, by controller and error class",
            ),
            &["controller", "error"],
        )
        .expect("metric");
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new(
                "ankusa_operator_reconcile_duration_seconds",
                "Duration of reconciles, by controller",
            )
            .buckets(vec![
                0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ]),
            &["controller"],
        )
        .expect("metric");
        let pod_calls = IntCounterVec::new(
            Opts::new(
                "ankusa_operator_pod_calls_total",
                "Calls to gateway pods' admin API, by operation and result",
            ),
            &["op", "result"],
        )
        .expect("metric");
        let leader = IntGauge::new(
            "ankusa_operator_leader",
            "1 while this replica holds the leader lease",
        )
        .expect("metric");
        let admin_ca_expiry = IntGaugeVec::new(
            Opts::new(
                "ankusa_operator_admin_ca_expiry_timestamp_seconds",
                "When the current admin CA of a Gateway expires (its notAfter, unix seconds)",
            ),
            &["namespace", "gateway"],
        )
        .expect("metric");
        for c in [
            Box::new(reconciles.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(reconcile_errors.clone()),
            Box::new(reconcile_duration.clone()),
            Box::new(pod_calls.clone()),
            Box::new(leader.clone()),
            Box::new(admin_ca_expiry.clone()),
        ] {
            registry.register(c).expect("register metric");
        }
        Metrics {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_duration,
            pod_calls,
            leader,
            admin_ca_expiry,
        }
    }
}

impl Metrics {
    /// Counts a reconcile and times it until the guard drops.
    pub fn reconcile(&self, controller: &'static str) -> Timer<'_> {
        self.reconciles.with_label_values(&[controller]).inc();
        Timer {
            metrics: self,
            controller,
            start: Instant::now(),
        }
    }

    pub fn error(&self, controller: &str, label: &str) {
        self.reconcile_errors
            .with_label_values(&[controller, label])
            .inc();
    }

    pub fn pod_call<T, E>(&self, op: &str, r: &Result<T, E>) {
        let result = if r.is_ok() { "ok" } else { "error" };
        self.pod_calls.with_label_values(&[op, result]).inc();
    }

    /// Records when a Gateway's current admin CA expires.
    pub fn admin_ca_expires(&self, namespace: &str, gateway: &str, not_after_unix: i64) {
        self.admin_ca_expiry
            .with_label_values(&[namespace, gateway])
            .set(not_after_unix);
    }

    /// Drops a deleted Gateway's series.
    pub fn forget_gateway(&self, namespace: &str, gateway: &str) {
        let _ = self
            .admin_ca_expiry
            .remove_label_values(&[namespace, gateway]);
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("encode metrics");
        String::from_utf8(buf).unwrap_or_default()
    }
}

pub struct Timer<'a> {
    metrics: &'a Metrics,
    controller: &'static str,
    start: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.metrics
            .reconcile_duration
            .with_label_values(&[self.controller])
            .observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::Metrics;

    #[test]
    fn the_admin_ca_expiry_is_exported_per_gateway_and_forgotten_with_it() {
        let m = Metrics::default();
        m.admin_ca_expires("ns", "gw", 2_000_000_000);
        let text = m.render();
        assert!(
            text.contains(
                "ankusa_operator_admin_ca_expiry_timestamp_seconds{gateway=\"gw\",namespace=\"ns\"} 2000000000"
            ),
            "{text}"
        );
        m.forget_gateway("ns", "gw");
        assert!(!m.render().contains("gateway=\"gw\""));
    }
}
