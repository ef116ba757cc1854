//! The docs against the code, read as text (nothing is started): the metrics table of
//! docs/admin-api.md against the metrics the code registers; the environment-override table
//! and the CLI reference of docs/configuration.md against `apply_env_overrides` and the clap
//! subcommands; every key table of docs/configuration.md against the serde fields of the
//! config types; the claim id examples against the claim id the code makes; the headless
//! Service named in field docs against the one the operator renders; and each doc's section
//! list against its headings. Each test lists every mismatch, naming the file and the item.

mod docs_consistency_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use docs_consistency_support::config_types::*;
use docs_consistency_support::text::*;

// ---------------------------------------------------------------------------------------------
// Metrics

/// Every `ankusa_*` metric registered in gateway/src, sinks/src and store/src: a string literal
/// given to a metric constructor (`gauge(`, `counter_vec(`, `Opts::new(`, ...).
fn code_metrics() -> BTreeMap<String, String> {
    const MAKERS: [&str; 9] = [
        "gauge(",
        "gauge_vec(",
        "counter(",
        "counter_vec(",
        "histogram(",
        "Opts::new(",
        "HistogramOpts::new(",
        "::new(",
        "with_opts(",
    ];
    let mut out = BTreeMap::new();
    for dir in ["gateway/src", "sinks/src", "store/src"] {
        for (file, code) in rust_sources(dir) {
            for (at, lit) in string_literals(&code) {
                if !lit.starts_with("ankusa_") {
                    continue;
                }
                // The statement the literal is in, up to it.
                let before = &code[..at];
                let stmt = &before[before.rfind([';', '{', '}']).map_or(0, |p| p + 1)..];
                if MAKERS.iter().any(|m| stmt.contains(m)) {
                    out.insert(lit, file.clone());
                }
            }
        }
    }
    out
}

#[test]
fn every_metric_is_in_the_admin_api_metrics_table_and_back() {
    let code = code_metrics();
    assert!(
        code.len() >= 40,
        "found only {} metrics: {code:?}",
        code.len()
    );
    let doc = section_of(&read("docs/admin-api.md"), "Metrics");
    let mut table = BTreeSet::new();
    for (head, rows) in tables(&doc) {
        if head.first().map(String::as_str) != Some("Metric") {
            continue;
        }
        for r in rows {
            table.extend(
                code_spans(&r[0])
                    .into_iter()
                    .filter(|m| m.starts_with("ankusa_")),
            );
        }
    }
    let mut problems = Vec::new();
    for (m, file) in &code {
        if !table.contains(m) {
            problems.push(format!(
                "`{m}` (registered in {file}) is missing from the metrics table of docs/admin-api.md"
            ));
        }
    }
    for m in &table {
        if !code.contains_key(m) {
            problems.push(format!(
                "`{m}` is in the metrics table of docs/admin-api.md but no code registers it"
            ));
        }
    }
    report("metrics", &problems);
}

// ---------------------------------------------------------------------------------------------
// Environment overrides

