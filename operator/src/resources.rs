//! The objects a Gateway owns, computed from its spec: StatefulSet, headless and ingest
//! Services, the per-pod config Secret and the generated admin-token Secret. Pure functions;
//! equal inputs give byte-identical objects (maps are sorted), so applying them again is a
//! no-op and never rolls the pods.

use std::collections::BTreeMap;

use ankusa_crds::Gateway;
use ankusa_crds::names::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, SeccompProfile, Secret,
    SecretVolumeSource, SecurityContext, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Resource, ResourceExt};

/// Name of the StatefulSet (and the pods' prefix): the Gateway's name.
pub fn statefulset_name(gw: &Gateway) -> String {
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
        refs.iter().any(|r| {
            r.controller == Some(true)
                && r.kind == "Gateway"
                && r.api_version.starts_with("ankusa.dev/")
                && r.uid == uid
        })
    })
}

/// Labels on everything the operator creates for a Gateway.
pub fn object_labels(gw: &Gateway) -> BTreeMap<String, String> {
    let mut l = selector_labels(gw);
    l.insert(GATEWAY_LABEL.into(), gw.name_any());
    l.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    l
}

fn meta(gw: &Gateway, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: gw.namespace(),
        labels: Some(object_labels(gw)),
        owner_references: gw.controller_owner_ref(&()).map(|r| vec![r]),
        ..Default::default()
    }
}

/// The per-pod config Secret: one key `<pod>.yaml` per pod.
pub fn config_secret(gw: &Gateway, files: &BTreeMap<String, String>) -> Secret {
    Secret {
        metadata: meta(gw, config_secret_name(gw)),
        type_: Some("Opaque".into()),
        data: Some(
            files
                .iter()
                .map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())))
                .collect(),
        ),
        ..Default::default()
    }
}

/// The generated admin token Secret (created once, never rotated by the operator).
pub fn admin_token_secret(gw: &Gateway, token: &str) -> Secret {
    Secret {
        metadata: meta(gw, admin_token_secret_name(gw)),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            "token".to_string(),
            ByteString(token.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

/// A random token: 256 bits from the operating system's CSPRNG, as 64 hex characters. It guards
/// the admin API (config pushes carry secrets), so never from a fast, predictable PRNG.
pub fn random_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

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

fn http_probe(path: &str, period: i32, failures: i32, initial: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("admin".into()),
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

/// The StatefulSet: one pod per ordinal, each with its own data volume, reading
/// `/etc/ankusa/<pod>.yaml` from the config Secret (hot-reloaded on change, no restart).
pub fn statefulset(gw: &Gateway, default_image: &str) -> StatefulSet {
    let spec = &gw.spec;
    let mut labels = spec.pod_template.labels.clone();
    labels.extend(object_labels(gw));
    let annotations = spec.pod_template.annotations.clone();
    let container = Container {
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
        resources: spec.resources.clone(),
        security_context: Some(container_security_context()),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "config".into(),
                mount_path: CONFIG_MOUNT.into(),
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
    };
    let pod_spec = PodSpec {
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
                name: "tmp".into(),
                empty_dir: Some(EmptyDirVolumeSource {
                    size_limit: Some(Quantity("64Mi".into())),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    let claim = PersistentVolumeClaim {
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
    };
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

#[cfg(test)]
mod tests {
    use super::{meta, owned_by, random_token};
    use ankusa_crds::Gateway;

    #[test]
    fn only_a_controller_reference_to_this_gateways_uid_is_ownership() {
        let gw = |uid: &str| -> Gateway {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": "ns", "uid": uid},
                "spec": {},
            }))
            .expect("a Gateway")
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

    #[test]
    fn tokens_are_256_bits_of_hex_and_differ() {
        let a = random_token().expect("the OS random source");
        let b = random_token().expect("the OS random source");
        assert_eq!(a.len(), 64);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }
}
