//! Pure tests of rendering: custom resources + Secret values → the gateway's own config per
//! pod, and the objects a Gateway owns.

use ankusa_config::{Config, SinkConfig, VerifyConfig};
use ankusa_crds::{Gateway, Sink, Source};
use ankusa_operator::render::{self, Inputs, Outcome, SecretValues};
use ankusa_operator::resources;
use common::{meta, object, secrets};
use serde_json::json;

mod common;

fn gateway(spec: serde_json::Value) -> Gateway {
    object(
        json!({"name": "gw", "namespace": "ns", "uid": "11111111-2222-3333-4444-555555555555", "generation": 1}),
        spec,
    )
}

fn source(name: &str, spec: serde_json::Value) -> Source {
    object(meta(name, 3), spec)
}

fn sink(name: &str, spec: serde_json::Value) -> Sink {
    object(meta(name, 2), spec)
}

const TOKEN: &str = "operator-admin-token-0123456789";

fn receiver_sink() -> Sink {
    sink(
        "receiver",
        json!({"type": "http", "options": {"url": "http://127.0.0.1:9000/hooks", "timeout_ms": 2000},
               "secretRefs": {"secret": [{"name": "signing", "key": "whsec"}]}}),
    )
}

fn orders() -> Source {
    source(
        "orders",
        json!({"gatewayRef": {"name": "gw"},
               "verify": {"type": "github", "secretRefs": [{"name": "gh", "key": "new"}, {"name": "gh", "key": "old"}]},
               "dedupe": {"preset": "github"},
               "sinks": [{"name": "receiver"}, {"name": "audit"}]}),
    )
}

fn base_secrets() -> SecretValues {
    secrets(&[
        ("gh", "old", "old-secret\n"),
        ("gh", "new", "new-secret"),
        ("signing", "whsec", "whsec_c2VjcmV0LWtleS1ieXRlcw=="),
    ])
}

fn render_with(
    gw: &Gateway,
    sources: &[Source],
    sinks: &[Sink],
    secrets: &SecretValues,
    previous: Option<&Config>,
) -> render::Rendered {
    render::render(&Inputs {
        gateway: gw,
        sources,
        sinks,
        secrets,
        admin_token: TOKEN,
        scrape_token: None,
        previous,
    })
}

fn lenient_gateway() -> Gateway {
    gateway(
        json!({"replicas": 3, "ports": {"http": 4100, "admin": 4102},
                   "settings": {"egress": {"allow_http": true, "allow_loopback": true},
                                "dispatch": {"concurrency": 8, "retry": {"max_ms": 500}}}}),
    )
}

#[test]
fn renders_the_gateways_own_config_per_pod() {
    let gw = lenient_gateway();
    let sinks = [receiver_sink(), sink("audit", json!({"type": "log"}))];
    let r = render_with(&gw, &[orders()], &sinks, &base_secrets(), None);
    assert_eq!(r.error, None);
    assert_eq!(r.sources["orders"].outcome, Outcome::Current);
    let c = r.for_pod("gw-1").unwrap();
    assert_eq!(c.node.instance, "gw-1");
    assert_eq!(c.node.data_dir.to_str(), Some("/var/lib/ankusa"));
    assert_eq!((c.http.port, c.admin.port), (4100, 4102));
    assert!(c.http.ip.is_unspecified() && c.admin.ip.is_unspecified());
    assert_eq!(c.admin.tokens[0].token, TOKEN);
    assert_eq!(c.admin.tokens[0].scopes, vec!["*"]);
    assert_eq!(c.dispatch.concurrency, 8);
    assert_eq!(c.dispatch.retry.max_ms, 500);
    assert_eq!(
        c.dispatch.retry.base_ms, 100,
        "absent keys keep the gateway's default"
    );
    assert!(c.egress.allow_loopback);
    let src = &c.sources["orders"];
    match &src.verify {
        VerifyConfig::Github(p) => {
            assert_eq!(
                p.secret.0,
                vec!["new-secret", "old-secret"],
                "newest first, newline trimmed"
            )
        }
        other => panic!("unexpected verify {other:?}"),
    }
    assert_eq!(src.sinks.len(), 2);
    match &src.sinks[0] {
        SinkConfig::Http(h) => {
            assert_eq!(h.url, "http://127.0.0.1:9000/hooks");
            assert_eq!(h.timeout_ms, 2000);
            assert_eq!(
                h.secret.as_ref().unwrap().0,
                vec!["whsec_c2VjcmV0LWtleS1ieXRlcw=="]
            );
        }
        other => panic!("unexpected sink {other:?}"),
    }
    assert_eq!(
        src.sinks[1].type_name(),
        "log",
        "sink order is the Source's list order"
    );
    assert_eq!(
        src.sink_names,
        vec!["receiver", "audit"],
        "the pods report delivery failures under the Sinks' names"
    );
    ankusa_config::validate(&c).expect("the gateway's own validation accepts it");
    // The YAML the pod reads parses back to the same config, with the same hash.
    let back = render::parse_rendered(&c.to_yaml()).unwrap();
    assert_eq!(back, c);
    assert_eq!(back.hash(), c.hash());
    // Pods differ only by instance.
    let c0 = r.for_pod("gw-0").unwrap();
    assert_ne!(c0.hash(), c.hash());
    assert_eq!(
        Config {
            node: c.node.clone(),
            ..c0
        },
        c
    );
    assert!(r.secrets_used.contains("gh") && r.secrets_used.contains("signing"));
}

