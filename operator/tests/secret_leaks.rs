//! A Sink author may name any Secret key in `secretRefs`, and the operator renders what it
//! names. Where the value lands decides whether it leaks: placed in a non-credential option
//! (`timeout_ms`), the error that follows used to quote it, and that error reaches the Sink's
//! status, the Gateway's status, a Warning Event and the operator's log. These tests hold the
//! renderer to two rules: Secret references only at a sink type's credential paths, and no
//! error that carries a value.

use ankusa_config::{Config, SinkConfig, SourceConfig};
use ankusa_crds::Sink;
use ankusa_operator::render::{self, SecretValues};
use common::{SINK_TYPES as TYPES, base_options, meta, object, secrets};
use proptest::prelude::*;
use serde_json::{Value, json};

mod common;

fn sink(spec: Value) -> Sink {
    object(meta("s", 1), spec)
}

fn one_secret(value: &str) -> SecretValues {
    secrets(&[("victim", "key", value)])
}

/// Option paths of every type, credential or not: where a Sink author might aim a Secret.
const PATHS: &[&str] = &[
    "secret",
    "url",
    "timeout_ms",
    "method",
    "max_response_bytes",
    "pool_size",
    "topic",
    "brokers",
    "key",
    "produce_timeout_ms",
    "sasl.username",
    "sasl.password",
    "sasl.mechanism",
    "exchange",
    "exchange_type",
    "routing_key",
    "subject",
    "auth.token",
    "auth.username",
    "servers",
    "tls",
    "channel",
    "queue_url",
    "region",
    "endpoint",
    "message_group_id",
    "access_key_id",
    "project",
    "token",
    "inline_max_bytes",
    "ordered",
    "batch_max_entries",
];

/// Every message a render of this Sink can produce: the renderer's, then the gateway's own
/// validation of a source holding the rendered sink.
fn messages(t: &str, path: &str, value: &str) -> Vec<String> {
    let mut spec = json!({"type": t, "options": base_options(t)});
    spec["secretRefs"] = json!({ path: [{"name": "victim", "key": "key"}] });
    let s = sink(spec);
    match render::render_sink(&s, &one_secret(value)) {
        Err(e) => vec![e],
        Ok(rendered) => {
            let mut c = Config::default();
            c.sources
                .insert("src".into(), SourceConfig::with_sinks(vec![rendered]));
            match ankusa_config::validate(&c) {
                Err(e) => vec![e.to_string()],
                Ok(()) => vec![],
            }
        }
    }
}

#[test]
fn a_secret_mapped_into_timeout_ms_is_refused_by_path_without_its_value() {
    const VALUE: &str = "4242424242424242";
    let got = messages("http", "timeout_ms", VALUE);
    assert_eq!(got.len(), 1);
    assert!(
        got[0].contains("secretRefs[\"timeout_ms\"]") && got[0].contains("a Secret may fill"),
        "{got:?}"
    );
    assert!(!got[0].contains(VALUE), "{got:?}");
    // A log sink takes none at all.
    let got = messages("log", "secret", VALUE);
    assert!(got[0].contains("takes no Secret references"), "{got:?}");
}

#[test]
fn every_allowed_path_renders_a_credential() {
    for (t, name) in &TYPES {
        let paths = render::secret_ref_paths(*t);
        let mut options = base_options(name);
        if *name == "kafka" {
            options["sasl"] = json!({"mechanism": "plain"});
        }
        let mut refs = serde_json::Map::new();
        let mut values = SecretValues::new();
        let mut expected = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            let value = if path.ends_with("url") || *path == "endpoint" {
                match *name {
                    "rabbitmq" => "amqps://u:p@rabbit:5671/%2f".to_string(),
                    "redis" => "rediss://:p@redis:6380/0".to_string(),
                    "sqs" => format!("https://sqs.us-east-1.amazonaws.com/12345678901{i}/hooks"),
                    _ => format!("https://receiver{i}.example.com/h?token=t"),
                }
            } else if *path == "secret" {
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string()
            } else {
                format!("credential-value-{i}")
            };
            let key = format!("k{i}");
            refs.insert(path.to_string(), json!([{"name": "victim", "key": key}]));
            values
                .entry("victim".into())
                .or_default()
                .insert(key, value.clone().into_bytes());
            expected.push((path, value));
        }
        let mut spec = json!({"type": name, "options": options});
        if !refs.is_empty() {
            spec["secretRefs"] = Value::Object(refs);
        }
        let rendered =
            render::render_sink(&sink(spec), &values).unwrap_or_else(|e| panic!("{name}: {e}"));
        let text = serde_json::to_string(&rendered).expect("serialises");
        for (path, value) in expected {
            assert!(
                text.contains(&value),
                "{name} {path}: the value is not in {text}"
            );
        }
        assert_eq!(matches!(rendered, SinkConfig::Http(_)), *name == "http");
    }
}

/// Values that pass for other types: numbers, booleans, URLs, YAML and JSON text.
fn secret_value() -> impl Strategy<Value = String> {
    prop_oneof![
        (10_000_000u64..u64::MAX).prop_map(|n| n.to_string()),
        Just("true-but-not-a-bool-0x1f".to_string()),
        "[a-z]{6,12}".prop_map(|h| format!("https://{h}.example.com/collect?k=v")),
        "[a-z]{6,12}".prop_map(|h| format!("{h}.internal:9092")),
        "[a-z]{4,8}".prop_map(|k| format!("{{{k}: [1, 2], nested: {{a: b}}}}")),
        "[a-z]{4,8}".prop_map(|k| format!("{{\"{k}\": 1}}")),
        "[A-Za-z0-9+/]{16,40}",
        "[ -~]{10,40}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 4000,
        // Seeded and reproducible: a failure prints the case, and the same cases run each time.
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5ec2_e71e),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_secret_placed_anywhere_never_appears_in_an_error(
        t in 0..TYPES.len(),
        path in prop::sample::select(PATHS),
        value in secret_value(),
    ) {
        let name = TYPES[t].1;
        for m in messages(name, path, &value) {
            prop_assert!(!m.contains(value.as_str()), "{} {}: {:?} in {}", name, path, value, m);
            let trimmed = value.trim();
            if trimmed.len() >= 8 {
                prop_assert!(!m.contains(trimmed), "{} {}: {:?} in {}", name, path, value, m);
            }
        }
    }
}
