//! Text → validated `Config`: YAML parse, interpolation, typed load (unknown keys refused),
//! environment overrides, validation.

use std::path::Path;

use serde_yaml_ng::Value;

use crate::error::ConfigError;
use crate::interpolate::{Lookup, SystemLookup, interpolate_tree};
use crate::model::Config;
use crate::section::admin::{AdminTls, AdminToken};
use crate::section::node::Role;
use crate::section::wal::WalType;
use crate::validate::validate;

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// What the process runs: the file with environment overrides applied.
    pub config: Config,
    /// `Config::hash` of the file as written (after interpolation, before overrides).
    pub file_hash: String,
}

/// Reads, interpolates, overrides from the process environment and validates a config file;
/// a sink file option naming the gateway's own files is refused (`check_file_options`).
pub fn load_file(path: &Path) -> Result<Loaded, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::general(format!("cannot read config file {}: {e}", path.display()))
    })?;
    let loaded = load_text(&text, &SystemLookup)?;
    crate::file_guard::check_file_options(&loaded.config, Some(path))?;
    Ok(loaded)
}

fn load_text(text: &str, lookup: &dyn Lookup) -> Result<Loaded, ConfigError> {
    let file = from_yaml_str(text, lookup)?;
    let file_hash = file.hash();
    let mut config = file;
    apply_env_overrides(&mut config, lookup)?;
    validate(&config)?;
    Ok(Loaded { config, file_hash })
}

/// Parses and interpolates YAML into a `Config` (not yet validated).
pub fn from_yaml_str(text: &str, lookup: &dyn Lookup) -> Result<Config, ConfigError> {
    let mut tree = parse_tree(text)?;
    interpolate_tree(&mut tree, lookup)?;
    from_yaml_value(tree)
}

/// Parses YAML as `Config::to_yaml` writes it (the operator's rendered configs, pushed to
/// `PUT /v1/config`) with no interpolation at all: `$${` reads as `${` and a `${VAR}` or
/// `${file:/path}` is text, never resolved. Whoever can push a config cannot make the pod read
/// its environment or its files through it.
pub fn from_rendered_yaml(text: &str) -> Result<Config, ConfigError> {
    let mut tree = parse_tree(text)?;
    unescape_tree(&mut tree);
    from_yaml_value(tree)
}

fn parse_tree(text: &str) -> Result<Value, ConfigError> {
    let tree: Value = serde_yaml_ng::from_str(text)
        .map_err(|e| ConfigError::general(format!("config is not valid YAML: {e}")))?;
    Ok(if tree.is_null() {
        Value::Mapping(Default::default())
    } else {
        tree
    })
}

/// The inverse of `Config::to_yaml`'s escaping: every `$${` becomes `${`.
fn unescape_tree(v: &mut Value) {
    match v {
        Value::String(s) if s.contains("$${") => *s = s.replace("$${", "${"),
        Value::Sequence(items) => items.iter_mut().for_each(unescape_tree),
        Value::Mapping(m) => m.iter_mut().for_each(|(_, v)| unescape_tree(v)),
        Value::Tagged(t) => unescape_tree(&mut t.value),
        _ => {}
    }
}

/// Typed load of an already interpolated tree; unknown keys and bad values name their field.
pub fn from_yaml_value(tree: Value) -> Result<Config, ConfigError> {
    serde_path_to_error::deserialize::<_, Config>(tree).map_err(|e| {
        let mut path = e.path().to_string();
        let inner = value_free(&e.into_inner().to_string());
        let top = path == "." || path.is_empty();
        // A key given twice (YAML lets a tagged key stand beside its plain spelling) is
        // reported at the map holding it: the key itself is the field.
        if let Some(key) = inner
            .strip_prefix("duplicate field `")
            .and_then(|r| r.split('`').next())
        {
            path = if top {
                key.to_string()
            } else {
                format!("{path}.{key}")
            };
            return ConfigError::field(path, inner);
        }
        if top {
            ConfigError::general(inner)
        } else {
            ConfigError::field(path, inner)
        }
    })
}

/// serde's message without the value it quotes: "invalid type: string \"<value>\", expected
/// u64" becomes "invalid type: string, expected u64". The message reaches statuses, Events and
/// logs, and the value may be a Secret placed in the wrong field.
pub fn value_free(msg: &str) -> String {
    // Field names are keys of the schema's (or the user's keys), not values.
    if ["unknown field", "missing field", "duplicate field"]
        .iter()
        .any(|p| msg.starts_with(p))
    {
        return msg.to_string();
    }
    let expected = msg.rfind(", expected").map(|i| &msg[i..]).unwrap_or("");
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = msg.strip_prefix(prefix) {
            // The unexpected value's kind is its first word: string, integer, map, ...
            let kind: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphabetic() || *c == ' ')
                .collect();
            let kind = kind.split_whitespace().next().unwrap_or("value");
            return format!("{prefix}{kind}{expected}");
        }
    }
    if msg.starts_with("unknown variant") {
        return format!("unknown variant{expected}");
    }
    strip_quoted(msg)
}

