//! The Gateway's Prometheus Operator monitors (`spec.monitoring`): a ServiceMonitor over the
//! headless Service `<gateway>-pods` (the only Service with the admin port) and a PodMonitor
//! over the pods, both scraping the admin port's `/metrics` over HTTPS. The CA that verifies
//! the pods' certificate and the scrape token come from the Secret `<gateway>-scrape`
//! (`ca.crt`, `token`: scope `metrics:read` only); `serverName` is the first DNS name of the
//! pods' admin certificate, since Prometheus dials the pod IP. JSON objects of
//! `monitoring.coreos.com/v1` (no Rust types exist for them).
//!
//! May import: `resources::names`, `ankusa_crds`.

use ankusa_crds::{Gateway, MonitorSpec};
use serde_json::{Value, json};

use crate::resources::names::{
    admin_tls_names, meta, monitor_name, object_labels, scrape_secret_name, selector_labels,
};

/// The API group and version of the monitors.
pub const MONITORING_GROUP: &str = "monitoring.coreos.com";
pub const MONITORING_VERSION: &str = "v1";

/// The two monitor kinds: (kind, plural, the field listing the endpoints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MonitorKind {
    ServiceMonitor,
    PodMonitor,
}

impl MonitorKind {
    pub const ALL: [MonitorKind; 2] = [MonitorKind::ServiceMonitor, MonitorKind::PodMonitor];

    pub fn kind(self) -> &'static str {
        match self {
            MonitorKind::ServiceMonitor => "ServiceMonitor",
            MonitorKind::PodMonitor => "PodMonitor",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            MonitorKind::ServiceMonitor => "servicemonitors",
            MonitorKind::PodMonitor => "podmonitors",
        }
    }

    /// The Gateway's spec of this monitor.
    pub fn spec(self, gw: &Gateway) -> &MonitorSpec {
        match self {
            MonitorKind::ServiceMonitor => &gw.spec.monitoring.service_monitor,
            MonitorKind::PodMonitor => &gw.spec.monitoring.pod_monitor,
        }
    }
}

/// One scrape endpoint: the admin port, HTTPS, the CA and token of the scrape Secret.
fn endpoint(gw: &Gateway, spec: &MonitorSpec) -> Value {
    let secret = scrape_secret_name(gw);
    let mut ep = json!({
        "port": "admin",
        "path": "/metrics",
        "scheme": "https",
        "tlsConfig": {
            "ca": {"secret": {"name": secret, "key": "ca.crt"}},
            "serverName": admin_tls_names(gw).remove(0),
        },
        "authorization": {
            "type": "Bearer",
            "credentials": {"name": secret, "key": "token"},
        },
    });
    if let Some(i) = &spec.interval {
        ep["interval"] = json!(i);
    }
    ep
}

