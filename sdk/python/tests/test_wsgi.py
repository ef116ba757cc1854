"""The WSGI receiver: driven directly with environs, and through a real wsgiref server."""

from __future__ import annotations

import http.client
import io
import json
import threading
import unittest
from typing import Any, Dict, List, Optional, Tuple
from wsgiref.simple_server import WSGIRequestHandler, make_server

from support import SECRET, delivery_headers

from ankusa import ClaimCheckUnavailableError, Delivery
from ankusa.wsgi import ReceiverApp, ReceiverMiddleware

BODY = b'{"id":"evt_1","type":"invoice.paid"}'


def environ_for(body: bytes, headers: Dict[str, str], method: str = "POST",
                path: str = "/ankusa", length: Optional[str] = None) -> Dict[str, Any]:
    env: Dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)) if length is None else length,
    }
    for name, value in headers.items():
        key = name.upper().replace("-", "_")
        if key == "CONTENT_TYPE":
            env[key] = value
        else:
            env["HTTP_" + key] = value
    return env


def call(app: Any, env: Dict[str, Any]) -> Tuple[int, Dict[str, str], Any]:
    seen: List[Any] = []

    def start_response(status: str, headers: List[Tuple[str, str]]) -> None:
        seen.append((int(status.split()[0]), dict(headers)))

    body = b"".join(app(env, start_response))
    status, headers = seen[0]
    return status, headers, json.loads(body) if body else None


class WsgiReceiverTest(unittest.TestCase):
    def setUp(self) -> None:
        self.got: List[Delivery] = []

    def handler(self, d: Delivery) -> None:
        self.got.append(d)

    def test_a_signed_delivery_is_accepted_with_its_raw_body(self) -> None:
        app = ReceiverApp(self.handler, secrets=[SECRET])
        status, headers, answer = call(app, environ_for(BODY, delivery_headers(BODY)))
        self.assertEqual(status, 202)
        self.assertEqual(answer, {"status": "accepted"})
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(len(self.got), 1)
        d = self.got[0]
        self.assertEqual(d.body, BODY)
        self.assertTrue(d.signed)
        self.assertEqual(d.tenant, "acme")
        self.assertEqual(d.idempotency_key, "acme:stripe:evt_1")

    def test_a_body_that_is_not_json_is_still_only_judged_by_its_signature(self) -> None:
        body = b"\xff\x00not json at all"
        app = ReceiverApp(self.handler, secrets=SECRET)
        status, _, _ = call(app, environ_for(body, delivery_headers(body)))
        self.assertEqual(status, 202)
        self.assertEqual(self.got[0].body, body)

    def test_refusals_name_the_code_and_never_reach_the_handler(self) -> None:
        app = ReceiverApp(self.handler, secrets=[SECRET])
        unsigned = {"x-ankusa-id": "h1", "content-type": "application/json"}
        self.assertEqual(call(app, environ_for(BODY, unsigned))[::2],
                         (401, {"error": "missing_header"}))
        tampered = delivery_headers(BODY)
        self.assertEqual(call(app, environ_for(BODY + b" ", tampered))[::2],
                         (401, {"error": "no_matching_signature"}))
        no_id = delivery_headers(BODY)
        del no_id["x-ankusa-id"]
        self.assertEqual(call(app, environ_for(BODY, no_id))[::2],
                         (400, {"error": "missing_header"}))
        mismatch = delivery_headers(BODY)
        mismatch["x-ankusa-id"] = "another"
        self.assertEqual(call(app, environ_for(BODY, mismatch))[::2],
                         (400, {"error": "id_mismatch"}))
        self.assertEqual(self.got, [])

    def test_an_unconfigured_receiver_is_closed(self) -> None:
        app = ReceiverApp(self.handler)
        status, _, answer = call(app, environ_for(BODY, delivery_headers(BODY)))
        self.assertEqual((status, answer), (401, {"error": "invalid_secret"}))
        opened = ReceiverApp(self.handler, allow_unsigned=True)
        status, _, _ = call(opened, environ_for(BODY, {"x-ankusa-id": "h1"}))
        self.assertEqual(status, 202)
        self.assertFalse(self.got[0].signed)

    def test_method_length_and_size_limits(self) -> None:
        app = ReceiverApp(self.handler, secrets=[SECRET], max_body_bytes=16)
        status, headers, _ = call(app, environ_for(b"", {}, method="GET"))
        self.assertEqual((status, headers["allow"]), (405, "POST"))
        big = b"x" * 17
        self.assertEqual(call(app, environ_for(big, delivery_headers(big)))[::2],
                         (413, {"error": "body_too_large"}))
        self.assertEqual(call(app, environ_for(b"", {}, length="12x"))[::2],
                         (400, {"error": "invalid_content_length"}))
        # A body without a length on a server that marks the input terminated.
        env = environ_for(big, delivery_headers(big), length="")
        env["wsgi.input_terminated"] = True
        self.assertEqual(call(app, env)[0], 413)
        self.assertEqual(self.got, [])

    def test_handler_outcomes(self) -> None:
        def declines(d: Delivery) -> bool:
            return False

        def busy(d: Delivery) -> None:
            raise ClaimCheckUnavailableError("claim_check_unavailable")

        def broken(d: Delivery) -> None:
            raise KeyError("secret payload detail")

        env = lambda: environ_for(BODY, delivery_headers(BODY))  # noqa: E731
        self.assertEqual(call(ReceiverApp(declines, secrets=SECRET), env())[::2],
                         (503, {"error": "handler_declined"}))
        self.assertEqual(call(ReceiverApp(busy, secrets=SECRET), env())[::2],
                         (503, {"error": "claim_check_unavailable"}))
        with self.assertLogs("ankusa", level="ERROR"):
            status, _, answer = call(ReceiverApp(broken, secrets=SECRET), env())
        self.assertEqual((status, answer), (500, {"error": "internal_error"}))

    def test_the_middleware_serves_one_path_and_passes_the_rest(self) -> None:
        def inner(environ: Dict[str, Any], start_response: Any) -> List[bytes]:
            start_response("200 OK", [("content-type", "text/plain")])
            return [b"inner"]

        app = ReceiverMiddleware(inner, self.handler, path="/ankusa", secrets=[SECRET])
        self.assertEqual(call(app, environ_for(BODY, delivery_headers(BODY)))[0], 202)
        seen: List[Any] = []
        out = app(environ_for(b"", {}, method="GET", path="/health"),
                  lambda s, h: seen.append(s))
        self.assertEqual((seen, b"".join(out)), (["200 OK"], b"inner"))

    def test_through_a_real_wsgi_server(self) -> None:
        class Quiet(WSGIRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

        server = make_server("127.0.0.1", 0, ReceiverApp(self.handler, secrets=[SECRET]),
                             handler_class=Quiet)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=5)
            conn.request("POST", "/anything", body=BODY, headers=delivery_headers(BODY))
            resp = conn.getresponse()
            self.assertEqual((resp.status, json.loads(resp.read())), (202, {"status": "accepted"}))
            conn.close()
        finally:
            server.shutdown()
            server.server_close()
        self.assertEqual(self.got[0].body, BODY)
        self.assertEqual(self.got[0].source_id, "stripe")


if __name__ == "__main__":
    unittest.main()
