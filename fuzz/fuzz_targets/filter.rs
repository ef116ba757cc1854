//! CEL filters (`ankusa-filter`): any expression compiled as each kind, and whatever
//! compiles evaluated with the default budget against any body. No panic and no hang: a
//! hostile expression is refused at compile time or cut off by its cost or size limit.
//! An accepted headers result is valid HTTP; a program that says it does not read the body
//! gives the same result without one.
//!
//! Input: the expression, a NUL byte, then the body; a body that is not JSON is absent, as
//! for a hook whose body is not JSON.

#![no_main]

use ankusa_filter::{Activation, DEFAULT_MAX_COST, Kind, MAX_HEADERS, Program};
use http::{HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

fn headers() -> Vec<(String, String)> {
    [
        ("content-type", "application/json"),
        ("x-github-event", "push"),
        ("x-shopify-topic", "orders/create"),
        ("x-repeat", "a"),
        ("x-repeat", "b"),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect()
}

fuzz_target!(|data: &[u8]| {
    let (expr, body) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(expr) = std::str::from_utf8(expr) else {
        return;
    };
    let body: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let headers = headers();
    let act = Activation {
        body: body.as_ref(),
        headers: &headers,
        source: "github",
        tenant: "acme",
        verification: "ok",
        received_at: 1_700_000_000_000,
        size: data.len() as u64,
    };
    let no_body = Activation { body: None, ..act };
    for kind in [Kind::Filter, Kind::Value, Kind::Headers] {
        let Ok(program) = Program::compile(expr, kind) else {
            continue;
        };
        assert_eq!((program.source(), program.kind()), (expr, kind));
        match kind {
            Kind::Filter => {
                let r = program.eval_filter(&act, DEFAULT_MAX_COST);
                if !program.reads_body() {
                    assert_eq!(r, program.eval_filter(&no_body, DEFAULT_MAX_COST));
                }
            }
            Kind::Value => {
                let r = program.eval_json(&act, DEFAULT_MAX_COST);
                if let Err(e) = &r {
                    assert!(!e.class().is_empty());
                }
                if !program.reads_body() {
                    assert_eq!(r, program.eval_json(&no_body, DEFAULT_MAX_COST));
                }
            }
            Kind::Headers => {
                if let Ok(out) = program.eval_headers(&act, DEFAULT_MAX_COST) {
                    assert!(out.len() <= MAX_HEADERS);
                    for (name, value) in &out {
                        assert_eq!(*name, name.to_ascii_lowercase());
                        assert!(HeaderName::from_bytes(name.as_bytes()).is_ok(), "{name:?}");
                        assert!(HeaderValue::from_str(value).is_ok(), "{value:?}");
                    }
                }
            }
        }
    }
});
