//! The StatefulSet of a Gateway: one pod per ordinal, each with its own data volume, reading
//! `/etc/ankusa/<pod>.yaml` from the config Secret (hot-reloaded on change, no restart), its
//! admin serving certificate mounted, hardened to the Pod Security "restricted" profile; the
//! durability digest on its pod template; and what of an existing StatefulSet must be kept
//! (volume claim templates are immutable); and the digest of the restart-pinned sections of the
//! rendered config (`restart_fingerprint`), so a change the gateway applies only at start
//! rolls the pods. Production defaults where the Gateway says nothing: container resources
//! (`default_resources`) and a spread of the pods over nodes (`default_spread`).
//!
//! May import: `resources::names`, `ankusa_crds`, `ankusa_config` (the config's types only).

use std::collections::BTreeMap;

use ankusa_crds::Gateway;
use ankusa_crds::names::*;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, KeyToPath, ObjectFieldSelector, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SeccompProfile, SecretVolumeSource, SecurityContext,
    TopologySpreadConstraint, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::resources::names::{
    ADMIN_TLS_MOUNT, admin_tls_secret_name, config_secret_name, headless_service_name, meta,
    object_labels, selector_labels, statefulset_name,
};

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn value_env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

fn http_probe(path: &str, period: i32, failures: i32, initial: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("admin".into()),
            // The admin listener is HTTPS only; the kubelet does not verify probe certificates.
            scheme: Some("HTTPS".into()),
            ..Default::default()
        }),
        initial_delay_seconds: (initial > 0).then_some(initial),
        period_seconds: Some(period),
        timeout_seconds: Some(2),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

/// The non-root user and group of the image `scripts/images` builds; the data volume is made
/// writable for it through `fsGroup`.
pub const GATEWAY_UID: i64 = 65532;

/// Pod-level hardening: the Pod Security "restricted" profile (non-root with a fixed UID/GID,
/// the runtime's default seccomp profile), and the data volume group-owned by the gateway's
/// group, so a fresh volume is writable without running anything as root. `OnRootMismatch`
/// skips the recursive chown of a large store on every restart.
fn pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(GATEWAY_UID),
        run_as_group: Some(GATEWAY_UID),
        fs_group: Some(GATEWAY_UID),
        fs_group_change_policy: Some("OnRootMismatch".into()),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Container-level hardening: read-only root (the gateway writes only its data volume and
/// `/tmp`), no privilege escalation, no capabilities.
fn container_security_context() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The container resources of a Gateway without `spec.resources`: requests of `250m` CPU and
/// `512Mi` memory (what a pod at a few hundred hooks a second uses, RocksDB's block cache and
/// memtables included, so the scheduler places it where that is free), a memory limit of `1Gi`
/// (a leak or a runaway batch is killed and restarted rather than starving the node; the store
/// survives the restart), and no CPU limit (CFS throttling would stall commits and blow the
/// ack deadline while the node has idle CPU).
pub fn default_resources() -> ResourceRequirements {
    let q = |v: &str| Quantity(v.into());
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), q("250m")),
            ("memory".to_string(), q("512Mi")),
        ])),
        limits: Some(BTreeMap::from([("memory".to_string(), q("1Gi"))])),
        ..Default::default()
    }
}

/// The spread of a Gateway without `spec.podTemplate.topologySpreadConstraints`: its pods over
/// nodes (`kubernetes.io/hostname`, at most one more on any node than on another), preferred,
/// not required (`ScheduleAnyway`): a cluster with fewer nodes than replicas still runs them
/// all.
pub fn default_spread(gw: &Gateway) -> Vec<TopologySpreadConstraint> {
    vec![TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "kubernetes.io/hostname".into(),
        when_unsatisfiable: "ScheduleAnyway".into(),
        label_selector: Some(LabelSelector {
            match_labels: Some(selector_labels(gw)),
            ..Default::default()
        }),
        ..Default::default()
    }]
}