#[test]
fn the_scrape_token_is_rendered_with_metrics_read_only_and_passes_the_gateways_validation() {
    let gw = lenient_gateway();
    let scrape = "scrape-token-0123456789abcdef";
    let sinks = [receiver_sink(), sink("audit", json!({"type": "log"}))];
    let r = render::render(&Inputs {
        gateway: &gw,
        sources: &[orders()],
        sinks: &sinks,
        secrets: &base_secrets(),
        admin_token: TOKEN,
        scrape_token: Some(scrape),
        previous: None,
    });
    assert_eq!(r.error, None);
    for pod in ["gw-0", "gw-2"] {
        let c = r.for_pod(pod).unwrap();
        let tokens: Vec<(&str, Vec<&str>)> = c
            .admin
            .tokens
            .iter()
            .map(|t| {
                (
                    t.token.as_str(),
                    t.scopes.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            tokens,
            vec![(TOKEN, vec!["*"]), (scrape, vec!["metrics:read"])],
            "{pod}"
        );
        // The file the pod reads back loads and validates with the gateway's own rules.
        let loaded = render::parse_rendered(&c.to_yaml()).expect("the gateway loads it");
        ankusa_config::validate(&loaded).unwrap();
        assert_eq!(loaded.admin.tokens[1].scopes, vec!["metrics:read"]);
    }
    // A scrape token too short for the gateway refuses the settings, naming the field.
    let r = render::render(&Inputs {
        gateway: &gw,
        sources: &[],
        sinks: &[],
        secrets: &base_secrets(),
        admin_token: TOKEN,
        scrape_token: Some("short"),
        previous: None,
    });
    let e = r.error.unwrap();
    assert!(e.contains("admin.tokens[1].token"), "{e}");
}

#[test]
fn rendering_is_deterministic() {
    let gw = lenient_gateway();
    let sinks = [receiver_sink(), sink("audit", json!({"type": "log"}))];
    let a = render_with(&gw, &[orders()], &sinks, &base_secrets(), None);
    let b = render_with(&gw, &[orders()], &sinks, &base_secrets(), None);
    assert_eq!(
        a.for_pod("gw-0").unwrap().to_yaml(),
        b.for_pod("gw-0").unwrap().to_yaml()
    );
    assert_eq!(
        serde_json::to_string(&resources::statefulset(&gw, "img")).unwrap(),
        serde_json::to_string(&resources::statefulset(&gw, "img")).unwrap()
    );
}

#[test]
fn sources_of_other_gateways_are_ignored() {
    let gw = lenient_gateway();
    let other = source(
        "other",
        json!({"gatewayRef": {"name": "elsewhere"}, "sinks": [{"name": "audit"}]}),
    );
    let r = render_with(
        &gw,
        &[other],
        &[sink("audit", json!({"type": "log"}))],
        &SecretValues::new(),
        None,
    );
    assert!(r.sources.is_empty());
    assert!(r.base.unwrap().sources.is_empty());
}

#[test]
fn credentials_in_sink_options_are_refused() {
    for (opts, want) in [
        (
            json!({"url": "https://x.example/h", "secret": "whsec_abc"}),
            "secretRefs[\"secret\"]",
        ),
        (
            json!({"url": "amqp://user:pass@rabbit:5672/"}),
            "password in its URL",
        ),
        (
            json!({"url": "https://x.example/h", "headers": {"Authorization": "Bearer x"}}),
            "secretHeaders",
        ),
        (
            json!({"url": "https://x.example/h", "sasl_password": "p"}),
            "credential",
        ),
        (
            json!({"brokers": ["k:9092"], "sasl": {"username": "u", "password": "p"}}),
            "secretRefs[\"sasl.password\"]",
        ),
    ] {
        let s = sink("bad", json!({"type": "http", "options": opts}));
        let e = render::render_sink(&s, &SecretValues::new()).unwrap_err();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn secret_headers_merge_into_headers() {
    let s = sink(
        "h",
        json!({"type": "http", "options": {"url": "https://x.example/h", "allow_unsigned": true, "headers": {"X-Team": "a"}},
               "secretHeaders": {"Authorization": {"name": "auth", "key": "bearer"}}}),
    );
    let c = render::render_sink(&s, &secrets(&[("auth", "bearer", "Bearer s3cr3t")])).unwrap();
    let SinkConfig::Http(h) = c else { panic!() };
    assert_eq!(h.headers["Authorization"], "Bearer s3cr3t");
    assert_eq!(h.headers["X-Team"], "a");
}

#[test]
fn queue_sinks_render_through_the_gateways_own_types() {
    let s = sink(
        "k",
        json!({"type": "kafka",
               "options": {"brokers": ["127.0.0.1:9092"], "topic": "hooks",
                           "sasl": {"mechanism": "plain", "username": "svc"}},
               "secretRefs": {"sasl.password": [{"name": "kafka", "key": "password"}]}}),
    );
    let c = render::render_sink(&s, &secrets(&[("kafka", "password", "pw")])).unwrap();
    assert_eq!(c.type_name(), "kafka");
    let v = serde_json::to_value(&c).unwrap();
    assert_eq!(v["sasl"]["password"], "pw");
    assert_eq!(v["sasl"]["username"], "svc");
    // A required option missing is the gateway's own error, naming the field.
    let s = sink(
        "p",
        json!({"type": "google_pubsub", "options": {"topic": "t"}}),
    );
    let e = render::render_sink(&s, &SecretValues::new()).unwrap_err();
    assert!(e.contains("project") || e.contains("not supported"), "{e}");
    let s = sink(
        "typo",
        json!({"type": "http", "options": {"urll": "https://x"}}),
    );
    let e = render::render_sink(&s, &SecretValues::new()).unwrap_err();
    assert!(e.contains("urll"), "{e}");
}

/// The typed option field (`spec.kafka`) renders like the deprecated `options` map, and the
/// renderer's errors name it; a field of another type, or both forms, are refused (the CRD's
/// CEL rules, re-checked for servers without CEL).
#[test]
fn typed_option_fields_render_and_errors_name_them() {
    let typed = sink(
        "k",
        json!({"type": "kafka",
               "kafka": {"brokers": ["127.0.0.1:9092"], "topic": "hooks",
                         "sasl": {"mechanism": "plain", "username": "svc"}},
               "secretRefs": {"sasl.password": [{"name": "kafka", "key": "password"}]}}),
    );
    let old = sink(
        "k",
        json!({"type": "kafka",
               "options": {"brokers": ["127.0.0.1:9092"], "topic": "hooks",
                           "sasl": {"mechanism": "plain", "username": "svc"}},
               "secretRefs": {"sasl.password": [{"name": "kafka", "key": "password"}]}}),
    );
    let s = secrets(&[("kafka", "password", "pw")]);
    assert_eq!(
        render::render_sink(&typed, &s).unwrap(),
        render::render_sink(&old, &s).unwrap()
    );
    for (spec, want) in [
        (
            json!({"type": "http", "http": {"urll": "https://x"}}),
            "http.urll",
        ),
        (
            json!({"type": "http", "http": {"url": "https://x", "timeout_ms": "soon"}}),
            "http.timeout_ms",
        ),
        (
            json!({"type": "kafka", "kafka": {"brokers": ["k:9092"], "topic": "t", "sasl": {"mechanism": "plain", "password": "p"}}}),
            "kafka.sasl.password is a credential",
        ),
        (
            json!({"type": "kafka", "kafka": {"brokers": ["k:9092"], "topic": "t", "sasl": {"mechanism": "oauthbearer", "token_file": "/etc/ankusa/gw-0.yaml"}}}),
            "kafka.sasl.token_file: a file path is not accepted",
        ),
        (
            json!({"type": "http", "kafka": {"brokers": ["k:9092"], "topic": "t"}}),
            "spec.kafka: is for type kafka",
        ),
        (
            json!({"type": "http", "http": {"url": "https://x"}, "options": {"url": "https://x"}}),
            "spec.options: deprecated",
        ),
    ] {
        let e = render::render_sink(&sink("bad", spec.clone()), &SecretValues::new()).unwrap_err();
        assert!(e.starts_with(want) || e.contains(want), "{spec}: {e}");
        assert!(!e.contains("/etc/ankusa"), "{e}");
    }
}

#[test]
fn a_broken_source_keeps_its_previous_version_and_a_new_one_stays_out() {
    let gw = lenient_gateway();
    let sinks = [receiver_sink(), sink("audit", json!({"type": "log"}))];
    let good = render_with(&gw, &[orders()], &sinks, &base_secrets(), None);
    let previous = good.for_pod("gw-0").unwrap();
    // The signing Secret disappears: the sink fails, so does the Source.
    let mut missing = base_secrets();
    missing.remove("signing");
    let fresh = source(
        "fresh",
        json!({"gatewayRef": {"name": "gw"}, "sinks": [{"name": "receiver"}]}),
    );
    let r = render_with(&gw, &[orders(), fresh], &sinks, &missing, Some(&previous));
    assert_eq!(r.error, None);
    match &r.sources["orders"].outcome {
        Outcome::Previous(e) => assert!(e.contains("Secret signing not found"), "{e}"),
        o => panic!("unexpected {o:?}"),
    }
    assert!(matches!(r.sources["fresh"].outcome, Outcome::Missing(_)));
    let c = r.for_pod("gw-0").unwrap();
    assert_eq!(
        c.sources["orders"], previous.sources["orders"],
        "kept as the pods had it"
    );
    assert!(!c.sources.contains_key("fresh"));
    assert!(r.sinks["receiver"].error.is_some());
}

#[test]
fn the_gateways_validation_refuses_in_context() {
    let gw = lenient_gateway();
    // standard_webhooks secrets must be whsec_<base64>: validate() names the field.
    let bad = source(
        "sw",
        json!({"gatewayRef": {"name": "gw"},
               "verify": {"type": "standard_webhooks", "secretRefs": [{"name": "s", "key": "k"}]},
               "sinks": [{"name": "audit"}]}),
    );
    let r = render_with(
        &gw,
        &[bad],
        &[sink("audit", json!({"type": "log"}))],
        &secrets(&[("s", "k", "whsec_!!!")]),
        None,
    );
    match &r.sources["sw"].outcome {
        Outcome::Missing(e) => assert!(e.contains("sources.sw.verify.secret"), "{e}"),
        o => panic!("unexpected {o:?}"),
    }
}

#[test]
fn duplicate_source_ids_refuse_the_later_one() {
    let gw = lenient_gateway();
    let mut a = source(
        "a",
        json!({"gatewayRef": {"name": "gw"}, "id": "hooks", "sinks": [{"name": "audit"}]}),
    );
    let mut b = source(
        "b",
        json!({"gatewayRef": {"name": "gw"}, "id": "hooks", "sinks": [{"name": "audit"}]}),
    );
    a.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    ));
    b.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-02T00:00:00Z".parse().unwrap(),
    ));
    let r = render_with(
        &gw,
        &[b, a],
        &[sink("audit", json!({"type": "log"}))],
        &SecretValues::new(),
        None,
    );
    assert_eq!(r.sources["a"].outcome, Outcome::Current);
    assert!(
        matches!(&r.sources["b"].outcome, Outcome::Missing(e) if e.contains("already used by Source a"))
    );
}

