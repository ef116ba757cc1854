"""Inputs the vectors do not reach: hostile (huge, deep, malformed) bytes never crash or
hang, header shapes of real frameworks, and what the package imports at run time."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import unittest

from support import SDK_ROOT, SECRET, delivery_headers, sign

import ankusa
from ankusa import (
    InvalidSignatureError,
    LifecycleEventError,
    MessageDecodeError,
    decode_lifecycle_event,
    decode_message,
    lifecycle_event_from,
    parse_headers,
    receive_delivery,
    to_hook,
    verify_signature,
)


def message(**fields: object) -> bytes:
    body = b'{"a":1}'
    base = {"v": 1, "id": "h1", "source_id": "s", "received_at": 1, "size": len(body),
            "sha256": "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862",
            "body_base64": base64.b64encode(body).decode()}
    base.update(fields)
    return json.dumps(base).encode()


class HostileInputTest(unittest.TestCase):
    def assert_decode_error(self, data: bytes, code: str) -> None:
        with self.assertRaises(MessageDecodeError) as caught:
            decode_message(data)
        self.assertEqual(caught.exception.code, code)
        self.assertFalse(caught.exception.retryable)

    def test_deep_nesting_huge_numbers_and_non_json_constants(self) -> None:
        started = time.monotonic()
        self.assert_decode_error(b"[" * 200000 + b"]" * 200000, "invalid_json")
        # Past Python's integer digit limit (3.11+) it is not JSON to us; before, not a version.
        with self.assertRaises(MessageDecodeError) as caught:
            decode_message(b'{"v":' + b"9" * 100000 + b"}")
        self.assertIn(caught.exception.code, ("invalid_json", "unsupported_version"))
        self.assert_decode_error(b'{"v":NaN}', "invalid_json")
        self.assert_decode_error(b"\xef\xbb\xbf{}", "invalid_json")  # a BOM is not JSON
        self.assert_decode_error(b'\x00\x00\x00{', "invalid_json")
        self.assert_decode_error(message(v=True), "unsupported_version")
        self.assert_decode_error(message(size=True), "invalid_field")
        self.assert_decode_error(message(received_at=1.0), "invalid_field")
        with self.assertRaises(LifecycleEventError):
            decode_lifecycle_event(b"{" * 100000)
        self.assertLess(time.monotonic() - started, 5)

    def test_a_large_inline_body_decodes(self) -> None:
        import hashlib

        body = bytes(range(256)) * 40000  # ~10 MB
        data = message(size=len(body), sha256=hashlib.sha256(body).hexdigest(),
                       body_base64=base64.b64encode(body).decode())
        m = decode_message(data)
        self.assertEqual(m.body, body)
        self.assertEqual(to_hook(m).body, body)
        self.assert_decode_error(message(body_base64=base64.b64encode(b'{"a":1}').decode() + "\n"),
                                 "invalid_body_base64")
        # Non-canonical trailing bits do not round-trip.
        self.assert_decode_error(message(size=1, sha256="0" * 64, body_base64="QR=="),
                                 "invalid_body_base64")

    def test_signature_inputs(self) -> None:
        body = b"{}"
        headers = delivery_headers(body, ts=1000)
        # A timestamp of a thousand digits is out of the window without converting it.
        long_ts = dict(headers, **{"webhook-timestamp": "9" * 1000})
        with self.assertRaises(InvalidSignatureError) as caught:
            verify_signature(long_ts, body, SECRET, now=1000)
        self.assertEqual(caught.exception.code, "timestamp_out_of_tolerance")
        for ts in ("1_000", " 1000", "1000 ", "١٠٠٠", "0x10", ""):
            with self.assertRaises(InvalidSignatureError) as caught:
                verify_signature(dict(headers, **{"webhook-timestamp": ts}), body, SECRET, now=1000)
            self.assertIn(caught.exception.code, ("invalid_timestamp", "missing_header"), ts)
        # A signature header of a million entries is judged, not choked on.
        junk = " ".join(["v1,AAAA"] * 200000)
        with self.assertRaises(InvalidSignatureError):
            verify_signature(dict(headers, **{"webhook-signature": junk}), body, SECRET, now=1000)
        # Secrets as a generator, as bytes (the raw key), one bad among good.
        self.assertEqual(verify_signature(headers, body, (s for s in [SECRET]), now=1000).timestamp, 1000)
        raw = base64.b64decode(SECRET[len("whsec_"):])
        self.assertEqual(verify_signature(headers, body, raw, now=1000).id, headers["webhook-id"])
        with self.assertRaises(TypeError):
            verify_signature(headers, "text, not bytes", SECRET, now=1000)  # type: ignore[arg-type]
        # The error never echoes a secret.
        with self.assertRaises(InvalidSignatureError) as caught:
            verify_signature(headers, body, ["whsec_%%%secret-value"], now=1000)
        self.assertNotIn("secret-value", str(caught.exception) + repr(caught.exception))

    def test_header_shapes(self) -> None:
        body = b"{}"
        headers = delivery_headers(body)
        pairs = [(k.title().encode(), v.encode()) for k, v in headers.items()]
        self.assertTrue(receive_delivery(pairs, body, secrets=[SECRET]).signed)
        self.assertTrue(receive_delivery(list(headers.items()), body, secrets=SECRET).signed)
        # A repeated name keeps its first value.
        doubled = [("x-ankusa-id", "first"), ("X-Ankusa-Id", "second")]
        self.assertEqual(parse_headers(doubled).id, "first")
        # UTF-8 octets (how a framework hands raw bytes) are read as UTF-8.
        utf8 = [(b"x-ankusa-id", "hé".encode("utf-8")), (b"x-ankusa-source", b"\xff")]
        parsed = parse_headers(utf8)
        self.assertEqual((parsed.id, parsed.source_id), ("hé", "ÿ"))
        with self.assertRaises(TypeError):
            parse_headers([("x-ankusa-id",)])  # type: ignore[list-item]

    def test_a_lifecycle_message_needs_its_source(self) -> None:
        event = json.dumps({"specversion": "1.0", "id": "e1", "source": "/ankusa/n",
                            "type": "io.ankusa.source.created", "time": "t"}).encode()
        import hashlib

        data = message(source_id="ankusa:lifecycle", tenant_id="ankusa:lifecycle", size=len(event),
                       sha256=hashlib.sha256(event).hexdigest(),
                       body_base64=base64.b64encode(event).decode())
        m = decode_message(data)
        self.assertTrue(lifecycle_event_from(m).known)
        self.assertTrue(lifecycle_event_from(to_hook(m)).known)
        with self.assertRaises(LifecycleEventError) as caught:
            lifecycle_event_from(decode_message(message()))
        self.assertEqual((caught.exception.code, caught.exception.field),
                         ("not_a_lifecycle_event", "source_id"))

    def test_a_claim_message_needs_a_client(self) -> None:
        m = decode_message(message(body_base64=None, claim="urn:ankusa:claim:v1:default:abc"))
        with self.assertRaises(ValueError):
            to_hook(m)


class PackageTest(unittest.TestCase):
    def test_runtime_imports_are_the_standard_library_only(self) -> None:
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); before = set(sys.modules);"
            "import ankusa, ankusa.wsgi, ankusa.asgi;"
            "print('\\n'.join(sorted(set(sys.modules) - before)))"
        )
        out = subprocess.run([sys.executable, "-c", code, str(SDK_ROOT / "src")],
                             check=True, capture_output=True, text=True).stdout.split()
        stdlib = getattr(sys, "stdlib_module_names", None)
        if stdlib is None:
            self.skipTest("sys.stdlib_module_names needs Python 3.10")
        foreign = sorted({m.split(".")[0] for m in out} - set(stdlib) - {"ankusa"})
        self.assertEqual(foreign, [], "non-stdlib modules imported at run time")

    def test_every_exported_error_has_the_four_attributes(self) -> None:
        for name in ankusa.__all__:
            obj = getattr(ankusa, name)
            if isinstance(obj, type) and issubclass(obj, ankusa.AnkusaError):
                e = obj("some_code")
                for attr in ("code", "retryable", "field", "status"):
                    self.assertTrue(hasattr(e, attr), f"{name}.{attr}")
        self.assertTrue(ankusa.ClaimCheckUnavailableError("x").retryable)
        self.assertFalse(ankusa.ClaimRejectedError("x").retryable)
        self.assertTrue(ankusa.AdminError("x", status=503).retryable)
        self.assertFalse(ankusa.AdminError("x", status=400).retryable)

    def test_the_signer_of_these_tests_agrees_with_the_specification_vector(self) -> None:
        self.assertEqual(sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
                              1614265330, b'{"test": 2432232314}'),
                         "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")


if __name__ == "__main__":
    unittest.main()
