//! Ankusa's Kubernetes custom resources, group `ankusa.dev`, version `v1alpha1`:
//!
//! - [`Gateway`]: a StatefulSet of gateway pods and gateway-wide settings;
//! - [`Source`]: an ingest endpoint, its verification (secrets as Secret refs) and its sinks;
//! - [`Sink`]: a destination (type + options, credentials as Secret refs);
//! - [`ReplayJob`]: a one-shot replay (dead letters, archived or quarantined hooks) fanned out
//!   to every pod (immutable spec).
//!
//! The CRD YAML is generated from these types (`cargo run -p ankusa-crds --bin crdgen`) and
//! committed in `crds/yaml/` and in the Helm chart; a test fails when they drift.

// `#[kube(printcolumn(name = .., type_ = ..), printcolumn(..))]` repeats keys by design.
#![allow(clippy::duplicated_attributes)]

pub mod common;
pub mod gateway;
pub mod replay;
pub mod sink;
pub mod source;

pub use common::{Condition, GROUP, LocalRef, SecretKeyRef, VERSION, condition, find_condition};
pub use gateway::{
    ArchiveCredentials, ArchiveSpec, AutoscalingSpec, BackupSpec, BackupStoreSpec,
    ClaimCheckSettings, ClaimReaderAccount, ClaimTokenReview, DEFAULT_CLAIM_AUDIENCE,
    DisruptionSpec, DurabilityMode, DurabilitySpec, EgressSettings, FleetDedupeMode, FleetSpec,
    Gateway, GatewayPodStatus, GatewaySettings, GatewaySpec, GatewayStatus, IntakeSpec, IntakeType,
    MonitorSpec, MonitoringSpec, OtlpSettings, OwnedSecret, OwnershipRecord, PodArchiveStatus,
    PodDlqStatus, RenderedSink, SinkDeliveryError, TelemetrySettings,
};
pub use replay::{
    ArchiveReplaySpec, DryRunSink, DryRunSinkStatus, DryRunStatus, DryRunTransform, ReplayJob,
    ReplayJobSpec, ReplayJobStatus, ReplayKind, ReplayPhase, ReplayPodStatus,
};
pub use sink::{Sink, SinkSpec, SinkStatus, SinkType};
pub use source::{
    QuarantineOnPod, Source, SourceQuarantine, SourceSink, SourceSpec, SourceStatus, VerifySpec,
    VerifyType,
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// Labels, annotations and finalizers the operator uses (one place, shared with the tests).
pub mod names {
    /// Label on every object the operator creates: the Gateway it belongs to.
    pub const GATEWAY_LABEL: &str = "ankusa.dev/gateway";
    pub const NAME_LABEL: &str = "app.kubernetes.io/name";
    pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
    pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
    pub const MANAGED_BY: &str = "ankusa-operator";
    /// Label a Secret carries (value `true`) to be usable by Sources, Sinks and Gateway
    /// settings: the Secret's owner opts in, so writing a Sink does not grant reading every
    /// Secret of the namespace. The operator watches only Secrets with it (and its own).
    pub const USABLE_LABEL: &str = "ankusa.dev/usable";
    pub const USABLE: &str = "true";
    /// Annotation on a Source: `dead_letter` makes a deletion dead-letter the source's queued
    /// deliveries (as `source_gone`) instead of waiting for them to drain.
    pub const DELIVERIES_ANNOTATION: &str = "ankusa.dev/deliveries";
    pub const DELIVERIES_DEAD_LETTER: &str = "dead_letter";
    /// Finalizer on a Source: its queued deliveries drained (or were dead-lettered) first.
    pub const SOURCE_FINALIZER: &str = "ankusa.dev/drain-deliveries";
    /// Finalizer on a ReplayJob: the job is cancelled on every pod first.
    pub const REPLAY_FINALIZER: &str = "ankusa.dev/cancel-replay";
    /// Set on a ReplayJob (any value) to resume the pods whose job paused itself after its
    /// deliveries kept dead-lettering; the operator removes it once every such pod resumed.
    pub const RESUME_ANNOTATION: &str = "ankusa.dev/resume";
    /// Finalizer on a Sink: no Source refers to it any more.
    pub const SINK_FINALIZER: &str = "ankusa.dev/sink-in-use";
    /// Where each pod's config file is mounted; the file is `<pod name>.yaml`.
    pub const CONFIG_MOUNT: &str = "/etc/ankusa";
    /// Where each pod's volume is mounted (`node.data_dir`).
    pub const DATA_MOUNT: &str = "/var/lib/ankusa";
    /// Name of the volume claim template (PVCs are `data-<pod>`).
    pub const DATA_VOLUME: &str = "data";
}

/// Every CRD, in a stable order, with the file name it is committed under.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("gateways.ankusa.dev.yaml", tidy(Gateway::crd())),
        ("sources.ankusa.dev.yaml", tidy(Source::crd())),
        ("sinks.ankusa.dev.yaml", tidy(Sink::crd())),
        ("replayjobs.ankusa.dev.yaml", tidy(ReplayJob::crd())),
    ]
}

