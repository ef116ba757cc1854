//! Which pods are a Gateway's: those its StatefulSet made, within the ordinals it runs.
//!
//! Labels alone prove nothing: anyone who may create a pod can copy them. A pod counts only
//! when it is named `<gateway>-<n>` (canonical decimal), `n` is below the number of pods the
//! Gateway and its StatefulSet run (`spec.replicas` of both, and the StatefulSet's
//! `status.replicas`, so pods of a scale-down still draining keep their config), and its
//! controller owner reference names that StatefulSet by name and uid. A planted `<gw>-99999`
//! is not polled, and makes the operator render no config for it. (Whoever may create pods in
//! the namespace can mount its Secrets anyway; this keeps such a pod from steering the
//! operator's work or its configs.)
//!
//! A direct Gateway's pods (`spec.durability.mode: direct`) have no ordinals: a pod counts
//! when its controller owner reference names, by name and uid, a ReplicaSet whose own
//! controller owner reference names the Gateway's Deployment by name and uid, its name is that
//! ReplicaSet's name and a suffix, and it is among the oldest `replicas` of that ReplicaSet
//! (the larger of its spec and status counts), so a planted pod claiming the ReplicaSet does
//! not widen the set beyond what the ReplicaSet runs.
//!
//! Also how to reach one of those pods: whether it is ready, and its admin API target with the
//! Gateway's token and TLS trust ([`AdminAccess`]).
//!
//! May import: `admin` (the target type), `context` (the error type), `resources` (names and
//! ownership). The controllers import this module; it imports none of them.

use std::sync::Arc;

use ankusa_crds::Gateway;
use k8s_openapi::Resource as _;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::admin::{AdminTrust, PodTarget};
use crate::context::Result;
use crate::resources;

/// Whether the kubelet reports the pod `Ready`.
pub fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What the operator needs to call a Gateway's pods: its admin token and TLS trust.
#[derive(Clone)]
pub struct AdminAccess {
    pub token: String,
    pub tls: Arc<AdminTrust>,
}

/// Where to reach a pod's admin API, when it runs and has an IP.
pub fn pod_target(p: &Pod, port: u16, access: &AdminAccess) -> Option<PodTarget> {
    if p.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let st = p.status.as_ref()?;
    if st.phase.as_deref() != Some("Running") {
        return None;
    }
    Some(PodTarget {
        name: p.name_any(),
        uid: p.uid().unwrap_or_default(),
        ip: st.pod_ip.clone().filter(|ip| !ip.is_empty())?,
        port,
        token: access.token.clone(),
        tls: Some(access.tls.clone()),
    })
}

/// How many ordinals of the Gateway's pods may exist: the largest of the Gateway's and the
/// StatefulSet's replica counts.
pub fn ordinal_bound(gw: &Gateway, sts: &StatefulSet) -> i32 {
    let spec = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let status = sts.status.as_ref().map_or(0, |s| s.replicas);
    gw.spec.replicas.max(spec).max(status).max(0)
}

/// The ordinal of `<gateway>-<n>`, only in canonical form (`gw-07`, `gw-+7` are not pods of
/// the StatefulSet).
pub fn canonical_ordinal(gw: &Gateway, name: &str) -> Option<i32> {
    let n = resources::ordinal(gw, name)?;
    let suffix = name.rsplit_once('-')?.1;
    (n >= 0 && n.to_string() == suffix).then_some(n)
}

/// Whether `pod` is one of the StatefulSet's pods (see the module header).
pub fn is_gateway_pod(gw: &Gateway, sts: &StatefulSet, pod: &Pod) -> bool {
    let Some(sts_uid) = sts.metadata.uid.as_deref() else {
        return false;
    };
    let owned = pod.owner_references().iter().any(|r| {
        r.controller == Some(true)
            && r.kind == StatefulSet::KIND
            && r.api_version == StatefulSet::API_VERSION
            && r.name == resources::statefulset_name(gw)
            && r.uid == sts_uid
    });
    owned && canonical_ordinal(gw, &pod.name_any()).is_some_and(|n| n < ordinal_bound(gw, sts))
}

/// A Gateway's pods, sorted by name, given its StatefulSet (as read, and checked to be the
/// Gateway's own, by the caller); none without one.
pub async fn gateway_pods_of(
    client: &Client,
    gw: &Gateway,
    sts: Option<&StatefulSet>,
) -> Result<Vec<Pod>> {
    let Some(sts) = sts.filter(|s| resources::owned_by(&s.metadata, gw)) else {
        return Ok(Vec::new());
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), &gw.namespace().unwrap_or_default());
    let mut pods: Vec<Pod> = api
        .list(&ListParams::default().labels(&resources::selector_string(gw)))
        .await?
        .items
        .into_iter()
        .filter(|p| is_gateway_pod(gw, sts, p))
        .collect();
    pods.sort_by_key(|p| p.name_any());
    Ok(pods)
}

/// A Gateway's pods, reading its StatefulSet (or, direct, its Deployment) first.
pub async fn gateway_pods(client: &Client, gw: &Gateway) -> Result<Vec<Pod>> {
    let ns = gw.namespace().unwrap_or_default();
    if gw.is_direct() {
        let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let d = api.get_opt(&resources::deployment_name(gw)).await?;
        return direct_pods_of(client, gw, d.as_ref()).await;
    }
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let sts = api.get_opt(&resources::statefulset_name(gw)).await?;
    gateway_pods_of(client, gw, sts.as_ref()).await
}

