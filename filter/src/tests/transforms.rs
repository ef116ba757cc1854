//! `Kind::Value` and `Kind::Headers` programs: transformed bodies and added headers, and
//! results that cannot be output.

use serde_json::json;

use super::{activation, compile, value};
use crate::{DEFAULT_MAX_COST, EvalError, Kind};

fn stripe_event() -> serde_json::Value {
    json!({
        "id": "evt_1",
        "type": "invoice.paid",
        "data": {"object": {"id": "in_1", "amount": 1500, "lines": [1, 2.5, "x", null, true]}},
    })
}

#[test]
fn subtree_of_the_body() {
    let body = stripe_event();
    assert_eq!(
        value("body.data.object", &body),
        Ok(body["data"]["object"].clone())
    );
    assert_eq!(value("body", &body), Ok(body.clone()));
}

#[test]
fn new_object_from_fields() {
    let out = value(r#"{"id": body.id, "kind": body.type}"#, &stripe_event());
    assert_eq!(out, Ok(json!({"id": "evt_1", "kind": "invoice.paid"})));
}

#[test]
fn list_transforms() {
    let body = json!({"items": [{"name": "a", "price": 5}, {"name": "b", "price": 50}]});
    assert_eq!(
        value("body.items.map(i, i.price * 2)", &body),
        Ok(json!([10, 100]))
    );
    assert_eq!(
        value("body.items.filter(i, i.price > 10).map(i, i.name)", &body),
        Ok(json!(["b"]))
    );
    assert_eq!(
        value("body.items.map(i, i.price < 10, i.name)", &body),
        Ok(json!(["a"]))
    );
    assert_eq!(
        value("[1, 2] + body.items.map(i, i.price)", &body),
        Ok(json!([1, 2, 5, 50]))
    );
}

#[test]
fn scalars_and_numbers() {
    let body = json!({"big": 18446744073709551615u64, "neg": -3, "f": 0.5});
    assert_eq!(value("body.big", &body), Ok(json!(18446744073709551615u64)));
    assert_eq!(
        value("[body.neg * 2, body.f * 2.0, 7u]", &body),
        Ok(json!([-6, 1.0, 7]))
    );
    assert_eq!(value(r#"string(body.neg) + "!""#, &body), Ok(json!("-3!")));
    assert_eq!(value("null", &body), Ok(json!(null)));
}

#[test]
fn headers_from_the_body() {
    let body = stripe_event();
    let p = compile(
        r#"{"x-event-type": body.type, "X-Tenant": tenant}"#,
        Kind::Headers,
    );
    let out = p.eval_headers(&activation(Some(&body), &[]), DEFAULT_MAX_COST);
    assert_eq!(
        out,
        Ok(vec![
            ("x-tenant".to_string(), "acme".to_string()),
            ("x-event-type".to_string(), "invoice.paid".to_string()),
        ])
    );
}

fn headers_error(src: &str, body: &serde_json::Value) -> EvalError {
    let p = compile(src, Kind::Headers);
    p.eval_headers(&activation(Some(body), &[]), DEFAULT_MAX_COST)
        .expect_err("invalid headers")
}

#[test]
fn invalid_headers_are_refused() {
    let body = json!({"name": "bad name", "value": "a\nb", "n": 7, "m": {"x-a": "1"}});
    for src in [
        r#"{body.name: "v"}"#,
        r#"{"x-a": body.value}"#,
        r#"{"x-a": body.n}"#,
        r#"{"": "v"}"#,
        r#"{"x-a": "1", "X-A": "2"}"#,
        "body.name",
    ] {
        let err = headers_error(src, &body);
        assert_eq!(err.class(), "invalid_output", "{src}: {err}");
        // Neither the hook's name nor its value shows in the message.
        let text = err.to_string();
        assert!(
            !text.contains("bad name") && !text.contains("a\nb"),
            "{text}"
        );
    }
    // A JSON object from the body is a map too.
    let p = compile("body.m", Kind::Headers);
    let out = p.eval_headers(&activation(Some(&body), &[]), DEFAULT_MAX_COST);
    assert_eq!(out, Ok(vec![("x-a".to_string(), "1".to_string())]));
}

#[test]
fn at_most_64_headers() {
    let many: serde_json::Map<String, serde_json::Value> =
        (0..65).map(|i| (format!("x-h{i}"), json!("v"))).collect();
    let body = json!({"h": many});
    assert_eq!(headers_error("body.h", &body).class(), "invalid_output");
    let mut fewer = many.clone();
    fewer.remove("x-h0");
    let body = json!({"h": fewer});
    let p = compile("body.h", Kind::Headers);
    let out = p.eval_headers(&activation(Some(&body), &[]), DEFAULT_MAX_COST);
    assert_eq!(out.map(|h| h.len()), Ok(64));
}

#[test]
fn values_json_cannot_hold() {
    let body = json!({"n": 0.0});
    for src in [
        r#"double("NaN")"#,
        "1.0 / body.n",
        r#"{"a": [double("-inf")]}"#,
        r#"b"bytes""#,
        r#"{1: "one"}"#,
    ] {
        let err = value(src, &body).expect_err(src);
        assert_eq!(err.class(), "invalid_output", "{src}: {err}");
    }
}

#[test]
fn output_is_size_limited() {
    let big = "x".repeat(300 * 1024);
    let body = json!({"s": big});
    assert!(value("[body.s, body.s, body.s]", &body).is_ok());
    assert_eq!(
        value("[body.s, body.s, body.s, body.s]", &body),
        Err(EvalError::ValueTooLarge)
    );
    // Copying a borrowed body is charged per node and sized as it goes.
    let body = json!({"a": vec![0; 50_000]});
    let p = compile("body", Kind::Value);
    let act = activation(Some(&body), &[]);
    assert_eq!(p.eval_json(&act, DEFAULT_MAX_COST).as_ref(), Ok(&body));
    assert_eq!(p.eval_json(&act, 10_000), Err(EvalError::CostExceeded));
    let body = json!({"a": vec![0; 200_000]});
    assert_eq!(value("body", &body), Err(EvalError::ValueTooLarge));
}
