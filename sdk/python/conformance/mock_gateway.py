"""The mock claim gateway of ``redeem_claim`` cases: a real HTTP server on 127.0.0.1
(port 0) that answers every request with the current case's scripted answer, after its
``delay_ms``, and records the requests it received.
"""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional


class Script:
    """One case's answer."""

    def __init__(self, status: int, headers: Dict[str, str], body: bytes, delay_ms: int) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.delay_ms = delay_ms


class MockGateway:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: Optional[Script] = None
        self._requests: List[Dict[str, Any]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def _serve(self) -> None:
                script = gateway._record(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}
                )
                if script is None:
                    self.send_error(500, "no script")
                    return
                if script.delay_ms:
                    time.sleep(script.delay_ms / 1000)
                try:
                    self.send_response(script.status)
                    names = {k.lower() for k in script.headers}
                    for name, value in script.headers.items():
                        self.send_header(name, value)
                    if "content-length" not in names:
                        self.send_header("Content-Length", str(len(script.body)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(script.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout case)
                self.close_connection = True

            do_GET = _serve
            do_HEAD = _serve
            do_POST = _serve
            do_PUT = _serve
            do_PATCH = _serve
            do_DELETE = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _record(self, method: str, path: str, headers: Dict[str, str]) -> Optional[Script]:
        with self._lock:
            self._requests.append({"method": method, "path": path, "headers": headers})
            return self._script

    def arm(self, script: Script) -> None:
        """Answers with ``script`` from now on and forgets earlier requests."""
        with self._lock:
            self._script = script
            self._requests = []

    def requests(self) -> List[Dict[str, Any]]:
        with self._lock:
            return list(self._requests)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def closed_port_url() -> str:
    """A loopback URL where nothing listens (the port was just bound and released)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"
