//! What one hook's filters cost, in process (docs/benchmarks.md, "Filters"): parsing a 1 KiB
//! JSON body and evaluating three typical filters (a body field, a header, a macro over a
//! list), in nanoseconds per hook over 200 000 hooks. Prints one JSON line.
//!
//! `cargo run --release -p ankusa-filter --example filter_cost`

use std::time::Instant;

use ankusa_filter::{Activation, DEFAULT_MAX_COST, Kind, Program};

const FILTERS: [&str; 3] = [
    r#"body.type == "invoice.paid""#,
    r#"headers["content-type"].startsWith("application/json") && size < 4096"#,
    r#"["invoice.paid", "invoice.payment_failed"].exists(t, t == body.type)"#,
];

/// A 1 KiB JSON body like the gateway benchmarks' (`ankusa_bench::body_1k`).
fn body_1k(n: u64) -> Vec<u8> {
    let head = format!("{{\"id\":\"evt_{n}\",\"type\":\"invoice.paid\",\"pad\":\"");
    let pad = 1024 - head.len() - 2;
    let mut s = head;
    s.push_str(&"x".repeat(pad));
    s.push_str("\"}");
    s.into_bytes()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const N: u64 = 200_000;
    let programs = FILTERS
        .iter()
        .map(|f| Program::compile(f, Kind::Filter))
        .collect::<Result<Vec<_>, _>>()?;
    let bodies: Vec<_> = (0..1000).map(body_1k).collect();
    let headers = vec![("content-type".to_string(), "application/json".to_string())];
    let mut parse_ns = 0u128;
    let mut eval_ns = [0u128; 3];
    let mut matched = 0u64;
    for n in 0..N {
        let body = &bodies[(n % 1000) as usize];
        let t = Instant::now();
        let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
        parse_ns += t.elapsed().as_nanos();
        let act = Activation {
            body: json.as_ref(),
            headers: &headers,
            source: "bench",
            tenant: "default",
            verification: "ok",
            received_at: 1_765_000_000_000,
            size: body.len() as u64,
        };
        for (p, ns) in programs.iter().zip(&mut eval_ns) {
            let t = Instant::now();
            if p.eval_filter(&act, DEFAULT_MAX_COST)? {
                matched += 1;
            }
            *ns += t.elapsed().as_nanos();
        }
    }
    if matched != 3 * N {
        return Err("every filter must match the bench body".into());
    }
    let per = |ns: u128| (ns as f64 / N as f64).round();
    println!(
        "{}",
        serde_json::json!({
            "case": "filter_cost_per_hook",
            "hooks": N,
            "json_parse_1k_ns": per(parse_ns),
            "filter_ns": FILTERS.iter().zip(eval_ns).map(|(f, ns)| serde_json::json!({"filter": f, "ns": per(ns)})).collect::<Vec<_>>(),
            "total_ns": per(parse_ns + eval_ns.iter().sum::<u128>()),
        })
    );
    Ok(())
}
