"""Queue message v1 (Kafka value, RabbitMQ/NATS/Redis payload, SQS body, Pub/Sub data).

Rules in order, the first that fails names the code (``MessageDecodeError``, never
retryable): JSON object → ``v`` in 1..2 → each field's type in a fixed order → exactly one
body (inline base64 or a claim URN) → an inline body's size then sha256 → a claim's tenant.
Unknown keys are ignored (v2 = v1 + additive fields).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from ._codec import NotJson, decode_padded_base64, is_int, is_sha256_hex, load_json
from .errors import InvalidClaimRefError, MessageDecodeError

DEFAULT_TENANT = "default"
CLAIM_URN_PREFIX = "urn:ankusa:claim:v1:"
SUPPORTED_VERSIONS = (1, 2)

_CLAIM_URN = re.compile(r"urn:ankusa:claim:v1:([A-Za-z0-9_-]{1,64}):([A-Za-z0-9_-]{1,64})")

# Optional string fields, in the order they are checked.
_OPTIONAL_STRINGS = (
    "tenant_id",
    "content_type",
    "dedupe_key",
    "replay_id",
    "idempotency_key",
    "instance",
    "region",
    "traceparent",
    "tracestate",
    "ordering_key",
)


@dataclass(frozen=True)
class Verification:
    """How the gateway's ingest judged the provider's signature.

    ``status`` is ``ok``, ``failed`` or ``skipped`` as sent (a status this SDK does not know
    is kept, and is never trusted); ``flagged`` is true for a hook accepted despite a failed
    check."""

    status: str
    flagged: bool

    @property
    def trusted(self) -> bool:
        return self.status == "ok" and self.flagged is False


@dataclass(frozen=True)
class ClaimRef:
    """A parsed ``urn:ankusa:claim:v1:<tenant>:<claim_id>``."""

    urn: str
    tenant: str
    claim_id: str


@dataclass(frozen=True)
class Message:
    """One decoded queue message. ``body`` is the inline body, or ``None`` for a claim
    (``claim`` set): redeem it with ``to_hook(message, ClaimClient(...))``."""

    v: int
    id: str
    source_id: str
    tenant_id: Optional[str]
    tenant: str
    received_at: int
    content_type: Optional[str]
    size: int
    sha256: str
    dedupe_key: Optional[str]
    replay_id: Optional[str]
    idempotency_key: str
    verification: Optional[Verification]
    headers: Dict[str, str] = field(default_factory=dict)
    instance: Optional[str] = None
    region: Optional[str] = None
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None
    ordering_key: Optional[str] = None
    body: Optional[bytes] = None
    claim: Optional[ClaimRef] = None


def parse_claim_ref(ref: str) -> ClaimRef:
    """Splits a claim URN; ``InvalidClaimRefError`` (field ``claim``) when it is not one."""
    parsed = _match_claim(ref)
    if parsed is None:
        raise InvalidClaimRefError("invalid_claim_ref", field="claim")
    return parsed


def _match_claim(ref: Any) -> Optional[ClaimRef]:
    if not isinstance(ref, str):
        return None
    m = _CLAIM_URN.fullmatch(ref)
    if m is None:
        return None
    return ClaimRef(urn=ref, tenant=m.group(1), claim_id=m.group(2))


def _fail(code: str, field_name: Optional[str] = None) -> MessageDecodeError:
    return MessageDecodeError(code, field=field_name)


def _non_empty_string(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise _fail("invalid_field", key)
    return value


def _non_negative_int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _fail("invalid_field", key)
    return value


def _optional_string(obj: Mapping[str, Any], key: str) -> Optional[str]:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _fail("invalid_field", key)
    return value


def _headers(obj: Mapping[str, Any]) -> Dict[str, str]:
    value = obj.get("headers")
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _fail("invalid_field", "headers")
    return dict(value)


def _verification(obj: Mapping[str, Any]) -> Optional[Verification]:
    value = obj.get("verification")
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("status"), str)
        or not isinstance(value.get("flagged"), bool)
    ):
        raise _fail("invalid_field", "verification")
    return Verification(status=value["status"], flagged=value["flagged"])


def decode_message(data: bytes) -> Message:
    """Decodes the bytes of one queue message; ``MessageDecodeError`` when they do not."""
    try:
        obj = load_json(data)
    except NotJson:
        raise _fail("invalid_json") from None
    if not isinstance(obj, dict):
        raise _fail("not_an_object")

    v = obj.get("v")
    if not is_int(v) or v not in SUPPORTED_VERSIONS:
        raise _fail("unsupported_version", "v")

    msg_id = _non_empty_string(obj, "id")
    source_id = _non_empty_string(obj, "source_id")
    received_at = _non_negative_int(obj, "received_at")
    size = _non_negative_int(obj, "size")
    sha256 = obj.get("sha256")
    if not isinstance(sha256, str) or not is_sha256_hex(sha256):
        raise _fail("invalid_field", "sha256")
    strings = {key: _optional_string(obj, key) for key in _OPTIONAL_STRINGS}
    headers = _headers(obj)
    verification = _verification(obj)

    inline = obj.get("body_base64")
    claim_value = obj.get("claim")
    if inline is not None and claim_value is not None:
        raise _fail("ambiguous_body")
    if inline is None and claim_value is None:
        raise _fail("missing_body")

    tenant_id = strings["tenant_id"]
    tenant = tenant_id if tenant_id is not None else DEFAULT_TENANT
    body: Optional[bytes] = None
    claim: Optional[ClaimRef] = None
    if inline is not None:
        body = decode_padded_base64(inline) if isinstance(inline, str) else None
        if body is None:
            raise _fail("invalid_body_base64", "body_base64")
        if len(body) != size:
            raise _fail("size_mismatch", "size")
        if hashlib.sha256(body).hexdigest() != sha256:
            raise _fail("integrity", "sha256")
    else:
        claim = _match_claim(claim_value)
        if claim is None:
            raise _fail("invalid_claim_ref", "claim")
        # A claim of another tenant is never this message's body.
        if claim.tenant != tenant:
            raise _fail("tenant_mismatch", "claim")

    key = strings["idempotency_key"]
    return Message(
        v=int(v),
        id=msg_id,
        source_id=source_id,
        tenant_id=tenant_id,
        tenant=tenant,
        received_at=received_at,
        content_type=strings["content_type"],
        size=size,
        sha256=sha256,
        dedupe_key=strings["dedupe_key"],
        replay_id=strings["replay_id"],
        idempotency_key=key if key is not None else msg_id,
        verification=verification,
        headers=headers,
        instance=strings["instance"],
        region=strings["region"],
        traceparent=strings["traceparent"],
        tracestate=strings["tracestate"],
        ordering_key=strings["ordering_key"],
        body=body,
        claim=claim,
    )