/// Drops every `"..."` and `` `...` `` span (a value serde or a parser quoted).
fn strip_quoted(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in msg.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                    out.push_str("<value>");
                }
            }
            None if c == '"' || c == '`' => quote = Some(c),
            None => out.push(c),
        }
    }
    if quote.is_some() {
        out.push_str("<value>");
    }
    out
}

/// Environment overrides for what differs per process: addresses, ports, paths, roles and an
/// admin token. The environment wins over the file.
pub fn apply_env_overrides(c: &mut Config, env: &dyn Lookup) -> Result<(), ConfigError> {
    fn parsed<T: std::str::FromStr>(env: &dyn Lookup, var: &str) -> Result<Option<T>, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        match env.env(var) {
            None => Ok(None),
            Some(v) if v.is_empty() => Ok(None),
            Some(v) => v
                .parse::<T>()
                .map(Some)
                .map_err(|e| ConfigError::field(var, format!("cannot parse: {e}"))),
        }
    }
    if let Some(v) = parsed::<String>(env, "ANKUSA_DATA_DIR")? {
        c.node.data_dir = v.into();
    }
    if let Some(v) = parsed::<String>(env, "ANKUSA_INSTANCE")? {
        c.node.instance = v;
    }
    if let Some(v) = parsed::<String>(env, "ANKUSA_ROLES")? {
        let mut roles = Vec::new();
        for r in v.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            roles.push(match r {
                "edge" => Role::Edge,
                "dispatch" => Role::Dispatch,
                _ => {
                    return Err(ConfigError::field(
                        "ANKUSA_ROLES",
                        "unknown role (expected edge, dispatch)",
                    ));
                }
            });
        }
        c.node.roles = roles;
    }
    if let Some(v) = parsed::<String>(env, "ANKUSA_WAL_TYPE")? {
        c.wal.wal_type = match v.trim() {
            "disk" => WalType::Disk,
            "dual" => WalType::Dual,
            "none" => WalType::None,
            _ => {
                return Err(ConfigError::field(
                    "ANKUSA_WAL_TYPE",
                    "unknown type (expected disk, dual, none)",
                ));
            }
        };
    }
    if let Some(v) = parsed::<bool>(env, "ANKUSA_BACKUP_ENABLED")? {
        c.backup.enabled = v;
    }
    if let Some(v) = parsed::<String>(env, "ANKUSA_LOG_LEVEL")? {
        c.log.level = v;
    }
    if let Some(v) = parsed(env, "ANKUSA_HTTP_IP")? {
        c.http.ip = v;
    }
    if let Some(v) = parsed(env, "PORT")? {
        c.http.port = v;
    }
    if let Some(v) = parsed(env, "ANKUSA_HTTP_PORT")? {
        c.http.port = v;
    }
    if let Some(v) = parsed(env, "ANKUSA_ADMIN_IP")? {
        c.admin.ip = v;
    }
    if let Some(v) = parsed(env, "ANKUSA_ADMIN_PORT")? {
        c.admin.port = v;
    }
    // The operator mounts the admin certificate from a Secret and names its files here, so
    // the rendered config it pushes stays free of pod paths.
    match (
        parsed::<String>(env, "ANKUSA_ADMIN_TLS_CERT_FILE")?,
        parsed::<String>(env, "ANKUSA_ADMIN_TLS_KEY_FILE")?,
    ) {
        (Some(cert), Some(key)) => {
            c.admin.tls = Some(AdminTls {
                cert_file: cert.into(),
                key_file: key.into(),
            });
        }
        (None, None) => {}
        (Some(_), None) => {
            return Err(ConfigError::field(
                "ANKUSA_ADMIN_TLS_KEY_FILE",
                "must be set together with ANKUSA_ADMIN_TLS_CERT_FILE",
            ));
        }
        (None, Some(_)) => {
            return Err(ConfigError::field(
                "ANKUSA_ADMIN_TLS_CERT_FILE",
                "must be set together with ANKUSA_ADMIN_TLS_KEY_FILE",
            ));
        }
    }
    if let Some(v) = parsed(env, "ANKUSA_CLAIM_CHECK_IP")? {
        c.claim_check.ip = v;
    }
    if let Some(v) = parsed(env, "ANKUSA_CLAIM_CHECK_PORT")? {
        c.claim_check.port = v;
    }
    if let Some(token) = parsed::<String>(env, "ANKUSA_ADMIN_TOKEN")?
        && !c.admin.tokens.iter().any(|t| t.token == token)
    {
        c.admin.tokens.push(AdminToken {
            token,
            scopes: vec!["*".into()],
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Env(HashMap<String, String>);
    impl Lookup for Env {
        fn env(&self, name: &str) -> Option<String> {
            self.0.get(name).cloned()
        }
        fn file(&self, _: &str) -> std::io::Result<String> {
            Err(std::io::Error::other("no files in this test"))
        }
    }
    fn env(pairs: &[(&str, &str)]) -> Env {
        Env(pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    const GOOD: &str = r#"
sources:
  gh:
    verify: {type: github, secret: "${GH_SECRET}"}
    dedupe: github
    sinks:
      - type: log
"#;

    #[test]
    fn serde_messages_lose_their_values() {
        assert_eq!(
            value_free("invalid type: string \"hunter2-secret\", expected u64"),
            "invalid type: string, expected u64"
        );
        assert_eq!(
            value_free("invalid value: integer `424242`, expected u16"),
            "invalid value: integer, expected u16"
        );
        assert_eq!(
            value_free("unknown variant `s3cr3t`, expected one of `a`, `b`"),
            "unknown variant, expected one of `a`, `b`"
        );
        assert!(!value_free("other \"s3cr3t\" here").contains("s3cr3t"));
        let e = from_yaml_str("http: {port: \"hunter2-secret\"}", &env(&[])).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("http.port"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn loads_a_good_file() {
        let l = load_text(GOOD, &env(&[("GH_SECRET", "It's a Secret to Everybody")])).unwrap();
        assert!(l.config.sources.contains_key("gh"));
        assert_eq!(l.file_hash.len(), 64);
    }

    #[test]
    fn a_key_given_twice_is_named() {
        // Found by the config_load fuzz target: a tagged key beside the same key untagged.
        let e = from_yaml_str(
            "#Rort: spatch: layslacks\n\nlog:\n? !)nstaFttp: log\n",
            &crate::interpolate::SystemLookup,
        )
        .expect_err("a key given twice");
        assert_eq!(e.field.as_deref(), Some("log"), "{e}");
    }

    #[test]
    fn unknown_key_is_refused_with_its_path() {
        let text = "http:\n  port: 4000\n  prot: 1\n";
        let e = load_text(text, &env(&[])).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("http.prot"), "{e}");
        assert!(e.to_string().contains("unknown field"), "{e}");
        let text = "sources:\n  s:\n    sinks:\n      - type: http\n        urll: x\n";
        let e = load_text(text, &env(&[])).unwrap_err();
        assert!(e.to_string().contains("sources.s.sinks"), "{e}");
        assert!(e.to_string().contains("urll"), "{e}");
    }

    #[test]
    fn missing_variable_is_refused_with_its_path() {
        let e = load_text(GOOD, &env(&[])).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("sources.gh.verify.secret"), "{e}");
        assert!(e.message.contains("GH_SECRET"));
    }

    #[test]
    fn bad_value_is_refused_with_its_path() {
        let e = load_text("http:\n  port: seventy\n", &env(&[])).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("http.port"), "{e}");
        let e = load_text("dispatch:\n  concurrency: 0\n", &env(&[])).unwrap_err();
        assert_eq!(e.to_string(), "dispatch.concurrency must be >= 1, got 0");
    }

    #[test]
    fn env_overrides_win_and_do_not_change_the_file_hash() {
        let plain = load_text(GOOD, &env(&[("GH_SECRET", "x")])).unwrap();
        let over = load_text(
            GOOD,
            &env(&[
                ("GH_SECRET", "x"),
                ("ANKUSA_HTTP_PORT", "4100"),
                ("ANKUSA_DATA_DIR", "/d"),
            ]),
        )
        .unwrap();
        assert_eq!(over.config.http.port, 4100);
        assert_eq!(over.config.node.data_dir, std::path::PathBuf::from("/d"));
        assert_eq!(plain.file_hash, over.file_hash);
        let e = load_text(
            GOOD,
            &env(&[("GH_SECRET", "x"), ("ANKUSA_ADMIN_PORT", "x")]),
        )
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("ANKUSA_ADMIN_PORT"));
    }

    #[test]
    fn admin_tls_files_come_from_the_environment_in_pairs() {
        let both = load_text(
            GOOD,
            &env(&[
                ("GH_SECRET", "x"),
                ("ANKUSA_ADMIN_TLS_CERT_FILE", "/tls/tls.crt"),
                ("ANKUSA_ADMIN_TLS_KEY_FILE", "/tls/tls.key"),
            ]),
        )
        .unwrap();
        let tls = both.config.admin.tls.expect("admin.tls set");
        assert_eq!(tls.cert_file, std::path::PathBuf::from("/tls/tls.crt"));
        assert_eq!(tls.key_file, std::path::PathBuf::from("/tls/tls.key"));
        let e = load_text(
            GOOD,
            &env(&[("GH_SECRET", "x"), ("ANKUSA_ADMIN_TLS_CERT_FILE", "/c")]),
        )
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("ANKUSA_ADMIN_TLS_KEY_FILE"));
    }

    #[test]
    fn rendered_config_round_trips_to_the_same_hash() {
        let l = load_text(GOOD, &env(&[("GH_SECRET", "x")])).unwrap();
        let yaml = l.config.to_yaml();
        let again = load_text(&yaml, &env(&[])).unwrap();
        assert_eq!(again.config, l.config);
        assert_eq!(again.file_hash, l.file_hash);
    }
}
