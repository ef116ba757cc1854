//! The committed CRD YAML matches the types, the schemas are structural the way Kubernetes
//! needs them, and the CEL rules behave (evaluated with kube's `cel` feature, since the local
//! 1.20 test server cannot enforce CEL).

use std::path::Path;

use ankusa_crds::{Gateway, LocalRef, ReplayJob, ReplayJobSpec};
use kube::CustomResourceExt;
use serde_json::json;

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
        archive: None,
        rate: Some(100),
        max_lag_ms: None,
        pause_after_dead: None,
        ttl_seconds_after_finished: None,
        ignore_filters: false,
        dry_run: false,
        dry_run_sinks: Vec::new(),
        dry_run_limit: None,
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

fn replay_of(spec: serde_json::Value) -> ReplayJob {
    serde_json::from_value(json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "ReplayJob",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": spec,
    }))
    .expect("a ReplayJob")
}

#[test]
fn replay_kinds_and_their_filters_are_checked_by_cel() {
    let window = json!({"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"});
    let ok = [
        json!({"gatewayRef": {"name": "gw"}, "filter": {"source": "orders", "sink": "k", "errorClass": "transient"}}),
        json!({"gatewayRef": {"name": "gw"}, "kind": "archive", "archive": window}),
        json!({"gatewayRef": {"name": "gw"}, "kind": "archive", "archive": window,
               "filter": {"id": "0190a5b2-1111-7222-8333-444455556666"}}),
        json!({"gatewayRef": {"name": "gw"}, "kind": "archive", "filter": {"tenant": "acme", "source": "orders"},
               "archive": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "sinks": ["k"]}}),
        json!({"gatewayRef": {"name": "gw"}, "kind": "quarantine",
               "filter": {"source": "orders", "id": "0190a5b2-1111-7222-8333-444455556666",
                          "since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"}}),
    ];
    for spec in ok {
        let r = replay_of(spec.clone());
        assert!(
            kube::core::cel::validate_cel(&r).is_ok(),
            "{spec}: {:?}",
            kube::core::cel::validate_cel(&r)
        );
    }
    let refused = [
        (
            json!({"gatewayRef": {"name": "gw"}, "kind": "archive"}),
            "kind archive requires archive.from and archive.to",
        ),
        (
            json!({"gatewayRef": {"name": "gw"}, "archive": window}),
            "archive is only for kind archive",
        ),
        (
            json!({"gatewayRef": {"name": "gw"}, "kind": "quarantine", "archive": window}),
            "archive is only for kind archive",
        ),
        (
            json!({"gatewayRef": {"name": "gw"}, "kind": "archive", "archive": window,
                   "filter": {"source": "orders", "since": "2026-01-01T00:00:00Z"}}),
            "kind archive filters by filter.tenant, filter.source and filter.id only",
        ),
        (
            json!({"gatewayRef": {"name": "gw"}, "kind": "archive", "archive": window,
                   "filter": {"source": "orders", "sink": "k"}}),
            "kind archive filters by filter.tenant, filter.source and filter.id only",
        ),
        (
            json!({"gatewayRef": {"name": "gw"}, "kind": "quarantine", "filter": {"source": "orders", "sink": "k"}}),
            "kind quarantine takes no filter.sink or filter.errorClass",
        ),
        (
            json!({"gatewayRef": {"name": "gw"}, "kind": "quarantine", "filter": {"errorClass": "permanent"}}),
            "kind quarantine takes no filter.sink or filter.errorClass",
        ),
        (
            json!({"gatewayRef": {"name": "gw"}, "kind": "archive",
                   "archive": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "sinks": ["k"]}}),
            "archive.sinks needs filter.source",
        ),
    ];
    for (spec, want) in refused {
        let err = kube::core::cel::validate_cel(&replay_of(spec.clone()))
            .expect_err(&format!("{spec} is refused"));
        assert!(err.to_string().contains(want), "{spec}: {err}");
    }
}

#[test]
fn replay_jobs_list_their_kind() {
    let crd = ReplayJob::crd();
    let cols = crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap();
    let names: Vec<&str> = cols
        .iter()
        .filter(|c| c.priority.unwrap_or(0) == 0)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "Gateway",
            "Kind",
            "Phase",
            "Progress",
            "Moved",
            "Delivered",
            "Age",
            "Finished"
        ]
    );
    let kind = cols.iter().find(|c| c.name == "Kind").unwrap();
    assert_eq!(kind.json_path, ".spec.kind");
    // The kind defaults to dlq, so an old ReplayJob lists as one.
    let v = serde_json::to_value(&crd).unwrap();
    let kind = &v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["kind"];
    assert_eq!(kind["default"], "dlq");
    assert_eq!(kind["enum"], json!(["dlq", "archive", "quarantine"]));
}