/// Whether `owner` is `o`'s controller, by kind, name and uid.
fn controlled_by<K: k8s_openapi::Resource>(
    o: &kube::api::ObjectMeta,
    name: &str,
    uid: &str,
) -> bool {
    o.owner_references.iter().flatten().any(|r| {
        r.controller == Some(true)
            && r.kind == K::KIND
            && r.api_version == K::API_VERSION
            && r.name == name
            && r.uid == uid
    })
}

/// The pods of a direct Gateway given its Deployment (see the module header), sorted by name.
pub async fn direct_pods_of(
    client: &Client,
    gw: &Gateway,
    deployment: Option<&Deployment>,
) -> Result<Vec<Pod>> {
    let Some(d) = deployment.filter(|d| resources::owned_by(&d.metadata, gw)) else {
        return Ok(Vec::new());
    };
    let Some(d_uid) = d.metadata.uid.as_deref() else {
        return Ok(Vec::new());
    };
    let ns = gw.namespace().unwrap_or_default();
    let selector = resources::selector_string(gw);
    let sets: Vec<ReplicaSet> = Api::<ReplicaSet>::namespaced(client.clone(), &ns)
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|rs| controlled_by::<Deployment>(&rs.metadata, &d.name_any(), d_uid))
        .collect();
    let all: Vec<Pod> = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    Ok(pods_of_sets(&sets, all))
}

/// The pods each ReplicaSet controls, at most as many as it runs, oldest first.
fn pods_of_sets(sets: &[ReplicaSet], all: Vec<Pod>) -> Vec<Pod> {
    let mut out = Vec::new();
    for rs in sets {
        let (Some(uid), name) = (rs.metadata.uid.as_deref(), rs.name_any()) else {
            continue;
        };
        let bound = rs
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(0)
            .max(rs.status.as_ref().map_or(0, |s| s.replicas))
            .max(0) as usize;
        let prefix = format!("{name}-");
        let mut mine: Vec<&Pod> = all
            .iter()
            .filter(|p| {
                p.name_any().starts_with(&prefix)
                    && controlled_by::<ReplicaSet>(&p.metadata, &name, uid)
            })
            .collect();
        mine.sort_by_key(|p| (p.metadata.creation_timestamp.clone(), p.name_any()));
        out.extend(mine.into_iter().take(bound).cloned());
    }
    out.sort_by_key(|p| p.name_any());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{controller_ref, object};
    use serde_json::json;

    fn gw(replicas: i32) -> Gateway {
        object(json!({
            "metadata": {"name": "gw", "namespace": "ns", "uid": "g-uid"},
            "spec": {"replicas": replicas},
        }))
    }

    fn sts(spec: i32, status: i32) -> StatefulSet {
        object(json!({
            "metadata": {"name": "gw", "namespace": "ns", "uid": "sts-uid"},
            "spec": {"replicas": spec, "selector": {}, "serviceName": "gw-pods",
                     "template": {}},
            "status": {"replicas": status},
        }))
    }

    fn pod(name: &str, owner_uid: Option<&str>) -> Pod {
        let owners = owner_uid.map(|u| json!([controller_ref::<StatefulSet>("gw", u)]));
        object(json!({
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners,
                         "labels": {"app.kubernetes.io/name": "ankusa-gateway",
                                    "app.kubernetes.io/instance": "gw"}},
        }))
    }

    #[test]
    fn only_the_statefulsets_pods_within_its_ordinals_count() {
        let (g, s) = (gw(3), sts(3, 3));
        assert!(is_gateway_pod(&g, &s, &pod("gw-0", Some("sts-uid"))));
        assert!(is_gateway_pod(&g, &s, &pod("gw-2", Some("sts-uid"))));
        // Planted with the labels and even a forged owner reference, outside the ordinals.
        assert!(!is_gateway_pod(&g, &s, &pod("gw-99999", Some("sts-uid"))));
        assert!(!is_gateway_pod(&g, &s, &pod("gw-3", Some("sts-uid"))));
        // Not canonical, no owner, another owner.
        assert!(!is_gateway_pod(&g, &s, &pod("gw-01", Some("sts-uid"))));
        assert!(!is_gateway_pod(&g, &s, &pod("gw-+1", Some("sts-uid"))));
        assert!(!is_gateway_pod(&g, &s, &pod("gw-1", None)));
        assert!(!is_gateway_pod(&g, &s, &pod("gw-1", Some("other-uid"))));
        assert!(!is_gateway_pod(&g, &s, &pod("gwx-1", Some("sts-uid"))));
    }

    #[test]
    fn pods_of_a_scale_down_still_count_until_the_statefulset_lets_them_go() {
        // The Gateway says 2; the StatefulSet still runs 4.
        let (g, s) = (gw(2), sts(2, 4));
        assert_eq!(ordinal_bound(&g, &s), 4);
        assert!(is_gateway_pod(&g, &s, &pod("gw-3", Some("sts-uid"))));
        assert!(!is_gateway_pod(&g, &s, &pod("gw-4", Some("sts-uid"))));
    }
}
