"""The examples run as a user runs them: each receiver is started, sent a delivery signed
by the tests' own signer, and its answers checked; the consumer decodes messages from a file
and from stdin and redeems a claim from a local claim server.

The receivers need flask, fastapi and uvicorn (``sdk/python/check`` runs these tests in a
venv that has them); without them they are skipped, unless ``ANKUSA_REQUIRE_EXAMPLES=1``.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Optional, Tuple

from support import SDK_ROOT, SECRET, delivery_headers, free_port

EXAMPLES = SDK_ROOT / "examples"
HOOK_ID = "0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d"


def env_with_sdk(**extra: str) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SDK_ROOT / "src"), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def have(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def frameworks_or_skip(*modules: str) -> Any:
    if have(*modules) or os.environ.get("ANKUSA_REQUIRE_EXAMPLES") == "1":
        return lambda cls: cls
    return unittest.skip(f"{', '.join(modules)} not installed (sdk/python/check installs them in a venv)")


def request(port: int, method: str, path: str, body: bytes = b"",
            headers: Optional[Dict[str, str]] = None) -> Tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class ReceiverExample:
    script = ""

    def run_receiver(self: Any) -> None:
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, str(EXAMPLES / self.script)],
            env=env_with_sdk(PORT=str(port), ANKUSA_WEBHOOK_SECRET=f"whsec_b2xk,{SECRET}"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if request(port, "GET", "/health")[0] == 200:
                        break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    stderr = proc.stderr.read().decode()[-2000:]
                    raise AssertionError(f"{self.script} did not start: {stderr}")
                time.sleep(0.1)
            body = b'{"id":"evt_1","type":"invoice.paid"}'
            signed = delivery_headers(body, hook_id=HOOK_ID)
            status, answer = request(port, "POST", "/ankusa", body, signed)
            self.assertEqual((status, json.loads(answer)), (202, {"status": "accepted"}))
            # The same hook again: accepted, handled once (idempotency key).
            self.assertEqual(request(port, "POST", "/ankusa", body, signed)[0], 202)
            status, answer = request(port, "POST", "/ankusa", body, {"x-ankusa-id": HOOK_ID})
            self.assertEqual((status, json.loads(answer)), (401, {"error": "missing_header"}))
            status, answer = request(port, "POST", "/ankusa", body + b" ", signed)
            self.assertEqual((status, json.loads(answer)), (401, {"error": "no_matching_signature"}))
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=15)
        lines = [line for line in out.decode().splitlines() if line.startswith("received ")]
        self.assertEqual(len(lines), 1, out.decode() + err.decode()[-2000:])
        self.assertIn(f"received {HOOK_ID} key=acme:stripe:evt_1", lines[0])


@frameworks_or_skip("flask")
class FlaskExampleTest(ReceiverExample, unittest.TestCase):
    script = "receive_flask.py"

    def test_receive_flask(self) -> None:
        self.run_receiver()


@frameworks_or_skip("fastapi", "uvicorn")
class FastApiExampleTest(ReceiverExample, unittest.TestCase):
    script = "receive_fastapi.py"

    def test_receive_fastapi(self) -> None:
        self.run_receiver()


def queue_message(body: bytes, *, claim: bool, source_id: str = "stripe") -> bytes:
    msg: Dict[str, Any] = {
        "v": 1, "id": HOOK_ID, "source_id": source_id, "tenant_id": "acme",
        "received_at": 1737500000000, "content_type": "application/json", "size": len(body),
        "sha256": hashlib.sha256(body).hexdigest(), "dedupe_key": "evt_1",
        "replay_id": "job-1", "idempotency_key": "acme:stripe:evt_1",
        "verification": {"status": "ok", "flagged": False}, "headers": {},
    }
    if claim:
        msg["claim"] = "urn:ankusa:claim:v1:acme:" + HOOK_ID.replace("-", "")
    else:
        msg["body_base64"] = base64.b64encode(body).decode()
    return json.dumps(msg).encode()


class ConsumeExampleTest(unittest.TestCase):
    def consume(self, data: bytes, *, as_file: bool = True, **env: str) -> Tuple[int, str, str]:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            f.write(data)
            f.flush()
            args = [sys.executable, str(EXAMPLES / "consume_message.py")] + ([f.name] if as_file else [])
            done = subprocess.run(args, input=None if as_file else data, capture_output=True,
                                  env=env_with_sdk(**env), timeout=30)
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    def test_an_inline_message_from_a_file_and_from_stdin(self) -> None:
        data = queue_message(b'{"id":"evt_1"}', claim=False)
        for as_file in (True, False):
            code, out, err = self.consume(data, as_file=as_file)
            self.assertEqual(code, 0, err)
            self.assertEqual(out.strip(),
                             f"hook {HOOK_ID} key=acme:stripe:evt_1#replay:job-1 trusted=True bytes=14")

    def test_a_claim_is_redeemed_and_failures_map_to_exit_codes(self) -> None:
        big = b"z" * 200000
        seen = []

        class Claims(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                seen.append((self.path, self.headers.get("authorization")))
                self.send_response(200)
                self.send_header("content-length", str(len(big)))
                self.end_headers()
                self.wfile.write(big)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Claims)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}"
            code, out, err = self.consume(queue_message(big, claim=True), ANKUSA_CLAIM_URL=url,
                                          ANKUSA_CLAIM_TOKEN="reader-token-0123456789")
            self.assertEqual(code, 0, err)
            self.assertIn("bytes=200000", out)
            self.assertEqual(seen, [(f"/v1/claims/acme/{HOOK_ID.replace('-', '')}",
                                     "Bearer reader-token-0123456789")])
            # Other bytes than the message's digest: permanent.
            code, _, err = self.consume(queue_message(b"y" * 200000, claim=True), ANKUSA_CLAIM_URL=url)
            self.assertEqual((code, err.strip()), (65, "ClaimIntegrityError: claim_integrity"))
        finally:
            server.shutdown()
            server.server_close()
        code, _, err = self.consume(queue_message(big, claim=True),
                                    ANKUSA_CLAIM_URL=f"http://127.0.0.1:{free_port()}")
        self.assertEqual((code, err.strip()), (75, "ClaimCheckUnavailableError: claim_check_unavailable"))
        code, _, err = self.consume(b"{not json")
        self.assertEqual((code, err.strip()), (65, "MessageDecodeError: invalid_json"))

    def test_a_lifecycle_message(self) -> None:
        event = json.dumps({"specversion": "1.0", "id": "019a8c3e-5f00-7a21-9b3c-1d2e3f405163",
                            "source": "/ankusa/node-0", "type": "io.ankusa.replay.paused",
                            "time": "2025-12-04T12:05:00.000Z", "subject": "job-3",
                            "data": {"job": "job-3"}}).encode()
        code, out, err = self.consume(queue_message(event, claim=False, source_id="ankusa:lifecycle"))
        self.assertEqual(code, 0, err)
        self.assertEqual(out.strip(), "lifecycle io.ankusa.replay.paused subject=job-3 "
                                      "id=019a8c3e-5f00-7a21-9b3c-1d2e3f405163")


class DocsSectionTest(unittest.TestCase):
    def test_the_code_blocks_are_the_example_files(self) -> None:
        text = (SDK_ROOT.parent.parent / "docs" / "sdk.md").read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        found = []
        i = 0
        while i < len(lines):
            line = lines[i].strip()
            if line.startswith("<!-- example: ") and line.endswith(" -->"):
                rel = line[len("<!-- example: "):-len(" -->")]
                self.assertTrue(lines[i + 1].startswith("```"), f"a code block follows {rel}")
                end = i + 2
                while not lines[end].startswith("```"):
                    end += 1
                block = "".join(lines[i + 2:end])
                path = SDK_ROOT.parent.parent / rel
                self.assertEqual(block, path.read_text(encoding="utf-8"), f"{rel} differs from its block")
                found.append(rel)
                i = end
            i += 1
        examples = sorted(f"sdk/python/examples/{p.name}" for p in EXAMPLES.glob("*.py"))
        self.assertEqual(sorted(f for f in found if f.startswith("sdk/python/")), examples)


if __name__ == "__main__":
    unittest.main()
