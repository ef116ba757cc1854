//! Issue 25: a manifest cannot make a gateway pod read a file. A Sink (or the Gateway's intake
//! log) that sets any path-valued option — at any position the gateway knows for its type, or
//! under any key named like a path — is refused, naming the option and never the path; and
//! whatever the manifests say, a rendered pod config names no file but the admin listener's
//! certificate, which the operator itself writes and mounts.

use std::collections::BTreeMap;

use ankusa_config::interpolate::Lookup;
use ankusa_config::{SinkConfig, file_options};
use ankusa_crds::names::CONFIG_MOUNT;
use ankusa_crds::{Gateway, Sink, Source};
use ankusa_operator::render::{self, Inputs, Outcome, SecretValues, files};
use ankusa_operator::resources::{self, ADMIN_TLS_MOUNT};
use common::{SINK_TYPES as TYPES, base_options, meta, object};
use proptest::prelude::*;
use serde_json::{Value, json};

mod common;

const TLS: [&str; 3] = ["tls.ca_file", "tls.cert_file", "tls.key_file"];

/// Every position at which this gateway version types an option of a sink `FilePath`. A
/// position missing here is still refused (by type and by name); `positions_are_the_gateways`
/// checks each one listed is one the gateway's own types read as a file.
fn positions(t: &str) -> Vec<&'static str> {
    match t {
        "http" => vec!["cacertfile"],
        "log" => vec![],
        "kafka" => [&["sasl.token_file"][..], &TLS].concat(),
        "nats" => [&["auth.credentials_file"][..], &TLS].concat(),
        _ => TLS.to_vec(),
    }
}

/// `t`'s base options with `path` at `pos` (and what the gateway's types need around it to
/// read the option at all).
fn with_file(t: &str, pos: &str, path: &str) -> Value {
    let mut options = base_options(t);
    if pos == "sasl.token_file" {
        set(&mut options, "sasl.mechanism", json!("oauthbearer"));
    }
    set(&mut options, pos, json!(path));
    options
}

/// Sets `a.b.c` in a JSON object, creating the maps on the way.
fn set(v: &mut Value, path: &str, value: Value) {
    let mut cur = v;
    let parts: Vec<&str> = path.split('.').collect();
    for p in &parts[..parts.len() - 1] {
        if !cur[*p].is_object() {
            cur[*p] = json!({});
        }
        cur = &mut cur[*p];
    }
    cur[parts[parts.len() - 1]] = value;
}

fn sink(name: &str, spec: Value) -> Sink {
    object(meta(name, 1), spec)
}

fn source(sinks: &[&str]) -> Source {
    let refs: Vec<Value> = sinks.iter().map(|n| json!({"name": n})).collect();
    object(
        meta("src", 1),
        json!({"gatewayRef": {"name": "gw"}, "verify": {"type": "none"}, "sinks": refs}),
    )
}

fn gateway(extra: Value) -> Gateway {
    let mut spec = json!({"replicas": 2, "settings": {"egress": {"allow_http": true}}});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    object(
        json!({"name": "gw", "namespace": "ns", "uid": "g-uid", "generation": 1}),
        spec,
    )
}

fn render_all(gw: &Gateway, sinks: &[Sink], secrets: &SecretValues) -> render::Rendered {
    let names: Vec<String> = sinks
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    render::render(&Inputs {
        gateway: gw,
        sources: &[source(&names)],
        sinks,
        secrets,
        admin_token: "operator-admin-token-0123456789",
        scrape_token: None,
        previous: None,
    })
}

/// Paths a Sink author might aim at: the pods' own files, the system's, relative ones.
fn a_path() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(format!("{CONFIG_MOUNT}/gw-0.yaml")),
        Just(format!("{ADMIN_TLS_MOUNT}/tls.key")),
        Just("/var/lib/ankusa/gw-0/store/CURRENT".to_string()),
        Just("/proc/self/environ".to_string()),
        Just("../../etc/ankusa/gw-1.yaml".to_string()),
        "[a-z]{1,8}(/[a-z0-9._-]{1,8}){0,3}",
        "/[a-z]{1,8}(/[a-z0-9._-]{1,8}){0,3}",
    ]
}

fn every_position() -> Vec<(usize, &'static str)> {
    TYPES
        .iter()
        .enumerate()
        .flat_map(|(i, (_, t))| positions(t).into_iter().map(move |p| (i, p)))
        .collect()
}

