//! The config types of config/src read as text: each struct's and enum's serde keys (with
//! `sink_config!`'s), the types reachable from a type, and the keys a docs section's tables
//! name.

use std::collections::{BTreeMap, BTreeSet};

use super::text::*;

/// A serde field of a config type: its key, its Rust type, whether it is `flatten`ed.
pub struct Field {
    pub key: String,
    pub ty: String,
    pub flatten: bool,
}

/// A config struct or enum: its fields (an enum's struct variants'), the types its variants
/// hold, its serde `tag`.
#[derive(Default)]
pub struct Item {
    pub file: String,
    pub fields: Vec<Field>,
    pub holds: Vec<String>,
    pub tag: Option<String>,
}

/// Splits `s` at the commas outside any brackets and literals.
pub fn split_top(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let (mut depth, mut start, mut i) = (0i32, 0, 0);
    let mut out = Vec::new();
    while i < b.len() {
        if let Some(n) = literal_len(b, i) {
            i += n;
            continue;
        }
        match b[i] {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'>' if i > 0 && b[i - 1] != b'-' && b[i - 1] != b'=' => depth -= 1,
            b',' if depth == 0 => {
                out.push(s[start..i].to_string());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(s[start..].to_string());
    out.into_iter().filter(|c| !c.trim().is_empty()).collect()
}

/// Leading `#[...]` attributes of `chunk`, and the rest.
pub fn take_attrs(chunk: &str) -> (Vec<String>, String) {
    let mut rest = chunk.trim().to_string();
    let mut attrs = Vec::new();
    while rest.starts_with("#[") {
        let end = close_of(&rest, 1);
        attrs.push(rest[..end].to_string());
        rest = rest[end..].trim().to_string();
    }
    (attrs, rest)
}

pub fn serde_words(attrs: &[String]) -> Vec<String> {
    attrs
        .iter()
        .filter(|a| a.contains("serde("))
        .flat_map(|a| split_top(&a[a.find("serde(").unwrap() + 6..a.len() - 2]))
        .map(|w| w.trim().to_string())
        .collect()
}

pub fn parse_fields(body: &str) -> Vec<Field> {
    let mut out = Vec::new();
    for chunk in split_top(body) {
        let (attrs, rest) = take_attrs(&chunk);
        let rest = if rest.starts_with("pub(") {
            rest[close_of(&rest, 3)..].trim().to_string()
        } else {
            rest.strip_prefix("pub ")
                .unwrap_or(&rest)
                .trim()
                .to_string()
        };
        let Some((name, ty)) = rest.split_once(':') else {
            continue;
        };
        let name = name.trim();
        if !is_ident(name) {
            continue;
        }
        let words = serde_words(&attrs);
        if words
            .iter()
            .any(|w| w == "skip" || w == "skip_deserializing")
        {
            continue;
        }
        let key = words
            .iter()
            .find_map(|w| w.strip_prefix("rename").map(|r| r.trim()))
            .and_then(|r| r.strip_prefix('='))
            .map_or(name.to_string(), |r| r.trim().trim_matches('"').to_string());
        out.push(Field {
            key,
            ty: ty.trim().to_string(),
            flatten: words.iter().any(|w| w == "flatten"),
        });
    }
    out
}

/// The name after `kw ` at each occurrence in `code`, with the index of the keyword.
pub fn declarations<'a>(code: &'a str, kw: &str) -> Vec<(usize, &'a str)> {
    let b = code.as_bytes();
    let pat = format!("{kw} ");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = code[from..].find(&pat) {
        let at = from + p;
        from = at + pat.len();
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let name_len = code[from..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(0);
        if name_len > 0 && code[from..].starts_with(|c: char| c.is_ascii_uppercase()) {
            out.push((at, &code[from..from + name_len]));
        }
    }
    out
}

/// Every struct and enum of config/src, by name.
pub fn config_items() -> BTreeMap<String, Item> {
    let sources = rust_sources("config/src");
    let mut items: BTreeMap<String, Item> = BTreeMap::new();
    for (file, code) in &sources {
        for kw in ["struct", "enum"] {
            for (at, name) in declarations(code, kw) {
                let after = at + kw.len() + 1 + name.len();
                let rest = code[after..].trim_start();
                let mut item = Item {
                    file: file.clone(),
                    ..Item::default()
                };
                if rest.starts_with('{') {
                    let open = after + code[after..].find('{').unwrap();
                    let body = &code[open + 1..close_of(code, open) - 1];
                    if kw == "struct" {
                        item.fields = parse_fields(body);
                    } else {
                        for v in split_top(body) {
                            let (_, v) = take_attrs(&v);
                            if let Some(p) = v.find('(') {
                                item.holds.push(v[p..].to_string());
                            } else if let Some(p) = v.find('{') {
                                item.fields.extend(parse_fields(&v[p + 1..v.len() - 1]));
                            }
                        }
                        let head = &code[code[..at].rfind([';', '}']).map_or(0, |p| p + 1)..at];
                        let (attrs, _) = take_attrs(head);
                        item.tag = serde_words(&attrs).iter().find_map(|w| {
                            let v = w.strip_prefix("tag")?.trim().strip_prefix('=')?;
                            Some(v.trim().trim_matches('"').to_string())
                        });
                    }
                }
                items.entry(name.to_string()).or_insert(item);
            }
        }
    }
    // `sink_config!` adds the `batch*` keys (a `batched by` sink) and the keys every sink has.
    let (_, mac_file) = sources
        .iter()
        .find(|(_, c)| c.contains("macro_rules! sink_config"))
        .expect("macro_rules! sink_config in config/src");
    let m = mac_file.find("macro_rules! sink_config").unwrap();
    let expansion = m + mac_file[m..].find("=>").expect("the macro's expansion");
    let s = expansion + mac_file[expansion..].find("pub struct $name").unwrap();
    let open = s + mac_file[s..].find('{').unwrap();
    let (mut batched, mut common) = (Vec::new(), Vec::new());
    for line in mac_file[open..close_of(mac_file, open)].lines() {
        if let Some(f) = parse_fields(line.trim().trim_end_matches(',')).pop() {
            if f.key.starts_with("batch") {
                batched.push(f);
            } else {
                common.push(f);
            }
        }
    }
    assert!(
        !batched.is_empty() && !common.is_empty(),
        "sink_config! fields"
    );
    for (_, code) in &sources {
        let mut from = 0;
        while let Some(p) = code[from..].find("sink_config! {") {
            let open = from + p + "sink_config! ".len();
            let end = close_of(code, open);
            let inv = &code[open..end];
            from = end;
            let Some((at, name)) = declarations(inv, "struct").into_iter().next() else {
                continue;
            };
            let sopen = at + inv[at..].find('{').unwrap();
            let after = &inv[close_of(inv, sopen)..];
            let item = items.get_mut(name).expect("a sink struct");
            if after.trim_start().starts_with("batched by") {
                let t = after.find("then").expect("batched by .., then {");
                let topen = t + after[t..].find('{').unwrap();
                item.fields
                    .extend(parse_fields(&after[topen + 1..close_of(after, topen) - 1]));
                item.fields.extend(batched.iter().map(|f| Field {
                    key: f.key.clone(),
                    ty: f.ty.clone(),
                    flatten: false,
                }));
            }
            item.fields.extend(common.iter().map(|f| Field {
                key: f.key.clone(),
                ty: f.ty.clone(),
                flatten: false,
            }));
        }
    }
    items
}

/// The config types a Rust type names (`Option<Vec<SinkConfig>>` names `SinkConfig`).
pub fn named_types(ty: &str, items: &BTreeMap<String, Item>) -> Vec<String> {
    ty.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| items.contains_key(*w))
        .map(str::to_string)
        .collect()
}

/// The items reachable from `ty` at `path`, each at the first path it was reached.
pub fn reach(
    ty: &str,
    path: &str,
    items: &BTreeMap<String, Item>,
    seen: &mut BTreeMap<String, String>,
) {
    for name in named_types(ty, items) {
        if seen.contains_key(&name) {
            continue;
        }
        seen.insert(name.clone(), path.to_string());
        let item = &items[&name];
        for f in &item.fields {
            let sub = if f.flatten {
                path.to_string()
            } else if f.ty.contains("Map<") {
                format!("{path}.{}.<key>", f.key)
            } else if f.ty.starts_with("Vec<") {
                format!("{path}.{}[]", f.key)
            } else {
                format!("{path}.{}", f.key)
            };
            reach(&f.ty, &sub, items, seen);
        }
        for h in &item.holds {
            reach(h, path, items, seen);
        }
    }
}

/// What one `##` section of docs/configuration.md documents: keys named as such (`strict`: a
/// key cell's code spans outside parentheses) and every word of a key or type cell (`loose`).
pub fn documented_keys(body: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut strict, mut loose) = (BTreeSet::new(), BTreeSet::new());
    for (head, rows) in tables(body) {
        let is_key = |h: &str| matches!(h, "Key" | "Keys" | "Required" | "Optional (default)");
        if !head.iter().any(|h| {
            matches!(
                h.as_str(),
                "Type" | "Default" | "Keys" | "Optional (default)"
            )
        }) {
            continue;
        }
        for row in rows {
            for (h, cell) in head.iter().zip(&row) {
                if !is_key(h) && h != "Type" {
                    continue;
                }
                for span in code_spans(cell) {
                    loose.extend(
                        span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                            .filter(|w| is_ident(w))
                            .map(str::to_string),
                    );
                }
                if is_key(h) {
                    for span in top_level_spans(cell) {
                        if span.split('.').all(is_ident) {
                            strict.extend(span.split('.').map(str::to_string));
                        }
                    }
                }
            }
        }
    }
    loose.extend(strict.iter().cloned());
    (strict, loose)
}