#[test]
fn refused_gateway_settings_render_nothing() {
    let gw = gateway(json!({"settings": {"dispatch": {"concurrency": 0}}}));
    let r = render_with(&gw, &[], &[], &SecretValues::new(), None);
    assert!(r.base.is_none());
    assert!(
        r.error
            .unwrap()
            .contains("dispatch.concurrency must be >= 1")
    );
}

#[test]
fn statefulset_reads_the_pods_own_file_and_keeps_a_volume_per_pod() {
    let gw = lenient_gateway();
    let sts = resources::statefulset(&gw, "ghcr.io/ankusa/ankusa:test");
    let spec = sts.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(3));
    assert_eq!(spec.service_name.as_deref(), Some("gw-pods"));
    let pod = spec.template.spec.as_ref().unwrap();
    let c = &pod.containers[0];
    assert_eq!(
        c.args.as_ref().unwrap(),
        &vec![
            "--config".to_string(),
            "/etc/ankusa/$(POD_NAME).yaml".into()
        ]
    );
    let env = c.env.as_ref().unwrap();
    assert_eq!(env[0].name, "POD_NAME");
    assert_eq!(
        env[0]
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path,
        "metadata.name"
    );
    let probe = c
        .readiness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(probe.path.as_deref(), Some("/ready"));
    assert_eq!(pod.termination_grace_period_seconds, Some(60));
    let vct = &spec.volume_claim_templates.as_ref().unwrap()[0];
    assert_eq!(vct.metadata.name.as_deref(), Some("data"));
    let vol = &pod.volumes.as_ref().unwrap()[0];
    assert_eq!(
        vol.secret.as_ref().unwrap().secret_name.as_deref(),
        Some("gw-config")
    );
    assert_eq!(
        sts.metadata.owner_references.as_ref().unwrap()[0].kind,
        "Gateway"
    );
    assert_eq!(resources::ordinal(&gw, "gw-12"), Some(12));
    assert_eq!(resources::ordinal(&gw, "gwx-1"), None);
}

/// The gateway pods pass the Pod Security "restricted" profile and run on a read-only root
/// with their volume writable for the image's non-root user (checked on a real kubelet by
/// operator/tests/node.rs).
#[test]
fn gateway_pods_are_restricted_non_root_with_a_read_only_root() {
    let sts = resources::statefulset(&lenient_gateway(), "ghcr.io/ankusa/ankusa:test");
    let pod = sts.spec.unwrap().template.spec.unwrap();
    let psc = pod.security_context.as_ref().unwrap();
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(psc.run_as_user, Some(resources::GATEWAY_UID));
    assert_eq!(psc.run_as_group, Some(resources::GATEWAY_UID));
    assert_eq!(psc.fs_group, Some(resources::GATEWAY_UID));
    assert_eq!(
        psc.seccomp_profile.as_ref().unwrap().type_,
        "RuntimeDefault"
    );
    let c = &pod.containers[0];
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(
        sc.capabilities.as_ref().unwrap().drop.as_deref(),
        Some(&["ALL".to_string()][..])
    );
    assert!(sc.privileged.is_none() && sc.capabilities.as_ref().unwrap().add.is_none());
    // Writable: the data volume and /tmp only.
    let writable: Vec<&str> = c
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .filter(|m| m.read_only != Some(true))
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(writable, ["/var/lib/ankusa", "/tmp"]);
    let tmp = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == "tmp")
        .unwrap();
    assert!(tmp.empty_dir.is_some());
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert!(pod.host_network.is_none() && pod.host_pid.is_none());
}

#[test]
fn the_claim_port_reaches_the_pod_network_only_with_reader_tokens() {
    let sinks = [receiver_sink(), sink("audit", json!({"type": "log"}))];
    // No tokens: the claim port stays on the pod's loopback.
    let gw = gateway(json!({"ports": {"claims": 4105}}));
    let r = render_with(&gw, &[orders()], &sinks, &base_secrets(), None);
    let c = r.for_pod("gw-0").unwrap();
    assert!(c.claim_check.enabled);
    assert_eq!(c.claim_check.port, 4105);
    assert!(c.claim_check.ip.is_loopback() && c.claim_check.tokens.is_empty());

    let gw = gateway(json!({"settings": {"claim_check": {
        "retention_days": 7,
        "token_secret_refs": [{"name": "claims", "key": "reader"}]}}}));
    let mut s = base_secrets();
    s.entry("claims".into())
        .or_default()
        .insert("reader".into(), b"claim-reader-token\n".to_vec());
    let r = render_with(&gw, &[orders()], &sinks, &s, None);
    assert_eq!(r.error, None);
    let c = r.for_pod("gw-0").unwrap();
    assert!(c.claim_check.ip.is_unspecified());
    assert_eq!(c.claim_check.port, 4001);
    assert_eq!(c.claim_check.retention_days, Some(7));
    assert_eq!(c.claim_check.tokens, vec!["claim-reader-token"]);
    assert!(r.secrets_used.contains("claims"));
    let names: Vec<String> = {
        let srcs = [orders()];
        ankusa_operator::render::referenced_secrets(&gw, &srcs, &sinks)
            .into_iter()
            .collect()
    };
    assert!(names.contains(&"claims".to_string()), "{names:?}");
    // The headless Service and the container expose the claim port.
    let sts = resources::statefulset(&gw, "ankusa:test");
    let ports = sts.spec.unwrap().template.spec.unwrap().containers[0]
        .ports
        .clone()
        .unwrap();
    assert!(
        ports
            .iter()
            .any(|p| p.name.as_deref() == Some("claims") && p.container_port == 4001)
    );

    // A missing token Secret refuses the render, naming the field.
    let r = render_with(&gw, &[orders()], &sinks, &base_secrets(), None);
    let err = r.error.unwrap();
    assert!(
        err.contains("spec.settings.claim_check.token_secret_refs[0]") && err.contains("claims"),
        "{err}"
    );
}

/// `settings.claim_check.store`: every pod gets the same bucket with its credentials from the
/// Secret (which then re-renders the pods), the declared expiry refuses a Source whose retries
/// outlast it, naming `retry_exceeds_claim_expiry`, and a `local` store is refused.
#[test]
fn a_claim_bucket_reaches_every_pod_and_its_expiry_bounds_the_sources() {
    let q = sink(
        "q",
        json!({"type": "rabbitmq", "options": {"url": "amqp://127.0.0.1:5672/%2f", "exchange": "hooks"}}),
    );
    let queued = |name: &str, horizon_ms: u64| {
        source(
            name,
            json!({"gatewayRef": {"name": "gw"}, "retry": {"maxElapsedMs": horizon_ms},
                   "sinks": [{"name": "q"}]}),
        )
    };
    let gw = gateway(json!({"replicas": 2,
        "settings": {"egress": {"allow_http": true, "allow_loopback": true}, "claim_check": {
            "bucket_expiry_days": 3,
            "store": {"type": "s3", "bucket": "claims", "endpoint": "http://127.0.0.1:5000",
                      "credentials": {"accessKeyId": {"name": "s3", "key": "id"},
                                      "secretAccessKey": {"name": "s3", "key": "secret"}}}}}}));
    let srcs = [
        queued("fits", 86_400_000),
        queued("outlasts", 3 * 86_400_000),
    ];
    let r = render_with(&gw, &srcs, &[q], &s3_secrets(), None);
    assert_eq!(r.error, None);
    assert!(r.secrets_used.contains("s3"), "its changes re-render");
    for pod in ["gw-0", "gw-1"] {
        let c = r.for_pod(pod).unwrap();
        let st = c.claim_check.store.as_ref().expect("a claim store");
        assert_eq!(st.store_type, ankusa_config::BlobStoreKind::S3);
        let s3 = st.s3.as_ref().unwrap();
        assert_eq!(s3.bucket, "claims");
        assert_eq!(c.claim_check.bucket_expiry_days, Some(3));
        assert_eq!(c.claim_check.redeem_grace_days, 1);
        assert!(c.sources.contains_key("fits"));
        assert!(!c.sources.contains_key("outlasts"));
    }
    match &r.sources["outlasts"].outcome {
        Outcome::Missing(e) => assert!(
            e.contains("retry_exceeds_claim_expiry") && e.contains("max_elapsed_ms"),
            "{e}"
        ),
        o => panic!("unexpected {o:?}"),
    }
    let v = serde_json::to_string(&r.for_pod("gw-0").unwrap().claim_check).unwrap();
    assert!(v.contains(AKID), "the pods get the Secret's credentials");

    let local = gateway(json!({"settings": {"claim_check": {"store": {"type": "local"}}}}));
    let e = render_with(&local, &[], &[], &s3_secrets(), None)
        .error
        .unwrap();
    assert!(e.contains("spec.settings.claim_check.store.type"), "{e}");
}