#[test]
fn positions_are_the_gateways() {
    // Each listed position is read as a file by the gateway's own type for that sink.
    for (i, pos) in every_position() {
        let (_, t) = TYPES[i];
        let mut v = with_file(t, pos, "/x");
        v["type"] = json!(t);
        let typed: SinkConfig =
            serde_json::from_value(v).unwrap_or_else(|e| panic!("{t} {pos}: {e}"));
        assert_eq!(file_options(&typed), vec![pos.to_string()], "{t}");
    }
    // Without one, no type names a file.
    for (_, t) in TYPES {
        let mut v = base_options(t);
        v["type"] = json!(t);
        let typed: SinkConfig = serde_json::from_value(v).unwrap();
        assert_eq!(file_options(&typed), Vec::<String>::new(), "{t}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 600,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x0f11_e5a7),
        ..ProptestConfig::default()
    })]

    /// At every known position of every sink type: refused by the Sink's render (by name),
    /// by the typed rule alone (the gateway's own `FilePath`), in a Gateway's render (the
    /// Sink's error, the Source left out, no file in the config), and as the intake log.
    #[test]
    fn a_file_option_at_any_known_position_is_refused_naming_it(
        (i, pos) in prop::sample::select(every_position()),
        path in a_path(),
    ) {
        let (st, t) = TYPES[i];
        let options = with_file(t, pos, &path);
        let expected = format!("options.{pos}: a file path is not accepted from a Sink");

        let s = sink("k", json!({"type": t, "options": options}));
        let e = render::render_sink(&s, &SecretValues::new()).unwrap_err();
        prop_assert!(e.starts_with(&expected), "{}", e);
        prop_assert!(path.len() < 8 || !e.contains(&path), "{}", e);

        let mut typed = options.clone();
        typed["type"] = json!(t);
        let typed: SinkConfig = serde_json::from_value(typed).unwrap();
        let e = files::refuse_file_options(&typed, "options", Some(st), "a Sink").unwrap_err();
        prop_assert!(e.starts_with(&expected), "{}", e);

        let r = render_all(&gateway(json!({})), &[s], &SecretValues::new());
        let err = r.sinks["k"].error.clone().unwrap_or_default();
        prop_assert!(err.starts_with(&expected), "{}", err);
        prop_assert!(matches!(r.sources["src"].outcome, Outcome::Missing(_)));
        let base = r.base.expect("the Gateway's own config renders");
        prop_assert!(file_options(&base).is_empty());

        if t == "kafka" || t == "nats" {
            let intake = with_file(t, pos, &path);
            let kind = if t == "kafka" { "kafka" } else { "jetstream" };
            let gw = gateway(json!({"durability": {"mode": "dual",
                "intake": {"type": kind, "options": intake}}}));
            let r = render_all(&gw, &[], &SecretValues::new());
            let e = r.error.unwrap_or_default();
            prop_assert!(
                e.starts_with(&format!("spec.durability.intake.options.{pos}: a file path is not accepted from a Gateway")),
                "{}", e
            );
            prop_assert!(path.len() < 8 || !e.contains(&path), "{}", e);
        }
    }

    /// A key the gateway does not know (yet), named like a path, at any depth: refused by name
    /// before the gateway's types ever see it.
    #[test]
    fn an_unknown_key_named_like_a_path_is_refused(
        i in 0..TYPES.len(),
        parents in prop::collection::vec("[a-z]{1,6}", 0..3),
        stem in "[a-z]{1,8}",
        suffix in prop::sample::select(vec!["_file", "file", "_path", "_dir", "_FILE"]),
        path in a_path(),
    ) {
        let (_, t) = TYPES[i];
        let key = format!("{stem}{suffix}");
        let at = parents.iter().cloned().chain([key]).collect::<Vec<_>>().join(".");
        // An http sink's header names are not options.
        prop_assume!(parents.first().map(String::as_str) != Some("headers"));
        let mut options = base_options(t);
        set(&mut options, &at, json!(path));
        let e = render::render_sink(&sink("k", json!({"type": t, "options": options})), &SecretValues::new())
            .unwrap_err();
        prop_assert!(
            e.starts_with(&format!("options.{at}: a file path is not accepted from a Sink")),
            "{}", e
        );
        prop_assert!(path.len() < 8 || !e.contains(&path), "{}", e);
    }

    /// Whatever the Sinks try, each pod's config, as the pod loads it (the YAML the operator
    /// writes, with the environment its StatefulSet gives), names no file of a sink, and the
    /// only files it names at all are the admin certificate, key and CA the operator writes
    /// into `<gw>-admin-tls` and mounts at `ADMIN_TLS_MOUNT` (the CA for the fleet).
    #[test]
    fn a_rendered_pod_config_names_only_the_files_the_operator_writes(
        tries in prop::collection::vec(prop::option::of(any::<prop::sample::Index>()), TYPES.len()),
        path in a_path(),
    ) {
        let sinks: Vec<Sink> = TYPES
            .iter()
            .zip(&tries)
            .map(|((_, t), try_file)| {
                let ps = positions(t);
                let options = match (try_file, ps.is_empty()) {
                    (Some(ix), false) => with_file(t, ps[ix.index(ps.len())], &path),
                    _ => base_options(t),
                };
                sink(t, json!({"type": t, "options": options, "secretRefs": static_credentials(t)}))
            })
            .collect();
        let gw = gateway(json!({}));
        let r = render_all(&gw, &sinks, &credentials());
        let sts = resources::statefulset(&gw, "img");
        let env = Env::of(&sts);
        let tried = tries.iter().zip(TYPES).any(|(t, (_, n))| t.is_some() && !positions(n).is_empty());
        prop_assert_eq!(matches!(r.sources["src"].outcome, Outcome::Current), !tried);
        for pod in resources::pod_names(&gw, 2) {
            let yaml = r.for_pod(&pod).unwrap().to_yaml();
            let mut loaded = ankusa_config::from_rendered_yaml(&yaml).unwrap();
            ankusa_config::apply_env_overrides(&mut loaded, &env).unwrap();
            prop_assert_eq!(file_options(&loaded), Vec::<String>::new());
            let tls = loaded.admin.tls.expect("admin TLS from the environment");
            let named: Vec<String> = [&tls.cert_file, &tls.key_file]
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            prop_assert_eq!(
                named,
                vec![format!("{ADMIN_TLS_MOUNT}/tls.crt"), format!("{ADMIN_TLS_MOUNT}/tls.key")]
            );
            // The fleet (three pods by default) names the same mount's files, and its CA.
            let fleet = loaded.fleet.expect("a fleet of the Gateway's pods");
            let named: Vec<String> = [&fleet.tls.cert_file, &fleet.tls.key_file, &fleet.tls.ca_file]
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            prop_assert_eq!(
                named,
                vec![
                    format!("{ADMIN_TLS_MOUNT}/tls.crt"),
                    format!("{ADMIN_TLS_MOUNT}/tls.key"),
                    format!("{ADMIN_TLS_MOUNT}/ca.crt"),
                ]
            );
            // A path the operator writes itself (the mounted certificate) is in the config by
            // the operator's hand, not the Sink's.
            if path.len() >= 12 && path.contains('/') && !path.starts_with(ADMIN_TLS_MOUNT) {
                prop_assert!(!yaml.contains(&path), "{}", yaml);
            }
        }
    }
}

