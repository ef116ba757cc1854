//! The Gateway's PodDisruptionBudget (`spec.disruption`): `maxUnavailable` over the pods the
//! StatefulSet selects. Rendered as JSON for the `policy` version the API server serves
//! (`policy/v1` from Kubernetes 1.21, `policy/v1beta1` before; both take these fields alike),
//! since k8s-openapi carries only the newer type.
//!
//! May import: `resources::names`, `ankusa_crds`.

use ankusa_crds::Gateway;
use serde_json::{Value, json};

use crate::resources::names::{disruption_budget_name, meta, selector_labels};

/// The PodDisruptionBudget for `api_version` (`policy/v1` or `policy/v1beta1`), or why
/// `spec.disruption` cannot make one (naming the field).
pub fn disruption_budget(gw: &Gateway, api_version: &str) -> Result<Value, String> {
    let max_unavailable = gw.spec.disruption.checked_max_unavailable()?;
    let metadata = serde_json::to_value(meta(gw, disruption_budget_name(gw)))
        .map_err(|e| format!("PodDisruptionBudget metadata: {e}"))?;
    Ok(json!({
        "apiVersion": api_version,
        "kind": "PodDisruptionBudget",
        "metadata": metadata,
        "spec": {
            "maxUnavailable": max_unavailable,
            "selector": {"matchLabels": selector_labels(gw)},
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::statefulset::statefulset;
    use crate::testing::object;

    fn gw(spec: Value) -> Gateway {
        object(json!({
            "metadata": {"name": "gw", "namespace": "ns", "uid": "g-uid"},
            "spec": spec,
        }))
    }

    #[test]
    fn the_budget_selects_the_statefulsets_pods_with_max_unavailable_one_by_default() {
        let g = gw(json!({}));
        let pdb = disruption_budget(&g, "policy/v1beta1").unwrap();
        assert_eq!(pdb["apiVersion"], "policy/v1beta1");
        assert_eq!(pdb["kind"], "PodDisruptionBudget");
        assert_eq!(pdb["metadata"]["name"], "gw");
        assert_eq!(pdb["metadata"]["namespace"], "ns");
        let owner = &pdb["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "Gateway");
        assert_eq!(owner["uid"], "g-uid");
        assert_eq!(owner["controller"], true);
        assert_eq!(pdb["spec"]["maxUnavailable"], 1);
        let sts = statefulset(&g, "img");
        let sel = serde_json::to_value(&sts.spec.unwrap().selector).unwrap();
        assert_eq!(pdb["spec"]["selector"], sel);
    }

    #[test]
    fn a_percentage_is_kept_and_a_bad_value_names_the_field() {
        let pct = gw(json!({"disruption": {"maxUnavailable": "50%"}}));
        let pdb = disruption_budget(&pct, "policy/v1").unwrap();
        assert_eq!(pdb["spec"]["maxUnavailable"], "50%");
        let bad = gw(json!({"disruption": {"maxUnavailable": -2}}));
        let e = disruption_budget(&bad, "policy/v1").unwrap_err();
        assert!(e.starts_with("spec.disruption.maxUnavailable"), "{e}");
    }
}
