//! Hostile expressions and hostile hooks: each is refused at compile time or cut off by the
//! cost or size limit, in bounded time.

use serde_json::json;

use super::{activation, bounded, compile, compile_error, filter, value};
use crate::{DEFAULT_MAX_COST, EvalError, Kind, Program};

fn cut(r: Result<impl std::fmt::Debug, EvalError>) -> EvalError {
    match r {
        Err(e @ (EvalError::CostExceeded | EvalError::ValueTooLarge)) => e,
        other => panic!("expected a limit error, got {other:?}"),
    }
}

#[test]
fn deep_parentheses() {
    let src = format!("{}1{} == 1", "(".repeat(1000), ")".repeat(1000));
    let e = bounded(|| compile_error(&src, Kind::Filter));
    assert!(e.message.contains("nests more than 32 levels deep"), "{e}");
    for open in ["[", "f(", "-(", "{1:"] {
        let close = if open == "{1:" {
            "}"
        } else if open == "[" {
            "]"
        } else {
            ")"
        };
        let src = format!("{}1{}", open.repeat(1000), close.repeat(1000));
        let e = bounded(|| compile_error(&src, Kind::Value));
        assert!(e.message.contains("nests more than 32"), "{open}: {e}");
    }
}

#[test]
fn huge_list_literal() {
    let src = format!("[{}]", vec!["1"; 2000].join(","));
    let e = bounded(|| compile_error(&src, Kind::Value));
    assert!(e.message.contains("more than 512 nodes"), "{e}");
    let src = format!("[{}]", vec![r#""x""#; 10_000].join(","));
    let e = bounded(|| compile_error(&src, Kind::Value));
    assert!(e.message.contains("more than 4096"), "{e}");
}

#[test]
fn nested_macros() {
    let list = format!("[{}]", vec!["1"; 50].join(","));
    let src = format!("{list}.map(x, {list}.map(y, {list}.map(z, x + y + z)))");
    let e = bounded(|| compile_error(&src, Kind::Value));
    assert!(e.message.contains("macros nest more than 2 deep"), "{e}");
    // Two levels over literal lists of 200: 40 000 inner iterations, over budget.
    let list = format!("[{}]", vec!["1"; 200].join(","));
    let src = format!("{list}.map(x, {list}.map(y, x + y))");
    cut(bounded(|| value(&src, &json!(null))));
    // Two levels over the body: 10^6 iterations asked, cut at the budget.
    let body = json!({"a": vec![1; 1000]});
    cut(bounded(|| {
        value("body.a.map(x, body.a.map(y, x * y))", &body)
    }));
    cut(bounded(|| {
        filter("body.a.all(x, body.a.all(y, x == y))", &body)
    }));
}

#[test]
fn string_doubling() {
    let body = json!({"s": "x".repeat(512 * 1024)});
    let src = "size(body.s + body.s + body.s + body.s + body.s + body.s + body.s + body.s) > 0";
    let p = compile(src, Kind::Filter);
    let act = activation(Some(&body), &[]);
    assert_eq!(
        bounded(|| p.eval_filter(&act, DEFAULT_MAX_COST)),
        Err(EvalError::CostExceeded)
    );
    // With no cost limit the size limit stops it: the second `+` would pass 1 MiB.
    assert_eq!(
        bounded(|| p.eval_filter(&act, u64::MAX)),
        Err(EvalError::ValueTooLarge)
    );
    // Doubling by macro: each step's string is twice the last.
    let src = r#"[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21].map(i, body.s + body.s)"#;
    cut(bounded(|| value(src, &body)));
}

#[test]
fn large_array_in_the_body() {
    let items: Vec<String> = (0..200_000).map(|i| format!("item-{i}")).collect();
    let body = json!({"items": items});
    cut(bounded(|| {
        value(r#"body.items.map(i, i + "-suffix")"#, &body)
    }));
    cut(bounded(|| {
        filter(r#"body.items.exists(i, (i + "!").endsWith("?"))"#, &body)
    }));
    cut(bounded(|| filter(r#""x" in body.items"#, &body)));
    cut(bounded(|| filter("body.items == body.items", &body)));
    // Without a cost limit, building the list is linear and stops at the size limit.
    let p = compile("body.items.filter(i, true)", Kind::Value);
    let act = activation(Some(&body), &[]);
    assert_eq!(
        bounded(|| p.eval_json(&act, u64::MAX)),
        Err(EvalError::ValueTooLarge)
    );
    // And a list of 50 000 builds in time linear in its length.
    let small = json!({"items": vec![1; 50_000]});
    let act = activation(Some(&small), &[]);
    let out = bounded(|| p.eval_json(&act, u64::MAX)).expect("fits");
    assert_eq!(out.as_array().map(Vec::len), Some(50_000));
}

#[test]
fn regex_blowup_patterns_run_in_linear_time() {
    let body = json!({"a": "a".repeat(1 << 20), "x": "x".repeat(1 << 20)});
    let act = activation(Some(&body), &[]);
    // Patterns that backtrack exponentially elsewhere, over 1 MiB, with no cost limit.
    for (src, expected) in [
        (r#"body.a.matches("(a*)*b")"#, false),
        (r#"body.x.matches("(x+x+)+y")"#, false),
        (r#"body.a.matches("^(a|aa)+$")"#, true),
        (r#"body.x.matches("(.*){20}y")"#, false),
        (r#"body.x.matches("(\\w+\\s?)*$")"#, true),
    ] {
        let p = compile(src, Kind::Filter);
        assert_eq!(
            bounded(|| p.eval_filter(&act, u64::MAX)),
            Ok(expected),
            "{src}"
        );
        // Scanning 1 MiB costs 131 072 units: over the default budget before it starts.
        assert_eq!(
            p.eval_filter(&act, DEFAULT_MAX_COST),
            Err(EvalError::CostExceeded)
        );
    }
}

/// Text the lazy DFA cannot keep up with: non-ASCII letters (Unicode `\b` makes it quit)
/// and the literals the patterns below need, so no prefilter skips the search.
fn awkward_text(len: usize) -> String {
    let mut x: u32 = 1;
    let mut s = String::with_capacity(len + 4);
    let mut i = 0usize;
    while s.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        s.push(match i {
            _ if i.is_multiple_of(7) => 'é',
            _ if i.is_multiple_of(53) => '!',
            _ if i.is_multiple_of(71) => ' ',
            _ => char::from(b'a' + u8::try_from((x >> 16) % 26).unwrap_or(0)),
        });
        i += 1;
    }
    s
}

#[test]
fn large_patterns_pay_for_the_slow_matcher() {
    // Patterns near the 1 MiB program limit on which the regex crate falls back to its NFA
    // simulation: microseconds a byte. Their scans cost 128 times a plain one, so any input
    // the budget lets through is matched in bounded time, and longer ones are cut first.
    for pattern in [r"(.{500})\\b(.{500})\\B!", r"(?-u:\\w)(?:.{200}!){3}"] {
        let p = compile(&format!(r#"body.s.matches("{pattern}")"#), Kind::Filter);
        for len in [1 << 10, 6 << 10, 1 << 16, 1 << 20] {
            let body = json!({"s": awkward_text(len)});
            let act = activation(Some(&body), &[]);
            let r = bounded(|| p.eval_filter(&act, DEFAULT_MAX_COST));
            if len <= 6 << 10 {
                assert!(r.is_ok(), "{pattern} on {len}: {r:?}");
            } else {
                assert_eq!(r, Err(EvalError::CostExceeded), "{pattern} on {len}");
            }
        }
    }
    // An ordinary pattern keeps the plain scan cost: 1 MiB of text is 131 072 units.
    let body = json!({"s": awkward_text(1 << 20)});
    let act = activation(Some(&body), &[]);
    let p = compile(r#"body.s.matches("^SKU-[0-9]+$")"#, Kind::Filter);
    assert_eq!(p.eval_filter(&act, 140_000), Ok(false));
}

#[test]
fn oversized_regex_is_refused() {
    for pattern in [r"\\w{1000}{1000}", r"((a{100}){100}){100}", r"\\pL{10000}"] {
        let src = format!(r#"body.s.matches("{pattern}")"#);
        let e = bounded(|| compile_error(&src, Kind::Filter));
        assert!(
            e.message.contains("compiles to more than"),
            "{pattern}: {e}"
        );
    }
}

#[test]
fn repeated_references_to_the_body() {
    // Building [body, body, ...] copies nothing; writing it out would, and is cut.
    let body = json!({"blob": "b".repeat(600 * 1024)});
    let src = format!("[{}]", vec!["body"; 100].join(", "));
    assert_eq!(
        bounded(|| value(&src, &body)),
        Err(EvalError::ValueTooLarge)
    );
    assert_eq!(
        bounded(|| filter(&format!("size({src}) == 100"), &body)),
        Ok(true)
    );
}

#[test]
fn many_headers_from_the_hook() {
    let headers: Vec<(String, String)> = (0..10_000)
        .map(|i| ("x-repeat".to_string(), format!("value-{i}")))
        .collect();
    let p = compile(
        r#"headers["x-repeat"].contains("value-9999")"#,
        Kind::Filter,
    );
    let act = activation(None, &headers);
    assert_eq!(bounded(|| p.eval_filter(&act, DEFAULT_MAX_COST)), Ok(true));
    assert_eq!(p.eval_filter(&act, 1_000), Err(EvalError::CostExceeded));
}

#[test]
fn garbage_expressions_never_panic() {
    let samples = [
        "",
        " ",
        "(",
        ")",
        "[",
        "{",
        "}",
        "]",
        ".",
        "..",
        "a.",
        ".a",
        "1..2",
        "'",
        "\"",
        "b'",
        "r\"",
        "\\",
        "@",
        "#",
        "$",
        "1e",
        "0x",
        "0xZZ",
        "1u1",
        "--1",
        "!!!",
        "??",
        "a ? b",
        "has(",
        "has()",
        "has(1)",
        "x.all(",
        "[1].map(,)",
        "{:}",
        "{1}",
        "f(,)",
        "\u{0}",
        "\u{feff}body",
        "body.\u{301}",
        "'\\u{110000}'",
        "'\\xZZ'",
        "b'\\777'",
        "1 in",
        "in 1",
        "a.b.c.d(",
        "`a`",
        "body.`a`",
        "body[?0]",
        "[?1]",
        "{?1: 2}",
        "1 ?: 2",
    ];
    for src in samples {
        for kind in [Kind::Filter, Kind::Value, Kind::Headers] {
            if let Ok(p) = Program::compile(src, kind) {
                let body = json!({"a": 1});
                let act = activation(Some(&body), &[]);
                let _ = p.eval_json(&act, DEFAULT_MAX_COST);
            }
        }
    }
}

#[test]
fn deepest_trees_evaluate_on_a_small_stack() {
    // Evaluation recurses over the tree, whose depth compile caps at 128: the deepest
    // accepted programs run on a quarter of a tokio worker's 2 MiB stack, in a debug build.
    let mut body = json!("leaf");
    for _ in 0..126 {
        body = json!({ "a": body });
    }
    let select = format!("body{}", ".a".repeat(126));
    let concat = format!("tenant{}", r#" + "x""#.repeat(120));
    let logic = format!("{} true", "false || ".repeat(120));
    let run = move || {
        let act = activation(Some(&body), &[]);
        let eval = |src: &str| compile(src, Kind::Value).eval_json(&act, DEFAULT_MAX_COST);
        assert_eq!(eval(&select), Ok(json!("leaf")));
        assert_eq!(eval(&concat), Ok(json!(format!("acme{}", "x".repeat(120)))));
        assert_eq!(eval(&logic), Ok(json!(true)));
        assert_eq!(eval("body").map(|v| v.is_object()), Ok(true));
    };
    let worker = std::thread::Builder::new()
        .stack_size(512 << 10)
        .spawn(run)
        .expect("spawns");
    assert!(worker.join().is_ok());
}