/// Static credentials for the types that would otherwise use the pods' cloud identity.
fn static_credentials(t: &str) -> Value {
    match t {
        "sqs" => json!({"access_key_id": [{"name": "aws", "key": "id"}],
                        "secret_access_key": [{"name": "aws", "key": "secret"}]}),
        _ => json!({}),
    }
}

fn credentials() -> SecretValues {
    let mut s = SecretValues::new();
    let aws = s.entry("aws".into()).or_default();
    aws.insert("id".into(), b"AKIAEXAMPLEEXAMPLE01".to_vec());
    aws.insert(
        "secret".into(),
        b"secret-access-key-example-0123456789".to_vec(),
    );
    s
}

/// The environment a gateway container of the StatefulSet gets (values, not field refs).
struct Env(BTreeMap<String, String>);

impl Env {
    fn of(sts: &k8s_openapi::api::apps::v1::StatefulSet) -> Env {
        let c = &sts
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0];
        // The admin TLS files are the ones the pod mounts from `<gw>-admin-tls`.
        let mounts = c.volume_mounts.as_ref().unwrap();
        assert!(
            mounts
                .iter()
                .any(|m| m.name == "admin-tls" && m.mount_path == ADMIN_TLS_MOUNT)
        );
        Env(c
            .env
            .iter()
            .flatten()
            .filter_map(|e| Some((e.name.clone(), e.value.clone()?)))
            .collect())
    }
}

impl Lookup for Env {
    fn env(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }

