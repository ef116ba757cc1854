//! The objects a Gateway owns, computed from its spec: StatefulSet (or, direct, Deployment and
//! HorizontalPodAutoscaler), headless and ingest
//! Services, the per-pod config Secret, the generated admin-token Secret, the admin CA and
//! serving certificate Secrets, the scrape Secret, the NetworkPolicy, the
//! PodDisruptionBudget and the Prometheus Operator monitors; and the operator's policy on what a
//! Gateway may ask for. Pure functions; equal inputs give byte-identical objects (maps are
//! sorted), so applying them again is a no-op and never rolls the pods.
//!
//! One module per object kind: `names` (names, labels, ownership; the leaf), `secrets`,
//! `services`, `pod_template` (the pods, whichever workload), `statefulset`, `deployment`
//! (and the autoscaler of a direct Gateway), `volumes`, `network_policy`, `disruption`, `monitoring`,
//! `policy`. This file only
//! re-exports them.
//!
//! May import: its own modules, `pki` (certificate files), `ankusa_crds`, `k8s_openapi`; never
//! `render`, `context` or the controllers.

pub mod deployment;
pub mod disruption;
pub mod monitoring;
pub mod names;
pub mod network_policy;
pub mod pod_template;
pub mod policy;
pub mod secrets;
pub mod services;
pub mod statefulset;
pub mod volumes;

pub use deployment::{autoscaler, deployment};
pub use disruption::disruption_budget;
pub use monitoring::{MONITORING_GROUP, MONITORING_VERSION, MonitorKind, monitor};
pub use names::{
    ADMIN_TLS_MOUNT, admin_ca_secret_name, admin_tls_names, admin_tls_secret_name,
    admin_token_secret_name, config_key, config_secret_name, deployment_name,
    disruption_budget_name, headless_service_name, ingest_service_name, is_gateway_ref,
    monitor_name, network_policy_name, object_labels, ordinal, owned_by, pod_names,
    scrape_secret_name, selector_labels, selector_string, statefulset_name,
};
pub use network_policy::{NAMESPACE_NAME_LABEL, claim_check_namespaces, network_policy};
pub use pod_template::{GATEWAY_UID, default_resources, default_spread};
pub use policy::{Policy, service_account_refusal};
pub use secrets::{
    admin_ca_secret, admin_tls_secret, admin_token_secret, config_secret, random_token,
    scrape_secret,
};
pub use services::{headless_service, ingest_service};
pub use statefulset::{
    DURABILITY_ANNOTATION, durability_fingerprint_of, keep_claim_templates,
    set_durability_fingerprint, statefulset,
};
pub use volumes::{claim_name, volume_lost};
