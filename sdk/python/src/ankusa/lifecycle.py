"""Lifecycle and operational events: CloudEvents 1.0 (structured JSON) that a node emits
about itself, delivered over HTTP (``application/cloudevents+json``) or as the inline body
of a queue message of the reserved source ``ankusa:lifecycle``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Mapping, Optional, Union

from ._codec import NotJson, load_json
from .claims import Hook
from .errors import LifecycleEventError
from .message import Message

LIFECYCLE_SOURCE = "ankusa:lifecycle"
SPEC_VERSION = "1.0"

#: The event types of docs/lifecycle.md. Another type still decodes (``known`` False).
KNOWN_TYPES: FrozenSet[str] = frozenset(
    {
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
    }
)


@dataclass(frozen=True)
class LifecycleEvent:
    """One decoded CloudEvent. Dedupe on ``id`` (kept by a re-emit)."""

    id: str
    type: str
    source: str
    time: str
    subject: Optional[str]
    specversion: str
    datacontenttype: Optional[str]
    traceparent: Optional[str]
    data: Optional[Dict[str, Any]]
    known: bool


def _fail(code: str, field: Optional[str] = None) -> LifecycleEventError:
    return LifecycleEventError(code, field=field)


def _required_string(obj: Mapping[str, Any], key: str, *, non_empty: bool) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or (non_empty and not value):
        raise _fail("invalid_field", key)
    return value


def _optional_string(obj: Mapping[str, Any], key: str) -> Optional[str]:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _fail("invalid_field", key)
    return value


def decode_lifecycle_event(data: bytes) -> LifecycleEvent:
    """Decodes one CloudEvent (the body of an HTTP delivery or of a lifecycle message);
    ``LifecycleEventError`` (not retryable) when it is not one."""
    try:
        obj = load_json(data)
    except NotJson:
        raise _fail("invalid_json") from None
    if not isinstance(obj, dict):
        raise _fail("not_an_object")
    if obj.get("specversion") != SPEC_VERSION:
        raise _fail("unsupported_specversion", "specversion")
    event_id = _required_string(obj, "id", non_empty=True)
    source = _required_string(obj, "source", non_empty=True)
    event_type = _required_string(obj, "type", non_empty=True)
    time = _required_string(obj, "time", non_empty=False)
    subject = _optional_string(obj, "subject")
    datacontenttype = _optional_string(obj, "datacontenttype")
    traceparent = _optional_string(obj, "traceparent")
    payload = obj.get("data")
    if payload is not None and not isinstance(payload, dict):
        raise _fail("invalid_field", "data")
    return LifecycleEvent(
        id=event_id,
        type=event_type,
        source=source,
        time=time,
        subject=subject,
        specversion=SPEC_VERSION,
        datacontenttype=datacontenttype,
        traceparent=traceparent,
        data=payload,
        known=event_type in KNOWN_TYPES,
    )


def lifecycle_event_from(message: Union[Message, Hook]) -> LifecycleEvent:
    """The event a decoded queue message (or its redeemed hook) of the source
    ``ankusa:lifecycle`` carries; ``not_a_lifecycle_event`` (field ``source_id``) for a
    message of another source. A message whose event was checked in as a claim must be
    redeemed first (``to_hook``)."""
    if message.source_id != LIFECYCLE_SOURCE:
        raise _fail("not_a_lifecycle_event", "source_id")
    if message.body is None:
        raise ValueError("this message carries a claim: redeem it with to_hook first")
    return decode_lifecycle_event(message.body)