/// The operator's own pods as the chart runs them.
fn policy() -> resources::Policy {
    resources::Policy {
        operator_namespace: "ankusa-system".into(),
        operator_pod_labels: [
            ("app.kubernetes.io/name", "ankusa-operator"),
            ("app.kubernetes.io/instance", "ankusa"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        allowed_service_accounts: vec![],
    }
}

/// The NetworkPolicy's ingress rules as `(port, from)` in JSON, for readable assertions.
fn ingress_rules(
    np: &k8s_openapi::api::networking::v1::NetworkPolicy,
) -> Vec<(i64, serde_json::Value)> {
    let spec = serde_json::to_value(np.spec.as_ref().expect("a spec")).unwrap();
    spec["ingress"]
        .as_array()
        .expect("ingress rules")
        .iter()
        .map(|r| {
            let ports = r["ports"].as_array().expect("ports");
            assert_eq!(ports.len(), 1, "one port per rule: {r}");
            assert_eq!(ports[0]["protocol"], "TCP");
            (
                ports[0]["port"].as_i64().expect("a port number"),
                r["from"].clone(),
            )
        })
        .collect()
}

#[test]
fn the_network_policy_opens_ingest_to_all_admin_to_the_operator_and_claims_to_the_namespace() {
    let gw = gateway(json!({"ports": {"http": 4100, "admin": 4102, "claims": 4101}}));
    let np = resources::network_policy(&gw, &policy());
    // Owned and labelled like everything else the Gateway owns.
    assert_eq!(np.metadata.name.as_deref(), Some("gw"));
    assert_eq!(np.metadata.namespace.as_deref(), Some("ns"));
    assert!(resources::owned_by(&np.metadata, &gw));
    assert_eq!(
        np.metadata.labels.as_ref(),
        Some(&resources::object_labels(&gw))
    );
    let spec = np.spec.as_ref().unwrap();
    assert_eq!(
        spec.pod_selector.as_ref().unwrap().match_labels.as_ref(),
        Some(&resources::selector_labels(&gw)),
        "the Gateway's pods, by the StatefulSet's own selector"
    );
    assert_eq!(
        spec.policy_types.as_deref(),
        Some(&["Ingress".to_string()][..])
    );
    assert!(spec.egress.is_none());
    let rules = ingress_rules(&np);
    assert_eq!(rules.len(), 4, "{rules:?}");
    // Ingest: no `from`, so every source.
    assert_eq!(rules[0], (4100, serde_json::Value::Null));
    // Admin: the operator's pods in the operator's namespace, both selectors in one peer (an
    // AND), so neither every pod of that namespace nor such labels elsewhere.
    assert_eq!(
        rules[1],
        (
            4102,
            json!([{
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ankusa-system"}},
                "podSelector": {"matchLabels": {
                    "app.kubernetes.io/instance": "ankusa",
                    "app.kubernetes.io/name": "ankusa-operator"}},
            }])
        )
    );
    // Claims: by default the Gateway's own namespace only.
    assert_eq!(
        rules[2],
        (
            4101,
            json!([{"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ns"]}]}}])
        )
    );
    // The fleet port (three pods by default): the Gateway's own pods only.
    assert_eq!(
        rules[3],
        (
            4004,
            json!([{"podSelector": {"matchLabels": resources::selector_labels(&gw)}}])
        )
    );
    // One pod: no fleet, no fleet rule.
    let one = gateway(json!({"replicas": 1}));
    assert_eq!(
        ingress_rules(&resources::network_policy(&one, &policy())).len(),
        3
    );
    // Deterministic, so re-applying it is a no-op.
    assert_eq!(
        serde_json::to_string(&np).unwrap(),
        serde_json::to_string(&resources::network_policy(&gw, &policy())).unwrap()
    );
}

#[test]
fn listed_namespaces_reach_the_claim_and_metrics_ports_and_an_empty_list_closes_claims() {
    let gw = gateway(json!({"networkPolicy": {
        "claimCheckNamespaces": ["orders", "billing", "orders"],
        "metricsNamespaces": ["monitoring"]}}));
    let rules = ingress_rules(&resources::network_policy(&gw, &policy()));
    assert_eq!(rules.len(), 4, "{rules:?}");
    let admin = &rules[1];
    assert_eq!(admin.0, 4002);
    let peers = admin.1.as_array().unwrap();
    assert_eq!(peers.len(), 2, "the operator, then the scrapers: {peers:?}");
    assert_eq!(
        peers[1],
        json!({"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring"]}]}})
    );
    assert_eq!(
        rules[2],
        (
            4001,
            json!([{"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In",
                 "values": ["billing", "orders"]}]}}])
        ),
        "sorted, once each; the Gateway's own namespace only if listed"
    );

    // `[]` closes the claim port: no rule at all, as a rule with an empty `from` would admit
    // every source.
    let closed = gateway(json!({"networkPolicy": {"claimCheckNamespaces": []}}));
    let rules = ingress_rules(&resources::network_policy(&closed, &policy()));
    assert_eq!(
        rules.iter().map(|r| r.0).collect::<Vec<_>>(),
        [4000, 4002, 4004],
        "{rules:?}"
    );
    assert!(rules.iter().all(|r| r.0 == 4000 || r.1.is_array()));

    // On by default; the switch is read from the spec.
    assert!(gateway(json!({})).spec.network_policy.enabled);
    assert!(
        !gateway(json!({"networkPolicy": {"enabled": false}}))
            .spec
            .network_policy
            .enabled
    );
}

#[test]
fn a_service_account_the_policy_does_not_allow_refuses_the_gateway() {
    let with_sa = |name: &str| gateway(json!({"podTemplate": {"serviceAccountName": name}}));
    let mut p = policy();
    // Unset, empty or `default` (what unset means) are always fine.
    assert_eq!(
        resources::service_account_refusal(&gateway(json!({})), &p),
        None
    );
    assert_eq!(resources::service_account_refusal(&with_sa(""), &p), None);
    assert_eq!(
        resources::service_account_refusal(&with_sa("default"), &p),
        None
    );
    // By default no other name is allowed; the message names the field and the name (a name
    // is no secret) and says how to allow it.
    let msg = resources::service_account_refusal(&with_sa("deployer"), &p).unwrap();
    assert!(
        msg.starts_with(
            "spec.podTemplate.serviceAccountName: ServiceAccount deployer is not allowed"
        ) && msg.contains("allows none")
            && msg.contains("gatewayPolicy.allowedServiceAccounts"),
        "{msg}"
    );
    p.allowed_service_accounts = vec!["gateway-pods".into(), "pull-only".into()];
    assert_eq!(
        resources::service_account_refusal(&with_sa("pull-only"), &p),
        None
    );
    let msg = resources::service_account_refusal(&with_sa("deployer"), &p).unwrap();
    assert!(msg.contains("it allows gateway-pods, pull-only"), "{msg}");
    // An allowed name reaches the pod template as given.
    let sts = resources::statefulset(&with_sa("pull-only"), "img");
    assert_eq!(
        sts.spec
            .unwrap()
            .template
            .spec
            .unwrap()
            .service_account_name
            .as_deref(),
        Some("pull-only")
    );
}

