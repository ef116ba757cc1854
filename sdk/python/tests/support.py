"""Test support: an SDK-independent signer, free ports, certificates made with the openssl
CLI, and the real gateway binary started on loopback ports with a temp data dir."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, Optional, Tuple

SDK_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SDK_ROOT / "src"))

SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()


def sign(secret: str, msg_id: str, ts: int, body: bytes) -> str:
    """Standard Webhooks, written here from the spec rather than taken from the SDK."""
    key = base64.b64decode(secret[len("whsec_"):]) if secret.startswith("whsec_") else secret.encode()
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def delivery_headers(body: bytes, *, hook_id: str = "0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d",
                     secret: str = SECRET, ts: Optional[int] = None) -> Dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    return {
        "content-type": "application/json",
        "x-ankusa-id": hook_id,
        "x-ankusa-source": "stripe",
        "x-ankusa-tenant": "acme",
        "x-ankusa-idempotency-key": "acme:stripe:evt_1",
        "x-ankusa-verification": "ok",
        "webhook-id": hook_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": sign(secret, hook_id, ts, body),
    }


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def openssl() -> Optional[str]:
    return shutil.which("openssl")


def make_tls(directory: Path) -> Tuple[Path, Path, Path]:
    """A CA and a server certificate for localhost/127.0.0.1 it signed: (ca, cert, key)."""
    ca_key, ca_pem = directory / "ca.key", directory / "ca.pem"
    key, csr, cert = directory / "tls.key", directory / "tls.csr", directory / "tls.crt"
    ext = directory / "ext.cnf"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                   "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=serverAuth\n")
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(ca_key), "-out", str(ca_pem), "-days", "2", "-subj", "/CN=ankusa test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_pem), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))
    # The gateway reads PKCS#8 or SEC1 keys; convert to PKCS#8 to be safe.
    pk8 = directory / "tls.pk8"
    run("pkcs8", "-topk8", "-nocrypt", "-in", str(key), "-out", str(pk8))
    return ca_pem, cert, pk8


def gateway_binary() -> Optional[Path]:
    default = Path.home() / ".cache/ankusa/target/debug/ankusa"
    path = Path(os.environ.get("ANKUSA_BIN") or default)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def gateway_required() -> bool:
    return os.environ.get("ANKUSA_REQUIRE_GATEWAY") == "1"


class Gateway:
    """The real ``ankusa`` binary on free loopback ports, stopped by ``close``."""

    def __init__(self, config: str, env: Optional[Dict[str, str]] = None) -> None:
        binary = gateway_binary()
        assert binary is not None, "no gateway binary"
        self.dir = Path(tempfile.mkdtemp(prefix="ankusa-sdk-py-"))
        self.config_path = self.dir / "ankusa.yml"
        self.config_path.write_text(config)
        self.ingest, self.admin, self.claims = free_port(), free_port(), free_port()
        self.tls = bool(env and "ANKUSA_ADMIN_TLS_CERT_FILE" in env)
        full_env = {k: v for k, v in os.environ.items() if k not in ("ANKUSA_CONFIG", "RUST_LOG")}
        full_env.update({
            "ANKUSA_DATA_DIR": str(self.dir / "data"),
            "ANKUSA_HTTP_IP": "127.0.0.1", "ANKUSA_HTTP_PORT": str(self.ingest),
            "ANKUSA_ADMIN_IP": "127.0.0.1", "ANKUSA_ADMIN_PORT": str(self.admin),
            "ANKUSA_CLAIM_CHECK_IP": "127.0.0.1", "ANKUSA_CLAIM_CHECK_PORT": str(self.claims),
        })
        full_env.update(env or {})
        self.log_path = self.dir / "gateway.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([str(binary), "--config", str(self.config_path)],
                                     env=full_env, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready(60.0)
        except BaseException:
            self.close()
            raise

    def _wait_ready(self, timeout_s: float) -> None:
        # An HTTPS-only admin listener answers plain HTTP 400; the ingest port has /ready too.
        url = f"http://127.0.0.1:{self.ingest if self.tls else self.admin}/ready"
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"gateway exited {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=1) as r:
                    if r.status == 200 and json.loads(r.read()).get("status") == "ready":
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"gateway not ready:\n{self.log_tail()}")
            time.sleep(0.05)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def post(self, path: str, body: bytes, headers: Dict[str, str]) -> Tuple[int, bytes]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.ingest}{path}", data=body,
                                     headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for(predicate, timeout_s: float = 30.0, interval_s: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}")
        time.sleep(interval_s)
