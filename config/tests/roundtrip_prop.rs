//! A loaded config renders (`Config::to_yaml`) to text that loads back equal, with the same
//! hash and without a single interpolation lookup, whatever its string values hold: secrets that
//! look like references (`${X}`, `$${`), YAML syntax, numbers, booleans, newlines, unicode. The
//! operator writes configs this way and the gateway reloads them, so a value that changed or
//! reached the environment on the way would be a wrong secret or a leak.
//!
//! The same text read as a pushed config (`from_rendered_yaml`, no interpolation) is the same
//! config too. And a refused config never quotes such a value in its error.

use std::cell::Cell;
use std::collections::HashMap;

use ankusa_config::interpolate::Lookup;
use ankusa_config::{Config, ConfigError, apply_env_overrides, from_yaml_str, validate};
use proptest::prelude::*;
use serde_yaml_ng::{Mapping, Value};

/// Answers from a map and counts every question.
#[derive(Default)]
struct MapLookup {
    vars: HashMap<String, String>,
    calls: Cell<u32>,
}

impl Lookup for MapLookup {
    fn env(&self, name: &str) -> Option<String> {
        self.calls.set(self.calls.get() + 1);
        self.vars.get(name).cloned()
    }
    fn file(&self, _: &str) -> std::io::Result<String> {
        self.calls.set(self.calls.get() + 1);
        Err(std::io::Error::other("this test reads no files"))
    }
}

fn load(text: &str, lookup: &MapLookup) -> Result<Config, ConfigError> {
    let mut c = from_yaml_str(text, lookup)?;
    apply_env_overrides(&mut c, lookup)?;
    validate(&c)?;
    Ok(c)
}

/// Text made of the pieces that break naive escaping and YAML quoting.
fn hostile() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("${".to_string()),
        Just("$${".to_string()),
        Just("$".to_string()),
        Just("}".to_string()),
        Just("${HOME}".to_string()),
        Just("${file:/etc/passwd}".to_string()),
        Just(": ".to_string()),
        Just(" #".to_string()),
        Just("'".to_string()),
        Just("\"".to_string()),
        Just("\\".to_string()),
        Just("\n".to_string()),
        Just("\t".to_string()),
        Just(" ".to_string()),
        Just("- ".to_string()),
        Just("[a, b]".to_string()),
        Just("{a: 1}".to_string()),
        Just("&anchor".to_string()),
        Just("*alias".to_string()),
        Just("!!binary".to_string()),
        Just("007".to_string()),
        Just("1e3".to_string()),
        Just("0x1f".to_string()),
        Just("true".to_string()),
        Just("null".to_string()),
        Just("~".to_string()),
        Just("é€😀".to_string()),
        "[A-Za-z0-9]{1,8}",
        "\\PC{1,6}",
    ];
    prop::collection::vec(piece, 1..8).prop_map(|p| p.concat())
}

/// Where a value goes, and whether it comes in through a reference or as YAML text.
#[derive(Debug, Clone)]
struct Placed {
    value: String,
    by_reference: bool,
}

fn placed() -> impl Strategy<Value = Placed> {
    (hostile(), any::<bool>()).prop_map(|(value, by_reference)| Placed {
        value,
        by_reference,
    })
}

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    let mut m = Mapping::new();
    for (k, v) in entries {
        m.insert(s(k), v);
    }
    Value::Mapping(m)
}

