//! `failing_sinks` of `GET /v1/status` through the real binary: a sink whose deliveries fail
//! shows its latest error (as the delivery row records it), its name from `sink_names`, the
//! count of failures in a row and the breaker; a success clears it, and a reload that removes
//! a failing sink drops its entry.

mod common;

use std::time::{Duration, Instant};

use common::receiver::{Receiver, Reply};
use common::*;
use serde_json::Value;

const SINK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Source `orders` with an HTTP sink per URL, named by `names`.
fn config(urls: &[String], names: &[&str]) -> String {
    let mut sinks = String::new();
    for u in urls {
        sinks.push_str(&format!(
            "      - {{type: http, url: \"{u}\", secret: {SINK_SECRET}, timeout_ms: 2000}}\n"
        ));
    }
    format!(
        "egress: {{allow_http: true, allow_loopback: true}}\n\
         dispatch:\n  retry: {{base_ms: 50, max_ms: 100, jitter: false}}\n  \
         breaker_failures: 3\n  breaker_open_ms: 100\n  breaker_max_open_ms: 200\n\
         sources:\n  orders:\n    sinks:\n{sinks}    sink_names: [{}]\n",
        names.join(", ")
    )
}

/// Polls `GET /v1/status` until `pred` holds over its `failing_sinks`; returns them.
async fn wait_failing(
    c: &reqwest::Client,
    g: &Gateway,
    what: &str,
    pred: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let st = g.admin_json(c, "/v1/status").await;
        let failing = st["failing_sinks"].as_array().cloned().unwrap_or_default();
        if pred(&failing) {
            return failing;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: never; last failing_sinks {failing:?}\n{}",
            g.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn of_sink(failing: &[Value], sink: u64) -> Option<&Value> {
    failing.iter().find(|f| f["sink"] == sink)
}

#[tokio::test]
async fn a_failing_sink_shows_its_error_until_a_success_or_its_removal() {
    let rx = Receiver::start(|_, _| Reply::status(503)).await;
    // Nothing listens there: every attempt fails to connect.
    let closed = format!("http://127.0.0.1:{}/in", free_port());
    let urls = [rx.url("/in"), closed];
    let g = Gateway::start(&config(&urls, &["orders-service", "closed-door"]));
    let c = client();
    post_ids(&c, &g, "/webhooks/orders", 1, |_| "{}".into()).await;

    let failing = wait_failing(&c, &g, "both sinks failing, the first one 3 times", |f| {
        f.len() == 2 && of_sink(f, 0).is_some_and(|s| s["failures"].as_u64() >= Some(3))
    })
    .await;
    let first = of_sink(&failing, 0).unwrap();
    assert_eq!(first["source"], "orders");
    assert_eq!(first["name"], "orders-service");
    assert_eq!(first["type"], "http");
    assert_eq!(first["error"], "http: status 503", "the row's last_error");
    assert!(first["since"].as_u64() <= first["at"].as_u64());
    let second = of_sink(&failing, 1).unwrap();
    assert_eq!(second["name"], "closed-door");
    let err = second["error"].as_str().unwrap();
    assert!(err.starts_with("http: transport: "), "{err}");
    assert!(err.len() <= 512, "{err}");
    // Three failures in a row open the breaker (breaker_failures: 3).
    wait_failing(&c, &g, "the breaker of the first sink open", |f| {
        of_sink(f, 0).is_some_and(|s| s["breaker_open"] == true)
    })
    .await;

    // The receiver recovers: the next attempt (the breaker's probe) clears the first sink only.
    rx.set(|_, _| Reply::status(200));
    let failing = wait_failing(&c, &g, "the first sink cleared", |f| {
        of_sink(f, 0).is_none()
    })
    .await;
    assert!(
        of_sink(&failing, 1).is_some(),
        "the closed port still fails: {failing:?}"
    );

    // A reload without the second sink drops its entry.
    g.write_config(&config(&urls[..1], &["orders-service"]));
    wait_failing(&c, &g, "no failing sink after the reload", |f| f.is_empty()).await;
    let st = g.admin_json(&c, "/v1/status").await;
    assert_eq!(st["generation"], 2, "{st}");
}
