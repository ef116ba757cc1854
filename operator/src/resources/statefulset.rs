//! The StatefulSet of a disk or dual Gateway: one pod per ordinal, each with its own data
//! volume, reading `/etc/ankusa/<pod>.yaml` from the config Secret (hot-reloaded on change, no
//! restart), on the shared pod template (`pod_template`); the durability digest on that
//! template; what of an existing StatefulSet must be kept (volume claim templates are
//! immutable); and the digest of the restart-pinned sections of the rendered config
//! (`restart_fingerprint`), so a change the gateway applies only at start rolls the pods.
//!
//! May import: `resources::{names, pod_template}`, `ankusa_crds`, `ankusa_config` (the
//! config's types only).

use std::collections::BTreeMap;

use ankusa_crds::Gateway;
use ankusa_crds::names::*;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::resources::names::{
    headless_service_name, meta, object_labels, selector_labels, statefulset_name,
};
use crate::resources::pod_template::{annotation, pod_template, set_annotation};

/// The data volume's claim template.
fn data_claim(gw: &Gateway) -> PersistentVolumeClaim {
    let spec = &gw.spec;
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(DATA_VOLUME.into()),
            labels: Some(object_labels(gw)),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: spec.storage.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(spec.storage.size.clone()),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The StatefulSet: one pod per ordinal, each with its own data volume, reading
/// `/etc/ankusa/<pod>.yaml` from the config Secret (hot-reloaded on change, no restart).
pub fn statefulset(gw: &Gateway, default_image: &str) -> StatefulSet {
    let spec = &gw.spec;
    StatefulSet {
        metadata: meta(gw, statefulset_name(gw)),
        spec: Some(StatefulSetSpec {
            replicas: Some(spec.replicas),
            service_name: Some(headless_service_name(gw)),
            // Pods are independent nodes: start and replace them in parallel.
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                ..Default::default()
            }),
            selector: LabelSelector {
                match_labels: Some(selector_labels(gw)),
                ..Default::default()
            },
            template: pod_template(gw, default_image),
            volume_claim_templates: Some(vec![data_claim(gw)]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Annotation on the pod template: a keyed digest of the pods' durability settings
/// (`render::durability::durability_fingerprint`); when it changes, the pods roll.
pub const DURABILITY_ANNOTATION: &str = "ankusa.dev/durability";

/// Sets (or, for `None`, removes) the durability digest on the StatefulSet's pod template.
pub fn set_durability_fingerprint(sts: &mut StatefulSet, fingerprint: Option<&str>) {
    set_template_annotation(sts, DURABILITY_ANNOTATION, fingerprint);
}

/// The durability digest an existing StatefulSet's pod template carries.
pub fn durability_fingerprint_of(sts: &StatefulSet) -> Option<String> {
    template_annotation(sts, DURABILITY_ANNOTATION)
}

/// Annotation on the pod template: a keyed digest of the restart-pinned sections of the
/// Gateway's rendered config (`restart_fingerprint`); when it changes, the pods roll.
pub const RESTART_ANNOTATION: &str = "ankusa.dev/restart-pinned";

/// The config keys a running gateway reads only at start: a hot reload that changes one keeps
/// its running value and reports it in `restart_required` (the gateway's
/// `live::ConfigHandle::pin_start_fields`, which `operator/tests/render.rs` checks this list
/// against). `node.instance` is there too, but differs per pod by design and is fixed by the
/// pod's name, so it is not part of the digest.
pub const RESTART_PINNED: &[&str] = &[
    "node.data_dir",
    "node.roles",
    "http.ip",
    "http.port",
    "admin.enabled",
    "admin.ip",
    "admin.port",
    "admin.connections",
    "admin.tls",
    "http.connections",
    "http.max_inflight_body_bytes",
    "claim_check",
    "wal",
    "intake",
    "storage",
    "backup",
    "batcher",
    "log",
    "telemetry",
];

/// A keyed digest of the restart-pinned keys of `c` (secrets included, so a rotated intake or
/// store credential counts), or `None` when `c` does not serialise. Computed on the Gateway's
/// base config: what differs per pod (`node.instance`, the pod's file) is not in it. Keyed
/// with the admin token like the durability digest, so the annotation lets nobody test
/// guesses of a password. A change of anything else (sources, sinks, their secrets) leaves it:
/// those the pods apply by hot reload.
pub fn restart_fingerprint(c: &ankusa_config::Config, key: &str) -> Option<String> {
    use hmac::{Hmac, Mac};
    let all = serde_json::to_value(c).ok()?;
    let pinned: Vec<(&str, &serde_json::Value)> = RESTART_PINNED
        .iter()
        .map(|path| {
            let v = path
                .split('.')
                .try_fold(&all, |v, k| v.get(k))
                .unwrap_or(&serde_json::Value::Null);
            (*path, v)
        })
        .collect();
    let body = serde_json::to_vec(&pinned).ok()?;
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).ok()?;
    mac.update(&body);
    let tag = mac.finalize().into_bytes();
    Some(hex::encode(&tag[..16]))
}

/// Sets (or, for `None`, removes) the restart digest on the StatefulSet's pod template.
pub fn set_restart_fingerprint(sts: &mut StatefulSet, fingerprint: Option<&str>) {
    set_template_annotation(sts, RESTART_ANNOTATION, fingerprint);
}

/// The restart digest an existing StatefulSet's pod template carries (kept when the config
/// does not render).
pub fn restart_fingerprint_of(sts: &StatefulSet) -> Option<String> {
    template_annotation(sts, RESTART_ANNOTATION)
}

fn set_template_annotation(sts: &mut StatefulSet, key: &str, value: Option<&str>) {
    if let Some(spec) = sts.spec.as_mut() {
        set_annotation(&mut spec.template, key, value);
    }
}

fn template_annotation(sts: &StatefulSet, key: &str) -> Option<String> {
    annotation(&sts.spec.as_ref()?.template, key)
}

/// Volume claim templates cannot change on a StatefulSet: keep the existing ones and say so.
pub fn keep_claim_templates(
    desired: &mut StatefulSet,
    existing: Option<&StatefulSet>,
) -> Option<String> {
    let existing = existing?.spec.as_ref()?.volume_claim_templates.clone()?;
    let spec = desired.spec.as_mut()?;
    let storage = |v: &[PersistentVolumeClaim]| {
        v.first().and_then(|c| c.spec.as_ref()).map(|s| {
            (
                s.storage_class_name.clone(),
                s.resources.as_ref().and_then(|r| r.requests.clone()),
            )
        })
    };
    let note = (storage(&existing) != storage(spec.volume_claim_templates.as_deref().unwrap_or(&[])))
        .then(|| {
            "spec.storage changed: volume claim templates of a StatefulSet are immutable, existing volumes keep their size and class".to_string()
        });
    spec.volume_claim_templates = Some(existing);
    note
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::object;
    use k8s_openapi::api::core::v1::PodSpec;
    use serde_json::json;

    fn gw(size: &str) -> Gateway {
        object(json!({
            "metadata": {"name": "gw", "namespace": "ns", "uid": "g-uid"},
            "spec": {"storage": {"size": size}},
        }))
    }

    fn pod_spec_of(spec: serde_json::Value) -> PodSpec {
        let g: Gateway = object(json!({
            "metadata": {"name": "gw", "namespace": "ns", "uid": "g-uid"},
            "spec": spec,
        }));
        statefulset(&g, "img").spec.unwrap().template.spec.unwrap()
    }

    #[test]
    fn without_resources_the_container_gets_the_documented_defaults() {
        let p = pod_spec_of(json!({}));
        let r = p.containers[0].resources.clone().unwrap();
        let get = |m: &Option<BTreeMap<String, Quantity>>, k: &str| {
            m.as_ref().and_then(|m| m.get(k)).map(|q| q.0.clone())
        };
        assert_eq!(get(&r.requests, "cpu").as_deref(), Some("250m"));
        assert_eq!(get(&r.requests, "memory").as_deref(), Some("512Mi"));
        assert_eq!(get(&r.limits, "memory").as_deref(), Some("1Gi"));
        assert_eq!(get(&r.limits, "cpu"), None, "no CPU limit by default");
        // Given resources replace the defaults whole.
        let p = pod_spec_of(json!({"resources": {"requests": {"cpu": "2"}}}));
        let r = p.containers[0].resources.clone().unwrap();
        assert_eq!(get(&r.requests, "cpu").as_deref(), Some("2"));
        assert_eq!(get(&r.requests, "memory"), None);
        assert_eq!(r.limits, None);
    }

    #[test]
    fn pods_spread_over_nodes_by_default_and_a_given_spread_replaces_it() {
        let p = pod_spec_of(json!({}));
        let c = p.topology_spread_constraints.unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].topology_key, "kubernetes.io/hostname");
        assert_eq!(c[0].when_unsatisfiable, "ScheduleAnyway");
        assert_eq!(c[0].max_skew, 1);
        let sel = c[0].label_selector.clone().unwrap().match_labels.unwrap();
        assert_eq!(
            sel.get("app.kubernetes.io/instance").map(String::as_str),
            Some("gw")
        );
        assert_eq!(
            sel.get("app.kubernetes.io/name").map(String::as_str),
            Some("ankusa-gateway")
        );
        let given = json!([{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "gw"}}}]);
        let p = pod_spec_of(json!({"podTemplate": {"topologySpreadConstraints": given}}));
        let c = p.topology_spread_constraints.unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].topology_key, "topology.kubernetes.io/zone");
        assert_eq!(c[0].when_unsatisfiable, "DoNotSchedule");
        let p = pod_spec_of(json!({"podTemplate": {"topologySpreadConstraints": []}}));
        assert_eq!(
            p.topology_spread_constraints, None,
            "an empty list means none"
        );
    }

    #[test]
    fn priority_class_and_pull_secrets_reach_the_pod_template() {
        let p = pod_spec_of(json!({}));
        assert_eq!(p.priority_class_name, None);
        assert_eq!(p.image_pull_secrets, None);
        let p = pod_spec_of(json!({"podTemplate": {
            "priorityClassName": "ankusa-critical",
            "imagePullSecrets": [{"name": "registry"}, {"name": "mirror"}],
        }}));
        assert_eq!(p.priority_class_name.as_deref(), Some("ankusa-critical"));
        let names: Vec<String> = p
            .image_pull_secrets
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["registry", "mirror"]);
    }

    #[test]
    fn existing_claim_templates_are_kept_and_a_change_is_noted() {
        let existing = statefulset(&gw("1Gi"), "img");
        let mut same = statefulset(&gw("1Gi"), "img");
        assert_eq!(keep_claim_templates(&mut same, Some(&existing)), None);
        let mut bigger = statefulset(&gw("5Gi"), "img");
        let note = keep_claim_templates(&mut bigger, Some(&existing)).unwrap();
        assert!(note.starts_with("spec.storage changed"), "{note}");
        let kept = |s: &StatefulSet| s.spec.as_ref().unwrap().volume_claim_templates.clone();
        assert_eq!(kept(&bigger), kept(&existing));
        let mut new = statefulset(&gw("5Gi"), "img");
        assert_eq!(keep_claim_templates(&mut new, None), None);
        assert_eq!(kept(&new), kept(&statefulset(&gw("5Gi"), "img")));
    }
}
