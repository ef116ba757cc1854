"""Strict decoders shared by the message, lifecycle and signature code."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Optional

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class NotJson(ValueError):
    """The bytes are not UTF-8 JSON."""


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser would accept them.
    raise ValueError(f"{name} is not JSON")


def load_json(data: bytes) -> Any:
    """Parses UTF-8 JSON bytes strictly (no BOM sniffing, no NaN), or raises ``NotJson``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, not {type(data).__name__}")
    try:
        text = bytes(data).decode("utf-8")
        return json.loads(text, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        # ValueError covers JSONDecodeError and integers past the digit limit; RecursionError
        # a deeply nested document. Neither is a crash of the caller.
        raise NotJson(type(e).__name__) from None


def is_int(value: Any) -> bool:
    """A JSON integer (``bool`` is an ``int`` subclass in Python and does not count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_sha256_hex(value: Any) -> bool:
    return isinstance(value, str) and _SHA256_HEX.fullmatch(value) is not None


def decode_padded_base64(text: str) -> Optional[bytes]:
    """Standard, padded, canonical base64 (what ``b64encode`` writes), else ``None``."""
    if not isinstance(text, str) or len(text) % 4 != 0:
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    # validate=True still accepts non-zero trailing bits; a canonical encoding round-trips.
    if base64.b64encode(raw).decode("ascii") != text:
        return None
    return raw