#[test]
fn every_env_override_is_in_the_table_and_back() {
    // The overrides: every variable `apply_env_overrides` reads.
    let load = rust_sources("config/src")
        .into_iter()
        .find(|(f, _)| f.ends_with("config/src/load.rs"))
        .expect("config/src/load.rs")
        .1;
    let at = load
        .find("fn apply_env_overrides")
        .expect("fn apply_env_overrides in config/src/load.rs");
    let body = &load[at..close_of(&load, at + load[at..].find('{').unwrap())];
    let is_var = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && s.starts_with(|c: char| c.is_ascii_uppercase())
    };
    let overrides: BTreeSet<String> = string_literals(body)
        .into_iter()
        .map(|(_, s)| s)
        .filter(|s| is_var(s))
        .collect();
    assert!(overrides.len() >= 10, "{overrides:?}");
    // Any other `ANKUSA_*` the code reads (`ANKUSA_CONFIG`).
    let mut others = BTreeMap::new();
    for dir in ["config/src", "gateway/src"] {
        for (file, code) in rust_sources(dir) {
            for (_, lit) in string_literals(&code) {
                if lit.starts_with("ANKUSA_") && is_var(&lit) && !overrides.contains(&lit) {
                    others.insert(lit, file.clone());
                }
            }
        }
    }

    let doc = section_of(&read("docs/configuration.md"), "Environment overrides");
    let mut table = BTreeSet::new();
    for (head, rows) in tables(&doc) {
        if head.first().map(String::as_str) == Some("Variable") {
            for r in rows {
                table.extend(code_spans(&r[0]));
            }
        }
    }
    let mentioned: BTreeSet<String> = code_spans(&doc)
        .into_iter()
        .filter(|s| s.starts_with("ANKUSA_") && is_var(s))
        .collect();
    let mut problems = Vec::new();
    for v in &overrides {
        if !table.contains(v) {
            problems.push(format!(
                "`{v}` (read by apply_env_overrides, config/src/load.rs) is missing from the \
                 table of docs/configuration.md#environment-overrides"
            ));
        }
    }
    for v in &table {
        if !overrides.contains(v) {
            problems.push(format!(
                "`{v}` is in the table of docs/configuration.md#environment-overrides but \
                 apply_env_overrides does not read it"
            ));
        }
    }
    for (v, file) in &others {
        if !mentioned.contains(v) {
            problems.push(format!(
                "`{v}` (read in {file}) is not named in docs/configuration.md#environment-overrides"
            ));
        }
    }
    for v in &mentioned {
        if !overrides.contains(v) && !others.contains_key(v) {
            problems.push(format!(
                "`{v}` is named in docs/configuration.md#environment-overrides but no code reads it"
            ));
        }
    }
    report("environment overrides", &problems);
}

// ---------------------------------------------------------------------------------------------
// The command line

