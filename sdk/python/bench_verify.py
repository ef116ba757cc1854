#!/usr/bin/env python3
"""Cost of one ``verify_signature`` of a 1 KiB body (one secret, one signature entry): the
median of several timed runs, in microseconds per verify.

    python3 sdk/python/bench_verify.py [--runs 7] [--iterations 2000]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from ankusa import verify_signature  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=2000)
    args = parser.parse_args()

    key = os.urandom(32)
    secret = "whsec_" + base64.b64encode(key).decode()
    body = os.urandom(1024)
    msg_id, ts = "0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d", 1764849600
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": "v1," + base64.b64encode(mac).decode(),
    }
    verify_signature(headers, body, [secret], now=ts)  # it verifies, and warms up

    per_verify = []
    for _ in range(args.runs):
        started = time.perf_counter()
        for _ in range(args.iterations):
            verify_signature(headers, body, [secret], now=ts)
        per_verify.append((time.perf_counter() - started) / args.iterations * 1e6)
    print(
        f"verify_signature: {statistics.median(per_verify):.1f} µs per delivery "
        f"(1 KiB body, 1 secret; median of {args.runs} runs of {args.iterations}; "
        f"Python {sys.version.split()[0]})"
    )


if __name__ == "__main__":
    main()
