//! The gateway's own files, which no sink may name: the config file itself, everything under
//! its directory, under the directories of the admin listener's TLS `cert_file`/`key_file`,
//! and under `node.data_dir`. A sink option that names a file ([`FilePath`], listed by
//! [`file_options`]) is read by the gateway on the sink's behalf and its content sent to a
//! broker — a `token_file` aimed at the rendered config would ship the admin token and every
//! secret to whoever runs that broker. So:
//!
//! - at load (`load_file`, a reload from the file or from `PUT /v1/config`, `check-config`),
//!   [`check_file_options`] refuses a config in which any file option (the sinks' under
//!   `sources`, and the intake's Kafka / JetStream client, which reads its files the same way)
//!   lands in one of those places, naming the option and never the path;
//! - at read time the sinks read such files only through `ankusa_sinks::files`, which checks
//!   the file it actually opened against the same [`OwnFiles`] (a symlink may change after
//!   load).
//!
//! A path is compared in every form it may take: made absolute (against the config file's
//! directory for the load check, and against the working directory, which is what a relative
//! path is opened against), lexically normalised (`.` and `..` folded), and canonicalised
//! where it exists (the longest existing ancestor resolved, symlinks included, the rest
//! appended). The roots are kept in their lexical and canonical forms too.
//!
//! [`FilePath`]: crate::FilePath

use std::path::{Component, Path, PathBuf};

use crate::error::ConfigError;
use crate::file_paths::file_options;
use crate::model::Config;

/// What a refused option's error says (after the field).
pub const OWN_FILE_REFUSAL: &str = "names a file under the gateway's own config or TLS \
     directory (or its data_dir): keep sink key material in a directory of its own";

/// The files and directories of the gateway itself (see the module header).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnFiles {
    /// Exact files (the config file), each in its lexical and canonical form.
    files: Vec<PathBuf>,
    /// Directories nothing under which is read for a sink.
    dirs: Vec<PathBuf>,
}

impl OwnFiles {
    /// The own files of a gateway running `config` loaded from `config_path` (`None`: the
    /// embedded config, no file).
    pub fn of(config: &Config, config_path: Option<&Path>) -> OwnFiles {
        let cwd = std::env::current_dir().ok();
        let abs = |p: &Path| absolute(p, cwd.as_deref());
        let mut own = OwnFiles::default();
        if let Some(p) = config_path {
            let file = abs(p);
            if let Some(dir) = file.parent() {
                own.add_dir(dir);
            }
            // The canonical file's directory too: a Kubernetes Secret mount links the file
            // into a timestamped directory.
            if let Ok(real) = std::fs::canonicalize(&file)
                && let Some(dir) = real.parent()
            {
                own.add_dir(dir);
            }
            own.add_file(&file);
        }
        if let Some(t) = &config.admin.tls {
            for f in [&t.cert_file, &t.key_file] {
                if let Some(dir) = abs(f).parent() {
                    own.add_dir(dir);
                }
            }
        }
        own.add_dir(&abs(&config.node.data_dir));
        own
    }

    fn add_file(&mut self, p: &Path) {
        for form in forms(p) {
            if !self.files.contains(&form) {
                self.files.push(form);
            }
        }
    }

    fn add_dir(&mut self, p: &Path) {
        for form in forms(p) {
            if !self.dirs.contains(&form) {
                self.dirs.push(form);
            }
        }
    }

    /// The exact own files (lexical and canonical forms), for a check by identity.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Whether `path` — absolute, or relative to `base` or to the working directory — is one
    /// of the own files or lies under one of the own directories, in any of its forms.
    pub fn refuses(&self, path: &Path, base: Option<&Path>) -> bool {
        let mut candidates = Vec::with_capacity(2);
        if path.is_absolute() {
            candidates.push(path.to_path_buf());
        } else {
            if let Some(b) = base {
                candidates.push(b.join(path));
            }
            if let Ok(cwd) = std::env::current_dir() {
                candidates.push(cwd.join(path));
            }
        }
        candidates
            .iter()
            .flat_map(|c| forms(c))
            .any(|form| self.files.contains(&form) || self.dirs.iter().any(|d| form.starts_with(d)))
    }
}

/// `p` made absolute against `base` (else left as it is).
fn absolute(p: &Path, base: Option<&Path>) -> PathBuf {
    match base {
        Some(b) if p.is_relative() => b.join(p),
        _ => p.to_path_buf(),
    }
}

/// `.` dropped and `..` folded, without touching the filesystem (`/..` stays `/`).
pub fn normalise(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() && !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The longest existing ancestor of `p` (normalised) canonicalised, the rest appended: the
/// file a path reaches through symlinks, whether or not the file itself exists yet.
fn canonical(p: &Path) -> Option<PathBuf> {
    let p = normalise(p);
    let mut head = p.as_path();
    let mut tail: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(head) {
            let mut out = real;
            for part in tail.iter().rev() {
                out.push(part);
            }
            // The appended part holds no `..` (normalised), so no second pass is needed.
            return Some(out);
        }
        tail.push(head.file_name()?);
        head = head.parent()?;
    }
}

/// Every form of an absolute path that is compared: lexical, and canonical where it resolves.
fn forms(p: &Path) -> Vec<PathBuf> {
    let lexical = normalise(p);
    match canonical(&lexical) {
        Some(c) if c != lexical => vec![lexical, c],
        _ => vec![lexical],
    }
}

