//! The names and labels of everything a Gateway owns, the pods' ordinals, and whether an
//! existing object is this Gateway's own (a controller owner reference to its uid). The leaf
//! every other `resources` module builds on.
//!
//! May import: `ankusa_crds` only.

use std::collections::BTreeMap;

use ankusa_crds::Gateway;
use ankusa_crds::names::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

/// Name of the StatefulSet (and the pods' prefix): the Gateway's name.
pub fn statefulset_name(gw: &Gateway) -> String {
    gw.name_any()
}

/// Name of a direct Gateway's Deployment (and of its HorizontalPodAutoscaler): the Gateway's
/// name, like the StatefulSet of the other modes (a Gateway has one or the other).
pub fn deployment_name(gw: &Gateway) -> String {
    gw.name_any()
}

pub fn headless_service_name(gw: &Gateway) -> String {
    format!("{}-pods", gw.name_any())
}

pub fn ingest_service_name(gw: &Gateway) -> String {
    gw.name_any()
}

pub fn config_secret_name(gw: &Gateway) -> String {
    format!("{}-config", gw.name_any())
}

pub fn admin_token_secret_name(gw: &Gateway) -> String {
    format!("{}-admin-token", gw.name_any())
}

/// The Gateway's admin CA (certificate bundle and key); read by the operator only.
pub fn admin_ca_secret_name(gw: &Gateway) -> String {
    format!("{}-admin-ca", gw.name_any())
}

/// The pods' admin serving certificate, mounted at `ADMIN_TLS_MOUNT`.
pub fn admin_tls_secret_name(gw: &Gateway) -> String {
    format!("{}-admin-tls", gw.name_any())
}

/// Where the pods find their admin certificate.
pub const ADMIN_TLS_MOUNT: &str = "/etc/ankusa-admin-tls";

/// The DNS names of the pods' admin certificate; the first is the name the operator checks.
pub fn admin_tls_names(gw: &Gateway) -> Vec<String> {
    let domain = format!(
        "{}.{}.svc",
        headless_service_name(gw),
        gw.namespace().unwrap_or_default()
    );
    vec![
        domain.clone(),
        format!("*.{domain}"),
        format!("{domain}.cluster.local"),
        format!("*.{domain}.cluster.local"),
    ]
}

pub fn network_policy_name(gw: &Gateway) -> String {
    gw.name_any()
}

/// The PodDisruptionBudget over the pods: the Gateway's name.
pub fn disruption_budget_name(gw: &Gateway) -> String {
    gw.name_any()
}

/// The ServiceMonitor and the PodMonitor: the Gateway's name.
pub fn monitor_name(gw: &Gateway) -> String {
    gw.name_any()
}

/// The Secret a Prometheus scrapes with: `token` (scope `metrics:read`) and `ca.crt`.
pub fn scrape_secret_name(gw: &Gateway) -> String {
    format!("{}-scrape", gw.name_any())
}

/// Key of a pod's config file in the config Secret.
pub fn config_key(pod: &str) -> String {
    format!("{pod}.yaml")
}

/// Pod names of a Gateway for ordinals `0..n`.
pub fn pod_names(gw: &Gateway, n: i32) -> Vec<String> {
    (0..n.max(0))
        .map(|i| format!("{}-{i}", statefulset_name(gw)))
        .collect()
}

/// The ordinal of a pod of this Gateway (`<gw>-<n>`).
pub fn ordinal(gw: &Gateway, pod: &str) -> Option<i32> {
    pod.strip_prefix(&format!("{}-", statefulset_name(gw)))?
        .parse()
        .ok()
}

/// Labels selecting a Gateway's pods (the StatefulSet selector; immutable once created).
pub fn selector_labels(gw: &Gateway) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), "ankusa-gateway".to_string()),
        (INSTANCE_LABEL.to_string(), gw.name_any()),
    ])
}

/// `key=value,...` form of the selector (for `status.selector` and list calls).
pub fn selector_string(gw: &Gateway) -> String {
    selector_labels(gw)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether an existing object is this Gateway's own: it carries a controller owner reference
/// to this Gateway's uid. A name match alone is not ownership: anyone who may create a Service
/// or a Secret in the namespace could have put it there first.
pub fn owned_by(meta: &ObjectMeta, gw: &Gateway) -> bool {
    let Some(uid) = gw.uid() else {
        return false;
    };
    meta.owner_references.as_ref().is_some_and(|refs| {
        refs.iter()
            .any(|r| r.controller == Some(true) && is_gateway_ref(r) && r.uid == uid)
    })
}

/// Whether an owner reference names a Gateway (of any version of its API group).
pub fn is_gateway_ref(r: &OwnerReference) -> bool {
    r.kind == Gateway::kind(&())
        && r.api_version.split_once('/').map(|(group, _)| group) == Some(&*Gateway::group(&()))
}

/// Labels on everything the operator creates for a Gateway.
pub fn object_labels(gw: &Gateway) -> BTreeMap<String, String> {
    let mut l = selector_labels(gw);
    l.insert(GATEWAY_LABEL.into(), gw.name_any());
    l.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    l
}

/// The metadata of an object the operator makes for a Gateway: its labels and the Gateway as
/// controller owner.
pub fn meta(gw: &Gateway, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: gw.namespace(),
        labels: Some(object_labels(gw)),
        owner_references: gw.controller_owner_ref(&()).map(|r| vec![r]),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::{meta, owned_by};
    use crate::testing::object;
    use ankusa_crds::Gateway;

    #[test]
    fn only_a_controller_reference_to_this_gateways_uid_is_ownership() {
        let gw = |uid: &str| -> Gateway {
            object(serde_json::json!({
                "metadata": {"name": "gw", "namespace": "ns", "uid": uid},
                "spec": {},
            }))
        };
        let mine = gw("11111111-2222-3333-4444-555555555555");
        let m = meta(&mine, "gw".into());
        assert!(owned_by(&m, &mine));
        // The same name and labels under a Gateway recreated with another uid, or no reference.
        assert!(!owned_by(&m, &gw("99999999-2222-3333-4444-555555555555")));
        let mut bare = m.clone();
        bare.owner_references = None;
        assert!(!owned_by(&bare, &mine));
        let mut not_controller = m;
        if let Some(r) = not_controller.owner_references.as_mut() {
            r[0].controller = Some(false);
        }
        assert!(!owned_by(&not_controller, &mine));
    }
}
