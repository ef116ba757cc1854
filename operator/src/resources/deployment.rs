//! The workload of a direct Gateway (`spec.durability.mode: direct`): a Deployment of
//! interchangeable pods on the shared pod template (`pod_template`), no volume claim, rolled
//! one pod at a time with none unavailable (a direct pod holds no hook, so a surge pod is all
//! a roll needs); and, with `spec.autoscaling`, the HorizontalPodAutoscaler over it (then the
//! Deployment leaves `replicas` to the autoscaler, so an apply never fights it).
//!
//! May import: `resources::{names, pod_template}`, `ankusa_crds`.

use ankusa_crds::{AutoscalingSpec, Gateway};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::autoscaling::v1::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::resources::names::{deployment_name, meta, selector_labels};
use crate::resources::pod_template::{annotation, pod_template, set_annotation};

/// The Deployment of a direct Gateway.
pub fn deployment(gw: &Gateway, default_image: &str) -> Deployment {
    Deployment {
        metadata: meta(gw, deployment_name(gw)),
        spec: Some(DeploymentSpec {
            replicas: gw.spec.autoscaling.is_none().then_some(gw.spec.replicas),
            selector: LabelSelector {
                match_labels: Some(selector_labels(gw)),
                ..Default::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(1)),
                    max_unavailable: Some(IntOrString::Int(0)),
                }),
            }),
            template: pod_template(gw, default_image),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Sets (or, for `None`, removes) an annotation of the Deployment's pod template.
pub fn set_template_annotation(d: &mut Deployment, key: &str, value: Option<&str>) {
    if let Some(spec) = d.spec.as_mut() {
        set_annotation(&mut spec.template, key, value);
    }
}

/// An annotation of an existing Deployment's pod template.
pub fn template_annotation(d: &Deployment, key: &str) -> Option<String> {
    annotation(&d.spec.as_ref()?.template, key)
}

/// The HorizontalPodAutoscaler of a direct Gateway with `spec.autoscaling`.
pub fn autoscaler(gw: &Gateway, a: &AutoscalingSpec) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: meta(gw, deployment_name(gw)),
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: deployment_name(gw),
            },
            min_replicas: Some(
                a.min_replicas
                    .unwrap_or(AutoscalingSpec::DEFAULT_MIN_REPLICAS)
                    .min(a.max_replicas),
            ),
            max_replicas: a.max_replicas,
            target_cpu_utilization_percentage: Some(
                a.target_cpu_utilization_percentage
                    .unwrap_or(AutoscalingSpec::DEFAULT_TARGET_CPU),
            ),
        }),
        ..Default::default()
    }
}
