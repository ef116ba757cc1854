//! Pure tests of a direct Gateway (`spec.durability.mode: direct`, issue 29): its config
//! (`wal.type: none` with its deadline, claims off unless asked, refusals naming the field),
//! its Deployment (no volume claim, one shared file, `ANKUSA_INSTANCE`, an emptyDir data
//! volume), its autoscaler, and the status's desired count under the autoscaler.

use ankusa_config::WalType;
use ankusa_crds::{Gateway, Sink, Source};
use ankusa_operator::render::{self, Inputs, SecretValues};
use ankusa_operator::resources;
use common::{meta, object, secrets};
use serde_json::json;

mod common;

const TOKEN: &str = "operator-admin-token-0123456789";

fn gateway(spec: serde_json::Value) -> Gateway {
    object(
        json!({"name": "gw", "namespace": "ns", "uid": "11111111-2222-3333-4444-555555555555", "generation": 1}),
        spec,
    )
}

fn direct(extra: serde_json::Value) -> Gateway {
    let mut spec = json!({"replicas": 2, "ports": {"http": 4100, "admin": 4102},
        "settings": {"egress": {"allow_http": true, "allow_loopback": true}},
        "durability": {"mode": "direct", "publishTimeoutMs": 3000, "retryAfterS": 4}});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    gateway(spec)
}

fn sink(name: &str, spec: serde_json::Value) -> Sink {
    object(meta(name, 2), spec)
}

fn source(sinks: &[&str]) -> Source {
    let sinks: Vec<_> = sinks.iter().map(|s| json!({"name": s})).collect();
    object(
        meta("orders", 3),
        json!({"gatewayRef": {"name": "gw"},
               "verify": {"type": "github", "secretRefs": [{"name": "gh", "key": "k"}]},
               "sinks": sinks}),
    )
}

fn sinks() -> Vec<Sink> {
    vec![
        sink(
            "stream",
            json!({"type": "nats", "nats": {"servers": ["nats://127.0.0.1:4222"], "subject": "orders"}}),
        ),
        sink(
            "cache",
            json!({"type": "redis", "redis": {"url": "redis://127.0.0.1:6379", "channel": "orders"}}),
        ),
    ]
}

fn values() -> SecretValues {
    secrets(&[("gh", "k", "github-secret")])
}

fn render(gw: &Gateway, sources: &[Source]) -> render::Rendered {
    render::render(&Inputs {
        gateway: gw,
        sources,
        sinks: &sinks(),
        secrets: &values(),
        admin_token: TOKEN,
        scrape_token: None,
        previous: None,
    })
}

#[test]
fn a_direct_gateway_renders_wal_none_with_its_deadline_and_no_claims() {
    let r = render(&direct(json!({})), &[source(&["stream"])]);
    assert_eq!(r.error, None);
    let c = r.for_pod("gw").expect("the shared config");
    assert_eq!(c.wal.wal_type, WalType::None);
    assert_eq!((c.wal.publish_timeout_ms, c.wal.retry_after_s), (3000, 4));
    assert!(!c.claim_check.enabled, "claims would live on an emptyDir");
    assert!(c.storage.is_none() && c.intake.is_none() && !c.backup.enabled);
    ankusa_config::validate(&c).expect("the gateway loads it");

    let asked = direct(
        json!({"settings": {"egress": {"allow_http": true, "allow_loopback": true},
                                          "claim_check": {"enabled": true}}}),
    );
    let c = render(&asked, &[source(&["stream"])])
        .for_pod("gw")
        .unwrap();
    assert!(c.claim_check.enabled, "asked for explicitly");
}

#[test]
fn a_direct_source_with_only_a_redis_sink_is_refused_naming_it() {
    let r = render(&direct(json!({})), &[source(&["cache"])]);
    let st = r.sources.get("orders").expect("the source's outcome");
    let msg = format!("{st:?}");
    assert!(msg.contains("sources.orders.sinks"), "{msg}");
    assert!(msg.contains("durable"), "{msg}");
    // Redis beside a durable sink is fine: it is still a confirmer.
    let r = render(&direct(json!({})), &[source(&["stream", "cache"])]);
    let c = r.for_pod("gw").unwrap();
    assert_eq!(c.sources["orders"].sinks.len(), 2);
}

