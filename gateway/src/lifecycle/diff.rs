//! What a config change did to the sources, as events: `source.created` and `source.deleted`
//! carry the source as `GET /v1/config` shows it (`ankusa_config::redacted_source`: the
//! allowlist redaction, so no secret reaches an event), `source.updated` the keys that changed
//! (found on the full values, so a rotated secret counts) with their redacted values before and
//! after. Pure. A leaf of `lifecycle` (imports `event`).

use std::collections::BTreeMap;

use ankusa_config::{SourceConfig, redacted_source};
use serde_json::{Map, Value, json};

use super::event::{Event, EventType};

/// The events of going from `before` to `after`, in source id order.
pub fn source_events(
    before: &BTreeMap<String, SourceConfig>,
    after: &BTreeMap<String, SourceConfig>,
) -> Vec<Event> {
    let mut out = Vec::new();
    for (id, b) in before {
        match after.get(id) {
            None => out.push(Event::new(
                EventType::SourceDeleted,
                id,
                None,
                json!({"source": id, "before": redacted_source(id, b)}),
            )),
            Some(a) if a != b => out.push(updated(id, b, a)),
            Some(_) => {}
        }
    }
    for (id, a) in after {
        if !before.contains_key(id) {
            out.push(Event::new(
                EventType::SourceCreated,
                id,
                None,
                json!({"source": id, "after": redacted_source(id, a)}),
            ));
        }
    }
    out.sort_by(|x, y| x.subject.cmp(&y.subject));
    out
}

fn updated(id: &str, b: &SourceConfig, a: &SourceConfig) -> Event {
    let full = |s: &SourceConfig| match serde_json::to_value(s) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let shown = |s: &SourceConfig| match redacted_source(id, s) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let (fb, fa) = (full(b), full(a));
    let (sb, sa) = (shown(b), shown(a));
    let mut keys: Vec<&String> = fb.keys().chain(fa.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut changed = Vec::new();
    let (mut before, mut after) = (Map::new(), Map::new());
    for k in keys {
        if fb.get(k) != fa.get(k) {
            changed.push(json!(k));
            before.insert(k.clone(), sb.get(k).cloned().unwrap_or(Value::Null));
            after.insert(k.clone(), sa.get(k).cloned().unwrap_or(Value::Null));
        }
    }
    Event::new(
        EventType::SourceUpdated,
        id,
        None,
        json!({"source": id, "changed": changed, "before": before, "after": after}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_config::{HttpSinkConfig, Preset, Secrets, SinkConfig, VerifyConfig};

    fn src(url: &str, secret: &str) -> SourceConfig {
        let mut s = SourceConfig::with_sinks(vec![SinkConfig::Http(HttpSinkConfig::new(url))]);
        s.verify = VerifyConfig::Github(Preset {
            secret: Secrets::one(secret),
        });
        s
    }

    #[test]
    fn created_updated_deleted_and_nothing_secret() {
        let mut before = BTreeMap::new();
        before.insert("a".to_string(), src("https://a.example.com/x", "sec-aaaa"));
        before.insert("b".to_string(), src("https://b.example.com/x", "sec-bbbb"));
        let mut after = BTreeMap::new();
        after.insert(
            "b".to_string(),
            src("https://b.example.com/x", "sec-rotated"),
        );
        after.insert(
            "c".to_string(),
            src("https://c.example.com/tok-in-path", "sec-cccc"),
        );
        let ev = source_events(&before, &after);
        let kinds: Vec<_> = ev.iter().map(|e| (e.kind, e.subject.as_str())).collect();
        assert_eq!(
            kinds,
            [
                (EventType::SourceDeleted, "a"),
                (EventType::SourceUpdated, "b"),
                (EventType::SourceCreated, "c")
            ]
        );
        assert_eq!(ev[1].data["changed"], json!(["verify"]));
        let text = serde_json::to_string(&ev.iter().map(|e| &e.data).collect::<Vec<_>>()).unwrap();
        for secret in [
            "sec-aaaa",
            "sec-bbbb",
            "sec-rotated",
            "sec-cccc",
            "tok-in-path",
        ] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert!(source_events(&after, &after).is_empty());
    }
}
