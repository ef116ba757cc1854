#!/usr/bin/env python3
"""Writes conformance cases signed by the Standard Webhooks REFERENCE libraries, so that the
SDKs are checked against signatures none of our own code computed.

    conformance/crosscheck/generate OUTDIR [--seed N]      # the wrapper sets up the libraries

Run by the wrapper with the Python of a venv holding PyPI ``standardwebhooks`` and with
``--npm-dir`` naming an npm prefix holding npm ``standardwebhooks``. For each body (empty,
1 KiB of binary-looking bytes, unicode JSON) and each secret (random ``whsec_`` keys of 24
and 32 bytes, a raw string), each library signs with its own ``sign``; each signature gives
``verify_signature`` cases (ok at the signing time, a body byte flipped, a signature byte
flipped) and ``receive_delivery`` cases built from them. Every signature is also compared
with an HMAC computed here from the specification, and the run stops if a library disagrees:
a vector is only as good as the signature in it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import random
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
REF = {  # the specification's own vector: both libraries must reproduce it first
    "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "msg_id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "ts": 1614265330,
    "body": b'{"test": 2432232314}',
    "signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


# --- inputs ---------------------------------------------------------------------------------


def utf8_noise(rng: random.Random, size: int) -> bytes:
    """``size`` bytes that look binary (NUL, controls, 2-4 byte sequences, every plane) yet
    are valid UTF-8: both reference libraries turn the payload into a string before signing
    (Python ``sign(..., data: str)``; npm ``Buffer.toString()``, which replaces invalid
    sequences), so bytes that are not UTF-8 cannot be signed faithfully by them."""
    out = bytearray()
    while True:
        cp = rng.choice([rng.randrange(0, 0x80), rng.randrange(0x80, 0x800),
                         rng.randrange(0x800, 0x10000), rng.randrange(0x10000, 0x110000)])
        if 0xD800 <= cp <= 0xDFFF:
            continue
        enc = chr(cp).encode("utf-8")
        if len(out) + len(enc) > size:
            break
        out += enc
    while len(out) < size:
        out.append(rng.randrange(0, 0x80))
    data = bytes(out)
    data.decode("utf-8")
    return data


def bodies(rng: random.Random) -> List[Tuple[str, bytes]]:
    doc = {"id": "evt_" + "".join(rng.choice(ALNUM) for _ in range(12)),
           "text": "ünïcödé — 日本語テキスト — emoji 🎉🚀 — RTL עברית — \u2028 sep",
           "escaped": "quote \" backslash \\ tab \t newline \n nul \u0000",
           "amount": rng.randrange(1, 10**9), "nested": {"list": [1, 2.5, None, True]}}
    return [
        ("empty", b""),
        ("binary_1kib", utf8_noise(rng, 1024)),
        ("unicode_json", json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")),
    ]


def secrets_of(rng: random.Random) -> List[Tuple[str, str, bool]]:
    """(name, secret, raw): random whsec_ keys (24 bytes: unpadded base64; 32: padded) and a
    raw string secret (its own bytes), which each library takes in its own way."""
    raw = "".join(rng.choice(ALNUM + "_-") for _ in range(32))
    return [
        ("whsec_24", "whsec_" + base64.b64encode(rng.randbytes(24)).decode(), False),
        ("whsec_32", "whsec_" + base64.b64encode(rng.randbytes(32)).decode(), False),
        ("raw_string", "raw" + raw, True),
    ]


def spec_signature(secret: str, raw: bool, msg_id: str, ts: int, body: bytes) -> str:
    key = secret.encode() if raw else base64.b64decode(secret[len("whsec_"):], validate=True)
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


# --- the reference libraries --------------------------------------------------------------


def python_library() -> Tuple[str, Any]:
    from importlib.metadata import version

    from standardwebhooks import Webhook

    def sign(req: Dict[str, Any]) -> str:
        # A str secret is base64 (whsec_ stripped); bytes are the raw key.
        hook = Webhook(req["secret"].encode() if req["raw"] else req["secret"])
        when = datetime.fromtimestamp(req["ts"], tz=timezone.utc)
        return hook.sign(req["msg_id"], when, base64.b64decode(req["body"]).decode("utf-8"))

    return f"standardwebhooks=={version('standardwebhooks')} (PyPI)", sign


def npm_sign_all(npm_dir: Path, requests: List[Dict[str, Any]]) -> Tuple[str, List[str]]:
    done = subprocess.run(
        ["node", str(HERE / "sign_npm.js"), str(npm_dir)],
        input=json.dumps(requests).encode(), capture_output=True, check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"crosscheck: the npm signer failed:\n{done.stderr.decode()[-2000:]}")
    answer = json.loads(done.stdout)
    return f"standardwebhooks@{answer['version']} (npm)", answer["signatures"]


# --- cases ----------------------------------------------------------------------------------


def body_of(data: bytes) -> Dict[str, str]:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def flip_body(rng: random.Random, body: bytes) -> bytes:
    if not body:
        return b"\x00"  # nothing to flip in an empty body: one byte more
    i = rng.randrange(len(body))
    return body[:i] + bytes([body[i] ^ (1 << rng.randrange(8))]) + body[i + 1:]


def flip_signature(rng: random.Random, signature: str) -> str:
    mac = bytearray(base64.b64decode(signature[3:]))
    mac[rng.randrange(len(mac))] ^= 1 << rng.randrange(8)
    return "v1," + base64.b64encode(bytes(mac)).decode()


NO_MATCH = {"class": "InvalidSignatureError", "code": "no_matching_signature",
            "retryable": False, "field": "webhook-signature"}


def cases_for(lib: str, rng: random.Random, req: Dict[str, Any], signature: str) -> List[Dict[str, Any]]:
    body = base64.b64decode(req["body"])
    base_id = f"crosscheck.{lib}.{req['secret_name']}.{req['body_name']}"
    headers = {"webhook-id": req["msg_id"], "webhook-timestamp": str(req["ts"]),
               "webhook-signature": signature}
    tampered_sig = dict(headers, **{"webhook-signature": flip_signature(rng, signature)})
    tampered_body = flip_body(rng, body)
    common = {"secrets": [req["secret"]], "now": req["ts"]}
    note = f"signed by {req['library']}"
    out: List[Dict[str, Any]] = [
        {"id": f"{base_id}.verify.ok", "feature": "signature", "operation": "verify_signature",
         "input": {"headers": headers, "body": body_of(body), **common},
         "expect": {"ok": {"id": req["msg_id"], "timestamp": req["ts"]}}, "note": note},
        {"id": f"{base_id}.verify.body_byte_flipped", "feature": "signature",
         "operation": "verify_signature",
         "input": {"headers": headers, "body": body_of(tampered_body), **common},
         "expect": {"error": NO_MATCH}, "note": note},
        {"id": f"{base_id}.verify.signature_byte_flipped", "feature": "signature",
         "operation": "verify_signature",
         "input": {"headers": tampered_sig, "body": body_of(body), **common},
         "expect": {"error": NO_MATCH}, "note": note},
    ]
    delivery = {"x-ankusa-id": req["msg_id"], "x-ankusa-source": "crosscheck",
                "content-type": "application/octet-stream"}
    out += [
        {"id": f"{base_id}.receive.ok", "feature": "webhook.receive", "operation": "receive_delivery",
         "input": {"headers": {**delivery, **headers}, "body": body_of(body), **common},
         "expect": {"ok": {"id": req["msg_id"], "source_id": "crosscheck", "signed": True,
                           "body": body_of(body)}}, "note": note},
        {"id": f"{base_id}.receive.body_byte_flipped", "feature": "webhook.require_signature",
         "operation": "receive_delivery",
         "input": {"headers": {**delivery, **headers}, "body": body_of(tampered_body), **common},
         "expect": {"error": {**NO_MATCH, "status": 401}}, "note": note},
        {"id": f"{base_id}.receive.signature_byte_flipped", "feature": "webhook.require_signature",
         "operation": "receive_delivery",
         "input": {"headers": {**delivery, **tampered_sig}, "body": body_of(body), **common},
         "expect": {"error": {**NO_MATCH, "status": 401}}, "note": note},
    ]
    return out


def rotation_case(lib: str, req: Dict[str, Any], signature: str, other: str) -> Dict[str, Any]:
    """The library's signature verified by a receiver that holds another secret first."""
    return {
        "id": f"crosscheck.{lib}.{req['secret_name']}.{req['body_name']}.verify.rotation",
        "feature": "signature", "operation": "verify_signature",
        "input": {"headers": {"webhook-id": req["msg_id"], "webhook-timestamp": str(req["ts"]),
                              "webhook-signature": signature},
                  "body": body_of(base64.b64decode(req["body"])),
                  "secrets": [other, req["secret"]], "now": req["ts"]},
        "expect": {"ok": {"id": req["msg_id"], "timestamp": req["ts"]}},
        "note": f"signed by {req['library']}; the second secret of a rotation matches",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--npm-dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=None,
                        help="reproduce an earlier run (its seed is in every file written)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(6), "big")
    rng = random.Random(seed)

    py_name, py_sign = python_library()
    ref_req = {"secret": REF["secret"], "raw": False, "msg_id": REF["msg_id"], "ts": REF["ts"],
               "body": base64.b64encode(REF["body"]).decode()}
    requests: List[Dict[str, Any]] = [ref_req]
    for secret_name, secret, raw in secrets_of(rng):
        for body_name, body in bodies(rng):
            requests.append({
                "secret_name": secret_name, "secret": secret, "raw": raw,
                "body_name": body_name, "body": base64.b64encode(body).decode(),
                "msg_id": "msg_" + "".join(rng.choice(ALNUM) for _ in range(27)),
                # Any plausible time; each case verifies with now = its signing time.
                "ts": 1_700_000_000 + rng.randrange(0, 100_000_000),
            })
    npm_name, npm_signatures = npm_sign_all(args.npm_dir, requests)
    py_signatures = [py_sign(r) for r in requests]

    for name, sigs in (("python", py_signatures), ("npm", npm_signatures)):
        if sigs[0] != REF["signature"]:
            raise SystemExit(f"crosscheck: the {name} library does not reproduce the specification's vector")

    args.outdir.mkdir(parents=True, exist_ok=True)
    other = "whsec_" + base64.b64encode(rng.randbytes(32)).decode()
    for lib, library, sigs in (("python", py_name, py_signatures), ("npm", npm_name, npm_signatures)):
        cases: List[Dict[str, Any]] = []
        for req, sig in zip(requests[1:], sigs[1:]):
            req = dict(req, library=library)
            expected = spec_signature(req["secret"], req["raw"], req["msg_id"], req["ts"],
                                      base64.b64decode(req["body"]))
            if sig != expected:
                raise SystemExit(f"crosscheck: {library} signs {req['secret_name']}/{req['body_name']} "
                                 f"differently from the specification (seed {seed})")
            cases += cases_for(lib, rng, req, sig)
            if req["body_name"] == "unicode_json":
                cases.append(rotation_case(lib, req, sig, other))
        path = args.outdir / f"crosscheck_{lib}.json"
        path.write_text(json.dumps({
            "generator": "conformance/crosscheck/generate", "library": library, "seed": seed,
            "cases": cases,
        }, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{path}: {len(cases)} cases signed by {library}")
    print(f"seed {seed} (rerun with --seed {seed} to write the same cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
