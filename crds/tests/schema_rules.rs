//! What the CRD schemas tell a user before anything runs: every field has a description
//! (`kubectl explain`), the gateway's limits are schema bounds, a Sink's options are typed per
//! sink type (credentials and paths left out), the rules that need CEL behave (kube's `cel`
//! feature evaluates them here; the local 1.20 server cannot), and the operator's re-check of
//! those rules for servers without CEL names the field.

use ankusa_crds::sink::OptionsFrom;
use ankusa_crds::{Gateway, ReplayJob, Sink, SinkSpec, Source};
use kube::CustomResourceExt;
use serde_json::{Value, json};

fn schema_of(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Value {
    serde_json::to_value(crd).unwrap()["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn undescribed(s: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(props) = s["properties"].as_object() {
        for (k, v) in props {
            let p = format!("{path}.{k}");
            if v["description"]
                .as_str()
                .is_none_or(|d| d.trim().is_empty())
            {
                out.push(p.clone());
            }
            undescribed(v, &p, out);
        }
    }
    if s["items"].is_object() {
        undescribed(&s["items"], &format!("{path}[]"), out);
    }
    if s["additionalProperties"].is_object() {
        undescribed(&s["additionalProperties"], &format!("{path}{{}}"), out);
    }
}

#[test]
fn every_field_of_every_crd_has_a_description() {
    let mut missing = Vec::new();
    for (file, crd) in ankusa_crds::all() {
        let mut out = Vec::new();
        // Beyond `metadata` (Kubernetes' own) every property, spec and status, at any depth.
        let root = schema_of(&crd);
        for top in ["spec", "status"] {
            if root["properties"][top]["description"].as_str().is_none() {
                out.push(format!(".{top}"));
            }
            undescribed(&root["properties"][top], &format!(".{top}"), &mut out);
        }
        missing.extend(out.into_iter().map(|p| format!("{file}: {p}")));
    }
    assert!(
        missing.is_empty(),
        "{} fields without a description:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

fn prop<'a>(root: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(root, |v, k| &v["properties"][k])
}

#[test]
fn the_gateways_limits_are_schema_bounds() {
    let replay = schema_of(&ReplayJob::crd());
    assert_eq!(prop(&replay, "spec.rate")["minimum"], json!(1.0));
    assert_eq!(prop(&replay, "spec.rate")["maximum"], json!(100000.0));
    assert_eq!(
        prop(&replay, "spec.ttlSecondsAfterFinished")["minimum"],
        json!(0.0)
    );
    assert_eq!(prop(&replay, "spec.filter.since")["format"], "date-time");
    assert_eq!(prop(&replay, "spec.archive.from")["format"], "date-time");

    let source = schema_of(&Source::crd());
    assert_eq!(prop(&source, "spec.id")["pattern"], "^[A-Za-z0-9_-]{1,64}$");
    assert_eq!(prop(&source, "spec.sinks")["minItems"], json!(1));
    assert_eq!(
        prop(&source, "spec.verify.secretRefs")["maxItems"],
        json!(8)
    );
    let tol = prop(&source, "spec.verify.toleranceSeconds");
    assert_eq!(
        (tol["minimum"].clone(), tol["maximum"].clone()),
        (json!(1.0), json!(3600.0))
    );
    assert_eq!(
        prop(&source, "spec.dedupe")["oneOf"],
        json!([{"required": ["preset"]}, {"required": ["header"]}, {"required": ["json"]}])
    );

    let gw = schema_of(&Gateway::crd());
    assert_eq!(prop(&gw, "spec.replicas")["minimum"], json!(0.0));
    assert_eq!(
        prop(&gw, "spec.imagePullPolicy")["enum"],
        json!(["Always", "IfNotPresent", "Never"])
    );
    assert_eq!(
        prop(&gw, "spec.service.type")["enum"],
        json!(["ClusterIP", "NodePort", "LoadBalancer"])
    );
    let size = regex::Regex::new(prop(&gw, "spec.storage.size")["pattern"].as_str().unwrap())
        .expect("the quantity pattern compiles");
    for q in ["10Gi", "500M", "1.5Ti", "1e3", "100"] {
        assert!(size.is_match(q), "{q}");
    }
    for q in ["ten gigs", "10 Gi", "10GB", "", "-"] {
        assert!(!size.is_match(q), "{q}");
    }
}

#[test]
fn sink_options_are_typed_per_sink_type_without_credentials_or_paths() {
    let sink = schema_of(&Sink::crd());
    let kafka = prop(&sink, "spec.kafka");
    assert_eq!(kafka["type"], "object");
    assert!(kafka.get("x-kubernetes-preserve-unknown-fields").is_none());
    assert!(kafka["properties"]["brokers"]["description"].is_string());
    let sasl = &kafka["properties"]["sasl"]["properties"];
    assert_eq!(
        sasl["mechanism"]["enum"],
        json!(["plain", "scram_sha_256", "scram_sha_512", "oauthbearer"])
    );
    // Credentials come from secretRefs, files never: not in the schema at all.
    for gone in ["password", "token", "token_file"] {
        assert!(
            sasl.get(gone).is_none(),
            "spec.kafka.sasl.{gone} is in the schema"
        );
    }
    assert!(
        kafka["properties"]["tls"]["properties"]
            .get("key_file")
            .is_none()
    );
    let http = prop(&sink, "spec.http");
    assert!(http["properties"].get("secret").is_none());
    assert!(http["properties"].get("cacertfile").is_none());
    // `url` may come from secretRefs.url, so it is not required in the field.
    assert!(
        http.get("required")
            .is_none_or(|r| !r.to_string().contains("url"))
    );
    assert!(prop(&sink, "spec.sqs")["properties"]["queue_url"].is_object());
    for f in [
        "http", "log", "kafka", "rabbitmq", "nats", "redis", "sqs", "pubsub",
    ] {
        assert!(prop(&sink, &format!("spec.{f}")).is_object(), "spec.{f}");
    }
    // No default of the gateway's is baked into stored objects.
    assert!(!kafka.to_string().contains("\"default\""));
    let gw = schema_of(&Gateway::crd());
    assert!(prop(&gw, "spec.durability.intake.kafka")["properties"]["topic"].is_object());
    assert!(prop(&gw, "spec.durability.intake.jetstream")["properties"]["subject"].is_object());
}

fn sink(spec: Value) -> Sink {
    serde_json::from_value(json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Sink",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": spec,
    }))
    .expect("a Sink")
}

