"""Standard Webhooks verification of an HTTP delivery.

Checks, in this order, the first failure naming the code (all ``InvalidSignatureError``):
``invalid_secret`` → ``missing_header`` (id, timestamp, signature) → ``invalid_timestamp`` →
``timestamp_out_of_tolerance`` → ``no_matching_signature``. Secrets are checked first so a
misconfigured receiver never looks like a bad sender.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

from ._codec import decode_padded_base64
from ._headers import HeadersLike, header_view
from .errors import InvalidSignatureError

SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_S = 300

Secret = Union[str, bytes]
Secrets = Union[Secret, Sequence[Secret]]

_TIMESTAMP = re.compile(r"[+-]?[0-9]+")
# Past this many digits a timestamp is out of any window; converting it would only cost time.
_MAX_TIMESTAMP_DIGITS = 64
_MAC_LEN = 32

# A receiver answers every signature failure with 401.
_STATUS = 401


@dataclass(frozen=True)
class VerifiedSignature:
    """What a verified signature vouches for: the ``webhook-id`` and ``webhook-timestamp``."""

    id: str
    timestamp: int


def _refuse(code: str, field: str) -> InvalidSignatureError:
    return InvalidSignatureError(code, field=field, status=_STATUS)


def _key(secret: Secret) -> bytes:
    """A ``whsec_`` secret is base64 of the key; any other string is its UTF-8 bytes;
    bytes are the key itself."""
    if isinstance(secret, (bytes, bytearray)):
        key = bytes(secret)
    elif isinstance(secret, str):
        if secret.startswith(SECRET_PREFIX):
            decoded = decode_padded_base64(secret[len(SECRET_PREFIX) :])
            key = decoded if decoded is not None else b""
        else:
            key = secret.encode("utf-8")
    else:
        raise _refuse("invalid_secret", "secrets")
    if not key:
        raise _refuse("invalid_secret", "secrets")
    return key


def signing_keys(secrets: Optional[Secrets]) -> List[bytes]:
    """The HMAC keys of ``secrets``; ``invalid_secret`` when there is none or any is bad
    (one bad secret is a configuration error that another secret must not hide)."""
    if secrets is None:
        raise _refuse("invalid_secret", "secrets")
    listed: Sequence[Secret]
    if isinstance(secrets, (str, bytes, bytearray)):
        listed = [secrets]
    else:
        listed = list(secrets)
    if not listed:
        raise _refuse("invalid_secret", "secrets")
    return [_key(s) for s in listed]


def _parse_timestamp(raw: str, now: int, tolerance_s: int) -> int:
    if _TIMESTAMP.fullmatch(raw) is None:
        raise _refuse("invalid_timestamp", "webhook-timestamp")
    digits = raw.lstrip("+-").lstrip("0")
    if len(digits) > _MAX_TIMESTAMP_DIGITS:
        raise _refuse("timestamp_out_of_tolerance", "webhook-timestamp")
    ts = int(raw)
    if abs(now - ts) > tolerance_s:
        raise _refuse("timestamp_out_of_tolerance", "webhook-timestamp")
    return ts


def _entry_macs(header: str) -> List[bytes]:
    """The MACs of the ``v1,<base64>`` entries; other versions and undecodable ones are
    skipped (a sender may list schemes we do not know)."""
    macs = []
    for entry in header.split(" "):
        version, sep, encoded = entry.partition(",")
        if version != "v1" or not sep:
            continue
        try:
            mac = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
        if len(mac) == _MAC_LEN:
            macs.append(mac)
    return macs


def verify_signature(
    headers: HeadersLike,
    body: bytes,
    secrets: Optional[Secrets],
    *,
    now: Optional[float] = None,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> VerifiedSignature:
    """Verifies a Standard Webhooks signature over the raw ``body`` bytes.

    ``secrets``: one secret or several (rotation: any may match). ``now``: unix seconds
    (default: the clock). Raises ``InvalidSignatureError`` (``status`` 401).
    """
    keys = signing_keys(secrets)
    view = header_view(headers)
    msg_id = view.present("webhook-id")
    if msg_id is None:
        raise _refuse("missing_header", "webhook-id")
    raw_ts = view.present("webhook-timestamp")
    if raw_ts is None:
        raise _refuse("missing_header", "webhook-timestamp")
    signature = view.present("webhook-signature")
    if signature is None:
        raise _refuse("missing_header", "webhook-signature")
    current = int(time.time() if now is None else now)
    ts = _parse_timestamp(raw_ts, current, tolerance_s)

    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise TypeError(f"body must be the raw bytes, not {type(body).__name__}")
    # The id and timestamp are signed as they were sent.
    signed = b"".join((msg_id.encode("utf-8"), b".", raw_ts.encode("utf-8"), b".", bytes(body)))
    offered = _entry_macs(signature)
    matched = False
    for key in keys:
        expected = hmac.digest(key, signed, "sha256")
        for mac in offered:
            # Every pair is compared, in constant time, so timing tells nothing of which.
            matched |= hmac.compare_digest(expected, mac)
    if not matched:
        raise _refuse("no_matching_signature", "webhook-signature")
    return VerifiedSignature(id=msg_id, timestamp=ts)
