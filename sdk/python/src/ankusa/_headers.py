"""Case-insensitive header lookup over whatever a framework hands over.

Accepted: a ``Mapping`` (``dict``, Werkzeug's ``Headers``/``EnvironHeaders``, Starlette's
``Headers``: anything with ``items()``) or an iterable of ``(name, value)`` pairs (ASGI's
``scope["headers"]`` of bytes pairs included). Bytes are read as UTF-8 when they are valid
UTF-8, else as Latin-1 (every octet a character), so the signed text is the text sent. A
name given more than once keeps its first value: a signature-relevant header is never
assembled from several.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union

HeaderText = Union[str, bytes]
HeadersLike = Union["HeaderView", Mapping[Any, Any], Iterable[Tuple[HeaderText, HeaderText]]]


def octets_to_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return octets_to_text(bytes(value))
    raise TypeError(f"a header name or value must be str or bytes, not {type(value).__name__}")


class HeaderView:
    """Lowercase names to their first value."""

    __slots__ = ("_map",)

    def __init__(self, headers: HeadersLike) -> None:
        if isinstance(headers, HeaderView):
            self._map: Dict[str, str] = dict(headers._map)
            return
        items_method = getattr(headers, "items", None)
        pairs: Iterable[Any] = items_method() if callable(items_method) else headers
        found: Dict[str, str] = {}
        for pair in pairs:
            try:
                name, value = pair
            except (TypeError, ValueError):
                raise TypeError("headers must be a mapping or (name, value) pairs") from None
            key = _text(name).lower()
            if key not in found:
                found[key] = _text(value)
        self._map = found

    def get(self, name: str) -> Optional[str]:
        """The value of ``name`` (lowercase), or ``None`` when absent."""
        return self._map.get(name)

    def present(self, name: str) -> Optional[str]:
        """The value of ``name`` when present and not empty, else ``None``."""
        value = self._map.get(name)
        return value if value else None


def header_view(headers: HeadersLike) -> HeaderView:
    return headers if isinstance(headers, HeaderView) else HeaderView(headers)
