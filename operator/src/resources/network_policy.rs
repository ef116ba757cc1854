//! The NetworkPolicy around a Gateway's pods (ingress only; egress is the gateway's own
//! `settings.egress`).
//!
//! May import: `resources::{names, policy}`, `ankusa_crds`.

use std::collections::BTreeMap;

use ankusa_crds::Gateway;
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::resources::names::{meta, network_policy_name, selector_labels};
use crate::resources::policy::Policy;

/// The label every namespace carries with its own name (set by the API server since
/// Kubernetes 1.21); NetworkPolicies select namespaces by it.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The namespaces whose pods may redeem claims: `claimCheckNamespaces`, or the Gateway's own.
pub fn claim_check_namespaces(gw: &Gateway) -> Vec<String> {
    match &gw.spec.network_policy.claim_check_namespaces {
        Some(list) => list.clone(),
        None => gw.namespace().into_iter().collect(),
    }
}

fn tcp(port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(port.into())),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// A peer of every pod in the listed namespaces (sorted, deduplicated), or none for an empty
/// list: a rule with an empty `from` would admit everyone.
fn namespaces_peer(names: &[String]) -> Option<NetworkPolicyPeer> {
    let mut values: Vec<String> = names.to_vec();
    values.sort();
    values.dedup();
    (!values.is_empty()).then(|| NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.into(),
                operator: "In".into(),
                values: Some(values),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The NetworkPolicy around a Gateway's pods (ingress only; egress is the gateway's own
/// `settings.egress`): the ingest port from anywhere, the admin port from the operator's pods
/// (it pushes configs carrying secrets there) and the `metricsNamespaces`, the claim-check
/// port from the claim-check namespaces, with a fleet its port from the Gateway's own pods. Any other port of the pods is closed. Ports are
/// numbers, as some network plugins ignore named ports.
pub fn network_policy(gw: &Gateway, policy: &Policy) -> NetworkPolicy {
    let ports = &gw.spec.ports;
    let np = &gw.spec.network_policy;
    let operator = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                NAMESPACE_NAME_LABEL.to_string(),
                policy.operator_namespace.clone(),
            )])),
            ..Default::default()
        }),
        pod_selector: Some(LabelSelector {
            match_labels: Some(policy.operator_pod_labels.clone()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut rules = vec![
        NetworkPolicyIngressRule {
            from: None,
            ports: Some(vec![tcp(ports.http)]),
        },
        NetworkPolicyIngressRule {
            from: Some(
                std::iter::once(operator)
                    .chain(namespaces_peer(&np.metrics_namespaces))
                    .collect(),
            ),
            ports: Some(vec![tcp(ports.admin)]),
        },
    ];
    if let Some(peer) = namespaces_peer(&claim_check_namespaces(gw)) {
        rules.push(NetworkPolicyIngressRule {
            from: Some(vec![peer]),
            ports: Some(vec![tcp(ports.claims)]),
        });
    }
    // With a fleet, its port from the Gateway's own pods only: they forward keyed hooks to
    // each other.
    if gw.has_fleet() {
        rules.push(NetworkPolicyIngressRule {
            from: Some(vec![NetworkPolicyPeer {
                pod_selector: Some(LabelSelector {
                    match_labels: Some(selector_labels(gw)),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ports: Some(vec![tcp(ports.fleet)]),
        });
    }
    NetworkPolicy {
        metadata: meta(gw, network_policy_name(gw)),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector_labels(gw)),
                ..Default::default()
            }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(rules),
            ..Default::default()
        }),
    }
}