/// Builds a document with each value at a field that takes free text (secrets, header values,
/// credentials, a label) and the lookup that resolves its references.
fn document(values: &[Placed; 8], tolerance: Option<u16>) -> (String, MapLookup) {
    let mut lookup = MapLookup::default();
    // An admin token has at least 16 characters; the others take any non-empty text.
    let value = |i: usize| -> String {
        if i == 7 {
            format!("token-0123456789{}", values[i].value)
        } else {
            values[i].value.clone()
        }
    };
    let field = |i: usize| -> Value {
        if values[i].by_reference {
            s(&format!("${{V{i}}}"))
        } else {
            // The YAML text must say exactly this value: a literal `${` is written `$${`.
            s(&value(i).replace("${", "$${"))
        }
    };
    for i in 0..values.len() {
        lookup.vars.insert(format!("V{i}"), value(i));
    }
    let mut verify = vec![
        ("type", s("github")),
        ("secret", Value::Sequence(vec![field(0), field(1)])),
    ];
    if let Some(t) = tolerance {
        verify = vec![
            ("type", s("hmac")),
            ("secret", field(0)),
            ("signature_header", s("X-Sig")),
            ("sig_prefix", s("sha256=")),
            ("signed", s("{ts}.{body}")),
            ("timestamp_header", s("X-Ts")),
            ("tolerance_seconds", Value::Number(u64::from(t).into())),
        ];
    }
    let doc = map(vec![
        ("node", map(vec![("region", field(2))])),
        // The brokers below are on loopback.
        ("egress", map(vec![("allow_loopback", Value::Bool(true))])),
        (
            "sources",
            map(vec![(
                "src",
                map(vec![
                    ("verify", map(verify)),
                    (
                        "sinks",
                        Value::Sequence(vec![
                            map(vec![
                                ("type", s("http")),
                                ("url", s("https://receiver.example.com/hooks")),
                                ("allow_unsigned", Value::Bool(true)),
                                ("headers", map(vec![("Authorization", field(3))])),
                            ]),
                            map(vec![
                                ("type", s("kafka")),
                                ("brokers", Value::Sequence(vec![s("127.0.0.1:9092")])),
                                ("topic", s("hooks")),
                                (
                                    "sasl",
                                    map(vec![
                                        ("mechanism", s("plain")),
                                        ("username", field(4)),
                                        ("password", field(5)),
                                    ]),
                                ),
                            ]),
                            map(vec![
                                ("type", s("nats")),
                                ("servers", Value::Sequence(vec![s("nats://127.0.0.1:4222")])),
                                ("subject", s("hooks")),
                                ("auth", map(vec![("token", field(6))])),
                            ]),
                        ]),
                    ),
                ]),
            )]),
        ),
        (
            "admin",
            map(vec![(
                "tokens",
                Value::Sequence(vec![map(vec![
                    ("token", field(7)),
                    ("scopes", Value::Sequence(vec![s("*")])),
                ])]),
            )]),
        ),
    ]);
    let text = serde_yaml_ng::to_string(&doc).expect("a YAML tree serialises");
    (text, lookup)
}

fn roundtrips(c: &Config) -> Result<(), TestCaseError> {
    let yaml = c.to_yaml();
    let none = MapLookup::default();
    let back = from_yaml_str(&yaml, &none)
        .map_err(|e| TestCaseError::fail(format!("rendered config does not load: {e}\n{yaml}")))?;
    prop_assert_eq!(
        none.calls.get(),
        0,
        "rendered config interpolates:\n{}",
        yaml
    );
    prop_assert_eq!(&back, c, "rendered config loads as another:\n{}", yaml);
    prop_assert_eq!(back.hash(), c.hash());
    // What the operator pushes is read with no interpolation at all, to the same config.
    let pushed = ankusa_config::from_rendered_yaml(&yaml)
        .map_err(|e| TestCaseError::fail(format!("rendered config refused as pushed: {e}")))?;
    prop_assert_eq!(&pushed, c, "pushed config reads as another:\n{}", yaml);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn a_loaded_config_renders_to_one_that_loads_equal_without_lookups(
        values in [placed(), placed(), placed(), placed(), placed(), placed(), placed(), placed()],
        tolerance in prop::option::of(1u16..4000),
    ) {
        let (text, lookup) = document(&values, tolerance);
        match load(&text, &lookup) {
            Ok(c) => roundtrips(&c)?,
            Err(e) => {
                let shown = e.to_string();
                for p in &values {
                    let v = p.value.trim();
                    if v.chars().count() > 12 {
                        prop_assert!(!shown.contains(v), "error quotes a value: {}", shown);
                    }
                }
            }
        }
    }
}

/// The property above would pass vacuously if every document were refused; these are accepted.
#[test]
fn hostile_secrets_and_labels_are_accepted_and_roundtrip() {
    let tricky = [
        "$${already-escaped}",
        "${NOT_A_REF}",
        "a$$${b}",
        "key: value # not a comment",
        "line one\nline two",
        "'\"\\",
        "0123456789abcdef",
        "true-ish token value",
    ];
    for by_reference in [false, true] {
        let values: [Placed; 8] = std::array::from_fn(|i| Placed {
            value: tricky[i].to_string(),
            by_reference,
        });
        let (text, lookup) = document(&values, Some(300));
        let c = load(&text, &lookup).unwrap_or_else(|e| panic!("refused: {e}\n{text}"));
        assert_eq!(c.node.region.as_deref(), Some(tricky[2]));
        roundtrips(&c).unwrap_or_else(|e| panic!("{e}"));
    }
}