fn gateway_of(archive: serde_json::Value) -> Gateway {
    serde_json::from_value(json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns"},
        "spec": {"archive": archive},
    }))
    .expect("a Gateway")
}

#[test]
fn the_archive_takes_bucket_fields_for_buckets_only_by_cel() {
    let ok = [
        json!({"type": "s3", "bucket": "b", "endpoint": "http://minio:9000", "forcePathStyle": true,
               "credentials": {"accessKeyId": {"name": "s", "key": "id"}, "secretAccessKey": {"name": "s", "key": "k"}}}),
        json!({"type": "local", "keyPrefix": "x", "rollBytes": 65536}),
        json!({"type": "gcs", "bucket": "b"}),
        json!({"type": "azure", "account": "acct", "container": "c-1"}),
    ];
    for a in ok {
        assert!(
            kube::core::cel::validate_cel(&gateway_of(a.clone())).is_ok(),
            "{a}"
        );
    }
    let refused = [
        (
            json!({"type": "s3"}),
            "archive.bucket is required for types s3 and gcs",
        ),
        (
            json!({"type": "gcs"}),
            "archive.bucket is required for types s3 and gcs",
        ),
        (
            json!({"type": "azure", "account": "acct"}),
            "archive.account and archive.container are required for type azure",
        ),
        (json!({"type": "local", "bucket": "b"}), "not type local"),
        (
            json!({"type": "local", "credentials": {"sessionToken": {"name": "s", "key": "t"}}}),
            "not type local",
        ),
    ];
    for (a, want) in refused {
        let err = kube::core::cel::validate_cel(&gateway_of(a.clone())).expect_err(&a.to_string());
        assert!(err.to_string().contains(want), "{a}: {err}");
    }
    // Credentials are Secret references only: a literal key is not even a valid object.
    let literal = serde_json::from_value::<Gateway>(json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway", "metadata": {"name": "gw"},
        "spec": {"archive": {"type": "s3", "bucket": "b", "credentials": {"accessKeyId": "AKIA..."}}}}));
    assert!(literal.is_err());
    let v = serde_json::to_value(Gateway::crd()).unwrap();
    let creds = &v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["archive"]["properties"]["credentials"]["properties"];
    for k in ["accessKeyId", "secretAccessKey", "sessionToken"] {
        assert_eq!(
            creds[k]["required"],
            json!(["key", "name"]),
            "{k}: {}",
            creds[k]
        );
    }
}

fn gateway_durable(durability: serde_json::Value) -> Gateway {
    serde_json::from_value(json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "ns"},
        "spec": {"durability": durability},
    }))
    .expect("a Gateway")
}

#[test]
fn durability_modes_and_backup_stores_are_checked_by_cel() {
    let intake = json!({"type": "kafka", "options": {"brokers": ["k:9092"], "topic": "t"},
                        "secretRefs": {"sasl.password": [{"name": "k", "key": "p"}]}});
    let ok = [
        json!({}),
        json!({"mode": "disk"}),
        json!({"mode": "dual", "intake": intake}),
        json!({"backup": {"intervalMs": 30000, "store": {"type": "s3", "bucket": "b",
               "credentials": {"accessKeyId": {"name": "s", "key": "id"}, "secretAccessKey": {"name": "s", "key": "k"}}}}}),
        json!({"backup": {"enabled": false}}),
    ];
    for d in ok {
        assert!(
            kube::core::cel::validate_cel(&gateway_durable(d.clone())).is_ok(),
            "{d}"
        );
    }
    let refused = [
        (
            json!({"mode": "dual"}),
            "durability.intake is required for mode dual",
        ),
        (
            json!({"intake": intake}),
            "durability.intake is required for mode dual, and only for it",
        ),
        (json!({"mode": "disk", "intake": intake}), "and only for it"),
        (
            json!({"backup": {"store": {"type": "local"}}}),
            "store.type must be s3",
        ),
        (
            json!({"backup": {"store": {"type": "s3"}}}),
            "store.bucket is required",
        ),
    ];
    for (d, want) in refused {
        let err =
            kube::core::cel::validate_cel(&gateway_durable(d.clone())).expect_err(&d.to_string());
        assert!(err.to_string().contains(want), "{d}: {err}");
    }
    // The mode defaults to disk; intake types are kafka and jetstream.
    let v = serde_json::to_value(Gateway::crd()).unwrap();
    let d = &v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["durability"]["properties"];
    assert_eq!(d["mode"]["default"], "disk");
    assert_eq!(
        d["intake"]["properties"]["type"]["enum"],
        json!(["kafka", "jetstream"])
    );
}