/// `check-config` for `CheckConfig`.
fn kebab(variant: &str) -> String {
    let mut out = String::new();
    for (i, c) in variant.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The variants of `enum name` in `code`, each with the enum its `#[command(subcommand)]`
/// field names, if any.
fn subcommands(code: &str, name: &str) -> Vec<(String, Option<String>)> {
    let at = code
        .find(&format!("enum {name} "))
        .unwrap_or_else(|| panic!("enum {name} in gateway/src/cli.rs"));
    let open = at + code[at..].find('{').unwrap();
    let body = &code[open + 1..close_of(code, open) - 1];
    let mut out = Vec::new();
    let mut i = 0;
    let b = body.as_bytes();
    while i < b.len() {
        if body[i..].starts_with("#[") {
            i = i + close_of(&body[i..], 1);
            continue;
        }
        if b[i].is_ascii_uppercase() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let len = body[i..]
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(body.len() - i);
            let variant = body[i..i + len].to_string();
            let mut j = i + len;
            let mut nested = None;
            let rest = body[j..].trim_start();
            if rest.starts_with('{') || rest.starts_with('(') {
                let open = j + body[j..].find(['{', '(']).unwrap();
                j = close_of(body, open);
                let inner = &body[open..j];
                if let Some(p) = inner.find("#[command(subcommand)]") {
                    let ty = inner[p..].split(':').nth(1).unwrap_or("").trim_start();
                    let len = ty
                        .find(|c: char| !c.is_ascii_alphanumeric())
                        .unwrap_or(ty.len());
                    nested = Some(ty[..len].to_string());
                }
            }
            out.push((variant, nested));
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

#[test]
fn every_cli_subcommand_is_in_the_cli_reference_and_back() {
    let code = rust_sources("gateway/src")
        .into_iter()
        .find(|(f, _)| f.ends_with("gateway/src/cli.rs"))
        .expect("gateway/src/cli.rs")
        .1;
    let mut commands = BTreeSet::new();
    for (variant, nested) in subcommands(&code, "Cmd") {
        match nested {
            Some(inner) => {
                for (v, _) in subcommands(&code, &inner) {
                    commands.insert(format!("{} {}", kebab(&variant), kebab(&v)));
                }
            }
            None => {
                commands.insert(kebab(&variant));
            }
        }
    }
    assert!(commands.len() >= 4, "{commands:?}");

    let doc = section_of(&read("docs/configuration.md"), "The command line");
    // A command as written in the docs: its words up to the first argument or option.
    let words = |s: &str| -> String {
        s.split_whitespace()
            .take_while(|w| w.starts_with(|c: char| c.is_ascii_lowercase()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut table = BTreeSet::new();
    for (head, rows) in tables(&doc) {
        if head.first().map(String::as_str) == Some("Command") {
            for r in rows {
                table.extend(code_spans(&r[0]).iter().map(|s| words(s)));
            }
        }
    }
    let mut usage = BTreeSet::new();
    for line in doc.lines() {
        if let Some(rest) = line.strip_prefix("ankusa [--config <file>]") {
            let rest = rest.trim().trim_start_matches('[').replace(']', " ");
            usage.insert(words(&rest));
        }
    }
    let mut problems = Vec::new();
    for (what, listed) in [("table", &table), ("usage block", &usage)] {
        for c in &commands {
            if !listed.contains(c) {
                problems.push(format!(
                    "`ankusa {c}` (gateway/src/cli.rs) is missing from the {what} of \
                     docs/configuration.md#the-command-line"
                ));
            }
        }
        for c in listed.iter() {
            if !commands.contains(c) {
                problems.push(format!(
                    "`ankusa {c}` is in the {what} of docs/configuration.md#the-command-line \
                     but gateway/src/cli.rs has no such subcommand"
                ));
            }
        }
    }
    report("CLI reference", &problems);
}

/// A `## ` section of docs/configuration.md about top-level keys (`roots`), with the keys its
/// tables name (`documented_keys`).
struct DocSection {
    line: usize,
    title: String,
    roots: Vec<String>,
    strict: BTreeSet<String>,
    loose: BTreeSet<String>,
}

#[test]
fn every_config_key_is_documented_and_every_documented_key_exists() {
    let items = config_items();
    let config = items.get("Config").expect("struct Config in config/src");
    assert!(config.fields.len() >= 10, "Config has too few fields");
    let md = read("docs/configuration.md");
    let mut problems = Vec::new();
    // Each `## `section`` (or `## `wal` and `intake``) and the Config fields it documents.
    let mut docs: Vec<DocSection> = Vec::new();
    for (line, title, body) in sections(&md, 2) {
        let roots = code_spans(&title);
        if roots.is_empty() {
            continue;
        }
        for r in &roots {
            if !config.fields.iter().any(|f| &f.key == r) {
                problems.push(format!(
                    "docs/configuration.md:{line} `## {title}`: `{r}` is not a top-level key of \
                     Config (config/src/model.rs)"
                ));
            }
        }
        let (strict, loose) = documented_keys(&body);
        docs.push(DocSection {
            line,
            title,
            roots,
            strict,
            loose,
        });
    }
    // Which items each section reaches.
    let mut all = BTreeMap::new();
    let mut reached: Vec<BTreeMap<String, String>> = Vec::new();
    for DocSection { roots, .. } in &docs {
        let mut seen = BTreeMap::new();
        for f in config.fields.iter().filter(|f| roots.contains(&f.key)) {
            reach(&f.ty, &f.key, &items, &mut seen);
        }
        for (k, v) in &seen {
            all.entry(k.clone()).or_insert(v.clone());
        }
        reached.push(seen);
    }
    for f in &config.fields {
        if !docs.iter().any(|d| d.roots.contains(&f.key)) {
            problems.push(format!(
                "top-level key `{}` (config/src/model.rs) has no `## `{}`` section in \
                 docs/configuration.md",
                f.key, f.key
            ));
        }
    }
    // Documented keys that no type of their section has.
    for (d, seen) in docs.iter().zip(&reached) {
        let (line, title, roots, strict) = (d.line, &d.title, &d.roots, &d.strict);
        let mut allowed: BTreeSet<String> = roots.iter().cloned().collect();
        for name in seen.keys() {
            allowed.extend(items[name].fields.iter().map(|f| f.key.clone()));
            allowed.extend(items[name].tag.clone());
        }
        for k in strict.difference(&allowed) {
            problems.push(format!(
                "docs/configuration.md:{line} `## {title}` documents key `{k}`, which no config \
                 type under `{}` has",
                roots.join("`, `")
            ));
        }
    }
    // Keys of the code that no section documents.
    for (name, path) in &all {
        let item = &items[name];
        let homes: Vec<usize> = (0..docs.len())
            .filter(|&i| reached[i].contains_key(name))
            .collect();
        for f in item.fields.iter().filter(|f| !f.flatten) {
            if !homes.iter().any(|&i| docs[i].loose.contains(&f.key)) {
                let titles: Vec<String> = homes
                    .iter()
                    .map(|&i| format!("`## {}`", docs[i].title))
                    .collect();
                problems.push(format!(
                    "`{path}.{}` ({name} in {}) is in no key table of docs/configuration.md \
                     (looked under {})",
                    f.key,
                    item.file,
                    titles.join(", ")
                ));
            }
        }
    }
    report("config keys", &problems);
}

// ---------------------------------------------------------------------------------------------
// Names the docs give for what the code makes

#[test]
fn claim_id_examples_match_the_claim_id_the_code_makes() {
    let code = rust_sources("gateway/src")
        .into_iter()
        .find(|(f, _)| f.ends_with("gateway/src/claim_check/claim_ref.rs"))
        .expect("gateway/src/claim_check/claim_ref.rs")
        .1;
    let at = code
        .find("fn claim_id")
        .expect("fn claim_id in gateway/src/claim_check/claim_ref.rs");
    let body = &code[at..close_of(&code, at + code[at..].find('{').unwrap())];
    // The hook id (a UUID) in the form `claim_id` gives it.
    let (form, valid): (&str, fn(&str) -> bool) = if body.contains(".simple()") {
        ("32 lowercase hex digits", |s| {
            s.len() == 32
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
    } else if body.contains(".hyphenated()") || body.contains("id.to_string()") {
        ("a hyphenated lowercase UUID", |s| {
            s.len() == 36 && s.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit())
        })
    } else {
        panic!(
            "claim_id in gateway/src/claim_check/claim_ref.rs makes an id this test does not know: {body}"
        )
    };
    let mut problems = Vec::new();
    let mut examples = 0;
    for (file, text) in docs() {
        for (n, line) in text.lines().enumerate() {
            for marker in ["urn:ankusa:claim:v1:", "/v1/claims/"] {
                for (p, _) in line.match_indices(marker) {
                    let rest = &line[p + marker.len()..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || "_-<>{}:/".contains(c)))
                        .unwrap_or(rest.len());
                    let Some((tenant, id)) = rest[..end].split_once([':', '/']) else {
                        continue;
                    };
                    if [tenant, id].iter().any(|s| s.contains(['<', '{'])) {
                        continue;
                    }
                    examples += 1;
                    if !valid(id) {
                        problems.push(format!(
                            "{file}:{}: claim id `{id}` is not {form}, the form claim_id \
                             (gateway/src/claim_check/claim_ref.rs) gives",
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(examples >= 2, "only {examples} claim id examples found");
    let admin = read("docs/admin-api.md");
    if !admin
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .contains(form)
    {
        problems.push(format!(
            "docs/admin-api.md (the claim port) does not say the claim id is {form}"
        ));
    }
    report("claim ids", &problems);
}

#[test]
fn the_headless_service_named_in_docs_is_the_one_the_operator_renders() {
    let names = read("operator/src/resources/names.rs");
    let at = names
        .find("fn headless_service_name")
        .expect("fn headless_service_name in operator/src/resources/names.rs");
    let fmt = string_literals(&names[at..])
        .into_iter()
        .next()
        .expect("a format string")
        .1;
    let suffix = fmt.strip_prefix("{}").expect("\"{}-<suffix>\"").to_string();
    assert!(suffix.starts_with('-'), "{fmt}");

    let mut texts = docs();
    let mut crds: Vec<PathBuf> = std::fs::read_dir(root().join("crds/src"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    crds.sort();
    for p in crds {
        let name = format!("crds/src/{}", p.file_name().unwrap().to_string_lossy());
        // Field docs only: the doc comments.
        let docs: Vec<String> = read(&name)
            .lines()
            .map(|l| {
                let t = l.trim_start();
                if t.starts_with("///") || t.starts_with("//!") {
                    t.to_string()
                } else {
                    String::new()
                }
            })
            .collect();
        texts.push((name, docs.join("\n")));
    }
    let label = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '<' || *c == '>')
            .collect()
    };
    let mut problems = Vec::new();
    for (file, text) in &texts {
        for (n, line) in text.lines().enumerate() {
            let at = format!("{file}:{}", n + 1);
            if line.contains("-headless") {
                problems.push(format!(
                    "{at}: names a `-headless` Service; the operator renders `<gateway>{suffix}`"
                ));
            }
            // `<pod>.<gateway>-x`, `<gateway>-x.<namespace>`, `<gateway>-x:<port>`.
            for gw in ["<gateway>-", "<gw>-"] {
                for (p, _) in line.match_indices(gw) {
                    let name = label(&line[p + gw.len() - 1..]);
                    let after = line[p + gw.len() - 1 + name.len()..].chars().next();
                    let dns = line[..p].ends_with('.') || matches!(after, Some('.') | Some(':'));
                    if dns && name != suffix {
                        problems.push(format!(
                            "{at}: `{gw}{}` as a pod's DNS domain; the operator renders \
                             `<gateway>{suffix}`",
                            &name[1..]
                        ));
                    }
                }
            }
            // `<instance>.webhooks-pods`, `webhooks-0.webhooks-pods`.
            for (p, _) in line.match_indices('.') {
                let before = label(&line[..p].chars().rev().collect::<String>());
                let pod: String = before.chars().rev().collect();
                let domain = label(&line[p + 1..]);
                let ordinal = pod.rsplit_once('-').filter(|(gw, o)| {
                    !gw.is_empty() && !o.is_empty() && o.bytes().all(|b| b.is_ascii_digit())
                });
                let expected = match (pod.as_str(), ordinal) {
                    ("<instance>" | "<pod>", _) if !domain.starts_with('<') => Some(domain.clone()),
                    (_, Some((gw, _))) if domain.starts_with(gw) && domain != gw => {
                        Some(format!("{gw}{suffix}"))
                    }
                    _ => None,
                };
                if let Some(e) = expected
                    && (!domain.ends_with(&suffix) || (ordinal.is_some() && domain != e))
                {
                    problems.push(format!(
                        "{at}: `{pod}.{domain}`: the pods' domain is `<gateway>{suffix}`"
                    ));
                }
            }
        }
    }
    report("headless Service name", &problems);
}

// ---------------------------------------------------------------------------------------------
// Section lists

#[test]
fn every_section_list_matches_its_headings() {
    let mut problems = Vec::new();
    let mut lists = 0;
    for (file, text) in docs() {
        let mut anchors = BTreeSet::new();
        for level in 2..=4 {
            anchors.extend(sections(&text, level).iter().map(|(_, t, _)| slug(t)));
        }
        let preamble = sections(&text, 2)
            .first()
            .map_or(text.as_str(), |(line, _, _)| {
                let cut: usize = text.lines().take(line - 1).map(|l| l.len() + 1).sum();
                &text[..cut]
            });
        let listed: Vec<String> = preamble
            .split("](#")
            .skip(1)
            .filter_map(|s| s.split_once(')').map(|(a, _)| a.to_string()))
            .collect();
        if listed.len() < 3 {
            continue; // no section list
        }
        lists += 1;
        for a in &listed {
            if !anchors.contains(a) {
                problems.push(format!(
                    "{file}: the section list links `#{a}`, which is no heading of {file}"
                ));
            }
        }
        for (line, title, _) in sections(&text, 2) {
            if !listed.contains(&slug(&title)) {
                problems.push(format!(
                    "{file}:{line}: `## {title}` is missing from the section list at the top"
                ));
            }
        }
    }
    assert!(lists >= 2, "only {lists} docs with a section list");
    report("section lists", &problems);
}
