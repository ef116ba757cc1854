//! `${VAR}`, `${VAR:-default}` and `${file:/path}` references in string values.
//!
//! References are resolved on the parsed YAML tree, before the typed load, so an error can
//! name the field that holds the reference. A scalar that is one whole reference is parsed
//! again as YAML after substitution, so `port: ${PORT}` still yields a number.

use serde_yaml_ng::Value;

use crate::error::ConfigError;

/// Where a reference gets its values from; tests replace the environment.
pub trait Lookup {
    fn env(&self, name: &str) -> Option<String>;
    fn file(&self, path: &str) -> std::io::Result<String>;
}

/// The process environment and the filesystem.
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
    fn file(&self, path: &str) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }
}

/// Resolves every reference in the tree in place.
pub fn interpolate_tree(v: &mut Value, lookup: &dyn Lookup) -> Result<(), ConfigError> {
    walk(v, &mut String::new(), lookup)
}

fn walk(v: &mut Value, path: &mut String, lookup: &dyn Lookup) -> Result<(), ConfigError> {
    match v {
        Value::String(s) => {
            if !s.contains('$') {
                return Ok(());
            }
            let whole = is_whole_reference(s);
            let out = interpolate_str(s, path, lookup)?;
            *v = if whole {
                reparse_scalar(out)
            } else {
                Value::String(out)
            };
            Ok(())
        }
        Value::Sequence(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, path, lookup)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Mapping(m) => {
            for (k, item) in m.iter_mut() {
                let len = path.len();
                let key = match k {
                    Value::String(s) => s.clone(),
                    other => serde_yaml_ng::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                };
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key);
                walk(item, path, lookup)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Tagged(t) => walk(&mut t.value, path, lookup),
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

fn is_whole_reference(s: &str) -> bool {
    s.starts_with("${") && s.ends_with('}') && s[2..].find('}') == Some(s.len() - 3)
}

/// A substituted whole-reference scalar keeps YAML's typing (numbers, booleans), but a value
/// that YAML would read as a structure stays a string: a secret is never reinterpreted.
fn reparse_scalar(text: String) -> Value {
    // Only text that a number or boolean prints back exactly: `007`, `1e3` or `0x1f` stay
    // strings, so a secret is never changed by being read as a number.
    match serde_yaml_ng::from_str::<Value>(&text) {
        Ok(Value::Bool(b)) if text == b.to_string() => Value::Bool(b),
        Ok(Value::Number(n)) if text == n.to_string() => Value::Number(n),
        _ => Value::String(text),
    }
}

/// Substitutes the references in one string. `$${` is a literal `${`.
pub fn interpolate_str(s: &str, path: &str, lookup: &dyn Lookup) -> Result<String, ConfigError> {
    let field = if path.is_empty() { "<root>" } else { path };
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos..];
        if let Some(stripped) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = stripped;
            continue;
        }
        if !after.starts_with("${") {
            out.push('$');
            rest = &after[1..];
            continue;
        }
        let Some(end) = after.find('}') else {
            return Err(ConfigError::field(
                field,
                "unterminated reference: `${` without a closing `}` (write `$${` for a literal `${`)",
            ));
        };
        let inner = &after[2..end];
        out.push_str(&resolve(inner, field, lookup)?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn resolve(inner: &str, field: &str, lookup: &dyn Lookup) -> Result<String, ConfigError> {
    if let Some(path) = inner.strip_prefix("file:") {
        if !path.starts_with('/') {
            return Err(ConfigError::field(
                field,
                format!("`${{file:{path}}}` must name an absolute path"),
            ));
        }
        let text = lookup.file(path).map_err(|e| {
            ConfigError::field(
                field,
                format!("unresolved reference `${{file:{path}}}`: {e}"),
            )
        })?;
        // Files mounted from Secrets often end with one newline that is not part of the value.
        let trimmed = text.strip_suffix('\n').unwrap_or(&text);
        let trimmed = trimmed.strip_suffix('\r').unwrap_or(trimmed);
        return Ok(trimmed.to_string());
    }
    if let Some(r) = inner.strip_prefix("sm:") {
        return Err(ConfigError::field(
            field,
            format!(
                "secret manager references (`${{sm:{r}}}`) are not supported; use ${{VAR}} or ${{file:/path}}"
            ),
        ));
    }
    let (name, default) = match inner.split_once(":-") {
        Some((n, d)) => (n, Some(d)),
        None => (inner, None),
    };
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        // The text between the braces is not echoed: it may be a value pasted in by mistake.
        return Err(ConfigError::field(
            field,
            "not a valid reference (expected ${VAR} with letters, digits and `_`, ${VAR:-default} or ${file:/path}; write `$${` for a literal `${`)",
        ));
    }
    match (lookup.env(name), default) {
        (Some(v), Some(d)) if v.is_empty() => Ok(d.to_string()),
        (Some(v), _) => Ok(v),
        (None, Some(d)) => Ok(d.to_string()),
        (None, None) => Err(ConfigError::field(
            field,
            format!("unresolved reference `${{{name}}}`: environment variable {name} is not set"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Fake(HashMap<&'static str, &'static str>);
    impl Lookup for Fake {
        fn env(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|s| s.to_string())
        }
        fn file(&self, path: &str) -> std::io::Result<String> {
            if path == "/secret" {
                Ok("s3cr3t\n".into())
            } else {
                Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file",
                ))
            }
        }
    }

    fn fake() -> Fake {
        Fake(HashMap::from([
            ("A", "alpha"),
            ("PORT", "4100"),
            ("EMPTY", ""),
        ]))
    }

    #[test]
    fn substitutes_env_default_and_file() {
        let l = fake();
        assert_eq!(interpolate_str("x-${A}-y", "f", &l).unwrap(), "x-alpha-y");
        assert_eq!(interpolate_str("${B:-beta}", "f", &l).unwrap(), "beta");
        assert_eq!(interpolate_str("${EMPTY:-d}", "f", &l).unwrap(), "d");
        assert_eq!(
            interpolate_str("${file:/secret}", "f", &l).unwrap(),
            "s3cr3t"
        );
        assert_eq!(
            interpolate_str("$${A} costs $5", "f", &l).unwrap(),
            "${A} costs $5"
        );
    }

    #[test]
    fn unresolved_reference_names_the_field() {
        let l = fake();
        let e = interpolate_str("${NOPE}", "sources.s.verify.secret[0]", &l).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("sources.s.verify.secret[0]"), "{msg}");
        assert!(msg.contains("NOPE"), "{msg}");
        let e = interpolate_str("${file:/missing}", "a.b", &l).unwrap_err();
        assert!(e.to_string().contains("a.b"));
        assert!(interpolate_str("${unterminated", "a", &l).is_err());
        assert!(interpolate_str("${sm:aws:x}", "a", &l).is_err());
        assert!(interpolate_str("${file:relative}", "a", &l).is_err());
    }

    #[test]
    fn whole_reference_keeps_yaml_type() {
        let l = fake();
        let mut v: Value =
            serde_yaml_ng::from_str("http:\n  port: ${PORT}\n  name: p${PORT}\n").unwrap();
        interpolate_tree(&mut v, &l).unwrap();
        assert_eq!(v["http"]["port"], Value::Number(4100.into()));
        assert_eq!(v["http"]["name"], Value::String("p4100".into()));
        // Text a number would not print back stays a string.
        assert_eq!(reparse_scalar("007".into()), Value::String("007".into()));
        assert_eq!(reparse_scalar("1e3".into()), Value::String("1e3".into()));
        assert_eq!(reparse_scalar("12".into()), Value::Number(12.into()));
    }

    #[test]
    fn tree_paths_include_sequence_indexes() {
        let l = fake();
        let mut v: Value =
            serde_yaml_ng::from_str("sources:\n  s:\n    sinks:\n      - url: ${MISSING}\n")
                .unwrap();
        let e = interpolate_tree(&mut v, &l).unwrap_err();
        assert!(e.to_string().contains("sources.s.sinks[0].url"), "{e}");
    }
}