/// A Gateway archiving to S3 with credentials from Secret `s3`, and pen and DLQ bounds.
fn archiving_gateway(archive: serde_json::Value) -> Gateway {
    gateway(json!({
        "replicas": 3,
        "settings": {"quarantine": {"max_bytes": 1048576},
                     "queue": {"dlq": {"retention_days": 7, "max_rows": 100}}},
        "archive": archive,
    }))
}

const AKID: &str = "AKIAEXAMPLEKEYID0001";
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

fn s3_secrets() -> SecretValues {
    secrets(&[("s3", "id", AKID), ("s3", "secret", SECRET_KEY)])
}

#[test]
fn the_archive_and_the_pen_and_dlq_bounds_reach_every_pods_config() {
    let gw = archiving_gateway(json!({
        "type": "s3", "bucket": "hooks-archive", "endpoint": "http://127.0.0.1:5000",
        "region": "eu-west-1", "forcePathStyle": true, "rollBytes": 65536, "intervalMs": 200,
        "credentials": {"accessKeyId": {"name": "s3", "key": "id"},
                        "secretAccessKey": {"name": "s3", "key": "secret"}}}));
    let r = render_with(&gw, &[], &[], &s3_secrets(), None);
    assert_eq!(r.error, None);
    assert!(r.secrets_used.contains("s3"), "its changes re-render");
    let c = r.for_pod("gw-2").unwrap();
    let st = c.storage.as_ref().expect("storage rendered");
    assert_eq!(st.store_type, ankusa_config::BlobStoreType::S3);
    assert_eq!(
        st.key_prefix.as_deref(),
        Some("ns/gw"),
        "Gateways sharing a bucket never share keys"
    );
    assert_eq!((st.roll_bytes, st.interval_ms), (65536, 200));
    assert_eq!(st.roll_ms, 30_000, "absent keys keep the gateway's default");
    assert_eq!(st.archive_at, ankusa_config::ArchiveAt::Settled);
    let s3 = st.s3.as_ref().unwrap();
    assert_eq!(s3.bucket, "hooks-archive");
    assert_eq!(s3.region.as_deref(), Some("eu-west-1"));
    assert_eq!(
        s3.endpoint.as_ref().map(|e| e.expose()),
        Some("http://127.0.0.1:5000")
    );
    assert_eq!(s3.force_path_style, Some(true));
    assert_eq!(s3.access_key_id.as_ref().map(|s| s.expose()), Some(AKID));
    assert_eq!(
        s3.secret_access_key.as_ref().map(|s| s.expose()),
        Some(SECRET_KEY)
    );
    assert_eq!(s3.session_token, None);
    // Credentials are the redacting type: a config printed to a log shows none.
    let printed = format!("{c:?}");
    assert!(
        !printed.contains(SECRET_KEY) && !printed.contains(AKID),
        "{printed}"
    );
    assert_eq!(c.quarantine.max_bytes, 1_048_576);
    assert_eq!(
        c.quarantine.burst, 100,
        "the pen's other keys keep their defaults"
    );
    assert_eq!(
        (c.queue.dlq.retention_days, c.queue.dlq.max_rows),
        (Some(7), Some(100))
    );
    // The pod reads back what it was given.
    let back = render::parse_rendered(&c.to_yaml()).expect("the pod's file parses");
    assert_eq!(back.storage, c.storage);
    assert_eq!(back.queue, c.queue);

    // Local: a directory on the pod's own volume; an explicit prefix is kept.
    let gw =
        archiving_gateway(json!({"type": "local", "keyPrefix": "team-a/gw", "archiveAt": "ack"}));
    let r = render_with(&gw, &[], &[], &SecretValues::new(), None);
    let c = r.for_pod("gw-0").unwrap();
    let st = c.storage.unwrap();
    assert_eq!(st.store_type, ankusa_config::BlobStoreType::Local);
    assert_eq!(st.key_prefix.as_deref(), Some("team-a/gw"));
    assert_eq!(st.archive_at, ankusa_config::ArchiveAt::Ack);
    assert_eq!(
        st.local.unwrap().dir.to_str(),
        Some("/var/lib/ankusa/archive"),
        "beside the store, on the data volume"
    );
    // No archive: none rendered.
    let r = render_with(&lenient_gateway(), &[], &[], &SecretValues::new(), None);
    assert_eq!(r.for_pod("gw-0").unwrap().storage, None);
}

#[test]
fn archive_errors_name_the_field_and_never_a_secret() {
    let creds = json!({"accessKeyId": {"name": "s3", "key": "id"},
                       "secretAccessKey": {"name": "s3", "key": "secret"}});
    let s3 = |extra: serde_json::Value| {
        let mut a = json!({"type": "s3", "bucket": "hooks-archive", "credentials": creds});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    };
    let mut unlabelled = s3_secrets();
    unlabelled.insert(
        "s3".into(),
        [(render::NOT_USABLE.to_string(), Vec::new())].into(),
    );
    let cases: Vec<(serde_json::Value, SecretValues, &str)> = vec![
        (
            s3(json!({})),
            SecretValues::new(),
            "spec.archive.credentials.accessKeyId: Secret s3 not found",
        ),
        (
            s3(json!({})),
            unlabelled,
            "spec.archive.credentials.accessKeyId: Secret s3 is not labelled ankusa.dev/usable=true",
        ),
        (
            s3(json!({"credentials": {"accessKeyId": {"name": "s3", "key": "id"}}})),
            s3_secrets(),
            "spec.archive.credentials: accessKeyId and secretAccessKey are given together",
        ),
        (
            json!({"type": "s3"}),
            s3_secrets(),
            "spec.archive.bucket: is required for type s3",
        ),
        (
            json!({"type": "local", "bucket": "b"}),
            s3_secrets(),
            "spec.archive.bucket: is for a bucket (s3, gcs, azure), not type local",
        ),
        (
            json!({"type": "local", "credentials": creds}),
            s3_secrets(),
            "spec.archive.credentials: is for a bucket (s3, gcs, azure), not type local",
        ),
        (
            s3(json!({"bucket": "Bad_Bucket"})),
            s3_secrets(),
            "spec.archive.bucket: refused by the gateway's validation",
        ),
        (
            s3(json!({"endpoint": format!("https://{AKID}:{SECRET_KEY}@minio:9000")})),
            s3_secrets(),
            "spec.archive.endpoint: carries credentials in its URL",
        ),
        (
            s3(json!({"endpoint": "ftp://minio"})),
            s3_secrets(),
            "spec.archive.endpoint: refused by the gateway's validation",
        ),
        (
            s3(json!({"keyPrefix": "../up"})),
            s3_secrets(),
            "spec.archive.keyPrefix: refused by the gateway's validation",
        ),
        (
            s3(json!({"rollBytes": 1})),
            s3_secrets(),
            "spec.archive.rollBytes: refused by the gateway's validation",
        ),
        (
            s3(json!({"timeoutMs": 0})),
            s3_secrets(),
            "spec.archive.timeoutMs: refused by the gateway's validation",
        ),
    ];
    for (archive, secrets, want) in cases {
        let gw = archiving_gateway(archive.clone());
        let r = render_with(&gw, &[], &[], &secrets, None);
        let e = r.error.unwrap_or_else(|| panic!("{archive} renders"));
        assert!(e.starts_with(want), "{archive}: {e}");
        assert!(!e.contains(SECRET_KEY) && !e.contains(AKID), "{e}");
        assert!(
            r.base.is_none(),
            "nothing rendered: the pods keep their config"
        );
    }
    // The refused DLQ bound is named as the config file names it, under settings.
    let gw = gateway(json!({"settings": {"queue": {"dlq": {"max_rows": 0}}}}));
    let r = render_with(&gw, &[], &[], &SecretValues::new(), None);
    assert!(r.error.unwrap().contains("queue.dlq.max_rows"));
}