#[test]
fn a_typed_option_field_is_for_its_own_type_only_by_cel_and_by_the_operator_recheck() {
    let ok = sink(json!({"type": "kafka", "kafka": {"brokers": ["k:9092"], "topic": "t"}}));
    assert!(kube::core::cel::validate_cel(&ok).is_ok());
    let (opts, from) = ok.spec.resolved_options().unwrap();
    assert_eq!(
        (opts["topic"].clone(), from),
        (json!("t"), OptionsFrom::Typed)
    );

    let wrong = sink(json!({"type": "http", "kafka": {"brokers": ["k:9092"], "topic": "t"}}));
    let err = kube::core::cel::validate_cel(&wrong)
        .unwrap_err()
        .to_string();
    assert!(err.contains("spec.kafka is for type kafka"), "{err}");
    let err = wrong.spec.resolved_options().unwrap_err();
    assert!(
        err.starts_with("spec.kafka:") && err.contains("spec.http"),
        "{err}"
    );

    let both = sink(
        json!({"type": "http", "http": {"url": "https://r"}, "options": {"url": "https://r"}}),
    );
    let err = kube::core::cel::validate_cel(&both)
        .unwrap_err()
        .to_string();
    assert!(err.contains("spec.options (deprecated)"), "{err}");
    assert!(
        both.spec
            .resolved_options()
            .unwrap_err()
            .starts_with("spec.options:")
    );

    let old = sink(json!({"type": "http", "options": {"url": "https://r"}}));
    assert!(kube::core::cel::validate_cel(&old).is_ok());
    assert_eq!(
        old.spec.resolved_options().unwrap().1,
        OptionsFrom::Deprecated
    );
    let log = SinkSpec::of_type(ankusa_crds::SinkType::Log);
    assert!(log.resolved_options().unwrap().0.is_empty());
}

fn source(sinks: &[&str]) -> Source {
    let refs: Vec<Value> = sinks.iter().map(|n| json!({"name": n})).collect();
    serde_json::from_value(json!({
        "apiVersion": "ankusa.dev/v1alpha1", "kind": "Source",
        "metadata": {"name": "orders", "namespace": "ns"},
        "spec": {"gatewayRef": {"name": "gw"}, "sinks": refs},
    }))
    .expect("a Source")
}

#[test]
fn a_sources_sinks_keep_their_positions_by_a_transition_rule() {
    let old = source(&["a", "b", "c"]);
    for fine in [
        &["a", "b", "c"][..],
        &["a", "b", "c", "d"],
        &["a", "b"],
        &["a"],
    ] {
        let new = source(fine);
        assert!(
            kube::core::cel::validate_cel_update(&new, &old).is_ok(),
            "{fine:?}"
        );
    }
    for moved in [
        &["b", "a", "c"][..],
        &["a", "c"],
        &["a", "d", "b", "c"],
        &["c", "b", "a"],
    ] {
        let err = kube::core::cel::validate_cel_update(&source(moved), &old)
            .expect_err("a move is refused")
            .to_string();
        assert!(err.contains("delivery index"), "{moved:?}: {err}");
    }
}
