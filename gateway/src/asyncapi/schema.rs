//! The `components` of the AsyncAPI document: the queue message v1 (docs/sinks.md) and the
//! lifecycle CloudEvent (docs/lifecycle.md) as JSON Schema, and the transport headers.

use serde_json::{Value, json};

/// The lifecycle event types of docs/lifecycle.md's catalogue.
pub const LIFECYCLE_TYPES: [&str; 11] = [
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

pub fn components() -> Value {
    let opt_string = json!({"type": ["string", "null"]});
    json!({
        "schemas": {
            "Verification": {
                "type": "object",
                "description": "How the node verified the hook at ingest. Trust it only for status ok and flagged false.",
                "required": ["status", "flagged"],
                "properties": {
                    "status": {"type": "string", "enum": ["ok", "failed", "skipped"]},
                    "flagged": {"type": "boolean"},
                },
            },
            "MessageV1": {
                "type": "object",
                "description": "The queue message every queue sink publishes (v 1; consumers accept 1..2 and ignore unknown keys). Exactly one of body_base64 and claim.",
                "required": ["v", "id", "source_id", "received_at", "size", "sha256", "idempotency_key"],
                "properties": {
                    "v": {"type": "integer", "minimum": 1, "maximum": 2},
                    "id": {"type": "string", "description": "The hook id; every redelivery carries the same one."},
                    "source_id": {"type": "string"},
                    "tenant_id": {"type": ["string", "null"], "description": "null for the default tenant."},
                    "received_at": {"type": "integer", "minimum": 0, "description": "Unix milliseconds the edge accepted the request."},
                    "content_type": opt_string,
                    "size": {"type": "integer", "minimum": 0},
                    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                    "dedupe_key": opt_string,
                    "replay_id": opt_string,
                    "idempotency_key": {"type": "string", "description": "Dedupe on this."},
                    "verification": {"oneOf": [{"$ref": "#/components/schemas/Verification"}, {"type": "null"}]},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                    "instance": opt_string,
                    "region": opt_string,
                    "traceparent": opt_string,
                    "tracestate": opt_string,
                    "ordering_key": {"type": "string", "description": "Ordered sinks only."},
                    "body_base64": {"type": "string", "contentEncoding": "base64"},
                    "claim": {"type": "string", "pattern": "^urn:ankusa:claim:v1:[A-Za-z0-9_-]{1,64}:[A-Za-z0-9_-]{1,64}$",
                              "description": "A claim check: GET /v1/claims/<tenant>/<claim_id> on the claim port, then check size and sha256."},
                },
            },
            "LifecycleEvent": {
                "type": "object",
                "description": "A CloudEvents 1.0 event (structured mode): the body of a lifecycle hook.",
                "required": ["specversion", "id", "source", "type", "time"],
                "properties": {
                    "specversion": {"const": "1.0"},
                    "id": {"type": "string", "description": "A UUIDv7; also the id of the hook that delivers it."},
                    "source": {"type": "string", "description": "/ankusa/<node.instance>"},
                    "type": {"type": "string", "description": "One of the catalogue; newer nodes may add types.",
                             "examples": LIFECYCLE_TYPES},
                    "time": {"type": "string", "format": "date-time"},
                    "subject": {"type": "string"},
                    "datacontenttype": {"const": "application/json"},
                    "traceparent": {"type": "string"},
                    "data": {"type": "object"},
                },
            },
        },
        "messages": {
            "HookMessage": {
                "name": "HookMessage",
                "title": "Ankusa queue message v1",
                "contentType": "application/json",
                "payload": {"$ref": "#/components/schemas/MessageV1"},
                "headers": headers(),
            },
            "LifecycleMessage": {
                "name": "LifecycleMessage",
                "title": "Lifecycle event in a queue message v1",
                "summary": "A message v1 of source ankusa:lifecycle whose body (body_base64) is a LifecycleEvent.",
                "contentType": "application/json",
                "payload": {"$ref": "#/components/schemas/MessageV1"},
                "headers": headers(),
                "x-ankusa-body": {"$ref": "#/components/schemas/LifecycleEvent"},
            },
        },
    })
}

/// The metadata transports with headers or attributes carry beside the message.
fn headers() -> Value {
    let s = json!({"type": "string"});
    json!({
        "type": "object",
        "properties": {
            "ankusa_id": s, "ankusa_source_id": s, "ankusa_message_version": s,
            "ankusa_idempotency_key": s, "content_type": s, "ankusa_tenant_id": s,
            "ankusa_dedupe_key": s, "ankusa_replay_id": s, "ankusa_ordering_key": s,
            "traceparent": s, "tracestate": s,
        },
    })
}
