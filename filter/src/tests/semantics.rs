//! CEL semantics the evaluator keeps: commutative error handling in `&&`/`||`, heterogeneous
//! equality, checked arithmetic, conversions, map iteration, and the cost model.

use serde_json::json;

use super::{activation, compile, filter, value};
use crate::{DEFAULT_MAX_COST, EvalError, Kind};

fn eval(src: &str) -> Result<serde_json::Value, EvalError> {
    let body =
        json!({"n": 0, "one": 1, "half": 0.5, "s": "secret-value", "big": 4611686018427387904i64});
    value(src, &body)
}

#[test]
fn logic_absorbs_errors_commutatively() {
    let body = json!({"n": 0, "obj": {}});
    assert_eq!(filter("false && 1 / body.n == 1", &body), Ok(false));
    assert_eq!(filter("1 / body.n == 1 && false", &body), Ok(false));
    assert_eq!(filter("true || body.obj.missing", &body), Ok(true));
    assert_eq!(filter("body.obj.missing || true", &body), Ok(true));
    assert_eq!(
        filter("1 / body.n == 1 && true", &body),
        Err(EvalError::DivisionByZero)
    );
    assert_eq!(
        filter("false || body.obj.missing", &body),
        Err(EvalError::NoSuchKey)
    );
    // A non-bool operand is an error the other side can still decide.
    assert_eq!(filter("body.n && false", &body), Ok(false));
    assert!(matches!(
        filter("body.n || false", &body),
        Err(EvalError::TypeMismatch { .. })
    ));
    // ?: evaluates only the branch taken.
    assert_eq!(eval("true ? 1 : 1 / 0"), Ok(json!(1)));
    assert_eq!(
        eval("body.n == 0 ? body.missing : 2"),
        Err(EvalError::NoSuchKey)
    );
}

#[test]
fn macros_absorb_errors_like_cel() {
    let body = json!({"xs": [0, 1, 2]});
    // 1/0 fails for x = 0, but x = 1 decides `exists`; for `all` a false decides.
    assert_eq!(filter("body.xs.exists(x, 1 / x == 1)", &body), Ok(true));
    assert_eq!(filter("body.xs.all(x, 10 / x > 6)", &body), Ok(false));
    assert_eq!(
        filter("body.xs.all(x, 10 / x > 0)", &body),
        Err(EvalError::DivisionByZero)
    );
    assert_eq!(filter("body.xs.exists_one(x, x > 1)", &body), Ok(true));
    assert_eq!(filter("body.xs.exists_one(x, x > 0)", &body), Ok(false));
    assert_eq!(
        value("body.xs.map(x, 2 / x)", &body),
        Err(EvalError::DivisionByZero)
    );
}

