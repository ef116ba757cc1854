//! The committed CRD YAML matches the types, the schemas are structural the way Kubernetes
//! needs them, and the CEL rules behave (evaluated with kube's `cel` feature, since the local
//! 1.20 test server cannot enforce CEL).

use std::path::Path;

use ankusa_crds::{Gateway, LocalRef, ReplayJob, ReplayJobSpec};
use kube::CustomResourceExt;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

#[test]
fn committed_yaml_matches_the_types() {
    let mut stale = Vec::new();
    for (file, crd) in ankusa_crds::all() {
        let expected = [
            (
                root().join("crds/yaml").join(file),
                ankusa_crds::to_yaml(&crd),
            ),
            (
                root().join("charts/ankusa/templates/crds").join(file),
                ankusa_crds::to_chart_template(&crd),
            ),
        ];
        for (path, want) in expected {
            match std::fs::read_to_string(&path) {
                Ok(have) if have == want => {}
                _ => stale.push(path.display().to_string()),
            }
        }
    }
    assert!(
        stale.is_empty(),
        "committed CRD YAML differs from the types: {stale:?}\n\
         regenerate with `cargo run -p ankusa-crds --bin crdgen -- --write`"
    );
}

#[test]
fn crds_carry_group_version_category_and_subresources() {
    for (_, crd) in ankusa_crds::all() {
        assert_eq!(crd.spec.group, "ankusa.dev");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert!(
            crd.spec
                .names
                .categories
                .as_ref()
                .is_some_and(|c| c.contains(&"ankusa".to_string()))
        );
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1alpha1");
        let sub = v.subresources.as_ref().expect("subresources");
        assert!(
            sub.status.is_some(),
            "{} has a status subresource",
            crd.spec.names.kind
        );
        assert!(
            v.additional_printer_columns
                .as_ref()
                .is_some_and(|c| c.len() >= 4)
        );
    }
    let gw = Gateway::crd();
    let scale = gw.spec.versions[0]
        .subresources
        .as_ref()
        .unwrap()
        .scale
        .as_ref()
        .expect("Gateway has a scale subresource");
    assert_eq!(scale.spec_replicas_path, ".spec.replicas");
    assert_eq!(scale.status_replicas_path, ".status.replicas");
    assert_eq!(
        scale.label_selector_path.as_deref(),
        Some(".status.selector")
    );
}

#[test]
fn embedded_gateway_settings_carry_no_defaults() {
    let v = serde_json::to_value(Gateway::crd()).unwrap();
    let settings = &v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["settings"];
    assert!(settings.is_object(), "settings schema present");
    let text = settings["properties"].to_string();
    assert!(
        !text.contains("\"default\""),
        "no defaults baked into settings: {text}"
    );
    assert!(
        text.contains("max_inflight"),
        "dispatch keys are the config file's"
    );
}

#[test]
fn conditions_merge_by_type() {
    let v = serde_json::to_value(ankusa_crds::Source::crd()).unwrap();
    let conds = &v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        ["conditions"];
    assert_eq!(conds["x-kubernetes-list-type"], "map");
    assert_eq!(conds["x-kubernetes-list-map-keys"][0], "type");
}

fn replay(source: &str) -> ReplayJob {
    let mut spec = ReplayJobSpec {
        gateway_ref: LocalRef { name: "gw".into() },
        kind: Default::default(),
        filter: Default::default(),
        rate: Some(100),
        max_lag_ms: None,
        pause_after_dead: None,
    };
    spec.filter.source = Some(source.into());
    ReplayJob::new("r", spec)
}

#[test]
fn replay_job_spec_is_immutable_by_cel() {
    let old = replay("orders");
    assert!(kube::core::cel::validate_cel(&old).is_ok());
    assert!(kube::core::cel::validate_cel_update(&old.clone(), &old).is_ok());
    let changed = replay("payments");
    let err = kube::core::cel::validate_cel_update(&changed, &old)
        .expect_err("changing the spec is refused");
    assert!(err.to_string().contains("immutable"), "{err}");
    // Status changes are not spec changes.
    let mut with_status = old.clone();
    with_status.status = Some(Default::default());
    assert!(kube::core::cel::validate_cel_update(&with_status, &old).is_ok());
}

#[test]
fn legacy_server_copy_drops_cel() {
    let v = ankusa_crds::for_legacy_server(&ReplayJob::crd());
    assert!(!v.to_string().contains("x-kubernetes-validations"));
    assert!(
        serde_json::to_string(&ReplayJob::crd())
            .unwrap()
            .contains("self == oldSelf")
    );
}