#[test]
fn the_archives_secrets_are_watched_with_the_gateways() {
    let gw = archiving_gateway(json!({
        "type": "s3", "bucket": "hooks-archive",
        "credentials": {"accessKeyId": {"name": "s3", "key": "id"},
                        "secretAccessKey": {"name": "s3-b", "key": "secret"},
                        "sessionToken": {"name": "sts", "key": "token"}}}));
    let names: Vec<&str> = render::gateway_secret_names(&gw).collect();
    assert_eq!(names, vec!["s3", "s3-b", "sts"]);
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sts", "namespace": "ns"}}))
    .unwrap();
    let hit = ankusa_operator::controllers::gateways_of_secret(
        &secret,
        &[std::sync::Arc::new(gw)],
        &[],
        &[],
    );
    assert_eq!(hit.len(), 1);
    assert_eq!(hit[0].name, "gw");
}

#[test]
fn a_quarantining_source_renders_and_validates() {
    let gw = lenient_gateway();
    let q = source(
        "orders",
        json!({"gatewayRef": {"name": "gw"}, "onVerifyFailure": "quarantine",
               "verify": {"type": "github", "secretRefs": [{"name": "gh", "key": "new"}]},
               "sinks": [{"name": "audit"}]}),
    );
    let r = render_with(
        &gw,
        &[q],
        &[sink("audit", json!({"type": "log"}))],
        &base_secrets(),
        None,
    );
    assert_eq!(r.sources["orders"].outcome, Outcome::Current);
    let c = r.for_pod("gw-0").unwrap();
    assert_eq!(
        c.sources["orders"].on_verify_failure,
        ankusa_config::OnVerifyFailure::Quarantine
    );
    assert!(c.to_yaml().contains("on_verify_failure: quarantine"));
}

const KAFKA_PASSWORD: &str = "kafka-intake-password-0001";
const NATS_TOKEN: &str = "nats-intake-token-0001";

fn durable_gateway(durability: serde_json::Value) -> Gateway {
    gateway(json!({
        "replicas": 3,
        "settings": {"egress": {"allow_http": true, "allow_loopback": true}},
        "durability": durability,
    }))
}

fn intake_secrets() -> SecretValues {
    secrets(&[
        ("s3", "id", AKID),
        ("s3", "secret", SECRET_KEY),
        ("kafka", "user", "intake"),
        ("kafka", "password", KAFKA_PASSWORD),
        ("nats", "token", NATS_TOKEN),
    ])
}

fn kafka_intake() -> serde_json::Value {
    json!({"type": "kafka",
           "options": {"brokers": ["127.0.0.1:9092"], "topic": "ankusa-intake",
                       "security_protocol": "sasl_plaintext", "sasl": {"mechanism": "plain"}},
           "secretRefs": {"sasl.username": [{"name": "kafka", "key": "user"}],
                          "sasl.password": [{"name": "kafka", "key": "password"}]},
           "publishTimeoutMs": 3000})
}

fn s3_backup() -> serde_json::Value {
    json!({"intervalMs": 30000, "keep": 5,
           "store": {"type": "s3", "bucket": "hooks-backup", "endpoint": "http://127.0.0.1:5000",
                     "region": "eu-west-1", "forcePathStyle": true,
                     "credentials": {"accessKeyId": {"name": "s3", "key": "id"},
                                     "secretAccessKey": {"name": "s3", "key": "secret"}}}})
}

#[test]
fn durability_dual_with_a_kafka_intake_and_s3_backups_reaches_every_pod() {
    let gw =
        durable_gateway(json!({"mode": "dual", "intake": kafka_intake(), "backup": s3_backup()}));
    let r = render_with(&gw, &[], &[], &intake_secrets(), None);
    assert_eq!(r.error, None);
    for s in ["kafka", "s3"] {
        assert!(r.secrets_used.contains(s), "{s}: its changes re-render");
    }
    let c = r.for_pod("gw-1").unwrap();
    assert_eq!(c.wal.wal_type, ankusa_config::WalType::Dual);
    let i = c.intake.as_ref().expect("intake rendered");
    assert!(i.jetstream.is_none());
    assert_eq!(i.node, None, "node defaults to node.instance, the pod name");
    assert_eq!(i.publish_timeout_ms, 3000);
    assert_eq!(
        i.breaker_failures, 3,
        "absent keys keep the gateway's default"
    );
    let k = i.kafka.as_ref().unwrap();
    assert_eq!(k.brokers, vec!["127.0.0.1:9092".to_string()]);
    assert_eq!(k.topic, "ankusa-intake");
    let sasl = k.sasl.as_ref().unwrap();
    assert_eq!(sasl.username.expose(), "intake");
    assert_eq!(sasl.password.expose(), KAFKA_PASSWORD);
    let b = &c.backup;
    assert!(b.enabled);
    assert_eq!((b.interval_ms, b.keep), (30_000, 5));
    assert_eq!(
        b.key_prefix.as_deref(),
        Some("ns/gw"),
        "each pod writes <prefix>/backup/<pod>/"
    );
    let store = b.store.as_ref().unwrap();
    assert_eq!(store.store_type, ankusa_config::BlobStoreType::S3);
    let s3 = store.s3.as_ref().unwrap();
    assert_eq!(s3.bucket, "hooks-backup");
    assert_eq!(s3.access_key_id.as_ref().map(|s| s.expose()), Some(AKID));
    assert_eq!(
        s3.secret_access_key.as_ref().map(|s| s.expose()),
        Some(SECRET_KEY)
    );
    // What the pod reads back is the same config, secrets resolved.
    let yaml = c.to_yaml();
    let back = ankusa_config::from_rendered_yaml(&yaml).unwrap();
    assert_eq!(back.hash(), c.hash());
    assert!(yaml.contains("type: dual"), "{yaml}");
    assert!(yaml.contains(KAFKA_PASSWORD));
    // No secret reaches what gets logged.
    assert!(!format!("{c:?}").contains(KAFKA_PASSWORD));
    assert!(!format!("{c:?}").contains(SECRET_KEY));
}

#[test]
fn a_jetstream_intake_and_backups_to_the_archives_bucket() {
    let gw = gateway(json!({
        "settings": {"egress": {"allow_http": true, "allow_loopback": true}},
        "archive": {"type": "s3", "bucket": "hooks-archive", "endpoint": "http://127.0.0.1:5000",
                    "credentials": {"accessKeyId": {"name": "s3", "key": "id"},
                                    "secretAccessKey": {"name": "s3", "key": "secret"}}},
        "durability": {"mode": "dual",
                       "intake": {"type": "jetstream",
                                  "options": {"servers": ["nats://127.0.0.1:4222"], "subject": "ankusa.intake"},
                                  "secretRefs": {"auth.token": [{"name": "nats", "key": "token"}]},
                                  "breakerFailures": 5, "retryAfterS": 4, "reconcileIntervalMs": 500},
                       "backup": {"keyPrefix": "team-a/backups"}},
    }));
    let r = render_with(&gw, &[], &[], &intake_secrets(), None);
    assert_eq!(r.error, None);
    assert!(r.secrets_used.contains("nats"));
    let c = r.for_pod("gw-0").unwrap();
    let i = c.intake.as_ref().unwrap();
    assert!(i.kafka.is_none());
    let n = i.jetstream.as_ref().unwrap();
    assert_eq!(n.subject, "ankusa.intake");
    assert_eq!(
        n.auth
            .as_ref()
            .and_then(|a| a.token.as_ref())
            .map(|t| t.expose()),
        Some(NATS_TOKEN)
    );
    assert_eq!(
        (i.breaker_failures, i.retry_after_s, i.reconcile_interval_ms),
        (5, 4, 500)
    );
    assert!(c.backup.enabled);
    assert_eq!(
        c.backup.store, None,
        "the gateway's default: the archive's store"
    );
    assert_eq!(c.backup.key_prefix.as_deref(), Some("team-a/backups"));
    assert_eq!((c.backup.interval_ms, c.backup.keep), (60_000, 3));
    // Disk mode with backups only; disabled backups render nothing.
    let gw = durable_gateway(json!({"backup": s3_backup()}));
    let c = render_with(&gw, &[], &[], &intake_secrets(), None)
        .for_pod("gw-0")
        .unwrap();
    assert_eq!(c.wal.wal_type, ankusa_config::WalType::Disk);
    assert!(c.intake.is_none() && c.backup.enabled);
    let mut off = s3_backup();
    off["enabled"] = json!(false);
    let gw = durable_gateway(json!({"backup": off}));
    let c = render_with(&gw, &[], &[], &intake_secrets(), None)
        .for_pod("gw-0")
        .unwrap();
    assert_eq!(c.backup, ankusa_config::BackupConfig::default());
    assert!(
        !c.to_yaml().contains("backup"),
        "a section at its defaults stays out"
    );
}

