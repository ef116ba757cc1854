//! The Services of a Gateway: the headless one (stable DNS names for the pods,
//! `<pod>.<gw>-pods`, every port) and the ingest one (the webhook endpoint, the ingest port
//! only).
//!
//! May import: `resources::names`, `ankusa_crds`.

use ankusa_crds::Gateway;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::resources::names::{headless_service_name, ingest_service_name, meta, selector_labels};

fn port(name: &str, port: u16) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port: port.into(),
        target_port: Some(IntOrString::String(name.into())),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// Headless Service: stable DNS names for the pods (`<pod>.<gw>-pods`).
pub fn headless_service(gw: &Gateway) -> Service {
    Service {
        metadata: meta(gw, headless_service_name(gw)),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(selector_labels(gw)),
            ports: Some(vec![
                port("http", gw.spec.ports.http),
                port("admin", gw.spec.ports.admin),
                port("claims", gw.spec.ports.claims),
            ]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Ingest Service: the webhook endpoint, on the pods' ingest port only.
pub fn ingest_service(gw: &Gateway) -> Service {
    let mut m = meta(gw, ingest_service_name(gw));
    if !gw.spec.service.annotations.is_empty() {
        m.annotations = Some(gw.spec.service.annotations.clone());
    }
    Service {
        metadata: m,
        spec: Some(ServiceSpec {
            type_: Some(
                gw.spec
                    .service
                    .type_
                    .clone()
                    .unwrap_or_else(|| "ClusterIP".into()),
            ),
            selector: Some(selector_labels(gw)),
            ports: Some(vec![port("http", gw.spec.ports.http)]),
            ..Default::default()
        }),
        ..Default::default()
    }
}
