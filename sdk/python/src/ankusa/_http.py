"""One HTTP exchange under a deadline, for the claim and admin clients.

Built on ``http.client`` (the layer ``urllib.request`` itself uses) rather than
``urlopen``: ``urlopen``'s timeout applies per socket operation, so a server that trickles
a body could hold a reader far past it, and it follows redirects. Here the socket timeout is
re-armed to the time left before every read, so the deadline bounds the whole exchange;
redirects are returned as answers, never followed; and at most ``limit`` + 1 body bytes are
read, so a body larger than expected is detected without being buffered whole.
Proxies from the environment are not used: the claim port and the admin API are reached
directly.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple, Union
from urllib.parse import urlsplit

from . import __about__

USER_AGENT = f"ankusa-python/{__about__.__version__}"
_CHUNK = 64 * 1024


class TransportFailure(Exception):
    """No complete answer: ``kind`` is ``timeout``, ``tls``, ``connect`` or ``protocol``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(kind)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Dict[str, str]
    body: bytes
    #: More than ``limit`` bytes were offered; ``body`` holds ``limit`` + 1 of them.
    over_limit: bool


class Endpoint:
    """A base URL (``http://host:port[/prefix]`` or ``https://...``) and how to reach it."""

    def __init__(self, base_url: str, *, ca_file: Optional[str] = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http:// or https:// URL with a host")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError("base_url must not carry a query, a fragment or credentials")
        if ca_file is not None and parts.scheme != "https":
            raise ValueError("ca_file is only used with an https:// base_url")
        self.https = parts.scheme == "https"
        self.host: str = parts.hostname
        self.port: int = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self._context: Optional[ssl.SSLContext] = None
        if self.https:
            # With ca_file, only that bundle is trusted (a private CA); else the system's.
            self._context = ssl.create_default_context(cafile=ca_file)

    def _connection(self, timeout_s: float) -> "_Held":
        if self.https:
            return _HeldHTTPS(self.host, self.port, timeout=timeout_s, context=self._context)
        return _HeldHTTP(self.host, self.port, timeout=timeout_s)

    def exchange(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str],
        body: Optional[bytes] = None,
        timeout_s: float,
        limit: int,
        error_limit: int = 64 * 1024,
    ) -> Answer:
        """Sends one request and reads its answer, all within ``timeout_s``: at most
        ``limit`` (+ 1) body bytes of a 2xx answer, ``error_limit`` of any other."""
        deadline = time.monotonic() + timeout_s
        conn = self._connection(max(timeout_s, 0.001))
        resp: Optional[http.client.HTTPResponse] = None
        try:
            conn.connect()
            sock = conn.sock
            _arm(sock, deadline)
            sent = {"User-Agent": USER_AGENT, **headers}
            conn.request(method, self.prefix + path, body=body, headers=sent)
            _arm(sock, deadline)
            # Kept open (see _Held) so that every body read can be re-armed.
            conn.hold_socket = True
            resp = conn.getresponse()
            answer_headers: Dict[str, str] = {}
            for name, value in resp.getheaders():
                answer_headers.setdefault(name.lower(), value)
            cap = limit if 200 <= resp.status < 300 else error_limit
            data, over = _read_bounded(resp, sock, deadline, cap)
            return Answer(resp.status, answer_headers, data, over)
        except TransportFailure:
            raise
        except (socket.timeout, TimeoutError):
            raise TransportFailure("timeout") from None
        except ssl.SSLError:
            raise TransportFailure("tls") from None
        except (http.client.HTTPException, ValueError):
            raise TransportFailure("protocol") from None
        except OSError:
            raise TransportFailure("connect") from None
        finally:
            conn.hold_socket = False
            if resp is not None:
                resp.close()
            conn.close()


class _Held(http.client.HTTPConnection):
    """A connection whose socket stays open while ``hold_socket`` is set.

    ``getresponse`` closes the connection's socket object when the answer ends the
    connection (``Connection: close``); the response still reads through it, but on some
    Python versions its timeout can no longer be changed, and the deadline is enforced by
    changing it before every read.
    """

    hold_socket = False

    def close(self) -> None:
        if not self.hold_socket:
            super().close()


class _HeldHTTP(_Held):
    pass


class _HeldHTTPS(_Held, http.client.HTTPSConnection):
    pass


def _arm(sock: Union[socket.socket, None], deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TransportFailure("timeout")
    if sock is not None:
        sock.settimeout(left)


def _read_bounded(
    resp: http.client.HTTPResponse,
    sock: Union[socket.socket, None],
    deadline: float,
    limit: int,
) -> Tuple[bytes, bool]:
    chunks = []
    got = 0
    while got <= limit:
        _arm(sock, deadline)
        chunk = resp.read1(min(_CHUNK, limit + 1 - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks), got > limit
