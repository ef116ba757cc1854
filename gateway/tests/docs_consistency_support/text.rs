//! Rust source and markdown read as text: comments and `#[cfg(test)]` items removed, brackets
//! matched, string literals listed; markdown sections, tables and code spans.

use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Fails with every problem, one per line.
pub fn report(what: &str, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{what}: {} mismatch(es):\n  - {}",
        problems.len(),
        problems.join("\n  - ")
    );
}

// ---------------------------------------------------------------------------------------------
// Rust source as text

/// The non-test `.rs` files under `dir` (relative to the workspace), with their comments and
/// `#[cfg(test)]` items removed.
pub fn rust_sources(dir: &str) -> Vec<(String, String)> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(p) else { return };
        for e in rd.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if path.is_dir() {
                if name != "tests" {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs")
                && name != "tests.rs"
                && name != "testing.rs"
                && !name.ends_with("_tests.rs")
            {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root().join(dir), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(root())
                .unwrap_or(&p)
                .to_string_lossy()
                .to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            (rel, strip_tests(&strip_comments(&text)))
        })
        .collect()
}

/// Length of the string or char literal starting at `i`, if one does (lifetimes are not).
pub fn literal_len(b: &[u8], i: usize) -> Option<usize> {
    match b[i] {
        b'"' => {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            Some(j + 1 - i)
        }
        b'r' if (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) =>
        {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                return None;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let start = i + 2 + hashes;
            let end = b[start..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| start + p + close.len());
            Some(end - i)
        }
        b'\'' if b.get(i + 1) == Some(&b'\\') => {
            let end = b[i + 2..].iter().position(|&c| c == b'\'')?;
            Some(end + 3)
        }
        b'\'' if b.get(i + 2) == Some(&b'\'') => Some(3),
        _ => None,
    }
}

pub fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let end = b[i + 2..].windows(2).position(|w| w == b"*/");
            i = end.map_or(b.len(), |p| i + 2 + p + 2);
        } else if let Some(n) = literal_len(b, i) {
            let n = n.min(b.len() - i);
            out.extend_from_slice(&b[i..i + n]);
            i += n;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// Index one past the bracket closing the one opened at `open` (`{`, `(`, `[`).
pub fn close_of(code: &str, open: usize) -> usize {
    let b = code.as_bytes();
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        if let Some(n) = literal_len(b, i) {
            i += n;
            continue;
        }
        match b[i] {
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Removes each item under `#[cfg(test)]` (a `mod x { .. }`, `mod x;`, a function ...).
pub fn strip_tests(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let rest = &out[at..];
        let semi = rest.find(';').unwrap_or(rest.len());
        let end = match rest.find('{') {
            Some(brace) if brace < semi => at + close_of(&out, at + brace),
            _ => at + semi + 1,
        };
        out.replace_range(at..end.min(out.len()), "");
    }
    out
}

/// The string literals of `code` (their text, unescaped only trivially).
pub fn string_literals(code: &str) -> Vec<(usize, String)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match literal_len(b, i) {
            Some(n) if b[i] == b'"' => {
                out.push((i, code[i + 1..i + n - 1].to_string()));
                i += n;
            }
            Some(n) => i += n,
            None => i += 1,
        }
    }
    out
}

pub fn is_ident(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

// ---------------------------------------------------------------------------------------------
// Markdown as text

/// `(heading line, level, title, body up to the next heading of the same or a higher level)`.
pub fn sections(md: &str, level: usize) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = md.lines().collect();
    let mark = "#".repeat(level) + " ";
    let mut out = Vec::new();
    let mut in_code = false;
    let mut heads = Vec::new();
    for (n, l) in lines.iter().enumerate() {
        if l.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        let hashes = l.chars().take_while(|&c| c == '#').count();
        if hashes >= 1 && l[hashes..].starts_with(' ') && hashes <= level {
            heads.push((n, hashes));
        }
    }
    for (k, &(n, h)) in heads.iter().enumerate() {
        if h != level {
            continue;
        }
        let end = heads.get(k + 1).map_or(lines.len(), |&(m, _)| m);
        let title = lines[n][mark.len()..].trim().to_string();
        out.push((n + 1, title, lines[n + 1..end].join("\n")));
    }
    out
}

pub fn section_of(md: &str, title: &str) -> String {
    sections(md, 2)
        .into_iter()
        .find(|(_, t, _)| t == title)
        .map(|(_, _, b)| b)
        .unwrap_or_else(|| panic!("no `## {title}` section"))
}

/// The tables of a markdown text: header cells and body rows of cells.
pub fn tables(md: &str) -> Vec<(Vec<String>, Vec<Vec<String>>)> {
    let cells = |l: &str| -> Vec<String> {
        let l = l.trim().trim_start_matches('|').trim_end_matches('|');
        // `\|` inside a cell is a literal bar.
        l.replace("\\|", "\u{1}")
            .split('|')
            .map(|c| c.replace('\u{1}', "|").trim().to_string())
            .collect()
    };
    let mut out = Vec::new();
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    while i + 1 < lines.len() {
        let sep = lines[i + 1].trim();
        let is_sep = sep.starts_with("|-") || sep.starts_with("| -") || sep.starts_with("|:");
        if lines[i].trim_start().starts_with('|') && is_sep {
            let head = cells(lines[i]);
            let mut rows = Vec::new();
            i += 2;
            while i < lines.len() && lines[i].trim_start().starts_with('|') {
                rows.push(cells(lines[i]));
                i += 1;
            }
            out.push((head, rows));
        } else {
            i += 1;
        }
    }
    out
}

/// The contents of the `code spans` of a markdown fragment.
pub fn code_spans(s: &str) -> Vec<String> {
    s.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The code spans of `s` outside any parentheses.
pub fn top_level_spans(s: &str) -> Vec<String> {
    let mut depth = 0i32;
    let mut in_code = false;
    let mut kept = String::new();
    for c in s.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code && c == '(' {
            depth += 1;
        } else if !in_code && c == ')' {
            depth -= 1;
            continue;
        }
        if depth == 0 {
            kept.push(c);
        }
    }
    code_spans(&kept)
}

// ---------------------------------------------------------------------------------------------
// The docs

/// The docs and README, by path relative to the workspace.
pub fn docs() -> Vec<(String, String)> {
    let mut out = vec![("README.md".to_string(), read("README.md"))];
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    for p in paths {
        let name = format!("docs/{}", p.file_name().unwrap().to_string_lossy());
        out.push((name.clone(), read(&name)));
    }
    out
}

/// GitHub's anchor of a heading.
pub fn slug(title: &str) -> String {
    title
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