#[test]
fn heterogeneous_equality() {
    for src in [
        "1 == 1.0",
        "1u == 1",
        "1.0 == 1u",
        "[1, 2u] == [1.0, 2]",
        r#"{"a": 1} == {"a": 1.0}"#,
        r#"{1: "x"} == {1u: "x"}"#,
        "null == null",
        "body.one == 1.0",
        "9007199254740993 != 9007199254740992.0",
        "1 < 1.5 && 2u > 1 && -1 < 0u",
        r#""a" < "b" && b"a" < b"b" && false < true"#,
    ] {
        assert_eq!(eval(src), Ok(json!(true)), "{src}");
    }
    for src in [
        r#"1 == "1""#,
        "null == 0",
        "[1] == [1, 2]",
        r#"body.s == 1"#,
        "[] == {}",
    ] {
        assert_eq!(eval(src), Ok(json!(false)), "{src}");
    }
    // NaN equals nothing and orders with nothing.
    assert_eq!(
        eval(r#"double("NaN") == double("NaN") || double("NaN") < 1.0"#),
        Ok(json!(false))
    );
    let err = eval(r#"body.s < 1"#).expect_err("incomparable");
    assert_eq!(err.class(), "type_mismatch");
    assert_eq!(err.to_string(), "`<` does not apply to string, int");
}

#[test]
fn checked_arithmetic() {
    assert_eq!(eval("9223372036854775807 + 1"), Err(EvalError::Overflow));
    assert_eq!(eval("-9223372036854775808 - 1"), Err(EvalError::Overflow));
    assert_eq!(eval("body.big * 2"), Err(EvalError::Overflow));
    assert_eq!(
        eval("-(-9223372036854775807 - 1)"),
        Err(EvalError::Overflow)
    );
    assert_eq!(
        eval("(-9223372036854775807 - 1) / -1"),
        Err(EvalError::Overflow)
    );
    assert_eq!(eval("1u - 2u"), Err(EvalError::Overflow));
    assert_eq!(eval("18446744073709551615u + 1u"), Err(EvalError::Overflow));
    assert_eq!(eval("1 / body.n"), Err(EvalError::DivisionByZero));
    assert_eq!(eval("1 % body.n"), Err(EvalError::DivisionByZero));
    assert_eq!(eval("5u / 0u"), Err(EvalError::DivisionByZero));
    assert_eq!(
        eval("[7 / 2, -7 % 3, 7u % 4u, 1.5 * 2.0]"),
        Ok(json!([3, -1, 3, 3.0]))
    );
    // Doubles follow IEEE: dividing by zero is infinite, not an error, until output.
    assert_eq!(eval("1.0 / 0.0 > 1e308"), Ok(json!(true)));
    let err = eval("body.one + 1.0").expect_err("no mixed arithmetic");
    assert_eq!(err.to_string(), "`+` does not apply to int, double");
}

#[test]
fn json_numbers() {
    let body = json!({"i": -5, "u": 18446744073709551615u64, "d": 1.5, "e": 1e300});
    assert_eq!(filter("body.i == -5 && body.i + 1 == -4", &body), Ok(true));
    assert_eq!(
        filter("body.u == 18446744073709551615u && body.u - 1u > 0u", &body),
        Ok(true)
    );
    assert_eq!(filter("body.d == 1.5 && body.e > 1e299", &body), Ok(true));
    assert_eq!(value("int(body.u)", &body), Err(EvalError::Overflow));
}

#[test]
fn conversions() {
    assert_eq!(
        eval(
            r#"[int("42"), int(3.9), int(-3.9), uint(7), double(2), double("1.5"), int(18446744073709551615u / 2u)]"#
        ),
        Ok(json!([42, 3, -3, 7, 2.0, 1.5, 9223372036854775807i64]))
    );
    assert_eq!(
        eval(r#"[string(42), string(7u), string(1.5), string(true), string(b"abc"), string("s")]"#),
        Ok(json!(["42", "7", "1.5", "true", "abc", "s"]))
    );
    assert_eq!(eval("uint(-1)"), Err(EvalError::Overflow));
    assert_eq!(eval("int(1e19)"), Err(EvalError::Overflow));
    assert_eq!(eval(r#"int(double("NaN"))"#), Err(EvalError::Overflow));
    let err = eval("int(body.s)").expect_err("not an int");
    assert_eq!(err.class(), "invalid_argument");
    // The message names the function, never the hook's value.
    assert!(!err.to_string().contains("secret"), "{err}");
    assert_eq!(
        eval(r#"string(b"\xff")"#).map_err(|e| e.class()),
        Err("invalid_argument")
    );
}

#[test]
fn strings_and_sizes() {
    let body = json!({"s": "Héllo World", "l": [1, 2, 3], "m": {"a": 1}});
    let checks = [
        r#"body.s.size() == 11 && size(body.s) == 11"#,
        r#"size(b"\xc3\xa9") == 2 && body.l.size() == 3 && size(body.m) == 1"#,
        r#"body.s.contains("llo W") && body.s.startsWith("Hé") && body.s.endsWith("ld")"#,
        r#"body.s.lowerAscii() == "héllo world" && body.s.upperAscii() == "HéLLO WORLD""#,
        r#"body.s.matches("o W") && !body.s.matches("^o") && matches(body.s, "(?i)^h")"#,
        r#""b" in body.m == false && "a" in body.m && 2 in body.l && !(4 in body.l)"#,
        r#"body.l[0] == 1 && body.l[2u] == 3 && body.m["a"] == 1 && body.m.a == 1"#,
        r#""ab" + "cd" == "abcd" && b"a" + b"b" == b"ab" && [1] + [2] == [1, 2]"#,
    ];
    for src in checks {
        assert_eq!(filter(src, &body), Ok(true), "{src}");
    }
    assert_eq!(
        filter("body.l[3] == 1", &body),
        Err(EvalError::IndexOutOfRange)
    );
    assert_eq!(
        filter("body.l[-1] == 1", &body),
        Err(EvalError::IndexOutOfRange)
    );
    assert_eq!(
        filter(r#"body.m["b"] == 1"#, &body),
        Err(EvalError::NoSuchKey)
    );
    assert_eq!(filter("body.m.b == 1", &body), Err(EvalError::NoSuchKey));
    assert_eq!(
        filter("body.s.x == 1", &body).map_err(|e| e.class()),
        Err("type_mismatch")
    );
}

#[test]
fn map_iteration_visits_keys() {
    let body = json!({"m": {"b": 2, "a": 1, "c": 3}});
    assert_eq!(value("body.m.map(k, k)", &body), Ok(json!(["a", "b", "c"])));
    assert_eq!(
        value("body.m.filter(k, body.m[k] > 1)", &body),
        Ok(json!(["b", "c"]))
    );
    assert_eq!(
        filter(r#"body.m.all(k, k in ["a", "b", "c"])"#, &body),
        Ok(true)
    );
    assert_eq!(
        value(r#"{"x": 1, "y": 2}.map(k, k + "!")"#, &body),
        Ok(json!(["x!", "y!"]))
    );
    assert_eq!(
        value("{1: true, 2: false}.filter(k, k > 1)", &body),
        Ok(json!([2]))
    );
}

#[test]
fn map_literals() {
    assert_eq!(
        eval(r#"{"a": 1, "b": [true]}"#),
        Ok(json!({"a": 1, "b": [true]}))
    );
    let err = eval(r#"{"a": 1, "a": 2}"#).expect_err("repeated key");
    assert_eq!(err.class(), "invalid_argument");
    assert_eq!(
        eval(r#"{body.one: 1, 1u: 2}"#).map_err(|e| e.class()),
        Err("invalid_argument")
    );
    assert_eq!(
        eval("{body.half: 1}").map_err(|e| e.class()),
        Err("type_mismatch")
    );
}

#[test]
fn error_classes() {
    let cases = [
        (EvalError::CostExceeded, "cost_exceeded"),
        (EvalError::ValueTooLarge, "value_too_large"),
        (EvalError::NoSuchKey, "no_such_key"),
        (EvalError::Overflow, "overflow"),
        (EvalError::DivisionByZero, "division_by_zero"),
        (EvalError::IndexOutOfRange, "index_out_of_range"),
        (EvalError::InvalidOutput("x".into()), "invalid_output"),
    ];
    for (e, class) in cases {
        assert_eq!(e.class(), class);
    }
}

#[test]
fn cost_model() {
    let units = |src: &str, body: &serde_json::Value| {
        compile(src, Kind::Value)
            .cost_of(&activation(Some(body), &[]))
            .expect("evaluates")
    };
    // Reading a field of a 1 MiB body costs its nodes, not its bytes.
    let mut object = serde_json::Map::new();
    object.insert("type".into(), json!("invoice.paid"));
    object.insert("blob".into(), json!("x".repeat(1 << 20)));
    let big = serde_json::Value::Object(object);
    let cost = units(r#"body.type == "invoice.paid""#, &big);
    assert!(cost <= 6, "{cost}");
    // A string built costs ceil(len / 8): 16 bytes, 2 units, plus 3 nodes.
    assert_eq!(units(r#""abcdefgh" + "ijklmnop""#, &big), 5);
    // A macro: per iteration 1 plus its nodes; map appends one unit per element.
    let body = json!({"l": vec![1; 100]});
    let cost = units("body.l.map(x, x)", &body);
    assert!((400..=700).contains(&cost), "{cost}");
    // Linear, not quadratic, in the list's length.
    let body = json!({"l": vec![1; 10_000]});
    let cost = units("body.l.map(x, x)", &body);
    assert!((40_000..=70_000).contains(&cost), "{cost}");
    // The budget stops an evaluation that would pass it.
    let p = compile("1 + 1 == 2", Kind::Filter);
    let act = activation(None, &[]);
    // Five nodes: `==`, `+`, and three literals.
    assert_eq!(p.eval_filter(&act, 4), Err(EvalError::CostExceeded));
    assert_eq!(p.eval_filter(&act, 5), Ok(true));
    assert_eq!(p.eval_filter(&act, DEFAULT_MAX_COST), Ok(true));
}
