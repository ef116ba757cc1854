//! The objects a Gateway owns, computed from its spec: StatefulSet, headless and ingest
//! Services, the per-pod config Secret, the generated admin-token Secret and the
//! NetworkPolicy; and the operator's policy on what a Gateway may ask for. Pure functions;
//! equal inputs give byte-identical objects (maps are sorted), so applying them again is a
//! no-op and never rolls the pods.

use std::collections::BTreeMap;

use ankusa_crds::Gateway;
use ankusa_crds::names::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, KeyToPath, ObjectFieldSelector, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, SeccompProfile,
    Secret, SecretVolumeSource, SecurityContext, Service, ServicePort, ServiceSpec, Volume,
    VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
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

fn secret_of(gw: &Gateway, name: String, type_: &str, files: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: meta(gw, name),
        type_: Some(type_.into()),
        data: Some(
            files
                .iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

/// The admin CA Secret (`ca.crt`: the trust bundle, `ca.key`).
pub fn admin_ca_secret(gw: &Gateway, ca: &crate::pki::CaFiles) -> Secret {
    secret_of(
        gw,
        admin_ca_secret_name(gw),
        "Opaque",
        &[("ca.crt", &ca.bundle_pem), ("ca.key", &ca.key_pem)],
    )
}

/// The pods' admin serving certificate, with the CA bundle that verifies it (`ca.crt`), for
/// clients other than the operator.
pub fn admin_tls_secret(gw: &Gateway, issued: &crate::pki::Issued) -> Secret {
    secret_of(
        gw,
        admin_tls_secret_name(gw),
        "kubernetes.io/tls",
        &[
            ("tls.crt", &issued.leaf.cert_pem),
            ("tls.key", &issued.leaf.key_pem),
            ("ca.crt", &issued.ca.bundle_pem),
        ],
    )
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

/// Annotation on the pod template: a keyed digest of the pods' durability settings
/// ([`crate::render::durability_fingerprint`]); when it changes, the pods roll.
pub const DURABILITY_ANNOTATION: &str = "ankusa.dev/durability";

/// Sets (or, for `None`, removes) the durability digest on the StatefulSet's pod template.
pub fn set_durability_fingerprint(sts: &mut StatefulSet, fingerprint: Option<&str>) {
    let Some(meta) = sts.spec.as_mut().and_then(|s| s.template.metadata.as_mut()) else {
        return;
    };
    let mut annotations = meta.annotations.take().unwrap_or_default();
    match fingerprint {
        Some(f) => {
            annotations.insert(DURABILITY_ANNOTATION.to_string(), f.to_string());
        }
        None => {
            annotations.remove(DURABILITY_ANNOTATION);
        }
    }
    meta.annotations = (!annotations.is_empty()).then_some(annotations);
}

/// The durability digest an existing StatefulSet's pod template carries.
pub fn durability_fingerprint_of(sts: &StatefulSet) -> Option<String> {
    sts.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(DURABILITY_ANNOTATION)
        .cloned()
}

/// Name of a pod's data volume claim, as the StatefulSet controller names it.
pub fn claim_name(pod: &str) -> String {
    format!("{DATA_VOLUME}-{pod}")
}

/// Why a pod must be deleted so that the StatefulSet controller gives it a new, empty volume,
/// if it must. Kubernetes 1.20's StatefulSet controller creates a missing claim only when it
/// creates the pod: a pod whose claim was deleted under it stays `Pending` for ever (the
/// kubelet will not start a pod on a claim being deleted, and the claim's protection waits
/// for the scheduled pod to go). So:
///
/// - the claim no longer exists: the pod cannot get its volume → delete it;
/// - the claim is being deleted and the pod is not ready: it is stuck → delete it;
/// - the claim is being deleted under a ready pod: the volume goes when the pod does. With
///   `protected` (backups or `mode: dual`), delete the pod now: it stops cleanly (a final
///   backup) and comes back restoring onto a new volume. Without, leave it running: a
///   restart would start it empty, so that stays the user's call.
pub fn volume_lost(
    pod: &k8s_openapi::api::core::v1::Pod,
    claim: Option<&PersistentVolumeClaim>,
    ready: bool,
    protected: bool,
) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let name = claim_name(&pod.name_any());
    let uses_claim = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| {
            v.iter().any(|v| {
                v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.claim_name == name)
            })
        });
    if !uses_claim {
        return None;
    }
    match claim {
        None => Some(format!("its volume claim {name} no longer exists")),
        Some(c) if c.metadata.deletion_timestamp.is_some() && (!ready || protected) => {
            Some(format!("its volume claim {name} is being deleted"))
        }
        Some(_) => None,
    }
}

/// The label every namespace carries with its own name (set by the API server since
/// Kubernetes 1.21); NetworkPolicies select namespaces by it.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What the operator's deployment decides, not the Gateway's author: who may reach the admin
/// port as the operator, and which ServiceAccounts a Gateway's pods may run as.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The namespace the operator's pods run in (`POD_NAMESPACE`).
    pub operator_namespace: String,
    /// Labels of the operator's pods (the chart's selector labels); never empty, as an empty
    /// selector would admit every pod of the operator's namespace to the admin port.
    pub operator_pod_labels: BTreeMap<String, String>,
    /// ServiceAccounts a Gateway may name in `spec.podTemplate.serviceAccountName`.
    pub allowed_service_accounts: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            operator_namespace: "default".into(),
            operator_pod_labels: BTreeMap::from([(
                NAME_LABEL.to_string(),
                "ankusa-operator".to_string(),
            )]),
            allowed_service_accounts: Vec::new(),
        }
    }
}

/// Why a Gateway may not run its pods as the ServiceAccount it names, if it may not. A pod's
/// ServiceAccount carries more than an API token (which the pods do not mount): image pull
/// Secrets, and on managed clusters a cloud identity (workload identity, IRSA) that the
/// metadata server hands to any pod running as it. So the choice is the operator's
/// installer's, not the Gateway author's. `default` is what an unset name means, so it is
/// always allowed.
pub fn service_account_refusal(gw: &Gateway, policy: &Policy) -> Option<String> {
    let name = gw
        .spec
        .pod_template
        .service_account_name
        .as_deref()
        .filter(|n| !n.is_empty() && *n != "default")?;
    if policy.allowed_service_accounts.iter().any(|a| a == name) {
        return None;
    }
    let allowed = if policy.allowed_service_accounts.is_empty() {
        "it allows none: leave the field unset".to_string()
    } else {
        format!("it allows {}", policy.allowed_service_accounts.join(", "))
    };
    Some(format!(
        "spec.podTemplate.serviceAccountName: ServiceAccount {name} is not allowed by the operator's policy ({allowed}; chart value gatewayPolicy.allowedServiceAccounts)"
    ))
}

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
/// port from the claim-check namespaces. Any other port of the pods is closed. Ports are
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
