"""An ASGI receiver of Ankusa HTTP deliveries (FastAPI, Starlette, any ASGI server).

``ReceiverApp`` is an ASGI 3 application; mount it (``app.mount("/ankusa", ReceiverApp(...))``)
or serve it alone. ``ReceiverMiddleware`` serves it on one path in front of another
application. The raw body is read first (bounded by ``max_body_bytes``) and verified with
``receive_delivery`` before ``handler(delivery)`` runs. An ``async def`` handler is awaited;
a plain function runs in a worker thread so it never blocks the event loop. See
``ankusa._receiver`` for the answers.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Awaitable, Callable, List, MutableMapping, Sequence, Tuple, Union

from ._receiver import (
    DEFAULT_MAX_BODY_BYTES,
    NOT_POST,
    TOO_LARGE,
    Answer,
    answer_for_exception,
    answer_for_result,
    judge,
    options_of,
)
from .delivery import Delivery
from .signature import DEFAULT_TOLERANCE_S, Secret

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _Disconnected(Exception):
    """The client went away before the body was read: nothing to answer."""


async def _read_body(receive: Receive, limit: int) -> Union[bytes, Answer]:
    chunks: List[bytes] = []
    got = 0
    too_large = False
    while True:
        message = await receive()
        kind = message.get("type")
        if kind == "http.disconnect":
            raise _Disconnected()
        if kind != "http.request":
            continue
        chunk = message.get("body", b"")
        if chunk and not too_large:
            got += len(chunk)
            if got > limit:
                # Keep draining without buffering, so the answer is not sent mid-upload.
                too_large = True
                chunks = []
            else:
                chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return TOO_LARGE if too_large else b"".join(chunks)


async def _send(send: Send, answer: Answer) -> None:
    headers: List[Tuple[bytes, bytes]] = [
        (k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers
    ]
    headers.append((b"content-length", str(len(answer.body)).encode("ascii")))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message.get("type") == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message.get("type") == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _is_async(handler: Callable[[Delivery], Any]) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(handler):
        return True
    method = type(handler).__call__  # every callable's type has one
    return inspect.iscoroutinefunction(method)


class ReceiverApp:
    """An ASGI application receiving Ankusa deliveries (``POST`` only)."""

    def __init__(
        self,
        handler: Callable[[Delivery], Any],
        *,
        secrets: Union[Secret, Sequence[Secret], None] = None,
        allow_unsigned: bool = False,
        tolerance_s: int = DEFAULT_TOLERANCE_S,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.handler = handler
        self.options = options_of(secrets, allow_unsigned, tolerance_s, max_body_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "lifespan":
            await _lifespan(receive, send)
            return
        if scope.get("type") != "http":
            raise RuntimeError(f"ankusa ReceiverApp serves http, not {scope.get('type')}")
        try:
            answer = await self._answer(scope, receive)
        except _Disconnected:
            return
        await _send(send, answer)

    async def _answer(self, scope: Scope, receive: Receive) -> Answer:
        if str(scope.get("method", "")).upper() != "POST":
            return NOT_POST
        body = await _read_body(receive, self.options.max_body_bytes)
        if isinstance(body, Answer):
            return body
        headers: List[Tuple[bytes, bytes]] = list(scope.get("headers") or [])
        verdict = judge(headers, body, self.options)
        if isinstance(verdict, Answer):
            return verdict
        try:
            result = await self._run(verdict)
        except Exception as e:
            return answer_for_exception(e)
        return answer_for_result(result)

    async def _run(self, delivery: Delivery) -> Any:
        handler = self.handler
        if _is_async(handler):
            return await handler(delivery)
        result = await asyncio.get_running_loop().run_in_executor(None, handler, delivery)
        if inspect.isawaitable(result):
            result = await result
        return result


class ReceiverMiddleware:
    """Serves a ``ReceiverApp`` on ``path`` (exactly) and passes everything else to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and scope.get("path") == self.path:
            await self.receiver(scope, receive, send)
            return
        await self.app(scope, receive, send)


__all__ = ["ReceiverApp", "ReceiverMiddleware"]
