//! Lifecycle events as a test receiver got them: each request's body parsed by an independent
//! CloudEvents 1.0 implementation (`cloudevents-sdk`) and checked against the attributes this
//! gateway fills, with none of the `forbidden` values (secrets) anywhere in its bytes; filters
//! by type; a poll until enough of a type arrived.

use std::time::{Duration, Instant};

use cloudevents::event::SpecVersion;
use cloudevents::{AttributesReader, Event};
use serde_json::Value;

use super::receiver::{Received, Receiver};

/// Every request's body as (the parsed event, its raw JSON); panics on anything that is not a
/// well-formed event of this gateway or that holds a `forbidden` value.
pub fn cloudevents(received: &[Received], forbidden: &[&str]) -> Vec<(Event, Value)> {
    received
        .iter()
        .map(|r| {
            assert_eq!(
                r.header("content-type").as_deref(),
                Some("application/cloudevents+json"),
                "structured mode"
            );
            let ev: Event = serde_json::from_slice(&r.body).unwrap_or_else(|e| {
                panic!(
                    "not a CloudEvent ({e}): {}",
                    String::from_utf8_lossy(&r.body)
                )
            });
            assert_eq!(ev.specversion(), SpecVersion::V10);
            assert!(
                ev.source().as_str().starts_with("/ankusa/"),
                "{}",
                ev.source()
            );
            assert!(ev.ty().starts_with("io.ankusa."));
            assert!(ev.time().is_some(), "time is set");
            assert!(ev.subject().is_some(), "subject is set");
            assert_eq!(ev.datacontenttype(), Some("application/json"));
            // Extension names: lower-case letters and digits only (CloudEvents 1.0, 3.1.4).
            for (name, _) in ev.iter_extensions() {
                assert!(
                    name.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                    "extension {name}"
                );
            }
            let id = uuid::Uuid::parse_str(ev.id()).expect("a UUID id");
            assert_eq!(id.get_version_num(), 7, "UUIDv7");
            let text = String::from_utf8_lossy(&r.body);
            for f in forbidden {
                assert!(!text.contains(f), "a secret in an event: {text}");
            }
            let raw: Value = serde_json::from_slice(&r.body).expect("JSON");
            (ev, raw)
        })
        .collect()
}

/// The raw JSON of the events of type `ty`, in arrival order.
pub fn of_type<'a>(evs: &'a [(Event, Value)], ty: &str) -> Vec<&'a Value> {
    evs.iter()
        .filter(|(e, _)| e.ty() == ty)
        .map(|(_, v)| v)
        .collect()
}

/// Polls `lc` until `done` holds of the events of type `ty` (at most `within`, else panics
/// listing what arrived); every event so far.
pub async fn wait_until(
    lc: &Receiver,
    forbidden: &[&str],
    ty: &str,
    within: Duration,
    done: impl Fn(&[&Value]) -> bool,
) -> Vec<(Event, Value)> {
    let deadline = Instant::now() + within;
    loop {
        let got = cloudevents(&lc.received(), forbidden);
        if done(&of_type(&got, ty)) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "never the {ty} events awaited: {:?}",
            got.iter().map(|(_, v)| v.to_string()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `lc` until `n` events of type `ty` arrived; every event so far.
pub async fn wait_events(
    lc: &Receiver,
    forbidden: &[&str],
    ty: &str,
    n: usize,
    within: Duration,
) -> Vec<(Event, Value)> {
    wait_until(lc, forbidden, ty, within, |evs| evs.len() >= n).await
}