/// Drops the `null` that schemars lists among the `enum` values of an optional enum: the
/// property is already `nullable: true`, and kubectl's client-side validation refuses a null
/// enum value ("unknown object type nil"). And drops `nullable` everywhere under a Sink's
/// typed option fields (and the intake log's): a server before 1.25 publishes a nullable
/// property to OpenAPI v2 without its type, so kubectl checks nothing below it there and a
/// misspelled option (`sasl.passwrd`) would pass `kubectl apply`.
pub fn tidy(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn not_nullable(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("nullable");
                m.values_mut().for_each(not_nullable);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(not_nullable),
            _ => {}
        }
    }
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(serde_json::Value::Array(values)) = m.get_mut("enum") {
                    values.retain(|x| !x.is_null());
                }
                m.values_mut().for_each(walk);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(&crd).expect("CRD serialises");
    walk(&mut v);
    // `get_mut` all the way: indexing a `Value` mutably would create what is missing.
    fn at<'a>(v: &'a mut serde_json::Value, path: &[&str]) -> Option<&'a mut serde_json::Value> {
        path.iter().try_fold(v, |v, k| v.get_mut(*k))
    }
    if let Some(versions) = at(&mut v, &["spec", "versions"]).and_then(|v| v.as_array_mut()) {
        for version in versions {
            let Some(spec) = at(
                version,
                &["schema", "openAPIV3Schema", "properties", "spec"],
            ) else {
                continue;
            };
            for f in sink::OPTION_FIELDS {
                if let Some(field) = at(spec, &["properties", f]) {
                    not_nullable(field);
                }
            }
            for f in ["kafka", "jetstream"] {
                let path = [
                    "properties",
                    "durability",
                    "properties",
                    "intake",
                    "properties",
                    f,
                ];
                if let Some(field) = at(spec, &path) {
                    not_nullable(field);
                }
            }
        }
    }
    serde_json::from_value(v).expect("CRD deserialises")
}

/// The committed YAML of one CRD.
pub fn to_yaml(crd: &CustomResourceDefinition) -> String {
    format!(
        "# Generated by `cargo run -p ankusa-crds --bin crdgen -- --write`; do not edit.\n{}",
        serde_yaml_ng::to_string(crd).expect("CRD serialises")
    )
}

/// The chart's copy: the same YAML inside `crds.enabled`, with `crds.keep` adding
/// `helm.sh/resource-policy: keep` so an uninstall does not delete users' objects.
pub fn to_chart_template(crd: &CustomResourceDefinition) -> String {
    let yaml = to_yaml(crd);
    let mut out = String::from("{{- if .Values.crds.enabled }}\n");
    // Indent of an open `x-kubernetes-validations:` block: CEL rules are declared only to
    // servers that know the field (1.25+); older ones refuse the whole CRD (see
    // `for_legacy_server`), and the operator enforces the rules itself there.
    let mut cel_block: Option<usize> = None;
    for line in yaml.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(open) = cel_block
            && (indent < open || (indent == open && !line.trim_start().starts_with('-')))
        {
            out.push_str("{{- end }}\n");
            cel_block = None;
        }
        if cel_block.is_none() && line.trim_start() == "x-kubernetes-validations:" {
            out.push_str(
                "{{- if semverCompare \">=1.25-0\" .Capabilities.KubeVersion.Version }}\n",
            );
            cel_block = Some(indent);
        }
        out.push_str(line);
        out.push('\n');
        if line == "metadata:" {
            out.push_str(
                "  {{- if .Values.crds.keep }}\n  annotations:\n    helm.sh/resource-policy: keep\n  {{- end }}\n",
            );
        }
    }
    if cel_block.is_some() {
        out.push_str("{{- end }}\n");
    }
    out.push_str("{{- end }}\n");
    out
}

/// A CRD as a server older than 1.25 accepts it: without `x-kubernetes-validations` (CEL) and
/// `selectableFields`, which 1.20's server-side apply refuses as undeclared fields.
pub fn for_legacy_server(crd: &CustomResourceDefinition) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("x-kubernetes-validations");
                m.remove("selectableFields");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(crd).expect("CRD serialises");
    strip(&mut v);
    v
}
