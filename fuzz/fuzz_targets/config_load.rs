//! Arbitrary text as a config file, through the loader the gateway uses (parse, interpolation,
//! typed load, environment overrides, validation) with a lookup that answers nothing, so no
//! reference reaches the real environment or filesystem.
//!
//! No panic. A refusal names where (a field path, a YAML position, or the section it is about)
//! and never quotes a value: no string scalar of the input longer than 12 characters may
//! appear in the message (the schema's own "expected ..." list aside). A config that loads
//! renders (`to_yaml`) to text that loads back equal, with no lookup at all.

#![no_main]

use std::cell::Cell;

use ankusa_config::interpolate::Lookup;
use ankusa_config::{Config, ConfigError, apply_env_overrides, from_yaml_str, validate};
use libfuzzer_sys::fuzz_target;
use serde_yaml_ng::Value;

/// Resolves nothing and counts what was asked.
#[derive(Default)]
struct NoLookup {
    calls: Cell<u32>,
}

impl Lookup for NoLookup {
    fn env(&self, _: &str) -> Option<String> {
        self.calls.set(self.calls.get() + 1);
        None
    }
    fn file(&self, _: &str) -> std::io::Result<String> {
        self.calls.set(self.calls.get() + 1);
        Err(std::io::Error::other("the fuzz target reads no files"))
    }
}

fn load(text: &str, lookup: &NoLookup) -> Result<Config, ConfigError> {
    let mut c = from_yaml_str(text, lookup)?;
    apply_env_overrides(&mut c, lookup)?;
    validate(&c)?;
    Ok(c)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lookup = NoLookup::default();
    match load(text, &lookup) {
        Ok(c) => {
            let yaml = c.to_yaml();
            let again = NoLookup::default();
            let back = from_yaml_str(&yaml, &again)
                .unwrap_or_else(|e| panic!("rendered config does not load: {e}\n{yaml}"));
            assert_eq!(back, c, "rendered config loads as another:\n{yaml}");
            assert_eq!(again.calls.get(), 0, "rendered config interpolates");
            assert_eq!(back.hash(), c.hash());
        }
        Err(e) => check_error(text, &e),
    }
});

fn check_error(text: &str, e: &ConfigError) {
    let shown = e.to_string();
    assert!(!e.message.trim().is_empty(), "empty error message: {e:?}");
    assert!(names_where(e), "error names no field: {shown}");
    // What follows "expected" ("expected one of `a`, `b`", "expected a preset (github, ...)")
    // lists the schema's words, not the input's.
    let own = match e.message.find("expected") {
        Some(i) => &e.message[..i],
        None => e.message.as_str(),
    };
    let Ok(tree) = serde_yaml_ng::from_str::<Value>(text) else {
        return;
    };
    let mut scalars = Vec::new();
    collect(&tree, &mut scalars);
    let mut keys = Vec::new();
    collect_keys(&tree, &mut keys);
    for s in scalars {
        // A path names keys on purpose; a value that also occurs inside a key proves nothing.
        if keys.iter().any(|k| k.contains(s.as_str())) {
            continue;
        }
        // A reference (`${VAR}`, `${file:/path}`) is the author's pointer to a value, not a
        // value: naming it is how an unresolved one is reported.
        if s.contains("${") {
            continue;
        }
        if s.chars().count() > 12 && own.contains(s.as_str()) {
            // The text may also be the loader's own words (a fuzzer writes those into values
            // readily). Put a canary in the value's place: an error that then shows the canary
            // quotes the value.
            let canary = "Zq7".repeat(s.chars().count() / 3 + 5);
            let mut swapped = tree.clone();
            if !replace_strings(&mut swapped, &s, &canary) {
                continue;
            }
            let Ok(text) = serde_yaml_ng::to_string(&swapped) else {
                continue;
            };
            if let Err(e2) = load(&text, &NoLookup::default())
                && e2.message.contains(&canary)
            {
                panic!("error quotes an input value {s:?}: {shown}");
            }
        }
    }
}

/// Replaces every string scalar equal to `from`; whether there was one.
fn replace_strings(v: &mut Value, from: &str, to: &str) -> bool {
    match v {
        Value::String(s) if s == from => {
            *s = to.to_string();
            true
        }
        Value::Sequence(items) => items
            .iter_mut()
            .fold(false, |any, i| replace_strings(i, from, to) | any),
        Value::Mapping(m) => m
            .iter_mut()
            .fold(false, |any, (_, i)| replace_strings(i, from, to) | any),
        Value::Tagged(t) => replace_strings(&mut t.value, from, to),
        _ => false,
    }
}

/// Every error says where: a field path, the YAML document itself, or a message that starts
/// from the top-level section it is about (`dispatch.concurrency must be >= 1`).
fn names_where(e: &ConfigError) -> bool {
    if e.field.as_deref().is_some_and(|f| !f.is_empty()) {
        return true;
    }
    let m = &e.message;
    // Text that is not YAML at all has no field to name; the parser's position, when it has
    // one, is in the message.
    // An unknown top-level key is named by the message itself.
    if m.starts_with("config is not valid YAML")
        || m.contains("struct Config")
        || m.starts_with("unknown field")
    {
        return true;
    }
    let Ok(Value::Mapping(top)) = serde_yaml_ng::to_value(Config::default()) else {
        return false;
    };
    top.keys()
        .filter_map(Value::as_str)
        .any(|k| m.contains(&format!("{k}.")) || m.contains(&format!("{k}:")))
}

/// String and number scalars (values, not keys: a path names keys on purpose).
fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Sequence(items) => items.iter().for_each(|i| collect(i, out)),
        Value::Mapping(m) => m.values().for_each(|i| collect(i, out)),
        Value::Tagged(t) => collect(&t.value, out),
        Value::Null | Value::Bool(_) => {}
    }
}

/// Mapping keys, as text, at every depth.
fn collect_keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Sequence(items) => items.iter().for_each(|i| collect_keys(i, out)),
        Value::Mapping(m) => {
            for (k, item) in m {
                match k {
                    Value::String(s) => out.push(s.clone()),
                    Value::Number(n) => out.push(n.to_string()),
                    _ => {}
                }
                collect_keys(item, out);
            }
        }
        Value::Tagged(t) => collect_keys(&t.value, out),
        _ => {}
    }
}
