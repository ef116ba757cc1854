//! One lifecycle event: its type (the fixed catalogue of docs/lifecycle.md), what it concerns
//! (subject, tenant), its data, and its CloudEvents 1.0 structured-mode JSON. Pure: no IO, no
//! clock of its own (the writer gives the id and the time). A leaf of `lifecycle`.

use serde_json::{Map, Value, json};

/// The event types; `as_str` is the CloudEvent `type` and the metrics' `type` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    SourceCreated,
    SourceUpdated,
    SourceDeleted,
    HookDeadLettered,
    BreakerOpened,
    BreakerClosed,
    ReplaySucceeded,
    ReplayFailed,
    ReplayPaused,
    QuarantineHeld,
    QuarantineReleased,
}

impl EventType {
    pub const ALL: [EventType; 11] = [
        EventType::SourceCreated,
        EventType::SourceUpdated,
        EventType::SourceDeleted,
        EventType::HookDeadLettered,
        EventType::BreakerOpened,
        EventType::BreakerClosed,
        EventType::ReplaySucceeded,
        EventType::ReplayFailed,
        EventType::ReplayPaused,
        EventType::QuarantineHeld,
        EventType::QuarantineReleased,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::SourceCreated => "io.ankusa.source.created",
            EventType::SourceUpdated => "io.ankusa.source.updated",
            EventType::SourceDeleted => "io.ankusa.source.deleted",
            EventType::HookDeadLettered => "io.ankusa.hook.dead_lettered",
            EventType::BreakerOpened => "io.ankusa.sink.breaker_opened",
            EventType::BreakerClosed => "io.ankusa.sink.breaker_closed",
            EventType::ReplaySucceeded => "io.ankusa.replay.succeeded",
            EventType::ReplayFailed => "io.ankusa.replay.failed",
            EventType::ReplayPaused => "io.ankusa.replay.paused",
            EventType::QuarantineHeld => "io.ankusa.quarantine.held",
            EventType::QuarantineReleased => "io.ankusa.quarantine.released",
        }
    }

    pub fn parse(s: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// An event before it is written: the writer adds `id`, `source` and `time`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: EventType,
    /// The CloudEvent `subject`: the source id, the hook id, the sink key, the job id.
    pub subject: String,
    /// The tenant the event concerns; `None`: node-wide (config changes), listed only to
    /// node-wide tokens.
    pub tenant: Option<String>,
    pub data: Value,
    /// The W3C trace context of what caused the event, when there is one.
    pub traceparent: Option<String>,
}

impl Event {
    pub fn new(
        kind: EventType,
        subject: impl Into<String>,
        tenant: Option<String>,
        data: Value,
    ) -> Event {
        Event {
            kind,
            subject: subject.into(),
            tenant,
            data,
            traceparent: None,
        }
    }

    /// The CloudEvents 1.0 structured-mode JSON of this event.
    pub fn cloudevent(&self, id: &uuid::Uuid, instance: &str, time_ms: u64) -> Value {
        let mut m = Map::new();
        m.insert("specversion".into(), json!("1.0"));
        m.insert("id".into(), json!(id.to_string()));
        m.insert("source".into(), json!(format!("/ankusa/{instance}")));
        m.insert("type".into(), json!(self.kind.as_str()));
        m.insert("time".into(), json!(rfc3339(time_ms)));
        m.insert("subject".into(), json!(self.subject));
        m.insert("datacontenttype".into(), json!("application/json"));
        if let Some(tp) = &self.traceparent {
            // The Distributed Tracing extension: an attribute of the event itself.
            m.insert("traceparent".into(), json!(tp));
        }
        m.insert("data".into(), self.data.clone());
        Value::Object(m)
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of a unix-ms time (RFC 3339, UTC).
pub fn rfc3339(unix_ms: u64) -> String {
    let day = ankusa_format::segment::day_of(unix_ms);
    let in_day = unix_ms % 86_400_000;
    let (h, rest) = (in_day / 3_600_000, in_day % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let (s, ms) = (rest / 1000, rest % 1000);
    format!("{day}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_764_806_400_123), "2025-12-04T00:00:00.123Z");
        assert_eq!(rfc3339(1_764_849_845_007), "2025-12-04T12:04:05.007Z");
    }

    #[test]
    fn a_cloudevent_has_the_required_attributes() {
        let mut e = Event::new(
            EventType::SourceCreated,
            "stripe",
            None,
            json!({"after": {"sinks": []}}),
        );
        e.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
        let id = uuid::Uuid::now_v7();
        let ce = e.cloudevent(&id, "node-0", 0);
        assert_eq!(ce["specversion"], "1.0");
        assert_eq!(ce["id"], id.to_string());
        assert_eq!(ce["source"], "/ankusa/node-0");
        assert_eq!(ce["type"], "io.ankusa.source.created");
        assert_eq!(ce["subject"], "stripe");
        assert_eq!(ce["datacontenttype"], "application/json");
        assert!(ce["traceparent"].is_string());
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
    }
}
