"""lifecycle.json: the lifecycle CloudEvents, alone and inside a queue message."""

import json

from common import HOOK_ID, base_message, case, dec_err, err, msg_input, ok, sha


EVENT_BASE = {"specversion": "1.0", "id": "019a8c3e-5f00-7a21-9b3c-1d2e3f405163", "source": "/ankusa/node-0",
              "time": "2025-12-04T12:04:05.007Z", "datacontenttype": "application/json"}

CATALOGUE = [
    ("io.ankusa.source.created", "github", {"source": "github", "after": {"sinks": [{"type": "log"}]}}),
    ("io.ankusa.source.updated", "stripe", {"source": "stripe", "changed": ["sinks"],
                                             "before": {"sinks": [{"type": "http", "secret": "[redacted]"}]},
                                             "after": {"sinks": [{"type": "log"}]}}),
    ("io.ankusa.source.deleted", "legacy", {"source": "legacy", "before": {"sinks": [{"type": "log"}]}}),
    ("io.ankusa.hook.dead_lettered", HOOK_ID, {"hook_id": HOOK_ID, "source": "stripe", "tenant": "acme", "sink": 0,
                                                "sink_name": "sinks[0]", "sink_type": "http", "error_class": "permanent",
                                                "attempts": 1, "replay_id": None}),
    ("io.ankusa.sink.breaker_opened", "stripe/sinks[0]", {"tenant": "acme", "source": "stripe", "sink": 0,
                                                          "sink_type": "http", "period_ms": 5000}),
    ("io.ankusa.sink.breaker_closed", "stripe/sinks[0]", {"tenant": "acme", "source": "stripe", "sink": 0,
                                                          "sink_type": "http", "period_ms": None}),
    ("io.ankusa.replay.succeeded", "job-1", {"job": "job-1", "kind": "dlq", "state": "completed", "moved": 120,
                                             "released": 0, "skipped": 0, "reason": None}),
    ("io.ankusa.replay.failed", "job-2", {"job": "job-2", "kind": "archive", "state": "completed", "moved": 0,
                                          "released": 310, "skipped": 0, "reason": "1 segment(s) failed"}),
    ("io.ankusa.replay.paused", "job-3", {"job": "job-3", "kind": "dlq", "state": "paused", "moved": 40,
                                          "released": 0, "skipped": 0, "reason": "paused itself"}),
    ("io.ankusa.quarantine.held", "github", {"tenant": "acme", "source": "github", "count": 17, "interval_s": 60}),
    ("io.ankusa.quarantine.released", "github", {"tenant": "acme", "source": "github", "count": 17, "interval_s": 60}),
]


def event(etype, subj, payload, **over):
    e = dict(EVENT_BASE, type=etype, subject=subj, data=payload)
    for k, v in over.items():
        if v is ...:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def event_ok(e, known=True):
    return {"id": e.get("id"), "type": e.get("type"), "source": e.get("source"), "time": e.get("time"),
            "subject": e.get("subject"), "specversion": e.get("specversion"),
            "datacontenttype": e.get("datacontenttype"), "traceparent": e.get("traceparent"),
            "data": e.get("data"), "known": known}


def lifecycle_cases():
    out = []

    def add(cid, inp, expect, note=None):
        out.append(case("lifecycle." + cid, "lifecycle", "decode_lifecycle_event", inp, expect, note))

    for etype, subject, data in CATALOGUE:
        e = event(etype, subject, data)
        if etype == "io.ankusa.hook.dead_lettered":
            e["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        add("ok." + etype.removeprefix("io.ankusa."), {"event": {"json": e}}, ok(event_ok(e)))
    fut = event("io.ankusa.future.thing", "x", {"new": True}, extension_attr="kept out")
    add("ok.unknown_type_still_decodes", {"event": {"json": fut}}, ok(event_ok(fut, known=False)),
        "forward compatible: a newer node's event type is not an error")
    nodata = event("io.ankusa.source.deleted", "legacy", None, data=..., subject=..., datacontenttype=...)
    add("ok.optional_absent", {"event": {"json": nodata}}, ok(event_ok(nodata)))
    # As a queue sink carries it: a message v1 of the reserved source, its body the event.
    ev = event(*CATALOGUE[3])
    body = json.dumps(ev, separators=(",", ":")).encode()
    lm = base_message(body, source_id="ankusa:lifecycle", tenant_id="ankusa:lifecycle", idempotency_key=ev["id"],
                      id=ev["id"], dedupe_key=None, headers={}, content_type="application/cloudevents+json")
    add("ok.from_queue_message", msg_input(lm), ok(event_ok(ev)))
    other = base_message(body, content_type="application/cloudevents+json")
    add("not_a_lifecycle_event", msg_input(other),
        err("LifecycleEventError", "not_a_lifecycle_event", False, "source_id"),
        "an event-shaped body of an ordinary source is provider data, not the node's event")
    add("message_decode_error_first", msg_input(dict(lm, sha256=sha(b"x"))), dec_err("integrity", "sha256"))

    le = lambda code, field="__unset__": err("LifecycleEventError", code, False, field)  # noqa: E731
    e0 = event(*CATALOGUE[0])
    add("invalid_json", {"event": {"text": "{"}}, le("invalid_json"))
    add("invalid_json.empty", {"event": {"text": ""}}, le("invalid_json"))
    add("not_an_object", {"event": {"text": "[]"}}, le("not_an_object"))
    add("specversion.old", {"event": {"json": dict(e0, specversion="0.3")}}, le("unsupported_specversion", "specversion"))
    add("specversion.absent", {"event": {"json": event(*CATALOGUE[0], specversion=...)}},
        le("unsupported_specversion", "specversion"))
    add("specversion.number", {"event": {"json": dict(e0, specversion=1.0)}}, le("unsupported_specversion", "specversion"))
    for label, over, field in [
        ("id_absent", {"id": ...}, "id"), ("id_empty", {"id": ""}, "id"), ("source_number", {"source": 1}, "source"),
        ("type_absent", {"type": ...}, "type"), ("type_empty", {"type": ""}, "type"), ("time_absent", {"time": ...}, "time"),
        ("time_number", {"time": 1764849600}, "time"), ("subject_number", {"subject": 5}, "subject"),
        ("datacontenttype_bool", {"datacontenttype": True}, "datacontenttype"),
        ("traceparent_number", {"traceparent": 7}, "traceparent"), ("data_array", {"data": [1]}, "data"),
        ("data_string", {"data": "text"}, "data"),
    ]:
        add("invalid_field." + label, {"event": {"json": event(*CATALOGUE[0], **over)}}, le("invalid_field", field))
    add("invalid_field.order_id_first", {"event": {"json": event(*CATALOGUE[0], id=..., type=...)}},
        le("invalid_field", "id"))
    return out