#[test]
fn what_a_direct_gateway_cannot_have_is_refused_naming_the_field() {
    let cases = [
        (
            direct(json!({"archive": {"type": "local"}})),
            "spec.archive",
        ),
        (
            direct(
                json!({"durability": {"mode": "direct", "backup": {"enabled": true,
                "store": {"type": "s3", "bucket": "b", "region": "r"}}}}),
            ),
            "spec.durability.backup",
        ),
        (
            gateway(json!({"autoscaling": {"maxReplicas": 3}})),
            "spec.autoscaling",
        ),
        (
            gateway(json!({"durability": {"mode": "disk", "publishTimeoutMs": 500}})),
            "spec.durability.publishTimeoutMs",
        ),
        (
            direct(json!({"durability": {"mode": "direct", "publishTimeoutMs": 50}})),
            "spec.durability.publishTimeoutMs",
        ),
    ];
    for (gw, field) in cases {
        let r = render(&gw, &[source(&["stream"])]);
        let e = r.error.unwrap_or_else(|| panic!("{field}: refused"));
        assert!(e.starts_with(field), "{field}: {e}");
    }
}

#[test]
fn the_deployment_has_no_claim_one_shared_file_and_the_pod_name_as_instance() {
    let gw = direct(json!({"storage": {"size": "2Gi"}}));
    let d = resources::deployment(&gw, "ghcr.io/ankusa/ankusa:test");
    assert_eq!(d.metadata.name.as_deref(), Some("gw"));
    assert_eq!(
        d.metadata.owner_references.as_ref().unwrap()[0].kind,
        "Gateway"
    );
    let spec = d.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(2));
    let ru = spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .unwrap();
    assert_eq!(
        serde_json::to_value(ru).unwrap(),
        json!({"maxSurge": 1, "maxUnavailable": 0})
    );
    let pod = spec.template.spec.as_ref().unwrap();
    let c = &pod.containers[0];
    assert_eq!(
        c.args.as_ref().unwrap(),
        &vec!["--config".to_string(), "/etc/ankusa/gw.yaml".into()]
    );
    let env = c.env.as_ref().unwrap();
    let instance = env.iter().find(|e| e.name == "ANKUSA_INSTANCE").unwrap();
    assert_eq!(
        instance
            .value_from
            .as_ref()
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.as_str()),
        Some("metadata.name")
    );
    let data = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == "data")
        .expect("a data volume");
    let empty = data.empty_dir.as_ref().expect("an emptyDir");
    assert_eq!(empty.size_limit.as_ref().map(|q| q.0.as_str()), Some("2Gi"));
    // Same hardening and probes as the StatefulSet's pods.
    let sts = resources::statefulset(&gateway(json!({})), "ghcr.io/ankusa/ankusa:test");
    let sts_pod = sts.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.security_context, sts_pod.security_context);
    assert_eq!(
        c.readiness_probe,
        sts_pod.containers[0].readiness_probe.clone()
    );
    assert_eq!(
        c.security_context,
        sts_pod.containers[0].security_context.clone()
    );
    // A StatefulSet pod reads its own file and has no ANKUSA_INSTANCE.
    let sts_env = sts_pod.containers[0].env.clone().unwrap();
    assert!(!sts_env.iter().any(|e| e.name == "ANKUSA_INSTANCE"));
}

#[test]
fn autoscaling_gives_an_autoscaler_and_leaves_replicas_to_it() {
    let gw =
        direct(json!({"autoscaling": {"maxReplicas": 6, "targetCPUUtilizationPercentage": 55}}));
    let d = resources::deployment(&gw, "img");
    assert_eq!(d.spec.as_ref().unwrap().replicas, None);
    let a = gw.spec.autoscaling.clone().unwrap();
    let hpa = resources::autoscaler(&gw, &a);
    let v = serde_json::to_value(&hpa).unwrap();
    assert_eq!(
        v["spec"],
        json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gw"},
               "minReplicas": 2, "maxReplicas": 6, "targetCPUUtilizationPercentage": 55})
    );
    assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "Gateway");
    use ankusa_operator::status::gateway::desired_replicas;
    assert_eq!(desired_replicas(&gw, 0), 2, "at least minReplicas");
    assert_eq!(desired_replicas(&gw, 4), 4, "what the autoscaler runs");
    assert_eq!(desired_replicas(&gw, 9), 6, "at most maxReplicas");
    assert_eq!(desired_replicas(&direct(json!({})), 5), 2, "spec.replicas");
}

#[test]
fn the_crd_schema_carries_the_direct_fields_and_their_rules() {
    let crd = serde_json::to_string(&<Gateway as kube::CustomResourceExt>::crd()).unwrap();
    for needle in [
        "\"direct\"",
        "publishTimeoutMs",
        "retryAfterS",
        "targetCPUUtilizationPercentage",
        "durability.backup is for modes disk and dual",
        "autoscaling.minReplicas must not exceed maxReplicas",
    ] {
        assert!(crd.contains(needle), "{needle}");
    }
}
