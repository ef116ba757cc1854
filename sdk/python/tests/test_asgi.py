"""The ASGI receiver, driven with the ASGI protocol's own messages."""

from __future__ import annotations

import asyncio
import json
import threading
import unittest
from typing import Any, Dict, List, Optional, Tuple

from support import SECRET, delivery_headers

from ankusa import ClaimCheckUnavailableError, Delivery
from ankusa.asgi import ReceiverApp, ReceiverMiddleware

BODY = b'{"id":"evt_1","type":"invoice.paid"}'


def scope_for(headers: Dict[str, str], method: str = "POST", path: str = "/ankusa") -> Dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
    }


def drive(app: Any, scope: Dict[str, Any], chunks: List[bytes],
          disconnect: bool = False) -> Tuple[Optional[int], Dict[str, str], Any]:
    """Runs one request; the body arrives in ``chunks``."""
    incoming: List[Dict[str, Any]] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    if disconnect:
        incoming = incoming[:1]
        incoming[0]["more_body"] = True
        incoming.append({"type": "http.disconnect"})
    sent: List[Dict[str, Any]] = []

    async def receive() -> Dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    if not sent:
        return None, {}, None
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], headers, json.loads(body) if body else None


class AsgiReceiverTest(unittest.TestCase):
    def setUp(self) -> None:
        self.got: List[Delivery] = []

    def test_a_signed_delivery_in_several_chunks_reaches_an_async_handler(self) -> None:
        async def handler(d: Delivery) -> None:
            self.got.append(d)

        app = ReceiverApp(handler, secrets=[SECRET])
        status, headers, answer = drive(app, scope_for(delivery_headers(BODY)),
                                        [BODY[:5], b"", BODY[5:]])
        self.assertEqual((status, answer), (202, {"status": "accepted"}))
        self.assertEqual(headers["content-length"], str(len(json.dumps(answer, separators=(",", ":")))))
        self.assertEqual(self.got[0].body, BODY)

    def test_a_plain_handler_runs_off_the_event_loop(self) -> None:
        threads: List[str] = []

        def handler(d: Delivery) -> None:
            threads.append(threading.current_thread().name)

        status, _, _ = drive(ReceiverApp(handler, secrets=SECRET),
                             scope_for(delivery_headers(BODY)), [BODY])
        self.assertEqual(status, 202)
        self.assertNotEqual(threads, [threading.main_thread().name])

    def test_refusals_and_limits(self) -> None:
        app = ReceiverApp(self.got.append, secrets=[SECRET], max_body_bytes=8)
        self.assertEqual(drive(app, scope_for({}, method="GET"), [b""])[0], 405)
        self.assertEqual(drive(app, scope_for(delivery_headers(BODY)), [BODY[:6], BODY[6:]])[::2],
                         (413, {"error": "body_too_large"}))
        roomy = ReceiverApp(self.got.append, secrets=[SECRET])
        self.assertEqual(drive(roomy, scope_for({"x-ankusa-id": "x"}), [BODY])[::2],
                         (401, {"error": "missing_header"}))
        closed = ReceiverApp(self.got.append)
        self.assertEqual(drive(closed, scope_for(delivery_headers(BODY)), [BODY])[::2],
                         (401, {"error": "invalid_secret"}))
        self.assertEqual(self.got, [])

    def test_a_client_that_goes_away_gets_no_answer(self) -> None:
        app = ReceiverApp(self.got.append, secrets=[SECRET])
        self.assertEqual(drive(app, scope_for(delivery_headers(BODY)), [BODY[:3]], disconnect=True),
                         (None, {}, None))
        self.assertEqual(self.got, [])

    def test_handler_outcomes(self) -> None:
        async def declines(d: Delivery) -> bool:
            return False

        def busy(d: Delivery) -> None:
            raise ClaimCheckUnavailableError("claim_check_unavailable")

        async def broken(d: Delivery) -> None:
            raise RuntimeError("boom")

        scope = scope_for(delivery_headers(BODY))
        self.assertEqual(drive(ReceiverApp(declines, secrets=SECRET), scope, [BODY])[::2],
                         (503, {"error": "handler_declined"}))
        self.assertEqual(drive(ReceiverApp(busy, secrets=SECRET), scope, [BODY])[::2],
                         (503, {"error": "claim_check_unavailable"}))
        with self.assertLogs("ankusa", level="ERROR"):
            self.assertEqual(drive(ReceiverApp(broken, secrets=SECRET), scope, [BODY])[::2],
                             (500, {"error": "internal_error"}))

    def test_lifespan_and_middleware(self) -> None:
        app = ReceiverApp(self.got.append, secrets=[SECRET])
        sent: List[Dict[str, Any]] = []
        incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

        async def receive() -> Dict[str, Any]:
            return incoming.pop(0)

        async def send(m: Dict[str, Any]) -> None:
            sent.append(m)

        asyncio.run(app({"type": "lifespan"}, receive, send))
        self.assertEqual([m["type"] for m in sent],
                         ["lifespan.startup.complete", "lifespan.shutdown.complete"])

        async def inner(scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        mw = ReceiverMiddleware(inner, self.got.append, path="/ankusa", secrets=[SECRET])
        self.assertEqual(drive(mw, scope_for(delivery_headers(BODY)), [BODY])[0], 202)
        self.assertEqual(drive(mw, scope_for({}, method="GET", path="/health"), [b""])[0], 204)
        self.assertEqual(len(self.got), 1)


if __name__ == "__main__":
    unittest.main()