#[test]
fn durability_errors_name_the_field_and_never_a_secret() {
    let dual = |intake: serde_json::Value| json!({"mode": "dual", "intake": intake});
    let mut bad_topic = kafka_intake();
    bad_topic["options"]["topic"] = json!(42);
    let mut inline_password = kafka_intake();
    inline_password["options"]["sasl"]["password"] = json!(KAFKA_PASSWORD);
    let mut wrong_ref = kafka_intake();
    wrong_ref["secretRefs"]["topic"] = json!([{"name": "kafka", "key": "password"}]);
    let mut missing = kafka_intake();
    missing["secretRefs"]["sasl.password"] = json!([{"name": "kafka", "key": "nope"}]);
    let mut no_brokers = kafka_intake();
    no_brokers["options"]["brokers"] = json!([]);
    let mut timeout = kafka_intake();
    timeout["publishTimeoutMs"] = json!(1);
    let mut backup_no_creds = s3_backup();
    backup_no_creds["store"]["credentials"]["secretAccessKey"] =
        json!({"name": "gone", "key": "k"});
    let mut backup_local = s3_backup();
    backup_local["store"] = json!({"type": "local"});
    let mut backup_interval = s3_backup();
    backup_interval["intervalMs"] = json!(10);
    let mut backup_endpoint = s3_backup();
    backup_endpoint["store"]["endpoint"] = json!(format!("http://id:{SECRET_KEY}@minio:9000"));
    let mut backup_bucket = s3_backup();
    backup_bucket["store"]["bucket"] = json!("No_Such");
    let cases = [
        (
            json!({"mode": "dual"}),
            "spec.durability.intake: is required for mode dual",
        ),
        (
            json!({"intake": kafka_intake()}),
            "spec.durability.intake: is for mode dual only",
        ),
        (
            dual(bad_topic),
            "spec.durability.intake.options.topic: invalid type",
        ),
        (
            dual(inline_password),
            "spec.durability.intake.options.sasl.password is a credential",
        ),
        (
            dual(wrong_ref),
            "spec.durability.intake.secretRefs[\"topic\"]: not a credential option",
        ),
        (
            dual(missing),
            "spec.durability.intake.secretRefs.sasl.password: Secret kafka has no key",
        ),
        (
            dual(no_brokers),
            "spec.durability.intake.options.brokers: refused by the gateway's validation",
        ),
        (
            dual(timeout),
            "spec.durability.intake.publishTimeoutMs: refused by the gateway's validation",
        ),
        (
            json!({"backup": {}}),
            "spec.durability.backup.store: is required when spec.archive is not set",
        ),
        (
            json!({"backup": backup_no_creds}),
            "spec.durability.backup.store.credentials.secretAccessKey: Secret gone not found",
        ),
        (
            json!({"backup": backup_local}),
            "spec.durability.backup.store.type: must be s3",
        ),
        (
            json!({"backup": backup_interval}),
            "spec.durability.backup.intervalMs: refused by the gateway's validation",
        ),
        (
            json!({"backup": backup_endpoint}),
            "spec.durability.backup.store.endpoint: carries credentials in its URL",
        ),
        (
            json!({"backup": backup_bucket}),
            "spec.durability.backup.store.bucket: refused by the gateway's validation",
        ),
    ];
    for (d, want) in cases {
        let gw = durable_gateway(d.clone());
        let r = render_with(&gw, &[], &[], &intake_secrets(), None);
        let e = r.error.unwrap_or_else(|| panic!("{d} renders"));
        assert!(e.starts_with(want), "{d}:\n  got  {e}\n  want {want}");
        for secret in [KAFKA_PASSWORD, SECRET_KEY, AKID, NATS_TOKEN] {
            assert!(!e.contains(secret), "{e}");
        }
        assert!(
            r.base.is_none(),
            "nothing rendered: the pods keep their config"
        );
    }
    // Backups on a local archive's store would go with the volume.
    let gw = gateway(json!({"archive": {"type": "local"}, "durability": {"backup": {}}}));
    let e = render_with(&gw, &[], &[], &intake_secrets(), None)
        .error
        .unwrap();
    assert!(
        e.starts_with("spec.durability.backup.store: is required: spec.archive is of type local"),
        "{e}"
    );
}

#[test]
fn durability_secrets_are_watched_and_roll_the_pods() {
    let gw =
        durable_gateway(json!({"mode": "dual", "intake": kafka_intake(), "backup": s3_backup()}));
    let names: Vec<&str> = render::gateway_secret_names(&gw).collect();
    assert_eq!(names, vec!["kafka", "kafka", "s3", "s3"]);
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kafka", "namespace": "ns"}}))
    .unwrap();
    let hit = ankusa_operator::controllers::gateways_of_secret(
        &secret,
        &[std::sync::Arc::new(gw.clone())],
        &[],
        &[],
    );
    assert_eq!(hit.len(), 1);
    // The pods' template carries a keyed digest of the durability sections: a rotated
    // password changes it (the StatefulSet rolls), nothing else does, and it gives nothing
    // of the password away.
    let fp = |secrets: &SecretValues| {
        let c = render_with(&gw, &[], &[], secrets, None).base.unwrap();
        render::durability_fingerprint(&c, TOKEN).unwrap()
    };
    let before = fp(&intake_secrets());
    assert_eq!(before, fp(&intake_secrets()), "stable");
    let mut rotated = intake_secrets();
    rotated
        .get_mut("kafka")
        .unwrap()
        .insert("password".into(), b"rotated-password".to_vec());
    assert_ne!(before, fp(&rotated));
    let c = render_with(&gw, &[], &[], &intake_secrets(), None)
        .base
        .unwrap();
    assert_ne!(
        render::durability_fingerprint(&c, TOKEN),
        render::durability_fingerprint(&c, "another-key"),
        "keyed"
    );
    let mut sts = resources::statefulset(&gw, "img");
    resources::set_durability_fingerprint(&mut sts, Some(&before));
    assert_eq!(
        resources::durability_fingerprint_of(&sts),
        Some(before.clone())
    );
    assert!(
        !serde_json::to_string(&sts)
            .unwrap()
            .contains(KAFKA_PASSWORD)
    );
    // Without durability, no digest: Gateways that never used it do not roll on upgrade.
    let plain = render_with(&lenient_gateway(), &[], &[], &base_secrets(), None)
        .base
        .unwrap();
    assert_eq!(render::durability_fingerprint(&plain, TOKEN), None);
    resources::set_durability_fingerprint(&mut sts, None);
    assert_eq!(resources::durability_fingerprint_of(&sts), None);
    let template = sts.spec.unwrap().template.metadata.unwrap();
    assert_eq!(template.annotations, None);
}

fn pod_with_claim(name: &str, deleting: bool) -> k8s_openapi::api::core::v1::Pod {
    let mut p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": "u-1"},
        "spec": {"containers": [{"name": "gateway"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("data-{name}")}}]},
    }))
    .unwrap();
    if deleting {
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ));
    }
    p
}

fn claim(deleting: bool) -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
    let mut c: k8s_openapi::api::core::v1::PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-gw-0", "namespace": "ns"}}))
    .unwrap();
    if deleting {
        c.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ));
    }
    c
}

