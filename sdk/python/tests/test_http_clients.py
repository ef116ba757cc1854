"""The claim and admin clients over real sockets: TLS with a CA bundle, the whole-redeem
deadline against a server that trickles, the bounded read, and the admin API's answers and
errors mapped to typed results."""

from __future__ import annotations

import hashlib
import json
import ssl
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from support import free_port, make_tls, openssl

from ankusa import (
    AdminClient,
    AdminError,
    ClaimCheckUnavailableError,
    ClaimClient,
    ClaimIntegrityError,
    DeadFilter,
    ReplayJob,
)

Reply = Tuple[int, Dict[str, str], Any]  # status, headers, body (bytes, or a callable writer)


class Server:
    """An HTTP(S) server on 127.0.0.1 answering with ``route(method, path, headers, body)``."""

    def __init__(self, route: Callable[[str, str, Dict[str, str], bytes], Reply],
                 context: Optional[ssl.SSLContext] = None) -> None:
        self.seen: List[Dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.seen.append({"method": self.command, "path": self.path,
                                   "headers": headers, "body": body})
                status, extra, payload = route(self.command, self.path, headers, body)
                try:
                    self.send_response(status)
                    for k, v in extra.items():
                        self.send_header(k, v)
                    if callable(payload):
                        self.end_headers()
                        payload(self.wfile)
                    else:
                        self.send_header("content-length", str(len(payload)))
                        self.send_header("connection", "close")
                        self.end_headers()
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass
                self.close_connection = True

            do_GET = do_POST = do_PATCH = _serve

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if context is not None:
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


CLAIM = "urn:ankusa:claim:v1:acme:0192f1c07a3e7b118c2d3e4f5a6b7c8d"
BODY = b"x" * 1000
SHA = hashlib.sha256(BODY).hexdigest()


class ClaimClientTest(unittest.TestCase):
    def test_the_deadline_bounds_a_trickling_body(self) -> None:
        def trickle(out: Any) -> None:
            for _ in range(100):
                out.write(b"x")
                out.flush()
                time.sleep(0.1)

        server = Server(lambda *a: (200, {"content-length": "1000", "connection": "close"}, trickle))
        try:
            client = ClaimClient(f"http://127.0.0.1:{server.port}", timeout_s=0.5)
            started = time.monotonic()
            with self.assertRaises(ClaimCheckUnavailableError) as caught:
                client.fetch(CLAIM, size=1000, sha256=SHA)
            elapsed = time.monotonic() - started
        finally:
            server.close()
        self.assertTrue(caught.exception.retryable)
        self.assertIsNone(caught.exception.status)
        self.assertLess(elapsed, 1.5, "the whole redeem is bounded, not each read")

    def test_a_body_larger_than_the_message_says_is_not_read_whole(self) -> None:
        sent = []

        def flood(out: Any) -> None:
            try:
                for _ in range(4096):  # 64 MiB offered
                    out.write(b"y" * 16384)
                    sent.append(1)
            except OSError:
                pass

        server = Server(lambda *a: (200, {"content-length": str(4096 * 16384)}, flood))
        try:
            client = ClaimClient(f"http://127.0.0.1:{server.port}", timeout_s=5)
            with self.assertRaises(ClaimIntegrityError) as caught:
                client.fetch(CLAIM, size=10, sha256=SHA)
        finally:
            server.close()
        self.assertEqual((caught.exception.code, caught.exception.field), ("claim_integrity", "sha256"))
        self.assertLess(len(sent), 4096, "the reader stopped early")

    def test_the_token_is_sent_and_never_shown(self) -> None:
        server = Server(lambda *a: (200, {}, BODY))
        try:
            client = ClaimClient(f"http://127.0.0.1:{server.port}/prefix", token="reader-token-0123456789")
            self.assertEqual(client.fetch(CLAIM, size=1000, sha256=SHA), BODY)
        finally:
            server.close()
        self.assertEqual(server.seen[0]["path"], "/prefix/v1/claims/acme/0192f1c07a3e7b118c2d3e4f5a6b7c8d")
        self.assertEqual(server.seen[0]["headers"]["authorization"], "Bearer reader-token-0123456789")
        self.assertNotIn("reader-token", repr(client))
        with self.assertRaises(ValueError):
            ClaimClient("http://127.0.0.1:1", token="bad\r\ninjected: 1")
        with self.assertRaises(ValueError):
            ClaimClient("ftp://127.0.0.1:1")


@unittest.skipUnless(openssl(), "openssl CLI not found: the CA-bundle tests need it to make certificates")
class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.dir = tempfile.TemporaryDirectory()
        cls.ca, cert, key = make_tls(Path(cls.dir.name))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        cls.server = Server(cls.route, context=ctx)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()
        cls.dir.cleanup()

    @staticmethod
    def route(method: str, path: str, headers: Dict[str, str], body: bytes) -> Reply:
        if path.startswith("/v1/claims/"):
            return 200, {}, BODY
        return 200, {"content-type": "application/json"}, json.dumps(
            {"entries": [], "next_cursor": None, "total": 0, "examined": 0}).encode()

    def test_a_claim_over_https_with_the_ca_bundle(self) -> None:
        for host in ("127.0.0.1", "localhost"):
            client = ClaimClient(f"https://{host}:{self.server.port}", ca_file=str(self.ca))
            self.assertEqual(client.fetch(CLAIM, size=1000, sha256=SHA), BODY)

    def test_without_the_bundle_the_certificate_is_refused(self) -> None:
        client = ClaimClient(f"https://127.0.0.1:{self.server.port}")
        with self.assertRaises(ClaimCheckUnavailableError) as caught:
            client.fetch(CLAIM, size=1000, sha256=SHA)
        self.assertIn("tls", str(caught.exception))
        admin = AdminClient(f"https://127.0.0.1:{self.server.port}", "t" * 20)
        with self.assertRaises(AdminError) as refused:
            admin.list_dlq()
        self.assertEqual((refused.exception.code, refused.exception.retryable), ("transport", True))

    def test_the_admin_client_with_the_ca_bundle(self) -> None:
        admin = AdminClient(f"https://localhost:{self.server.port}", "t" * 20, ca_file=str(self.ca))
        self.assertEqual(admin.list_dlq().total, 0)

    def test_a_ca_file_needs_https(self) -> None:
        with self.assertRaises(ValueError):
            ClaimClient("http://127.0.0.1:1", ca_file=str(self.ca))


DEAD_PAGE = {
    "entries": [
        {"id": "0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d", "seq": 1042, "tenant": "acme",
         "source_id": "stripe", "sink": 0, "sink_type": "http", "error_class": "permanent",
         "reason": "http: permanent: status 410", "attempts": 1, "dead_at": 1737500123456,
         "first_attempt_at": 1737500123000, "received_at": 1737500122990, "size": 1834,
         "replay_id": None}
    ],
    "next_cursor": "AAABlJ3kXsAAAAAAAAAEEgAA", "total": None, "examined": 3,
}
JOB = {"id": "0192f1d2-5c1e-7a40-9d7e-2b9c1f0e4a11", "kind": "dlq",
       "filter": {"tenant": "acme", "source_id": "stripe"}, "rate": 300, "max_lag_ms": 2000,
       "pause_after_dead": 20, "state": "running", "created_at": 1737500200000,
       "updated_at": 1737500200000, "moved": 0, "scanned": 0, "delivered": 0, "failed": 0,
       "outstanding": 0, "done": False, "some_future_field": {"x": 1}}
PEN_PAGE = {"entries": [{"id": "0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d", "source_id": "stripe",
                         "tenant": "default", "received_at": 1737500000000,
                         "reason": "no_matching_signature", "size": 1834, "method": "POST",
                         "path": "/webhooks/stripe", "url_tenant": False}],
            "total": None, "bytes": None, "next_cursor": "73000001946f"}


def admin_route(method: str, path: str, headers: Dict[str, str], body: bytes) -> Reply:
    js = {"content-type": "application/json"}
    if headers.get("authorization") != "Bearer admin-token-0123456789":
        return 401, js, b'{"error":"unauthorized"}'
    if path.startswith("/v1/dlq"):
        return 200, js, json.dumps(DEAD_PAGE).encode()
    if path == "/v1/replays" and method == "POST":
        return 202, js, json.dumps(JOB).encode()
    if path == "/v1/replays" and method == "GET":
        return 200, js, json.dumps({"jobs": [JOB]}).encode()
    if path.startswith("/v1/replays/") and method == "PATCH":
        return 200, js, json.dumps({**JOB, "state": json.loads(body)["state"]}).encode()
    if path.startswith("/v1/replays/missing"):
        return 404, js, b'{"error":"replay_not_found"}'
    if path.startswith("/v1/quarantine"):
        return 200, js, json.dumps(PEN_PAGE).encode()
    if path == "/v1/busy":
        return 429, {**js, "retry-after": "10"}, b'{"error":"too_many_jobs","max_live_jobs":64}'
    if path == "/v1/garbage":
        return 200, js, b"<html>"
    return 404, {}, b""


class AdminClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = Server(admin_route)
        cls.client = AdminClient(f"http://127.0.0.1:{cls.server.port}", "admin-token-0123456789")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()

    def test_typed_answers(self) -> None:
        page = self.client.list_dlq(tenant="acme", error_class="permanent", limit=1)
        self.assertEqual(self.server.seen[-1]["path"], "/v1/dlq?tenant=acme&error_class=permanent&limit=1")
        self.assertEqual(page.entries[0].reason, "http: permanent: status 410")
        self.assertEqual((page.entries[0].sink, page.examined, page.total), (0, 3, None))
        job = self.client.create_replay(job_id=JOB["id"], tenant="acme", source_id="stripe", rate=300)
        sent = json.loads(self.server.seen[-1]["body"])
        self.assertEqual(sent, {"kind": "dlq", "job_id": JOB["id"], "rate": 300,
                                "filter": {"tenant": "acme", "source_id": "stripe"}})
        self.assertIsInstance(job, ReplayJob)
        self.assertEqual(job.filter, DeadFilter(tenant="acme", source_id="stripe"))
        self.assertEqual((job.state, job.rate, job.done, job.archive), ("running", 300, False, None))
        self.assertEqual(self.client.patch_replay(job.id, "paused").state, "paused")
        self.assertEqual(json.loads(self.server.seen[-1]["body"]), {"state": "paused"})
        self.assertEqual([j.id for j in self.client.list_replays()], [JOB["id"]])
        pen = self.client.list_quarantine(source_id="stripe", limit=1)
        self.assertEqual((pen.entries[0].reason, pen.entries[0].url_tenant), ("no_matching_signature", False))
        archive = self.client.create_replay(kind="archive", from_=1, to=2, sinks=[0])
        self.assertEqual(json.loads(self.server.seen[-1]["body"]),
                         {"kind": "archive", "from": 1, "to": 2, "sinks": [0]})
        self.assertEqual(archive.kind, "dlq")  # the scripted answer

    def test_errors(self) -> None:
        with self.assertRaises(AdminError) as e:
            self.client.get_replay("missing")
        self.assertEqual((e.exception.code, e.exception.status, e.exception.retryable),
                         ("replay_not_found", 404, False))
        with self.assertRaises(AdminError) as e:
            self.client._call("GET", "/v1/busy")
        self.assertEqual((e.exception.code, e.exception.retryable, e.exception.retry_after_s),
                         ("too_many_jobs", True, 10))
        with self.assertRaises(AdminError) as e:
            self.client._call("GET", "/nothing")
        self.assertEqual((e.exception.code, e.exception.status), ("http_404", 404))
        with self.assertRaises(AdminError) as e:
            self.client._call("GET", "/v1/garbage")
        self.assertEqual(e.exception.code, "invalid_response")
        anonymous = AdminClient(f"http://127.0.0.1:{self.server.port}", "wrong-token-0123456789")
        with self.assertRaises(AdminError) as e:
            anonymous.list_dlq()
        self.assertEqual((e.exception.code, e.exception.status, e.exception.retryable),
                         ("unauthorized", 401, False))
        closed = AdminClient(f"http://127.0.0.1:{free_port()}", "admin-token-0123456789")
        with self.assertRaises(AdminError) as e:
            closed.list_quarantine()
        self.assertEqual((e.exception.code, e.exception.status, e.exception.retryable),
                         ("transport", None, True))
        with self.assertRaises(ValueError):
            self.client.patch_replay("x", "done")


if __name__ == "__main__":
    unittest.main()
