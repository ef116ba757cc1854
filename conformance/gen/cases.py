#!/usr/bin/env python3
"""Writes the hand-designed conformance case files (conformance/cases/*.json, all but
producer.json, which the gateway's encoder writes).

Signatures and digests are computed here rather than pasted, so a case cannot carry a typo
that makes it pass for the wrong reason; the reference vector of the Standard Webhooks
specification is checked against this signer before anything is written.

    python3 conformance/gen/cases.py          # rewrite the files
    python3 conformance/gen/cases.py --check  # exit 1 when a file differs from what it would write
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claims import claim_ref_cases, redeem_cases  # noqa: E402
from lifecycle import lifecycle_cases  # noqa: E402
from queue_cases import (failure_policy_cases, idempotency_cases, message_cases,  # noqa: E402
                         verification_cases)
from webhook import headers_cases, receive_cases, signature_cases  # noqa: E402

CASES = Path(__file__).resolve().parent.parent / "cases"

FEATURES = {
    "signature": "Standard Webhooks verification: secrets, headers, window, constant-time match, error order",
    "webhook.headers": "The x-ankusa-* delivery headers, the advisory ones never an error",
    "webhook.require_signature": "receive_delivery is closed by default; the signature is judged before the hook id",
    "webhook.receive": "receive_delivery's result on a signed (or explicitly unsigned) delivery",
    "webhook.verification": "The ingest verification of an HTTP delivery (x-ankusa-verification, -flagged)",
    "message.decode": "Queue message v1 decoding: rule order and error codes",
    "message.verification": "The ingest verification of a queue message",
    "trusted": "The trust check: true only for status ok and flagged false",
    "idempotency": "The idempotency key, with and without the replay id",
    "consumer.failure_policy": "Undecodable input is permanent (retryable: false)",
    "claim_ref": "Claim URN parsing",
    "redeem": "Claim redemption over HTTP: digest check and error classes",
    "lifecycle": "Lifecycle and operational CloudEvents, over HTTP or inside a queue message",
    "producer": "Messages the gateway's own encoder writes (generated; CI fails on drift)",
}

OPERATIONS = ["verify_signature", "parse_headers", "receive_delivery", "decode_message", "trusted",
              "idempotency_key", "parse_claim_ref", "redeem_claim", "decode_lifecycle_event"]


def render(doc) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def files():
    gen = "conformance/gen/cases.py"
    out = {
        "signature.json": signature_cases(), "headers.json": headers_cases(), "receive.json": receive_cases(),
        "message.json": message_cases(), "failure_policy.json": failure_policy_cases(),
        "verification.json": verification_cases(), "idempotency.json": idempotency_cases(),
        "claim_ref.json": claim_ref_cases(), "redeem.json": redeem_cases(), "lifecycle.json": lifecycle_cases(),
    }
    docs = {name: render({"generated_by": gen, "cases": cases}) for name, cases in out.items()}
    features = {"version": 1, "operations": OPERATIONS,
                "features": [{"id": k, "description": v} for k, v in FEATURES.items()]}
    return docs, render(features)


def main():
    check = "--check" in sys.argv[1:]
    docs, features = files()
    targets = {CASES / name: text for name, text in docs.items()}
    targets[CASES.parent / "features.json"] = features
    stale = []
    for path, text in targets.items():
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("stale (run python3 conformance/gen/cases.py):\n  " + "\n  ".join(stale), file=sys.stderr)
        sys.exit(1)
    total = sum(len(json.loads(t)["cases"]) for t in docs.values())
    print(f"{'checked' if check else 'wrote'} {len(docs)} case files, {total} cases")


if __name__ == "__main__":
    main()
