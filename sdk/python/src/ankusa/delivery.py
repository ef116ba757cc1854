"""An HTTP delivery from an Ankusa ``http`` sink: its ``x-ankusa-*`` headers, and the
receiver-side decision (closed by default; the signature judged before the hook id).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional

from ._headers import HeadersLike, header_view
from .errors import InvalidDeliveryError, InvalidSignatureError
from .message import DEFAULT_TENANT, Verification
from .signature import DEFAULT_TOLERANCE_S, Secret, Secrets, verify_signature

_RECEIVED_AT = re.compile(r"[0-9]{1,16}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ParsedHeaders:
    """The ``x-ankusa-*`` headers of a delivery. ``received_at`` and ``body_sha256`` are
    advisory: ``None`` when absent or malformed, never an error."""

    id: str
    source_id: Optional[str]
    tenant_id: Optional[str]
    tenant: str
    idempotency_key: str
    dedupe_key: Optional[str]
    replay_id: Optional[str]
    ordering_key: Optional[str]
    content_type: Optional[str]
    verification: Optional[Verification]
    received_at: Optional[int]
    body_sha256: Optional[str]


@dataclass(frozen=True)
class Delivery(ParsedHeaders):
    """A delivery a receiver accepted: the headers, whether a signature was verified, and
    the raw body."""

    signed: bool
    body: bytes


def parse_headers(headers: HeadersLike) -> ParsedHeaders:
    """Parses the delivery headers without judging a signature (use ``receive_delivery``
    for that). ``InvalidDeliveryError`` (``missing_header``, 400) without ``x-ankusa-id``."""
    view = header_view(headers)
    hook_id = view.present("x-ankusa-id")
    if hook_id is None:
        raise InvalidDeliveryError("missing_header", field="x-ankusa-id", status=400)
    tenant_id = view.present("x-ankusa-tenant")
    status = view.present("x-ankusa-verification")
    verification = None
    if status is not None:
        flag = view.get("x-ankusa-verification-flagged")
        # Fail closed: only an absent header or "false" clears the flag.
        flagged = flag is not None and flag.lower() != "false"
        verification = Verification(status=status, flagged=flagged)
    received = view.get("x-ankusa-received-at")
    digest = view.get("x-ankusa-body-sha256")
    return ParsedHeaders(
        id=hook_id,
        source_id=view.present("x-ankusa-source"),
        tenant_id=tenant_id,
        tenant=tenant_id if tenant_id is not None else DEFAULT_TENANT,
        idempotency_key=view.present("x-ankusa-idempotency-key") or hook_id,
        dedupe_key=view.present("x-ankusa-dedupe-key"),
        replay_id=view.present("x-ankusa-replay-id"),
        ordering_key=view.present("x-ankusa-ordering-key"),
        content_type=view.present("content-type"),
        verification=verification,
        received_at=int(received) if received and _RECEIVED_AT.fullmatch(received) else None,
        body_sha256=digest if digest and _SHA256_HEX.fullmatch(digest) else None,
    )


def receive_delivery(
    headers: HeadersLike,
    body: bytes,
    *,
    secrets: Optional[Secrets] = None,
    allow_unsigned: bool = False,
    now: Optional[float] = None,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> Delivery:
    """Accepts or refuses one delivery, given the raw body bytes (read them before any
    JSON parsing).

    With secrets, the signature must verify (``InvalidSignatureError``, 401). Without any,
    only ``allow_unsigned=True`` opens the receiver; otherwise it refuses everything
    (``invalid_secret``, 401). Then ``x-ankusa-id`` must be there (400) and, when signed,
    equal the signed ``webhook-id`` (``id_mismatch``, 400).
    """
    view = header_view(headers)
    listed: List[Secret] = []
    if isinstance(secrets, (str, bytes, bytearray)):
        listed = [secrets]
    elif secrets is not None:
        listed = list(secrets)
    signed_id: Optional[str] = None
    if listed:
        signed_id = verify_signature(view, body, listed, now=now, tolerance_s=tolerance_s).id
    elif not allow_unsigned:
        raise InvalidSignatureError("invalid_secret", field="secrets", status=401)

    parsed = parse_headers(view)
    if signed_id is not None and parsed.id != signed_id:
        # The signature covers webhook-id only: another x-ankusa-id is not the signed hook.
        raise InvalidDeliveryError("id_mismatch", field="x-ankusa-id", status=400)
    return Delivery(
        id=parsed.id,
        source_id=parsed.source_id,
        tenant_id=parsed.tenant_id,
        tenant=parsed.tenant,
        idempotency_key=parsed.idempotency_key,
        dedupe_key=parsed.dedupe_key,
        replay_id=parsed.replay_id,
        ordering_key=parsed.ordering_key,
        content_type=parsed.content_type,
        verification=parsed.verification,
        received_at=parsed.received_at,
        body_sha256=parsed.body_sha256,
        signed=signed_id is not None,
        body=bytes(body),
    )
