"""Redeeming a claim check: a queue message whose body was too large to carry inline names
``urn:ankusa:claim:v1:<tenant>:<claim_id>``; the body is fetched from the gateway's claim
port and checked against the message's size and sha256 before it is used.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field
from typing import Dict, Optional, Union

from ._http import Endpoint, TransportFailure
from .errors import (
    ClaimCheckUnavailableError,
    ClaimIntegrityError,
    ClaimNotFoundError,
    ClaimRejectedError,
)
from .message import ClaimRef, Message, Verification, parse_claim_ref

DEFAULT_TIMEOUT_S = 5.0
_TOKEN = re.compile(r"[\x21-\x7e]+(?: +[\x21-\x7e]+)*")


@dataclass(frozen=True)
class Hook:
    """A message with its body in hand (inline, or redeemed from its claim)."""

    id: str
    source_id: str
    tenant_id: Optional[str]
    tenant: str
    idempotency_key: str
    dedupe_key: Optional[str]
    replay_id: Optional[str]
    ordering_key: Optional[str]
    verification: Optional[Verification]
    content_type: Optional[str]
    received_at: int
    size: int
    sha256: str
    body: bytes
    headers: Dict[str, str] = field(default_factory=dict)
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None
    #: The claim the body was redeemed from, ``None`` for an inline body.
    claim: Optional[ClaimRef] = None


def _unavailable(status: Optional[int], message: str) -> ClaimCheckUnavailableError:
    return ClaimCheckUnavailableError("claim_check_unavailable", status=status, message=message)


class ClaimClient:
    """Reads claims from the claim port (``claim_check.port``, 4001 by default).

    ``token``: sent as ``Authorization: Bearer <token>`` (a tenant-limited token reads only
    its tenants' claims). ``timeout_s`` bounds one whole redeem: connect, answer and body.
    ``ca_file``: a PEM bundle to trust instead of the system's, for an https base URL.
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        ca_file: Optional[str] = None,
    ) -> None:
        if token is not None and _TOKEN.fullmatch(token) is None:
            raise ValueError("token must be printable ASCII without leading or trailing spaces")
        if not timeout_s > 0:
            raise ValueError("timeout_s must be positive")
        self._endpoint = Endpoint(base_url, ca_file=ca_file)
        self._token = token
        self.timeout_s = timeout_s

    def __repr__(self) -> str:  # never the token
        return f"ClaimClient(host={self._endpoint.host!r}, port={self._endpoint.port})"

    def fetch(self, claim: Union[ClaimRef, str], *, size: int, sha256: str) -> bytes:
        """The claimed body, checked to be ``size`` bytes with this ``sha256``.

        Raises ``ClaimNotFoundError`` (404), ``ClaimCheckUnavailableError`` (retryable: 408,
        429, 5xx, a redirect, no connection, the timeout), ``ClaimRejectedError`` (any other
        status), ``ClaimIntegrityError`` (other bytes), ``InvalidClaimRefError``.
        """
        ref = parse_claim_ref(claim) if isinstance(claim, str) else claim
        headers = {"Accept": "application/octet-stream"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        try:
            answer = self._endpoint.exchange(
                "GET",
                f"/v1/claims/{ref.tenant}/{ref.claim_id}",
                headers=headers,
                timeout_s=self.timeout_s,
                limit=size,
            )
        except TransportFailure as e:
            raise _unavailable(None, e.kind) from None
        status = answer.status
        if status == 200:
            if answer.over_limit or len(answer.body) != size:
                raise ClaimIntegrityError("claim_integrity", field="sha256", status=200)
            digest = hashlib.sha256(answer.body).hexdigest()
            if not hmac.compare_digest(digest, sha256):
                raise ClaimIntegrityError("claim_integrity", field="sha256", status=200)
            return answer.body
        if status == 404:
            raise ClaimNotFoundError("claim_not_found", status=404)
        if status in (408, 429) or status >= 500 or 300 <= status < 400:
            # A redirect is never followed: a claim port does not send one, and following
            # it would hand the token to another host.
            raise _unavailable(status, "redirect" if status < 400 else "retry later")
        raise ClaimRejectedError("claim_rejected", status=status)


def to_hook(message: Message, claim_client: Optional[ClaimClient] = None) -> Hook:
    """The message's hook with its body: the inline body as is (no request), or the claim
    redeemed through ``claim_client``."""
    if message.claim is None:
        body = message.body if message.body is not None else b""
    else:
        if claim_client is None:
            raise ValueError("this message carries a claim: pass a ClaimClient to redeem it")
        body = claim_client.fetch(message.claim, size=message.size, sha256=message.sha256)
    return Hook(
        id=message.id,
        source_id=message.source_id,
        tenant_id=message.tenant_id,
        tenant=message.tenant,
        idempotency_key=message.idempotency_key,
        dedupe_key=message.dedupe_key,
        replay_id=message.replay_id,
        ordering_key=message.ordering_key,
        verification=message.verification,
        content_type=message.content_type,
        received_at=message.received_at,
        size=message.size,
        sha256=message.sha256,
        body=body,
        headers=dict(message.headers),
        traceparent=message.traceparent,
        tracestate=message.tracestate,
        claim=message.claim,
    )
