//! The pod template every Gateway runs, whichever workload carries it (the StatefulSet of a
//! disk or dual Gateway, the Deployment of a direct one): the gateway container, its ports,
//! probes on the admin listener (HTTPS), hardened to the Pod Security "restricted" profile,
//! the config Secret, admin certificate and a bounded `/tmp`; production defaults where the
//! Gateway says nothing: container resources (`default_resources`) and a spread of the pods
//! over nodes (`default_spread`); and the annotations on a template that roll the pods.
//!
//! A direct pod has no ordinal and no volume of its own: it reads the one shared file
//! `<gateway>.yaml`, learns its name (`node.instance`) from `ANKUSA_INSTANCE`, and keeps its
//! scratch data (the quarantine pen, claims) on an emptyDir bounded by `spec.storage.size`.
//!
//! The pods mount no API token, except for a Gateway whose claim readers authenticate with
//! ServiceAccount tokens (`settings.claim_check.token_review`): it gets the token and CA a
//! TokenReview needs, projected where the gateway's defaults look (`api_access`).
//!
//! May import: `resources::names`, `ankusa_crds`.

use std::collections::BTreeMap;

use ankusa_crds::Gateway;
use ankusa_crds::names::*;
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapProjection, Container, ContainerPort, EmptyDirVolumeSource, EnvVar,
    EnvVarSource, HTTPGetAction, KeyToPath, ObjectFieldSelector, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, ProjectedVolumeSource, ResourceRequirements, SeccompProfile,
    SecretVolumeSource, SecurityContext, ServiceAccountTokenProjection, TopologySpreadConstraint,
    Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::resources::names::{
    ADMIN_TLS_MOUNT, admin_tls_secret_name, config_key, config_secret_name, object_labels,
    selector_labels,
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

/// The config file a pod reads: its own `<pod>.yaml`, or a direct pod's shared
/// `<gateway>.yaml` (a Deployment's pods have no stable names to key files by).
fn config_path(gw: &Gateway) -> String {
    if gw.is_direct() {
        format!("{CONFIG_MOUNT}/{}", config_key(&gw.name_any()))
    } else {
        format!("{CONFIG_MOUNT}/$(POD_NAME).yaml")
    }
}

/// The container's environment: the pod's identity and the admin certificate's files; a
/// direct pod also takes its `node.instance` from its name (`ANKUSA_INSTANCE`, which wins
/// over the shared file, also on reload).
fn env(gw: &Gateway) -> Vec<EnvVar> {
    let mut env = vec![
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
    ];
    if gw.is_direct() {
        env.push(field_env("ANKUSA_INSTANCE", "metadata.name"));
    }
    env
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
        args: Some(vec!["--config".into(), config_path(gw)]),
        env: Some(env(gw)),
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
            ContainerPort {
                name: Some("fleet".into()),
                container_port: spec.ports.fleet.into(),
                protocol: Some("TCP".into()),
                ..Default::default()
            },
        ]),
        readiness_probe: Some(http_probe("/ready", 5, 3, 0)),
        liveness_probe: Some(http_probe("/health", 10, 6, 10)),
        resources: Some(spec.resources.clone().unwrap_or_else(default_resources)),
        security_context: Some(container_security_context()),
        volume_mounts: Some(
            vec![
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
            ]
            .into_iter()
            .chain(api_access(gw).map(|(_, m)| m))
            .collect(),
        ),
        ..Default::default()
    }
}

/// Where a pod looks for its ServiceAccount's token and the cluster CA.
const SA_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The API token and CA of a pod whose claim port checks readers' ServiceAccount tokens: a
/// projected, hourly rotated token of the pod's ServiceAccount (for the API server's own
/// audience) and the namespace's `kube-root-ca.crt`, where `automountServiceAccountToken`
/// would put them, which stays off. `None` for any other Gateway.
fn api_access(gw: &Gateway) -> Option<(Volume, VolumeMount)> {
    gw.spec
        .settings
        .claim_check
        .as_ref()
        .and_then(|c| c.token_review.as_ref())?;
    let volume = Volume {
        name: "api-access".into(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o440),
            sources: Some(vec![
                VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        path: "token".into(),
                        expiration_seconds: Some(3607),
                        audience: None,
                    }),
                    ..Default::default()
                },
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: "kube-root-ca.crt".into(),
                        items: Some(vec![KeyToPath {
                            key: "ca.crt".into(),
                            path: "ca.crt".into(),
                            ..Default::default()
                        }]),
                        optional: None,
                    }),
                    ..Default::default()
                },
            ]),
        }),
        ..Default::default()
    };
    let mount = VolumeMount {
        name: "api-access".into(),
        mount_path: SA_MOUNT.into(),
        read_only: Some(true),
        ..Default::default()
    };
    Some((volume, mount))
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
        volumes: Some(
            [
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
                            // The CA the fleet's peers are checked against (`fleet.tls`).
                            KeyToPath {
                                key: "ca.crt".into(),
                                path: "ca.crt".into(),
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
            ]
            .into_iter()
            .chain(gw.is_direct().then(|| scratch_volume(gw)))
            .chain(api_access(gw).map(|(v, _)| v))
            .collect(),
        ),
        ..Default::default()
    }
}

/// A direct pod's data volume: an emptyDir bounded by `spec.storage.size` (no hook is kept
/// there; the quarantine pen and claims are, for the pod's life).
fn scratch_volume(gw: &Gateway) -> Volume {
    Volume {
        name: DATA_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(Quantity(gw.spec.storage.size.clone())),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod template: labels (the selector's and the Gateway's own), annotations, the pod.
pub fn pod_template(gw: &Gateway, default_image: &str) -> PodTemplateSpec {
    let spec = &gw.spec;
    let mut labels = spec.pod_template.labels.clone();
    labels.extend(object_labels(gw));
    let annotations = spec.pod_template.annotations.clone();
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        }),
        spec: Some(pod_spec(gw, container(gw, default_image))),
    }
}

/// Sets (or, for `None`, removes) an annotation of a pod template: one that rolls the pods
/// when it changes.
pub fn set_annotation(t: &mut PodTemplateSpec, key: &str, value: Option<&str>) {
    let meta = t.metadata.get_or_insert_with(Default::default);
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

/// An annotation of a pod template.
pub fn annotation(t: &PodTemplateSpec, key: &str) -> Option<String> {
    t.metadata.as_ref()?.annotations.as_ref()?.get(key).cloned()
}
