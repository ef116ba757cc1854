"""A WSGI receiver of Ankusa HTTP deliveries (Flask, Django, any WSGI server).

``ReceiverApp`` is a WSGI application that answers every request; ``ReceiverMiddleware``
serves it on one path in front of another application. Either reads the raw body first
(bounded by ``max_body_bytes``), verifies it with ``receive_delivery`` and only then calls
``handler(delivery)``; see ``ankusa._receiver`` for the answers.

    app.wsgi_app = ReceiverMiddleware(app.wsgi_app, handle, path="/ankusa", secrets=[secret])
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ._headers import octets_to_text
from ._receiver import (
    BAD_LENGTH,
    DEFAULT_MAX_BODY_BYTES,
    NOT_POST,
    TOO_LARGE,
    Answer,
    Handler,
    answer_for_exception,
    answer_for_result,
    judge,
    options_of,
    reason,
)
from .delivery import Delivery
from .signature import DEFAULT_TOLERANCE_S, Secret

Environ = Dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

_CHUNK = 64 * 1024


def _headers_of(environ: Environ) -> List[Tuple[str, str]]:
    """The request headers from the environ (PEP 3333 gives values as Latin-1 text: the
    original octets are recovered, then read as UTF-8 where they are)."""
    pairs = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = key[5:].replace("_", "-").lower()
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = key.replace("_", "-").lower()
        else:
            continue
        if isinstance(value, str):
            try:
                value = octets_to_text(value.encode("latin-1"))
            except UnicodeEncodeError:
                pass
        pairs.append((name, value))
    return pairs


def _read_body(environ: Environ, limit: int) -> Union[bytes, Answer]:
    raw_length = environ.get("CONTENT_LENGTH") or ""
    stream = environ.get("wsgi.input")
    if raw_length:
        if not raw_length.isdigit():
            return BAD_LENGTH
        length = int(raw_length)
        if length > limit:
            return TOO_LARGE
    elif environ.get("wsgi.input_terminated"):
        length = limit + 1  # read to the end, one byte past the limit at most
    else:
        return b""
    if stream is None:
        return b""
    chunks = []
    got = 0
    while got < length:
        chunk = stream.read(min(_CHUNK, length - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    if got > limit:
        return TOO_LARGE
    return b"".join(chunks)


class ReceiverApp:
    """A WSGI application receiving Ankusa deliveries (``POST`` only)."""

    def __init__(
        self,
        handler: Callable[[Delivery], Any],
        *,
        secrets: Union[Secret, Sequence[Secret], None] = None,
        allow_unsigned: bool = False,
        tolerance_s: int = DEFAULT_TOLERANCE_S,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.handler: Handler = handler
        self.options = options_of(secrets, allow_unsigned, tolerance_s, max_body_bytes)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        answer = self._answer(environ)
        headers = list(answer.headers) + [("content-length", str(len(answer.body)))]
        start_response(f"{answer.status} {reason(answer.status)}", headers)
        return [answer.body]

    def _answer(self, environ: Environ) -> Answer:
        if environ.get("REQUEST_METHOD", "GET").upper() != "POST":
            return NOT_POST
        body = _read_body(environ, self.options.max_body_bytes)
        if isinstance(body, Answer):
            return body
        verdict = judge(_headers_of(environ), body, self.options)
        if isinstance(verdict, Answer):
            return verdict
        try:
            result = self.handler(verdict)
        except Exception as e:
            return answer_for_exception(e)
        return answer_for_result(result)


class ReceiverMiddleware:
    """Serves a ``ReceiverApp`` on ``path`` (exactly) and passes every other request to
    ``app``."""

    def __init__(
        self,
        app: WSGIApp,
        handler: Callable[[Delivery], Any],
        *,
        path: str,
        secrets: Union[Secret, Sequence[Secret], None] = None,
        allow_unsigned: bool = False,
        tolerance_s: int = DEFAULT_TOLERANCE_S,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.path = path
        self.receiver = ReceiverApp(
            handler,
            secrets=secrets,
            allow_unsigned=allow_unsigned,
            tolerance_s=tolerance_s,
            max_body_bytes=max_body_bytes,
        )

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path: Optional[str] = (environ.get("SCRIPT_NAME", "") or "") + environ.get("PATH_INFO", "")
        if path == self.path:
            return self.receiver(environ, start_response)
        return self.app(environ, start_response)


__all__ = ["ReceiverApp", "ReceiverMiddleware"]
