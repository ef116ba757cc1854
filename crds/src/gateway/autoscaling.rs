//! `spec.autoscaling`: a HorizontalPodAutoscaler over a direct Gateway's Deployment.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::{DurabilityMode, Gateway};

/// The HorizontalPodAutoscaler (`autoscaling/v1`) the operator keeps over a direct Gateway's
/// Deployment: it scales on the pods' CPU, which the gateway spends verifying and publishing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[x_kube(
    validation = Rule::new("!has(self.minReplicas) || self.minReplicas <= self.maxReplicas")
        .message("autoscaling.minReplicas must not exceed maxReplicas")
)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingSpec {
    /// Fewest pods (1 to 1000, default 2: one pod lost still leaves one answering).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub min_replicas: Option<i32>,
    /// Most pods (1 to 1000).
    #[schemars(range(min = 1, max = 1000))]
    pub max_replicas: i32,
    /// Average CPU use, in percent of the pods' CPU request, the autoscaler holds the pods at
    /// (1 to 100, default 70).
    #[serde(
        default,
        rename = "targetCPUUtilizationPercentage",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 100))]
    pub target_cpu_utilization_percentage: Option<i32>,
}

impl AutoscalingSpec {
    pub const DEFAULT_MIN_REPLICAS: i32 = 2;
    pub const DEFAULT_TARGET_CPU: i32 = 70;
}

impl Gateway {
    /// Whether the Gateway runs in direct mode (`spec.durability.mode: direct`): a Deployment
    /// without volumes instead of a StatefulSet.
    pub fn is_direct(&self) -> bool {
        self.spec
            .durability
            .as_ref()
            .is_some_and(|d| d.mode == DurabilityMode::Direct)
    }
}