#[test]
fn a_pod_whose_claim_is_gone_is_replaced() {
    let pod = pod_with_claim("gw-0", false);
    assert_eq!(resources::claim_name("gw-0"), "data-gw-0");
    // (claim, ready, protected) → replaced?
    let cases = [
        (None, false, false, true),
        (None, true, false, true),
        (Some(claim(true)), false, false, true),
        (Some(claim(true)), true, true, true),
        // A ready pod on a claim being deleted, without backups or dual: the user's call.
        (Some(claim(true)), true, false, false),
        (Some(claim(false)), false, true, false),
        (Some(claim(false)), true, true, false),
    ];
    for (c, ready, protected, replaced) in cases {
        let why = resources::volume_lost(&pod, c.as_ref(), ready, protected);
        assert_eq!(
            why.is_some(),
            replaced,
            "claim {:?} ready {ready} protected {protected}: {why:?}",
            c.as_ref().map(|c| c.metadata.deletion_timestamp.is_some())
        );
        if let Some(w) = why {
            assert!(w.contains("data-gw-0"), "{w}");
        }
    }
    // A pod already going is left to go.
    assert_eq!(
        resources::volume_lost(&pod_with_claim("gw-0", true), None, false, true),
        None
    );
    // The StatefulSet keeps what lets its controller recreate a claim: a claim template named
    // `data`, no retention policy that would delete claims, no finalizer of ours on them.
    let sts = resources::statefulset(&durable_gateway(json!({"backup": s3_backup()})), "img");
    let spec = sts.spec.unwrap();
    let templates = spec.volume_claim_templates.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].metadata.name.as_deref(), Some("data"));
    assert_eq!(templates[0].metadata.finalizers, None);
    assert_eq!(spec.persistent_volume_claim_retention_policy, None);
}

/// The pod template a Gateway's StatefulSet gets for a rendered base config: the restart digest
/// set as the controller sets it.
fn template_for(gw: &Gateway, c: &Config) -> serde_json::Value {
    use resources::statefulset::{restart_fingerprint, set_restart_fingerprint};
    let mut sts = resources::statefulset(gw, "img");
    set_restart_fingerprint(&mut sts, restart_fingerprint(c, TOKEN).as_deref());
    serde_json::to_value(&sts.spec.unwrap().template).unwrap()
}

#[test]
fn restart_pinned_changes_roll_the_pods_and_hot_ones_do_not() {
    use resources::statefulset::{RESTART_ANNOTATION, restart_fingerprint, restart_fingerprint_of};
    let render_base = |gw: &Gateway, secrets: &SecretValues| {
        let sinks = [receiver_sink(), sink("audit", json!({"type": "log"}))];
        let r = render_with(gw, &[orders()], &sinks, secrets, None);
        assert_eq!(r.error, None);
        assert_eq!(r.sources["orders"].outcome, Outcome::Current);
        r.base.unwrap()
    };
    let mut all = intake_secrets();
    all.extend(base_secrets());
    let disk = durable_gateway(json!({"mode": "disk", "backup": s3_backup()}));
    let dual =
        durable_gateway(json!({"mode": "dual", "intake": kafka_intake(), "backup": s3_backup()}));
    let base = render_base(&dual, &all);
    let before = template_for(&dual, &base);
    assert_eq!(
        before,
        template_for(&dual, &render_base(&dual, &all)),
        "stable"
    );

    // `wal` (disk → dual, the intake appearing with it) rolls the pods.
    assert_ne!(
        template_for(&disk, &render_base(&disk, &all)),
        before,
        "wal"
    );
    // `intake`: another topic, or a rotated intake password, rolls them.
    let mut other_topic = kafka_intake();
    other_topic["options"]["topic"] = json!("ankusa-intake-2");
    let dual2 =
        durable_gateway(json!({"mode": "dual", "intake": other_topic, "backup": s3_backup()}));
    assert_ne!(
        template_for(&dual2, &render_base(&dual2, &all)),
        before,
        "intake"
    );
    let mut rotated = all.clone();
    rotated
        .get_mut("kafka")
        .unwrap()
        .insert("password".into(), b"rotated-password".to_vec());
    assert_ne!(
        template_for(&dual, &render_base(&dual, &rotated)),
        before,
        "intake secret"
    );

    // A source's secret, a sink's, a source's own settings: hot reload, no roll.
    let mut hot = all.clone();
    hot.get_mut("gh")
        .unwrap()
        .insert("new".into(), b"rotated-github-secret".to_vec());
    hot.get_mut("signing").unwrap().insert(
        "whsec".into(),
        b"whsec_cm90YXRlZC1zaWduaW5nLWtleQ==".to_vec(),
    );
    let hot_base = render_base(&dual, &hot);
    assert_ne!(hot_base.hash(), base.hash(), "the config did change");
    assert_eq!(template_for(&dual, &hot_base), before, "a source's secret");
    // Also on a pod's own config, where the sources are: its config changed, its digest did not.
    let pod = |secrets: &SecretValues| {
        let sinks = [receiver_sink(), sink("audit", json!({"type": "log"}))];
        let r = render_with(&dual, &[orders()], &sinks, secrets, None);
        r.for_pod("gw-0").unwrap()
    };
    let (pod_before, pod_hot) = (pod(&all), pod(&hot));
    assert_ne!(
        pod_hot.hash(),
        pod_before.hash(),
        "the pod's config did change"
    );
    assert_eq!(
        restart_fingerprint(&pod_hot, TOKEN),
        restart_fingerprint(&pod_before, TOKEN)
    );

    // Keyed, read back from an existing StatefulSet, and no secret in it.
    let fp = restart_fingerprint(&base, TOKEN).unwrap();
    assert_ne!(Some(fp.clone()), restart_fingerprint(&base, "another-key"));
    assert_eq!(
        before["metadata"]["annotations"][RESTART_ANNOTATION],
        json!(fp)
    );
    let mut sts = resources::statefulset(&dual, "img");
    resources::statefulset::set_restart_fingerprint(&mut sts, Some(&fp));
    assert_eq!(restart_fingerprint_of(&sts), Some(fp));
    assert!(!before.to_string().contains(KAFKA_PASSWORD));
}

/// The operator's list of restart-pinned keys is the gateway's: every key the gateway pins on
/// reload (`pin!(a.b, "a.b")` in `gateway/src/live.rs`) rolls the pods, but `node.instance`,
/// fixed by the pod's name.
#[test]
fn the_restart_pinned_keys_are_the_gateways() {
    let live = include_str!("../../gateway/src/live.rs");
    let mut gateway: Vec<&str> = live
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pin!("))
        .filter_map(|rest| rest.split('"').nth(1))
        .filter(|k| *k != "node.instance")
        .collect();
    assert!(gateway.len() >= 10, "pin! lines found: {gateway:?}");
    let mut operator = resources::statefulset::RESTART_PINNED.to_vec();
    gateway.sort_unstable();
    operator.sort_unstable();
    assert_eq!(operator, gateway);
}

#[test]
fn telemetry_settings_render_into_the_pods_config() {
    let collector = "http://otel-collector.observability:4318";
    let gw = gateway(json!({"settings": {"telemetry": {"otlp": {
        "endpoint": collector, "sampling_ratio": 0.25}}}}));
    let r = render_with(&gw, &[], &[], &SecretValues::new(), None);
    let base = r.base.unwrap_or_else(|| panic!("renders: {:?}", r.error));
    let otlp = &base.telemetry.otlp;
    assert_eq!(otlp.endpoint.as_deref(), Some(collector));
    assert_eq!(otlp.sampling_ratio, 0.25);
    assert_eq!(otlp.service_name, ankusa_config::DEFAULT_SERVICE_NAME);
    assert!(otlp.headers.is_empty());

    // Off unless the Gateway asks.
    let r = render_with(&gateway(json!({})), &[], &[], &SecretValues::new(), None);
    let base = r.base.unwrap_or_else(|| panic!("renders: {:?}", r.error));
    assert_eq!(base.telemetry, ankusa_config::TelemetryConfig::default());

    // What the gateway refuses is refused here, named, without the value.
    let gw = gateway(json!({"settings": {"telemetry": {"otlp": {
        "endpoint": "http://user:hunter2@collector:4318"}}}}));
    let r = render_with(&gw, &[], &[], &SecretValues::new(), None);
    let e = r.error.expect("refused");
    assert!(e.contains("telemetry.otlp.endpoint"), "{e}");
    assert!(!e.contains("hunter2"), "{e}");
    assert!(r.base.is_none());
}