/// The monitor of `kind` for the Gateway, as its spec asks (whether enabled is the caller's).
pub fn monitor(gw: &Gateway, kind: MonitorKind) -> Result<Value, String> {
    let spec = kind.spec(gw);
    let mut m = meta(gw, monitor_name(gw));
    let mut labels = spec.labels.clone();
    labels.extend(object_labels(gw));
    m.labels = Some(labels);
    let metadata = serde_json::to_value(m).map_err(|e| format!("{} metadata: {e}", kind.kind()))?;
    let ns = gw.metadata.namespace.clone().unwrap_or_default();
    let body = match kind {
        MonitorKind::ServiceMonitor => json!({
            // Both Services carry these labels; only the headless one has the admin port.
            "selector": {"matchLabels": object_labels(gw)},
            "namespaceSelector": {"matchNames": [ns]},
            "endpoints": [endpoint(gw, spec)],
        }),
        MonitorKind::PodMonitor => json!({
            "selector": {"matchLabels": selector_labels(gw)},
            "namespaceSelector": {"matchNames": [ns]},
            "podMetricsEndpoints": [endpoint(gw, spec)],
        }),
    };
    Ok(json!({
        "apiVersion": format!("{MONITORING_GROUP}/{MONITORING_VERSION}"),
        "kind": kind.kind(),
        "metadata": metadata,
        "spec": body,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::services::{headless_service, ingest_service};
    use crate::testing::object;

    fn gw() -> Gateway {
        object(json!({
            "metadata": {"name": "gw", "namespace": "ns", "uid": "g-uid"},
            "spec": {"monitoring": {
                "serviceMonitor": {"enabled": true, "interval": "15s", "labels": {"release": "prom", "app.kubernetes.io/name": "spoof"}},
                "podMonitor": {"enabled": true},
            }},
        }))
    }

    fn matches(selector: &Value, labels: &std::collections::BTreeMap<String, String>) -> bool {
        selector["matchLabels"]
            .as_object()
            .unwrap()
            .iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
    }

    #[test]
    fn the_service_monitor_scrapes_the_admin_port_over_tls_with_the_scrape_secret() {
        let g = gw();
        let sm = monitor(&g, MonitorKind::ServiceMonitor).unwrap();
        assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(sm["kind"], "ServiceMonitor");
        assert_eq!(sm["metadata"]["name"], "gw");
        assert_eq!(sm["metadata"]["ownerReferences"][0]["uid"], "g-uid");
        // The user's labels are added; the operator's own win.
        assert_eq!(sm["metadata"]["labels"]["release"], "prom");
        assert_eq!(
            sm["metadata"]["labels"]["app.kubernetes.io/name"],
            "ankusa-gateway"
        );
        let ep = &sm["spec"]["endpoints"][0];
        assert_eq!(ep["port"], "admin");
        assert_eq!(ep["path"], "/metrics");
        assert_eq!(ep["scheme"], "https");
        assert_eq!(ep["interval"], "15s");
        assert_eq!(ep["tlsConfig"]["ca"]["secret"]["name"], "gw-scrape");
        assert_eq!(ep["tlsConfig"]["ca"]["secret"]["key"], "ca.crt");
        assert_eq!(ep["tlsConfig"]["serverName"], "gw-pods.ns.svc");
        assert_eq!(ep["authorization"]["type"], "Bearer");
        assert_eq!(ep["authorization"]["credentials"]["name"], "gw-scrape");
        assert_eq!(ep["authorization"]["credentials"]["key"], "token");
        // It selects the Services; only the headless one has a port named `admin`.
        let sel = &sm["spec"]["selector"];
        let headless = headless_service(&g);
        assert!(matches(sel, headless.metadata.labels.as_ref().unwrap()));
        let port_names = |s: &k8s_openapi::api::core::v1::Service| -> Vec<String> {
            s.spec
                .as_ref()
                .unwrap()
                .ports
                .as_ref()
                .unwrap()
                .iter()
                .filter_map(|p| p.name.clone())
                .collect()
        };
        assert!(port_names(&headless).contains(&"admin".to_string()));
        assert!(!port_names(&ingest_service(&g)).contains(&"admin".to_string()));
        assert_eq!(sm["spec"]["namespaceSelector"]["matchNames"][0], "ns");
    }

    #[test]
    fn the_pod_monitor_selects_the_pods_and_has_no_interval_unless_given() {
        let g = gw();
        let pm = monitor(&g, MonitorKind::PodMonitor).unwrap();
        assert_eq!(pm["kind"], "PodMonitor");
        let ep = &pm["spec"]["podMetricsEndpoints"][0];
        assert_eq!(ep["port"], "admin");
        assert!(ep.get("interval").is_none());
        assert_eq!(ep["authorization"]["credentials"]["key"], "token");
        let sts = crate::resources::statefulset::statefulset(&g, "img");
        let pod_labels = sts.spec.unwrap().template.metadata.unwrap().labels.unwrap();
        assert!(matches(&pm["spec"]["selector"], &pod_labels));
    }
}