/// The gateway container: its ports, probes on the admin listener (HTTPS), the config,
/// admin certificate, data and `/tmp` mounts.
fn container(gw: &Gateway, default_image: &str) -> Container {
    let spec = &gw.spec;
    Container {
        name: "gateway".into(),
        image: Some(
            spec.image
                .clone()
                .unwrap_or_else(|| default_image.to_string()),
        ),
        image_pull_policy: spec.image_pull_policy.clone(),
        args: Some(vec![
            "--config".into(),
            format!("{CONFIG_MOUNT}/$(POD_NAME).yaml"),
        ]),
        env: Some(vec![
            field_env("POD_NAME", "metadata.name"),
            field_env("POD_NAMESPACE", "metadata.namespace"),
            value_env(
                "ANKUSA_ADMIN_TLS_CERT_FILE",
                &format!("{ADMIN_TLS_MOUNT}/tls.crt"),
            ),
            value_env(
                "ANKUSA_ADMIN_TLS_KEY_FILE",
                &format!("{ADMIN_TLS_MOUNT}/tls.key"),
            ),
        ]),
        ports: Some(vec![
            ContainerPort {
                name: Some("http".into()),
                container_port: spec.ports.http.into(),
                protocol: Some("TCP".into()),
                ..Default::default()
            },
            ContainerPort {
                name: Some("admin".into()),
                container_port: spec.ports.admin.into(),
                protocol: Some("TCP".into()),
                ..Default::default()
            },
            ContainerPort {
                name: Some("claims".into()),
                container_port: spec.ports.claims.into(),
                protocol: Some("TCP".into()),
                ..Default::default()
            },
        ]),
        readiness_probe: Some(http_probe("/ready", 5, 3, 0)),
        liveness_probe: Some(http_probe("/health", 10, 6, 10)),
        resources: Some(spec.resources.clone().unwrap_or_else(default_resources)),
        security_context: Some(container_security_context()),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "config".into(),
                mount_path: CONFIG_MOUNT.into(),
                read_only: Some(true),
                ..Default::default()
            },
            VolumeMount {
                name: "admin-tls".into(),
                mount_path: ADMIN_TLS_MOUNT.into(),
                read_only: Some(true),
                ..Default::default()
            },
            VolumeMount {
                name: DATA_VOLUME.into(),
                mount_path: DATA_MOUNT.into(),
                ..Default::default()
            },
            VolumeMount {
                name: "tmp".into(),
                mount_path: "/tmp".into(),
                ..Default::default()
            },
        ]),
        ..Default::default()
    }
}

/// The pod: the container, hardened, with the config Secret, the admin certificate and a
/// bounded `/tmp` as volumes (the data volume comes from the claim template).
fn pod_spec(gw: &Gateway, container: Container) -> PodSpec {
    let spec = &gw.spec;
    PodSpec {
        containers: vec![container],
        termination_grace_period_seconds: Some(spec.termination_grace_period_seconds),
        automount_service_account_token: Some(false),
        service_account_name: spec.pod_template.service_account_name.clone(),
        security_context: Some(pod_security_context()),
        affinity: spec.pod_template.affinity.clone(),
        tolerations: (!spec.pod_template.tolerations.is_empty())
            .then(|| spec.pod_template.tolerations.clone()),
        node_selector: (!spec.pod_template.node_selector.is_empty())
            .then(|| spec.pod_template.node_selector.clone()),
        priority_class_name: spec.pod_template.priority_class_name.clone(),
        topology_spread_constraints: Some(
            spec.pod_template
                .topology_spread_constraints
                .clone()
                .unwrap_or_else(|| default_spread(gw)),
        )
        .filter(|c| !c.is_empty()),
        image_pull_secrets: (!spec.pod_template.image_pull_secrets.is_empty())
            .then(|| spec.pod_template.image_pull_secrets.clone()),
        volumes: Some(vec![
            Volume {
                name: "config".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(config_secret_name(gw)),
                    default_mode: Some(0o440),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "admin-tls".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(admin_tls_secret_name(gw)),
                    default_mode: Some(0o440),
                    items: Some(vec![
                        KeyToPath {
                            key: "tls.crt".into(),
                            path: "tls.crt".into(),
                            ..Default::default()
                        },
                        KeyToPath {
                            key: "tls.key".into(),
                            path: "tls.key".into(),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "tmp".into(),
                empty_dir: Some(EmptyDirVolumeSource {
                    size_limit: Some(Quantity("64Mi".into())),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    }
}

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
    let mut labels = spec.pod_template.labels.clone();
    labels.extend(object_labels(gw));
    let annotations = spec.pod_template.annotations.clone();
    let pod_spec = pod_spec(gw, container(gw, default_image));
    let claim = data_claim(gw);
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
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: (!annotations.is_empty()).then_some(annotations),
                    ..Default::default()
                }),
                spec: Some(pod_spec),
            },
            volume_claim_templates: Some(vec![claim]),
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
    let Some(meta) = sts.spec.as_mut().and_then(|s| s.template.metadata.as_mut()) else {
        return;
    };
    let mut annotations = meta.annotations.take().unwrap_or_default();
    match value {
        Some(v) => {
            annotations.insert(key.to_string(), v.to_string());
        }
        None => {
            annotations.remove(key);
        }
    }
    meta.annotations = (!annotations.is_empty()).then_some(annotations);
}

fn template_annotation(sts: &StatefulSet, key: &str) -> Option<String> {
    sts.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(key)
        .cloned()
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