/// Refuses a config in which a file option (any sink's `tls.key_file`, `sasl.token_file`,
/// `auth.credentials_file`, `cacertfile`, ..., and the intake client's) names one of the
/// gateway's own files (see the module header). Relative paths are taken against the config
/// file's directory and against the working directory. The error names the option, never the
/// path.
pub fn check_file_options(config: &Config, config_path: Option<&Path>) -> Result<(), ConfigError> {
    let options = file_options(config);
    if options.is_empty() {
        return Ok(());
    }
    let own = OwnFiles::of(config, config_path);
    let cwd = std::env::current_dir().ok();
    let base = config_path
        .map(|p| absolute(p, cwd.as_deref()))
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let tree = serde_json::to_value(config)
        .map_err(|_| ConfigError::general("a file option is not UTF-8"))?;
    // The admin listener's own certificate and key are what the rule protects, not a
    // client's file (they are plain paths today; this keeps it so should they be typed).
    for field in options.into_iter().filter(|f| !f.starts_with("admin.")) {
        // Every option `file_options` lists is a string in the tree; one that cannot be found
        // there cannot be checked, and is refused rather than read unchecked.
        let Some(path) = lookup(&tree, &field).and_then(|v| v.as_str()) else {
            return Err(ConfigError::field(field, "cannot be checked"));
        };
        if own.refuses(Path::new(path), base.as_deref()) {
            return Err(ConfigError::field(field, OWN_FILE_REFUSAL));
        }
    }
    Ok(())
}

/// The value at a dotted path with `[i]` indexes (`s.sinks[0].tls.ca_file`).
fn lookup<'a>(tree: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut cur = tree;
    for seg in path.split('.') {
        let (name, mut rest) = match seg.find('[') {
            Some(i) => (&seg[..i], &seg[i..]),
            None => (seg, ""),
        };
        if !name.is_empty() {
            cur = cur.get(name)?;
        }
        while let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            cur = cur.get(r[..end].parse::<usize>().ok()?)?;
            rest = &r[end + 1..];
        }
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Config {
        crate::from_yaml_str(yaml, &crate::interpolate::SystemLookup).expect("parses")
    }

    fn kafka(token_file: &str) -> String {
        format!(
            "sources:\n  s:\n    sinks:\n      - type: log\n      - type: kafka\n        \
             brokers: [\"b:9093\"]\n        topic: t\n        \
             sasl: {{mechanism: oauthbearer, token_file: \"{token_file}\"}}\n"
        )
    }

    #[test]
    fn normalises_lexically() {
        assert_eq!(normalise(Path::new("/a/./b/../c")), Path::new("/a/c"));
        assert_eq!(normalise(Path::new("/../a")), Path::new("/a"));
        assert_eq!(normalise(Path::new("a/../../b")), Path::new("../b"));
    }

    #[test]
    fn the_config_file_its_directory_tls_dirs_and_data_dir_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let conf_dir = root.join("conf");
        let tls_dir = root.join("tls");
        let keys = root.join("sink-keys");
        for dir in [&conf_dir, &tls_dir, &keys] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let cfg_path = conf_dir.join("gw.yaml");
        std::fs::write(&cfg_path, "x").unwrap();
        let refused = |token_file: &Path| {
            let mut c = config(&kafka(&token_file.display().to_string()));
            c.admin.tls = Some(crate::AdminTls {
                cert_file: tls_dir.join("tls.crt"),
                key_file: tls_dir.join("tls.key"),
            });
            c.node.data_dir = root.join("data");
            check_file_options(&c, Some(&cfg_path)).err()
        };
        for bad in [
            cfg_path.clone(),
            conf_dir.join("other.yaml"),
            conf_dir.join("sub/deeper.pem"),
            tls_dir.join("tls.key"),
            root.join("data/default/store/CURRENT"),
            // `..` traversal back into the config directory.
            keys.join("../conf/gw.yaml"),
        ] {
            let e = refused(&bad).unwrap_or_else(|| panic!("{} accepted", bad.display()));
            assert_eq!(
                e.field.as_deref(),
                Some("sources.s.sinks[1].sasl.token_file")
            );
            assert_eq!(e.message, OWN_FILE_REFUSAL);
            assert!(!e.to_string().contains(&*root.to_string_lossy()), "{e}");
        }
        assert_eq!(refused(&keys.join("token")), None);
        // Relative to the config file's directory.
        assert!(refused(Path::new("gw.yaml")).is_some());
        assert!(refused(Path::new("./sub/../gw.yaml")).is_some());
    }

    #[test]
    fn a_symlink_into_the_config_directory_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let conf_dir = d.path().join("conf");
        let keys = d.path().join("keys");
        std::fs::create_dir_all(&conf_dir).unwrap();
        std::fs::create_dir_all(&keys).unwrap();
        let cfg_path = conf_dir.join("gw.yaml");
        std::fs::write(&cfg_path, "x").unwrap();
        // A file link, and a directory link under which the file does not exist yet.
        std::os::unix::fs::symlink(&cfg_path, keys.join("token")).unwrap();
        std::os::unix::fs::symlink(&conf_dir, keys.join("dir")).unwrap();
        for link in [keys.join("token"), keys.join("dir/not-yet.pem")] {
            let c = config(&kafka(&link.display().to_string()));
            let e = check_file_options(&c, Some(&cfg_path)).expect_err("a link into conf");
            assert_eq!(
                e.field.as_deref(),
                Some("sources.s.sinks[1].sasl.token_file")
            );
        }
    }

    #[test]
    fn lookup_follows_dotted_paths_and_indexes() {
        let v = serde_json::json!({"s": {"sinks": [{}, {"tls": {"ca_file": "/x"}}]}});
        assert_eq!(
            lookup(&v, "s.sinks[1].tls.ca_file"),
            Some(&serde_json::json!("/x"))
        );
        assert_eq!(lookup(&v, "s.sinks[2].tls.ca_file"), None);
    }
}
