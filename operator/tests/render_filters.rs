//! A Source's per-sink `filter`, `onFilterError` and `transform` reach the rendered sink entry
//! of that Source only, and an expression the gateway would refuse is the Source's error
//! (naming the sink entry and the position) before any pod sees it.

use ankusa_config::{OnFilterError, SinkConfig};
use ankusa_crds::{Gateway, Sink, Source};
use ankusa_operator::render::{self, Inputs, Outcome};
use common::{meta, object, secrets};
use serde_json::json;

mod common;

fn gateway() -> Gateway {
    object(
        json!({"name": "gw", "namespace": "ns", "uid": "11111111-2222-3333-4444-555555555555", "generation": 1}),
        json!({"replicas": 1, "settings": {"egress": {"allow_http": true, "allow_loopback": true}}}),
    )
}

fn source(name: &str, sinks: serde_json::Value) -> Source {
    object(
        meta(name, 3),
        json!({"gatewayRef": {"name": "gw"}, "sinks": sinks}),
    )
}

fn render(sources: &[Source]) -> render::Rendered {
    let sinks: Vec<Sink> = vec![object(meta("audit", 2), json!({"type": "log"}))];
    let secrets = secrets(&[]);
    render::render(&Inputs {
        gateway: &gateway(),
        sources,
        sinks: &sinks,
        secrets: &secrets,
        admin_token: "operator-admin-token-0123456789",
        scrape_token: None,
        previous: None,
    })
}

#[test]
fn filters_and_transforms_render_per_source_sink_entry() {
    let paid = source(
        "paid",
        json!([{"name": "audit", "filter": "body.type == \"invoice.paid\"", "onFilterError": "skip",
                "transform": {"body": "body.data.object", "headers": "{\"x-type\": body.type}"}},
               {"name": "audit"}]),
    );
    let plain = source("plain", json!([{"name": "audit"}]));
    let r = render(&[paid, plain]);
    assert_eq!(r.error, None);
    let c = r.for_pod("gw-0").expect("a config");
    let sinks = &c.sources["paid"].sinks;
    let SinkConfig::Log(first) = &sinks[0] else {
        panic!("a log sink")
    };
    assert_eq!(
        first.filter.as_deref(),
        Some("body.type == \"invoice.paid\"")
    );
    assert_eq!(first.on_filter_error, OnFilterError::Skip);
    let t = first.transform.as_ref().expect("a transform");
    assert_eq!(t.body.as_deref(), Some("body.data.object"));
    assert!(sinks[1].routing().is_plain(), "the second entry has none");
    assert!(
        c.sources["plain"].sinks[0].routing().is_plain(),
        "the Sink itself has none"
    );
    // The rendered file loads in the gateway as it is.
    ankusa_config::validate(&c).expect("the gateway takes it");
}

#[test]
fn a_bad_expression_is_the_sources_error_with_its_position() {
    let cases = [
        (
            json!({"name": "audit", "filter": "body.type =="}),
            "sources.bad.sinks[0].filter",
            "line 1",
        ),
        (
            json!({"name": "audit", "filter": "size"}),
            "sources.bad.sinks[0].filter",
            "bool",
        ),
        (
            json!({"name": "audit", "onFilterError": "skip"}),
            "sources.bad.sinks[0].on_filter_error",
            "filter",
        ),
        (
            json!({"name": "audit", "transform": {"headers": "[1]"}}),
            "sources.bad.sinks[0].transform.headers",
            "map",
        ),
    ];
    for (entry, field, reason) in cases {
        let r = render(&[source("bad", json!([entry]))]);
        match &r.sources["bad"].outcome {
            Outcome::Missing(e) => {
                assert!(e.contains(field), "{e}");
                assert!(e.contains(reason), "{e}");
            }
            o => panic!("unexpected {o:?}"),
        }
    }
}
