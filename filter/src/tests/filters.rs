//! Filters as users write them for Stripe, GitHub and Shopify hooks, and the activation's
//! variables.

use serde_json::json;

use super::{activation, compile, filter};
use crate::{Activation, DEFAULT_MAX_COST, Kind, Program};

#[test]
fn stripe_event_type() {
    let paid = json!({"id": "evt_1", "type": "invoice.paid"});
    let failed = json!({"id": "evt_2", "type": "invoice.payment_failed"});
    assert_eq!(filter(r#"body.type == "invoice.paid""#, &paid), Ok(true));
    assert_eq!(filter(r#"body.type == "invoice.paid""#, &failed), Ok(false));
}

#[test]
fn stripe_event_prefix() {
    let src = r#"body.type.startsWith("customer.")"#;
    assert_eq!(
        filter(src, &json!({"type": "customer.subscription.created"})),
        Ok(true)
    );
    assert_eq!(filter(src, &json!({"type": "invoice.paid"})), Ok(false));
}

#[test]
fn github_event_header_and_ref() {
    let p = compile(
        r#"headers["x-github-event"] == "push" && body.ref == "refs/heads/main""#,
        Kind::Filter,
    );
    let push = vec![("x-github-event".to_string(), "push".to_string())];
    let pr = vec![("x-github-event".to_string(), "pull_request".to_string())];
    let main = json!({"ref": "refs/heads/main"});
    let branch = json!({"ref": "refs/heads/feature"});
    let run = |headers: &[(String, String)], body| {
        p.eval_filter(&activation(Some(body), headers), DEFAULT_MAX_COST)
    };
    assert_eq!(run(&push, &main), Ok(true));
    assert_eq!(run(&push, &branch), Ok(false));
    assert_eq!(run(&pr, &main), Ok(false));
}

#[test]
fn has_then_nested_amount() {
    let src = "has(body.data) && body.data.object.amount > 1000";
    assert_eq!(
        filter(src, &json!({"data": {"object": {"amount": 1500}}})),
        Ok(true)
    );
    assert_eq!(
        filter(src, &json!({"data": {"object": {"amount": 500}}})),
        Ok(false)
    );
    // has() false decides the && before the missing key is read.
    assert_eq!(filter(src, &json!({"type": "ping"})), Ok(false));
}

#[test]
fn shopify_line_items_sku_regex() {
    let src = r#"body.line_items.exists(i, i.sku.matches("^SKU-[0-9]+$"))"#;
    let hit = json!({"line_items": [{"sku": "gift"}, {"sku": "SKU-1042"}]});
    let miss = json!({"line_items": [{"sku": "gift"}, {"sku": "SKU-10a"}]});
    assert_eq!(filter(src, &hit), Ok(true));
    assert_eq!(filter(src, &miss), Ok(false));
    assert_eq!(filter(src, &json!({"line_items": []})), Ok(false));
}

#[test]
fn body_size_and_tenant() {
    let p = compile("size > 100", Kind::Filter);
    let mut act = activation(None, &[]);
    assert_eq!(p.eval_filter(&act, DEFAULT_MAX_COST), Ok(true));
    act.size = 100;
    assert_eq!(p.eval_filter(&act, DEFAULT_MAX_COST), Ok(false));

    let p = compile(r#"tenant in ["a", "b"]"#, Kind::Filter);
    act.tenant = "b";
    assert_eq!(p.eval_filter(&act, DEFAULT_MAX_COST), Ok(true));
    act.tenant = "c";
    assert_eq!(p.eval_filter(&act, DEFAULT_MAX_COST), Ok(false));
}

#[test]
fn facts_of_the_hook() {
    let body = json!({});
    let src = r#"source == "stripe" && verification == "ok" && received_at > 1600000000000"#;
    assert_eq!(filter(src, &body), Ok(true));
    assert_eq!(filter(r#"verification == "failed""#, &body), Ok(false));
}

#[test]
fn non_json_body_is_null() {
    let act = activation(None, &[]);
    let run = |src: &str| compile(src, Kind::Filter).eval_filter(&act, DEFAULT_MAX_COST);
    assert_eq!(run("has(body.type)"), Ok(false));
    assert_eq!(run("!has(body.type) && body == null"), Ok(true));
    assert_eq!(run(r#"has(body.type) && body.type == "x""#), Ok(false));
}

#[test]
fn has_on_a_non_map_is_false() {
    let body = json!({"s": "text", "n": 1, "l": [1], "m": {"k": null}});
    assert_eq!(
        filter("has(body.s.x) || has(body.n.x) || has(body.l.x)", &body),
        Ok(false)
    );
    // A key whose value is null is present.
    assert_eq!(filter("has(body.m.k) && !has(body.m.j)", &body), Ok(true));
}

#[test]
fn repeated_headers_are_joined_in_order() {
    let headers: Vec<(String, String)> = [("x-a", "1"), ("x-b", "2"), ("x-a", "3")]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    let act = activation(None, &headers);
    let run = |src: &str| compile(src, Kind::Filter).eval_filter(&act, DEFAULT_MAX_COST);
    assert_eq!(run(r#"headers["x-a"] == "1, 3""#), Ok(true));
    assert_eq!(
        run(r#"headers["x-b"] == "2" && size(headers) == 2"#),
        Ok(true)
    );
    assert_eq!(run(r#""x-c" in headers"#), Ok(false));
    assert_eq!(run(r#"headers.exists(h, h == "x-b")"#), Ok(true));
}

#[test]
fn reads_body_only_when_named() {
    assert!(!compile("size > 100", Kind::Filter).reads_body());
    assert!(!compile(r#"headers["x-a"] == "1""#, Kind::Filter).reads_body());
    assert!(compile(r#"body.type == "x""#, Kind::Filter).reads_body());
    assert!(compile(r#"[1].exists(x, has(body.a))"#, Kind::Filter).reads_body());
}

#[test]
fn program_is_shareable_and_shows_its_source() {
    fn shareable<T: Send + Sync + Clone>() {}
    shareable::<Program>();
    let p = compile(r#"body.type == "x""#, Kind::Filter);
    assert_eq!(p.source(), r#"body.type == "x""#);
    assert_eq!(p.kind(), Kind::Filter);
    assert!(format!("{p:?}").contains(r#"body.type == \"x\""#));
    let body = json!({"type": "x"});
    let copy = p.clone();
    let handle = std::thread::spawn(move || {
        let act = Activation {
            body: Some(&body),
            headers: &[],
            source: "s",
            tenant: "t",
            verification: "ok",
            received_at: 0,
            size: 0,
        };
        copy.eval_filter(&act, DEFAULT_MAX_COST)
    });
    assert_eq!(handle.join().expect("evaluates"), Ok(true));
}

#[test]
fn filter_result_must_be_bool_at_run_time() {
    // `body.flag` is dyn: accepted at compile, checked when evaluated.
    assert_eq!(filter("body.flag", &json!({"flag": true})), Ok(true));
    let err = filter("body.flag", &json!({"flag": "yes"})).expect_err("not a bool");
    assert_eq!(err.class(), "invalid_output");
}
