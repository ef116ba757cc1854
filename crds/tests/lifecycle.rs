//! `Gateway.spec.lifecycle`: references to Sinks (the shape of a Source's `sinks`), its
//! bounds as schema bounds, the CEL rule on the number of Sinks (evaluated with kube's `cel`
//! feature) and the operator's re-check of it for servers without CEL.

use ankusa_crds::Gateway;
use ankusa_crds::gateway::{LifecycleSpec, MAX_LIFECYCLE_SINKS};
use kube::CustomResourceExt;
use serde_json::{Value, json};

fn lifecycle_schema() -> Value {
    let v = serde_json::to_value(Gateway::crd()).unwrap();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["lifecycle"]
        .clone()
}

fn gateway_with(lifecycle: Value) -> Gateway {
    serde_json::from_value(json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns"},
        "spec": {"lifecycle": lifecycle},
    }))
    .expect("a Gateway")
}

#[test]
fn the_bounds_are_schema_bounds_and_sinks_are_references() {
    let s = lifecycle_schema();
    let p = &s["properties"];
    assert_eq!(p["retentionDays"]["minimum"], json!(1.0));
    assert_eq!(p["retentionDays"]["maximum"], json!(3650.0));
    assert_eq!(p["maxEvents"]["minimum"], json!(1000.0));
    assert_eq!(p["maxEvents"]["maximum"], json!(10_000_000.0));
    assert_eq!(p["maxPerMinute"]["minimum"], json!(1.0));
    assert_eq!(p["maxPerMinute"]["maximum"], json!(100_000.0));
    assert_eq!(p["sinks"]["minItems"], json!(1));
    assert_eq!(p["sinks"]["maxItems"], json!(MAX_LIFECYCLE_SINKS));
    assert_eq!(p["sinks"]["items"]["required"], json!(["name"]));
    assert_eq!(s["required"], json!(["sinks"]));
    for k in ["sinks", "retentionDays", "maxEvents", "maxPerMinute"] {
        assert!(
            p[k]["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{k}"
        );
    }
    assert!(s["description"].as_str().is_some());
}

#[test]
fn the_number_of_sinks_is_checked_by_cel_and_by_the_operator() {
    let refs = |n: usize| -> Value { (0..n).map(|i| json!({"name": format!("s{i}")})).collect() };
    for n in [1, 16] {
        let gw = gateway_with(json!({"sinks": refs(n)}));
        assert!(kube::core::cel::validate_cel(&gw).is_ok(), "{n}");
        gw.spec.lifecycle.as_ref().unwrap().check().unwrap();
    }
    for n in [0, 17] {
        let gw = gateway_with(json!({"sinks": refs(n)}));
        let err = kube::core::cel::validate_cel(&gw).expect_err(&n.to_string());
        assert!(
            err.to_string()
                .contains("lifecycle.sinks must name 1 to 16 Sinks"),
            "{n}: {err}"
        );
        let e = gw.spec.lifecycle.as_ref().unwrap().check().unwrap_err();
        assert_eq!(
            e,
            format!("spec.lifecycle.sinks must name 1 to 16 Sinks, got {n}")
        );
    }
    // Absent: no rule applies; the bounds are optional.
    let gw: Gateway = serde_json::from_value(json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns"}, "spec": {}}))
    .unwrap();
    assert!(gw.spec.lifecycle.is_none());
    assert!(kube::core::cel::validate_cel(&gw).is_ok());
    let l: LifecycleSpec = serde_json::from_value(json!({"sinks": [{"name": "a"}]})).unwrap();
    assert_eq!(
        (l.retention_days, l.max_events, l.max_per_minute),
        (None, None, None)
    );
    assert_eq!(l.sink_names().collect::<Vec<_>>(), vec!["a"]);
}
