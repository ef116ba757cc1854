//! Support of `monitoring_consistency.rs` and `prometheus_scrape.rs`: the alert rules and the
//! dashboard of deploy/monitoring read as data, the metric names a PromQL expression uses,
//! the names a `/metrics` scrape serves, and a gateway whose HTTP sink always fails (so
//! retries, breakers and the DLQ move).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[derive(Debug, Deserialize)]
pub struct RuleFile {
    pub groups: Vec<Group>,
}

#[derive(Debug, Deserialize)]
pub struct Group {
    pub name: String,
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Rule {
    #[serde(default)]
    pub alert: Option<String>,
    #[serde(default)]
    pub record: Option<String>,
    pub expr: String,
    #[serde(default, rename = "for")]
    pub for_: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Every rule of deploy/monitoring/ankusa-rules.yaml.
pub fn rules() -> Vec<Rule> {
    let file: RuleFile = serde_yaml_ng::from_str(&read("deploy/monitoring/ankusa-rules.yaml"))
        .expect("deploy/monitoring/ankusa-rules.yaml parses as a rules file");
    file.groups.into_iter().flat_map(|g| g.rules).collect()
}

/// The alert named `name`.
pub fn alert(name: &str) -> Rule {
    rules()
        .into_iter()
        .find(|r| r.alert.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no alert {name} in deploy/monitoring/ankusa-rules.yaml"))
}

/// `(panel title, expression)` of every target of deploy/monitoring/ankusa-dashboard.json,
/// rows' nested panels included.
pub fn dashboard_targets() -> Vec<(String, String)> {
    fn walk(panels: &serde_json::Value, out: &mut Vec<(String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("?").to_string();
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push((title.clone(), e.to_string()));
                }
            }
            walk(&p["panels"], out);
        }
    }
    let d: serde_json::Value =
        serde_json::from_str(&read("deploy/monitoring/ankusa-dashboard.json"))
            .expect("the dashboard is JSON");
    let mut out = Vec::new();
    walk(&d["panels"], &mut out);
    out
}

/// The `ankusa_*` metric names a PromQL expression uses: identifiers outside quoted strings
/// (label values, regexes) that start with `ankusa_`. Label names never do.
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let b = expr.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if matches!(c, b'"' | b'\'' | b'`') {
            i += 1;
            while i < b.len() && b[i] != c {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b':' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                i += 1;
            }
            if expr[start..i].starts_with("ankusa_") {
                out.insert(expr[start..i].to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The series names of a Prometheus text scrape (histograms as `_bucket`, `_sum`, `_count`).
pub fn scraped_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// The `"ankusa_..."` string literals of a Rust file, or of the Rust files under a directory
/// (relative to the workspace): the names a crate registers.
pub fn registered_in(dir: &str) -> BTreeSet<String> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    let at = root().join(dir);
    if at.is_file() {
        files.push(at);
    } else {
        walk(&at, &mut files);
    }
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for (at, _) in text.match_indices("\"ankusa_") {
            let rest = &text[at + 1..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if rest[name.len()..].starts_with('"') {
                out.insert(name);
            }
        }
    }
    out
}
