//! The edge's request grammars: `route` in every routing mode, `valid_traceparent`, and the
//! HTTP sink's `parse_retry_after`. No panic; route's parts are slices of the path without a
//! `/` that rebuild it exactly; an accepted traceparent has the W3C field widths.

#![no_main]

use ankusa_config::Routing;
use ankusa_format::http::parse_retry_after;
use ankusa_format::request::{route, valid_traceparent};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    path: String,
    /// A prefix as the config allows (`/` or `/a/b`), or any text.
    prefix: Option<String>,
    prefix_pick: u8,
    tenant_path: bool,
    header: String,
}

const PREFIXES: &[&str] = &["/", "/webhooks", "/in", "/a/b"];

fuzz_target!(|input: Input| {
    let prefix = input
        .prefix
        .unwrap_or_else(|| PREFIXES[usize::from(input.prefix_pick) % PREFIXES.len()].into());
    let routing = if input.tenant_path {
        Routing::TenantPath
    } else {
        Routing::Path
    };
    let path = input.path.as_str();
    if let Some((tenant, source)) = route(path, &prefix, routing) {
        assert_eq!(tenant.is_some(), input.tenant_path);
        let parts: Vec<&str> = tenant.into_iter().chain([source]).collect();
        let range = path.as_bytes().as_ptr_range();
        for p in &parts {
            assert!(!p.contains('/'), "{p:?} of {path:?}");
            let r = p.as_bytes().as_ptr_range();
            assert!(
                range.start <= r.start && r.end <= range.end,
                "not a slice of the path"
            );
        }
        let joined = parts.join("/");
        let expected = if prefix == "/" {
            format!("/{joined}")
        } else {
            format!("{prefix}/{joined}")
        };
        assert_eq!(expected, path);
    }

    let v = input.header.as_str();
    if valid_traceparent(v) {
        let f: Vec<&str> = v.split('-').collect();
        let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
        assert!(f.len() >= 4);
        for (s, n) in f.iter().zip([2, 32, 16, 2]) {
            assert!(s.len() == n && hex(s), "{v:?}");
        }
    }

    let ms = parse_retry_after(v);
    if let Ok(secs) = v.trim().parse::<u64>() {
        assert_eq!(ms, Some(secs.saturating_mul(1000)));
    }
});