    fn file(&self, _: &str) -> std::io::Result<String> {
        Err(std::io::Error::other("no files"))
    }
}

#[test]
fn ambient_cloud_identity_needs_the_gateways_opt_in() {
    let sqs = sink(
        "queue",
        json!({"type": "sqs", "options": base_options("sqs")}),
    );
    let mut pubsub_options = base_options("google_pubsub");
    pubsub_options.as_object_mut().unwrap().remove("auth");
    let pubsub = sink(
        "topic",
        json!({"type": "google_pubsub", "options": pubsub_options}),
    );
    let r = render_all(
        &gateway(json!({})),
        &[sqs.clone(), pubsub.clone()],
        &SecretValues::new(),
    );
    let e = r.sinks["queue"].error.clone().unwrap();
    assert!(
        e.starts_with("options.access_key_id:")
            && e.contains("spec.settings.egress.allowAmbientIdentity"),
        "{e}"
    );
    let e = r.sinks["topic"].error.clone().unwrap();
    assert!(e.starts_with("options.auth: metadata"), "{e}");
    match &r.sources["src"].outcome {
        Outcome::Missing(m) => assert!(
            m.contains("sinks[0]: Sink queue: options.access_key_id"),
            "{m}"
        ),
        o => panic!("{o:?}"),
    }
    // With static credentials the sqs Sink renders; with the Gateway's opt-in both do.
    let with_keys = sink(
        "queue",
        json!({"type": "sqs", "options": base_options("sqs"), "secretRefs": static_credentials("sqs")}),
    );
    let r = render_all(&gateway(json!({})), &[with_keys], &credentials());
    assert_eq!(r.sinks["queue"].error, None);
    let opted_in = gateway(
        json!({"settings": {"egress": {"allow_http": true, "allowAmbientIdentity": true}}}),
    );
    let r = render_all(
        &opted_in,
        &[sqs.clone(), pubsub.clone()],
        &SecretValues::new(),
    );
    assert_eq!(
        (
            r.sinks["queue"].error.clone(),
            r.sinks["topic"].error.clone()
        ),
        (None, None)
    );
    assert!(matches!(r.sources["src"].outcome, Outcome::Current));
    // A Source already running with such a Sink keeps that version (dropping it would
    // dead-letter its queued deliveries) and says why it no longer renders.
    let previous = r.for_pod("gw-0").unwrap();
    let r2 = render::render(&Inputs {
        gateway: &gateway(json!({})),
        sources: &[source(&["queue", "topic"])],
        sinks: &[sqs.clone(), pubsub.clone()],
        secrets: &SecretValues::new(),
        admin_token: "operator-admin-token-0123456789",
        scrape_token: None,
        previous: Some(&previous),
    });
    match &r2.sources["src"].outcome {
        Outcome::Previous(m) => assert!(m.contains("allowAmbientIdentity"), "{m}"),
        o => panic!("{o:?}"),
    }
    // The opt-in is the operator's: the gateway's `egress` section does not carry it.
    let yaml = r.for_pod("gw-0").unwrap().to_yaml();
    assert!(!yaml.contains("mbient"), "{yaml}");
    assert!(r.for_pod("gw-0").unwrap().egress.allow_http);
}

#[test]
fn a_kept_previous_version_with_a_file_is_not_kept() {
    // A config rendered before this rule (or planted) whose Source reads a file: when the
    // Source no longer renders, that version is not carried forward.
    let mut prev = ankusa_config::Config::default();
    let typed: SinkConfig = serde_json::from_value(json!({"type": "kafka", "brokers": ["k:9092"],
        "topic": "t", "sasl": {"mechanism": "oauthbearer", "token_file": "/etc/ankusa/gw-0.yaml"}}))
    .unwrap();
    prev.sources.insert(
        "src".into(),
        ankusa_config::SourceConfig::with_sinks(vec![typed]),
    );
    let gw = gateway(json!({}));
    let r = render::render(&Inputs {
        gateway: &gw,
        sources: &[source(&["missing"])],
        sinks: &[],
        secrets: &SecretValues::new(),
        admin_token: "operator-admin-token-0123456789",
        scrape_token: None,
        previous: Some(&prev),
    });
    match &r.sources["src"].outcome {
        Outcome::Missing(m) => assert!(m.contains("sinks[0].options.sasl.token_file"), "{m}"),
        o => panic!("{o:?}"),
    }
    assert!(r.base.unwrap().sources.is_empty());
}
