//! What the operator's deployment decides, not the Gateway's author: who may reach the admin
//! port as the operator, and which ServiceAccounts a Gateway's pods may run as.
//!
//! May import: `ankusa_crds`.

use std::collections::BTreeMap;

use ankusa_crds::Gateway;
use ankusa_crds::names::NAME_LABEL;

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
