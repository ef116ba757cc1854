//! Lifecycle and operational events (`docs/lifecycle.md`): CloudEvents 1.0 in structured JSON
//! mode, delivered over HTTP (`application/cloudevents+json`) or as the inline body of a queue
//! message of the reserved source `ankusa:lifecycle`.

use serde_json::{Map, Value};

use crate::errors::{Error, LifecycleErrorKind as Kind, LifecycleEventError};
use crate::hook::Hook;
use crate::message::{Message, MessageBody};

/// The source id of the queue messages that carry lifecycle events.
pub const LIFECYCLE_SOURCE: &str = "ankusa:lifecycle";

/// The event types of `docs/lifecycle.md`'s catalogue. A type outside it still decodes
/// (a newer node's), with [`LifecycleEvent::known`] false.
pub const EVENT_TYPES: [&str; 11] = [
    "io.ankusa.source.created",
    "io.ankusa.source.updated",
    "io.ankusa.source.deleted",
    "io.ankusa.hook.dead_lettered",
    "io.ankusa.sink.breaker_opened",
    "io.ankusa.sink.breaker_closed",
    "io.ankusa.replay.succeeded",
    "io.ankusa.replay.failed",
    "io.ankusa.replay.paused",
    "io.ankusa.quarantine.held",
    "io.ankusa.quarantine.released",
];

/// A decoded lifecycle event.
#[derive(Debug, Clone, PartialEq)]
pub struct LifecycleEvent {
    /// A UUIDv7, also the id of the hook that delivered it: dedupe on it.
    pub id: String,
    /// `type`: one of [`EVENT_TYPES`], or a newer one.
    pub event_type: String,
    /// `/ankusa/<instance>`.
    pub source: String,
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// What it is about: a source id, a hook id, `<source>/sinks[<i>]`, a job id.
    pub subject: Option<String>,
    pub specversion: String,
    pub datacontenttype: Option<String>,
    /// The W3C trace context of the hook the event is about.
    pub traceparent: Option<String>,
    /// The event's own fields; `None` when absent.
    pub data: Option<Map<String, Value>>,
    /// Whether `event_type` is in this SDK's catalogue.
    pub known: bool,
}

impl LifecycleEvent {
    /// The event carried by a queue message of the source `ankusa:lifecycle` (its inline body).
    /// A message of another source is `not_a_lifecycle_event`.
    pub fn from_message(message: &Message) -> Result<LifecycleEvent, LifecycleEventError> {
        check_source(&message.source_id)?;
        match &message.body {
            MessageBody::Inline(body) => decode_lifecycle_event(body),
            // Events are small; should one ever be claim-checked, redeem it and use from_hook.
            MessageBody::Claim(_) => Err(LifecycleEventError::new(
                Kind::InvalidJson,
                None,
                "the event is claim-checked: redeem it with to_hook and use LifecycleEvent::from_hook",
            )),
        }
    }

    /// The event carried by a hook of the source `ankusa:lifecycle` (e.g. a redeemed claim).
    pub fn from_hook(hook: &Hook) -> Result<LifecycleEvent, LifecycleEventError> {
        check_source(hook.source_id.as_deref().unwrap_or_default())?;
        decode_lifecycle_event(&hook.body)
    }
}

fn check_source(source_id: &str) -> Result<(), LifecycleEventError> {
    if source_id == LIFECYCLE_SOURCE {
        Ok(())
    } else {
        Err(LifecycleEventError::new(
            Kind::NotALifecycleEvent,
            Some("source_id"),
            format!("a message of source {source_id:?}, not {LIFECYCLE_SOURCE}"),
        ))
    }
}

/// Decodes the bytes of a queue message of the source `ankusa:lifecycle` into its event:
/// [`decode_message`](crate::decode_message), then [`LifecycleEvent::from_message`]. A
/// message that does not decode fails with its [`MessageDecodeError`](crate::MessageDecodeError).
pub fn decode_lifecycle_message(bytes: &[u8]) -> Result<LifecycleEvent, Error> {
    let message = crate::message::decode_message(bytes)?;
    Ok(LifecycleEvent::from_message(&message)?)
}

/// Decodes one CloudEvent (structured JSON) of the gateway.
pub fn decode_lifecycle_event(bytes: &[u8]) -> Result<LifecycleEvent, LifecycleEventError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        LifecycleEventError::new(Kind::InvalidJson, None, format!("not UTF-8 JSON: {e}"))
    })?;
    let Value::Object(mut e) = value else {
        return Err(LifecycleEventError::new(
            Kind::NotAnObject,
            None,
            "JSON, but not an object",
        ));
    };
    if e.get("specversion").and_then(Value::as_str) != Some("1.0") {
        return Err(LifecycleEventError::new(
            Kind::UnsupportedSpecversion,
            Some("specversion"),
            "specversion must be \"1.0\"",
        ));
    }
    let id = required(&e, "id")?;
    let source = required(&e, "source")?;
    let event_type = required(&e, "type")?;
    let time = match e.get("time") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(invalid_field("time", "must be a string")),
    };
    let subject = optional(&e, "subject")?;
    let datacontenttype = optional(&e, "datacontenttype")?;
    let traceparent = optional(&e, "traceparent")?;
    let data = match e.remove("data") {
        None | Some(Value::Null) => None,
        Some(Value::Object(d)) => Some(d),
        Some(_) => return Err(invalid_field("data", "must be an object or null")),
    };
    Ok(LifecycleEvent {
        known: EVENT_TYPES.contains(&event_type.as_str()),
        id,
        event_type,
        source,
        time,
        subject,
        specversion: "1.0".to_string(),
        datacontenttype,
        traceparent,
        data,
    })
}

fn invalid_field(field: &'static str, detail: &str) -> LifecycleEventError {
    LifecycleEventError::new(Kind::InvalidField, Some(field), format!("{field} {detail}"))
}

fn required(e: &Map<String, Value>, key: &'static str) -> Result<String, LifecycleEventError> {
    match e.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(invalid_field(key, "must be a non-empty string")),
    }
}

fn optional(
    e: &Map<String, Value>,
    key: &'static str,
) -> Result<Option<String>, LifecycleEventError> {
    match e.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid_field(key, "must be a string or null")),
    }
}
