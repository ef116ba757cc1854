#!/usr/bin/env python3
"""Writes the hand-designed conformance case files (conformance/cases/*.json, all but
producer.json, which the gateway's encoder writes).

Signatures and digests are computed here rather than pasted, so a case cannot carry a typo
that makes it pass for the wrong reason; the reference vector of the Standard Webhooks
specification is checked against this signer before anything is written.

    python3 conformance/gen/cases.py          # rewrite the files
    python3 conformance/gen/cases.py --check  # exit 1 when a file differs from what it would write
"""

import base64
import copy
import hashlib
import hmac
import json
import sys
from pathlib import Path

CASES = Path(__file__).resolve().parent.parent / "cases"

# The Standard Webhooks reference vector (feature inventory 2.18).
REF_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
REF_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
REF_TS = 1614265330
REF_BODY = '{"test": 2432232314}'
REF_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

HOOK_ID = "0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d"
CLAIM_ID = "0192f1c07a3e7b118c2d3e4f5a6b7c8d"
SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(bytes(range(100, 132))).decode()
TS = 1764849600


def key_bytes(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[len("whsec_"):], validate=True)
    return secret.encode()


def sign(secret: str, msg_id: str, ts, body: bytes) -> str:
    mac = hmac.new(key_bytes(secret), f"{msg_id}.{ts}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def body_of(data: bytes) -> dict:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": b64(data)}


def ok(value):
    return {"ok": value}


def err(cls, code, retryable=False, field="__unset__", status="__unset__"):
    e = {"class": cls, "code": code, "retryable": retryable}
    if field != "__unset__":
        e["field"] = field
    if status != "__unset__":
        e["status"] = status
    return {"error": e}


def case(cid, feature, operation, inp, expect, note=None):
    c = {"id": cid, "feature": feature, "operation": operation, "input": inp, "expect": expect}
    if note:
        c["note"] = note
    return c


def sig_err(code, field=None, status="__unset__"):
    return err("InvalidSignatureError", code, False, field, status)


# ---------------------------------------------------------------------------------------------
# signature.json


def signature_cases():
    assert sign(REF_SECRET, REF_ID, REF_TS, REF_BODY.encode()) == REF_SIG, "signer is wrong"
    ref_headers = {"webhook-id": REF_ID, "webhook-timestamp": str(REF_TS), "webhook-signature": REF_SIG}
    ref = {"headers": ref_headers, "body": {"text": REF_BODY}, "secrets": [REF_SECRET], "now": REF_TS}
    out = []

    def add(cid, inp, expect, note=None):
        out.append(case("signature." + cid, "signature", "verify_signature", inp, expect, note))

    def with_(**kw):
        i = copy.deepcopy(ref)
        i.update(kw)
        return i

    def hdrs(**kw):
        h = dict(ref_headers)
        for k, v in kw.items():
            name = k.replace("_", "-")
            if v is None:
                h.pop(name, None)
            else:
                h[name] = v
        return h

    good = ok({"id": REF_ID, "timestamp": REF_TS})
    add("ok.reference", ref, good, "the Standard Webhooks specification's own vector")
    add("ok.window_edge_late", with_(now=REF_TS + 300), good, "|now - ts| = 300 passes")
    add("ok.window_edge_early", with_(now=REF_TS - 300), good)
    add("ok.header_names_any_case",
        with_(headers={"Webhook-Id": REF_ID, "WEBHOOK-TIMESTAMP": str(REF_TS), "webhook-Signature": REF_SIG}), good)
    add("ok.several_entries", with_(headers=hdrs(webhook_signature="v2,abc v1,bm90IGl0 " + REF_SIG)), good,
        "entries that are not v1 or do not match are skipped")
    add("ok.second_secret", with_(secrets=[OTHER_SECRET, REF_SECRET]), good, "rotation: any secret may match")
    add("ok.custom_tolerance", with_(now=REF_TS + 10, tolerance_s=10), good)
    raw_secret = "a plain shared secret"
    add("ok.raw_string_secret",
        with_(secrets=[raw_secret],
              headers=hdrs(webhook_signature=sign(raw_secret, REF_ID, REF_TS, REF_BODY.encode()))),
        good, "a secret without whsec_ is its own UTF-8 bytes")
    binary = bytes(range(256)) * 4
    add("ok.binary_body_1kib",
        with_(body={"base64": b64(binary)}, headers=hdrs(webhook_signature=sign(SECRET, REF_ID, REF_TS, binary)),
              secrets=[SECRET]), good)
    add("ok.empty_body",
        with_(body={"text": ""}, headers=hdrs(webhook_signature=sign(SECRET, REF_ID, REF_TS, b"")), secrets=[SECRET]),
        good)
    add("ok.negative_timestamp_window",
        with_(headers=hdrs(webhook_timestamp="-5", webhook_signature=sign(REF_SECRET, REF_ID, -5, REF_BODY.encode())),
              now=0), ok({"id": REF_ID, "timestamp": -5}), "an optionally signed integer")

    add("invalid_secret.none", with_(secrets=[]), sig_err("invalid_secret", "secrets"))
    add("invalid_secret.empty_string", with_(secrets=[""]), sig_err("invalid_secret", "secrets"))
    add("invalid_secret.bad_base64", with_(secrets=["whsec_!!!not base64"]), sig_err("invalid_secret", "secrets"))
    add("invalid_secret.unpadded_base64", with_(secrets=["whsec_" + b64(bytes(range(31))).rstrip("=")]),
        sig_err("invalid_secret", "secrets"), "base64 must be padded and canonical, as the gateway requires")
    add("invalid_secret.whsec_nothing", with_(secrets=["whsec_"]), sig_err("invalid_secret", "secrets"))
    add("invalid_secret.one_bad_of_two", with_(secrets=[REF_SECRET, "whsec_%%%"]), sig_err("invalid_secret", "secrets"),
        "a configuration error is never hidden by another secret that works")
    add("invalid_secret.before_missing_header", with_(secrets=[], headers={}), sig_err("invalid_secret", "secrets"))

    add("missing_header.id", with_(headers=hdrs(webhook_id=None)), sig_err("missing_header", "webhook-id"))
    add("missing_header.timestamp", with_(headers=hdrs(webhook_timestamp=None)),
        sig_err("missing_header", "webhook-timestamp"))
    add("missing_header.signature", with_(headers=hdrs(webhook_signature=None)),
        sig_err("missing_header", "webhook-signature"))
    add("missing_header.all_names_id_first", with_(headers={}), sig_err("missing_header", "webhook-id"))
    add("missing_header.empty_id", with_(headers=hdrs(webhook_id="")), sig_err("missing_header", "webhook-id"))
    add("missing_header.before_invalid_timestamp",
        with_(headers=hdrs(webhook_timestamp="soon", webhook_signature=None)),
        sig_err("missing_header", "webhook-signature"), "all three headers are looked for first")

    add("invalid_timestamp.word", with_(headers=hdrs(webhook_timestamp="yesterday")),
        sig_err("invalid_timestamp", "webhook-timestamp"))
    add("invalid_timestamp.fraction", with_(headers=hdrs(webhook_timestamp="1614265330.5")),
        sig_err("invalid_timestamp", "webhook-timestamp"))
    add("invalid_timestamp.hex", with_(headers=hdrs(webhook_timestamp="0x5f")),
        sig_err("invalid_timestamp", "webhook-timestamp"))

    add("out_of_tolerance.late", with_(now=REF_TS + 301), sig_err("timestamp_out_of_tolerance", "webhook-timestamp"))
    add("out_of_tolerance.early", with_(now=REF_TS - 301), sig_err("timestamp_out_of_tolerance", "webhook-timestamp"))
    add("out_of_tolerance.custom", with_(now=REF_TS + 11, tolerance_s=10),
        sig_err("timestamp_out_of_tolerance", "webhook-timestamp"))
    add("out_of_tolerance.before_bad_signature",
        with_(now=REF_TS + 3600, headers=hdrs(webhook_signature="v1,AAAA")),
        sig_err("timestamp_out_of_tolerance", "webhook-timestamp"))

    nms = sig_err("no_matching_signature", "webhook-signature")
    add("no_match.wrong_secret", with_(secrets=[OTHER_SECRET]), nms)
    add("no_match.body_byte_changed", with_(body={"text": REF_BODY.replace("4", "5", 1)}), nms)
    add("no_match.body_trailing_newline", with_(body={"text": REF_BODY + "\n"}), nms,
        "the raw bytes are signed: a re-serialised body fails")
    add("no_match.id_changed", with_(headers=hdrs(webhook_id=REF_ID + "x")), nms)
    add("no_match.timestamp_changed", with_(headers=hdrs(webhook_timestamp=str(REF_TS + 1)), now=REF_TS + 1), nms)
    add("no_match.only_other_versions", with_(headers=hdrs(webhook_signature=REF_SIG.replace("v1,", "v2,"))), nms)
    add("no_match.no_comma", with_(headers=hdrs(webhook_signature=REF_SIG.replace("v1,", "v1"))), nms)
    add("no_match.garbage_entry", with_(headers=hdrs(webhook_signature="v1,!!!! v1,")), nms)
    add("no_match.truncated_signature", with_(headers=hdrs(webhook_signature=REF_SIG[:-4])), nms)
    add("no_match.raw_secret_not_base64_decoded",
        with_(secrets=["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]), nms,
        "without whsec_ the string is used as bytes, so the reference key does not match")
    return out


# ---------------------------------------------------------------------------------------------
# headers.json, receive.json


def delivery_headers(body: bytes, *, secret=SECRET, ts=TS, hook_id=HOOK_ID, extra=None, drop=()):
    h = {
        "content-type": "application/json",
        "x-ankusa-id": hook_id,
        "x-ankusa-source": "stripe",
        "x-ankusa-idempotency-key": "acme:stripe:evt_1",
        "x-ankusa-verification": "ok",
        "x-ankusa-received-at": "1764849599123",
        "x-ankusa-body-sha256": sha(body),
        "x-ankusa-tenant": "acme",
        "x-ankusa-dedupe-key": "evt_1",
        "stripe-signature": "t=1,v1=provider-header-forwarded",
        "webhook-id": hook_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": sign(secret, hook_id, ts, body) if secret else None,
    }
    if extra:
        h.update(extra)
    for d in drop:
        h.pop(d, None)
    return {k: v for k, v in h.items() if v is not None}


DELIVERY_BODY = b'{"id":"evt_1","type":"invoice.paid"}'

PARSED_FULL = {
    "id": HOOK_ID, "source_id": "stripe", "tenant_id": "acme", "tenant": "acme",
    "idempotency_key": "acme:stripe:evt_1", "dedupe_key": "evt_1", "replay_id": None, "ordering_key": None,
    "content_type": "application/json", "verification": {"status": "ok", "flagged": False},
    "received_at": 1764849599123, "body_sha256": sha(DELIVERY_BODY),
}


def headers_cases():
    out = []

    def add(cid, headers, expect, note=None, feature="webhook.headers"):
        out.append(case("headers." + cid, feature, "parse_headers", {"headers": headers}, expect, note))

    full = delivery_headers(DELIVERY_BODY)
    add("full", full, ok(PARSED_FULL))
    add("minimal", {"x-ankusa-id": HOOK_ID},
        ok({"id": HOOK_ID, "source_id": None, "tenant_id": None, "tenant": "default", "idempotency_key": HOOK_ID,
            "dedupe_key": None, "replay_id": None, "ordering_key": None, "content_type": None,
            "verification": None, "received_at": None, "body_sha256": None}),
        "a sender that predates the newer headers: the key falls back to the id")
    add("names_any_case", {"X-Ankusa-Id": HOOK_ID, "X-ANKUSA-SOURCE": "github", "X-Ankusa-Replay-Id": "job-7"},
        ok({"id": HOOK_ID, "source_id": "github", "replay_id": "job-7"}))
    add("replay_and_ordering",
        dict(full, **{"x-ankusa-replay-id": "9b1d2c3e", "x-ankusa-ordering-key": "cus_123"}),
        ok({"replay_id": "9b1d2c3e", "ordering_key": "cus_123", "idempotency_key": "acme:stripe:evt_1"}))
    for label, value in [("word", "yesterday"), ("negative", "-5"), ("fraction", "1.5"), ("too_long", "1" * 17),
                         ("empty", "")]:
        add("advisory.received_at_" + label, dict(full, **{"x-ankusa-received-at": value}),
            ok({"received_at": None, "id": HOOK_ID}), "advisory: malformed is null, never an error")
    for label, value in [("uppercase", sha(DELIVERY_BODY).upper()), ("short", "abc123"), ("not_hex", "z" * 64)]:
        add("advisory.body_sha256_" + label, dict(full, **{"x-ankusa-body-sha256": value}),
            ok({"body_sha256": None, "id": HOOK_ID}))
    add("missing_id", {k: v for k, v in full.items() if k != "x-ankusa-id"},
        err("InvalidDeliveryError", "missing_header", False, "x-ankusa-id", 400))
    add("empty_id", dict(full, **{"x-ankusa-id": ""}),
        err("InvalidDeliveryError", "missing_header", False, "x-ankusa-id", 400))
    return out


def receive_cases():
    out = []
    full = delivery_headers(DELIVERY_BODY)
    body = {"text": DELIVERY_BODY.decode()}

    def add(cid, inp, expect, note=None, feature="webhook.require_signature"):
        out.append(case("receive." + cid, feature, "receive_delivery", inp, expect, note))

    received = dict(PARSED_FULL, signed=True, body=body)
    add("ok.signed", {"headers": full, "body": body, "secrets": [SECRET], "now": TS}, ok(received),
        feature="webhook.receive")
    add("ok.rotation_second_secret", {"headers": full, "body": body, "secrets": [OTHER_SECRET, SECRET], "now": TS},
        ok({"id": HOOK_ID, "signed": True}), feature="webhook.receive")
    add("ok.allow_unsigned", {"headers": delivery_headers(DELIVERY_BODY, secret=None, drop=("webhook-id", "webhook-timestamp")),
                              "body": body, "allow_unsigned": True},
        ok(dict(PARSED_FULL, signed=False, body=body)), "an explicit opt-out accepts an unsigned delivery")
    add("ok.allow_unsigned_with_signature_headers", {"headers": full, "body": body, "allow_unsigned": True},
        ok({"id": HOOK_ID, "signed": False}), "without secrets there is nothing to judge a signature with")
    add("closed.no_secret_no_opt_out", {"headers": full, "body": body, "now": TS},
        sig_err("invalid_secret", "secrets", 401), "an unconfigured receiver refuses every delivery")
    add("closed.empty_secret_list", {"headers": full, "body": body, "secrets": [], "now": TS},
        sig_err("invalid_secret", "secrets", 401))
    add("closed.opt_out_false", {"headers": full, "body": body, "allow_unsigned": False, "now": TS},
        sig_err("invalid_secret", "secrets", 401))
    add("closed.nothing_at_all", {"headers": {}, "body": {"text": ""}}, sig_err("invalid_secret", "secrets", 401))
    add("signature_first.unsigned_without_id",
        {"headers": {"content-type": "application/json"}, "body": body, "secrets": [SECRET], "now": TS},
        sig_err("missing_header", "webhook-id", 401), "not a signed delivery: 401 whatever else it lacks")
    add("signature_first.bad_signature_without_id",
        {"headers": dict(delivery_headers(DELIVERY_BODY, secret=OTHER_SECRET, drop=("x-ankusa-id",))), "body": body,
         "secrets": [SECRET], "now": TS},
        sig_err("no_matching_signature", "webhook-signature", 401))
    add("signature_first.stale_without_id",
        {"headers": delivery_headers(DELIVERY_BODY, drop=("x-ankusa-id",)), "body": body, "secrets": [SECRET],
         "now": TS + 301},
        sig_err("timestamp_out_of_tolerance", "webhook-timestamp", 401))
    add("signed_without_id", {"headers": delivery_headers(DELIVERY_BODY, drop=("x-ankusa-id",)), "body": body,
                              "secrets": [SECRET], "now": TS},
        err("InvalidDeliveryError", "missing_header", False, "x-ankusa-id", 400),
        "400 only for a signed delivery with no x-ankusa-id")
    add("opt_out_without_id", {"headers": {"content-type": "text/plain"}, "body": {"text": "hi"}, "allow_unsigned": True},
        err("InvalidDeliveryError", "missing_header", False, "x-ankusa-id", 400))
    add("secrets_win_over_opt_out",
        {"headers": delivery_headers(DELIVERY_BODY, secret=OTHER_SECRET), "body": body, "secrets": [SECRET],
         "allow_unsigned": True, "now": TS},
        sig_err("no_matching_signature", "webhook-signature", 401), "with a secret the signature is always judged")
    add("id_mismatch",
        {"headers": dict(full, **{"x-ankusa-id": "0192f1c0-0000-7000-8000-000000000000"}), "body": body,
         "secrets": [SECRET], "now": TS},
        err("InvalidDeliveryError", "id_mismatch", False, "x-ankusa-id", 400),
        "the signature covers webhook-id only: an x-ankusa-id that differs is not the signed hook")
    add("tampered_body", {"headers": full, "body": {"text": DELIVERY_BODY.decode().replace("paid", "void")},
                          "secrets": [SECRET], "now": TS},
        sig_err("no_matching_signature", "webhook-signature", 401))
    add("advisory_headers_never_fail",
        {"headers": dict(full, **{"x-ankusa-received-at": "soon", "x-ankusa-body-sha256": "nope"}), "body": body,
         "secrets": [SECRET], "now": TS},
        ok({"id": HOOK_ID, "received_at": None, "body_sha256": None, "signed": True}), feature="webhook.receive")
    return out


# ---------------------------------------------------------------------------------------------
# message.json, failure_policy.json, verification.json, idempotency.json


def base_message(body=DELIVERY_BODY, **over):
    m = {
        "v": 1, "id": HOOK_ID, "source_id": "stripe", "tenant_id": "acme", "received_at": 1737500000000,
        "content_type": "application/json", "size": len(body), "sha256": sha(body), "dedupe_key": "evt_1",
        "replay_id": None, "idempotency_key": "acme:stripe:evt_1", "verification": {"status": "ok", "flagged": False},
        "headers": {"x-github-event": "push"}, "instance": "ankusa-0", "region": "eu-west-1",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": None,
        "body_base64": b64(body),
    }
    for k, v in over.items():
        if v is ...:
            m.pop(k, None)
        else:
            m[k] = v
    return m


def decoded(m, body=DELIVERY_BODY):
    """The `ok` of decode_message for a message built by base_message."""
    out = {k: m.get(k) for k in ("v", "id", "source_id", "tenant_id", "received_at", "content_type", "size", "sha256",
                                 "dedupe_key", "replay_id", "instance", "region", "traceparent", "tracestate",
                                 "ordering_key")}
    out["tenant"] = m.get("tenant_id") or "default"
    out["idempotency_key"] = m.get("idempotency_key") or m["id"]
    out["verification"] = m.get("verification")
    out["headers"] = m.get("headers") or {}
    if m.get("claim") is not None:
        _, _, _, _, tenant, claim_id = m["claim"].split(":")
        out["body"] = None
        out["claim"] = {"urn": m["claim"], "tenant": tenant, "claim_id": claim_id}
    else:
        out["body"] = body_of(body)
        out["claim"] = None
    return out


def msg_input(m):
    return {"message": {"json": m}}


def dec_err(code, field="__unset__"):
    return err("MessageDecodeError", code, False, field)


def message_cases():
    out = []

    def add(cid, inp, expect, note=None, feature="message.decode"):
        out.append(case("message." + cid, feature, "decode_message", inp, expect, note))

    m = base_message()
    add("ok.inline", msg_input(m), ok(decoded(m)))
    m2 = base_message(v=2, later_field={"added": "in v2"}, another=[1, 2])
    add("ok.v2_additive", msg_input(m2), ok(decoded(m2)), "v2 = v1 + additive fields; unknown keys are ignored")
    mt = base_message(tenant_id=None, idempotency_key=HOOK_ID, dedupe_key=None)
    add("ok.default_tenant", msg_input(mt), ok(decoded(mt)))
    mn = base_message(idempotency_key=..., headers=..., verification=..., region=..., tracestate=..., traceparent=...)
    add("ok.optional_absent", msg_input(mn), ok(decoded(mn)), "absent optional keys: key = id, headers {}, verification null")
    me = base_message(b"")
    add("ok.empty_body", msg_input(me), ok(decoded(me, b"")))
    binary = bytes(range(256))
    mb = base_message(binary, content_type="application/octet-stream")
    add("ok.binary_body", msg_input(mb), ok(decoded(mb, binary)))
    claim = f"urn:ankusa:claim:v1:acme:{CLAIM_ID}"
    mc = base_message(b"x" * 100000, body_base64=..., claim=claim)
    add("ok.claim", msg_input(mc), ok(decoded(mc)))
    mcn = base_message(b"x" * 100000, body_base64=None, claim=claim)
    add("ok.claim_with_null_inline", msg_input(mcn), ok(decoded(mcn)), "a null key counts as absent")
    md = base_message(b"x" * 100000, body_base64=..., claim=f"urn:ankusa:claim:v1:default:{CLAIM_ID}", tenant_id=None)
    add("ok.claim_default_tenant", msg_input(md), ok(decoded(md)))
    mu = base_message(b"y" * 10, body_base64=..., claim="urn:ankusa:claim:v1:acme:01JDXYZ8ABCDEFGHJKMNPQRSTV")
    add("ok.claim_ulid", msg_input(mu), ok(decoded(mu)))
    mo = base_message(ordering_key="cus_123", replay_id="9b1d2c3e")
    add("ok.ordering_and_replay", msg_input(mo), ok(decoded(mo)))
    add("ok.whitespace_and_key_order",
        {"message": {"text": "\n  " + json.dumps(dict(reversed(list(m.items()))), indent=2) + "\n"}}, ok(decoded(m)))

    add("invalid_json.truncated", {"message": {"text": json.dumps(m)[:40]}}, dec_err("invalid_json"))
    add("invalid_json.empty", {"message": {"text": ""}}, dec_err("invalid_json"))
    add("invalid_json.not_utf8", {"message": {"base64": b64(b"\xff\xfe{}")}}, dec_err("invalid_json"))
    add("invalid_json.trailing_garbage", {"message": {"text": json.dumps(m) + "}"}}, dec_err("invalid_json"))
    for label, text in [("array", "[1,2]"), ("number", "1"), ("null", "null"), ("string", '"v1"')]:
        add("not_an_object." + label, {"message": {"text": text}}, dec_err("not_an_object"))

    for label, v in [("three", 3), ("zero", 0), ("string", "1"), ("fraction", 1.5), ("null", None), ("negative", -1)]:
        add("unsupported_version." + label, msg_input(base_message(v=v)), dec_err("unsupported_version", "v"))
    add("unsupported_version.absent", msg_input(base_message(v=...)), dec_err("unsupported_version", "v"))
    add("unsupported_version.before_invalid_field", msg_input(base_message(v=9, id=5)),
        dec_err("unsupported_version", "v"))

    fields = [
        ("id_absent", {"id": ...}, "id"), ("id_empty", {"id": ""}, "id"), ("id_number", {"id": 5}, "id"),
        ("source_id_absent", {"source_id": ...}, "source_id"), ("source_id_null", {"source_id": None}, "source_id"),
        ("received_at_negative", {"received_at": -1}, "received_at"),
        ("received_at_string", {"received_at": "1737500000000"}, "received_at"),
        ("received_at_fraction", {"received_at": 1.5}, "received_at"),
        ("size_absent", {"size": ...}, "size"), ("size_negative", {"size": -36}, "size"),
        ("sha256_uppercase", {"sha256": sha(DELIVERY_BODY).upper()}, "sha256"),
        ("sha256_short", {"sha256": "abcd"}, "sha256"), ("sha256_absent", {"sha256": ...}, "sha256"),
        ("tenant_id_number", {"tenant_id": 7}, "tenant_id"), ("content_type_object", {"content_type": {}}, "content_type"),
        ("dedupe_key_number", {"dedupe_key": 1}, "dedupe_key"), ("replay_id_bool", {"replay_id": True}, "replay_id"),
        ("idempotency_key_number", {"idempotency_key": 3}, "idempotency_key"),
        ("instance_array", {"instance": []}, "instance"), ("region_number", {"region": 1}, "region"),
        ("traceparent_number", {"traceparent": 1}, "traceparent"),
        ("tracestate_number", {"tracestate": 1}, "tracestate"),
        ("ordering_key_number", {"ordering_key": 1}, "ordering_key"),
        ("headers_array", {"headers": ["a"]}, "headers"), ("headers_value_number", {"headers": {"a": 1}}, "headers"),
        ("verification_string", {"verification": "ok"}, "verification"),
        ("verification_status_number", {"verification": {"status": 1, "flagged": False}}, "verification"),
        ("verification_flagged_string", {"verification": {"status": "ok", "flagged": "false"}}, "verification"),
        ("verification_flagged_absent", {"verification": {"status": "ok"}}, "verification"),
    ]
    for label, over, field in fields:
        add("invalid_field." + label, msg_input(base_message(**over)), dec_err("invalid_field", field))
    add("invalid_field.order_id_before_sha256", msg_input(base_message(id=..., sha256="x")),
        dec_err("invalid_field", "id"))
    add("invalid_field.order_size_before_sha256", msg_input(base_message(size=-1, sha256="x")),
        dec_err("invalid_field", "size"))
    add("invalid_field.before_body", msg_input(base_message(region=5, body_base64=..., claim=...)),
        dec_err("invalid_field", "region"))

    add("ambiguous_body", msg_input(base_message(claim=claim)), dec_err("ambiguous_body"))
    add("missing_body.absent", msg_input(base_message(body_base64=...)), dec_err("missing_body"))
    add("missing_body.both_null", msg_input(base_message(body_base64=None, claim=None)), dec_err("missing_body"))
    for label, value in [("symbols", "!!!!"), ("unpadded", "YQ"),
                         ("url_alphabet", "-_-_"), ("number", 12), ("inner_space", "eyJp ZCI6")]:
        mm = base_message(body_base64=value)
        add("invalid_body_base64." + label, msg_input(mm), dec_err("invalid_body_base64", "body_base64"))
    for label, value in [
        ("wrong_version", f"urn:ankusa:claim:v2:acme:{CLAIM_ID}"), ("no_claim_id", "urn:ankusa:claim:v1:acme"),
        ("extra_part", f"urn:ankusa:claim:v1:acme:{CLAIM_ID}:x"), ("empty_tenant", f"urn:ankusa:claim:v1::{CLAIM_ID}"),
        ("bad_char", f"urn:ankusa:claim:v1:ac/me:{CLAIM_ID}"), ("long_id", "urn:ankusa:claim:v1:acme:" + "a" * 65),
        ("not_urn", "https://claims.example.com/x"), ("number", 42), ("uppercase_prefix", f"URN:ANKUSA:CLAIM:V1:acme:{CLAIM_ID}"),
    ]:
        mm = base_message(b"z" * 10, body_base64=..., claim=value)
        add("invalid_claim_ref." + label, msg_input(mm), dec_err("invalid_claim_ref", "claim"))
    add("size_mismatch", msg_input(base_message(size=len(DELIVERY_BODY) + 1)), dec_err("size_mismatch", "size"))
    add("size_mismatch.before_integrity", msg_input(base_message(size=1, sha256="0" * 64)),
        dec_err("size_mismatch", "size"))
    add("integrity", msg_input(base_message(sha256=sha(b"another body"))), dec_err("integrity", "sha256"))
    add("integrity.body_swapped", msg_input(base_message(body_base64=b64(DELIVERY_BODY.replace(b"paid", b"void")))),
        dec_err("integrity", "sha256"), "same length, other bytes")
    add("tenant_mismatch", msg_input(base_message(b"z" * 10, body_base64=...,
                                                  claim=f"urn:ankusa:claim:v1:other:{CLAIM_ID}")),
        dec_err("tenant_mismatch", "claim"))
    add("tenant_mismatch.default_tenant", msg_input(base_message(b"z" * 10, body_base64=..., tenant_id=None,
                                                                 claim=f"urn:ankusa:claim:v1:acme:{CLAIM_ID}")),
        dec_err("tenant_mismatch", "claim"))
    return out


def failure_policy_cases():
    out = []
    m = json.dumps(base_message(), separators=(",", ":"))

    def add(cid, inp, expect, note):
        out.append(case("failure_policy." + cid, "consumer.failure_policy", "decode_message", inp, expect, note))

    add("empty", {"message": {"text": ""}}, dec_err("invalid_json"), "an empty message is dead-lettered, not requeued")
    add("truncated", {"message": {"text": m[: len(m) // 2]}}, dec_err("invalid_json"), "the same bytes fail again")
    add("non_object", {"message": {"text": "[]"}}, dec_err("not_an_object"), "never retryable")
    add("future_version", msg_input(base_message(v=3)), dec_err("unsupported_version", "v"),
        "a newer producer than this SDK: upgrade, then replay")
    add("corrupt_body", msg_input(base_message(sha256=sha(b"x"))), dec_err("integrity", "sha256"),
        "a body that does not match its digest is never handed on")
    out.append(case("failure_policy.lifecycle_truncated", "consumer.failure_policy", "decode_lifecycle_event",
                    {"event": {"text": '{"specversion":"1.0","id":'}},
                    err("LifecycleEventError", "invalid_json", False), "same policy for lifecycle events"))
    return out


def verification_cases():
    out = []

    def dm(cid, verification, expect_v, trusted, feature="message.verification"):
        over = {"verification": verification} if verification is not ... else {"verification": ...}
        mm = base_message(**over)
        out.append(case(f"verification.message.{cid}", feature, "decode_message", msg_input(mm),
                        ok({"verification": expect_v})))
        out.append(case(f"verification.trusted.message.{cid}", "trusted", "trusted", msg_input(mm), ok(trusted)))

    dm("ok", {"status": "ok", "flagged": False}, {"status": "ok", "flagged": False}, True)
    dm("flagged", {"status": "ok", "flagged": True}, {"status": "ok", "flagged": True}, False)
    dm("failed_flagged", {"status": "failed", "flagged": True}, {"status": "failed", "flagged": True}, False)
    dm("skipped", {"status": "skipped", "flagged": False}, {"status": "skipped", "flagged": False}, False)
    dm("unknown_status", {"status": "maybe", "flagged": False}, {"status": "maybe", "flagged": False}, False)
    dm("absent", ..., None, False)
    dm("null", None, None, False)

    base = delivery_headers(DELIVERY_BODY)

    def dh(cid, over, expect_v, trusted):
        h = dict(base)
        for k, v in over.items():
            if v is None:
                h.pop(k, None)
            else:
                h[k] = v
        out.append(case(f"verification.headers.{cid}", "webhook.verification", "parse_headers", {"headers": h},
                        ok({"verification": expect_v})))
        out.append(case(f"verification.trusted.headers.{cid}", "trusted", "trusted", {"headers": h}, ok(trusted)))

    dh("ok", {}, {"status": "ok", "flagged": False}, True)
    dh("flagged", {"x-ankusa-verification-flagged": "true"}, {"status": "ok", "flagged": True}, False)
    dh("flagged_any_other_value", {"x-ankusa-verification-flagged": "yes"}, {"status": "ok", "flagged": True}, False)
    dh("flagged_false", {"x-ankusa-verification-flagged": "false"}, {"status": "ok", "flagged": False}, True)
    dh("failed", {"x-ankusa-verification": "failed", "x-ankusa-verification-flagged": "true"},
       {"status": "failed", "flagged": True}, False)
    dh("skipped", {"x-ankusa-verification": "skipped"}, {"status": "skipped", "flagged": False}, False)
    dh("absent_older_node", {"x-ankusa-verification": None}, None, False)
    dh("unknown_status", {"x-ankusa-verification": "OK"}, {"status": "OK", "flagged": False}, False)
    return out


def idempotency_cases():
    out = []

    def add(cid, inp, include, expect):
        inp = dict(inp, include_replay=include)
        out.append(case("idempotency." + cid, "idempotency", "idempotency_key", inp, ok(expect)))

    add("message.dedupe_key", msg_input(base_message()), False, "acme:stripe:evt_1")
    add("message.no_replay_id", msg_input(base_message()), True, "acme:stripe:evt_1")
    add("message.replay", msg_input(base_message(replay_id="9b1d2c3e")), True, "acme:stripe:evt_1#replay:9b1d2c3e")
    add("message.replay_not_included", msg_input(base_message(replay_id="9b1d2c3e")), False, "acme:stripe:evt_1")
    add("message.absent_key_is_id", msg_input(base_message(idempotency_key=..., dedupe_key=None)), False, HOOK_ID)
    h = delivery_headers(DELIVERY_BODY)
    add("headers.key", {"headers": h}, False, "acme:stripe:evt_1")
    add("headers.replay", {"headers": dict(h, **{"x-ankusa-replay-id": "job-1"})}, True, "acme:stripe:evt_1#replay:job-1")
    add("headers.absent_key_is_id", {"headers": {"x-ankusa-id": HOOK_ID}}, True, HOOK_ID)
    return out


# ---------------------------------------------------------------------------------------------
# claim_ref.json, redeem.json


def claim_ref_cases():
    out = []

    def add(cid, ref, expect, note=None):
        out.append(case("claim_ref." + cid, "claim_ref", "parse_claim_ref", {"ref": ref}, expect, note))

    add("ok.hex", f"urn:ankusa:claim:v1:acme:{CLAIM_ID}", ok({"tenant": "acme", "claim_id": CLAIM_ID}))
    add("ok.ulid", "urn:ankusa:claim:v1:acme:01JDXYZ8ABCDEFGHJKMNPQRSTV",
        ok({"tenant": "acme", "claim_id": "01JDXYZ8ABCDEFGHJKMNPQRSTV"}))
    add("ok.default_tenant", f"urn:ankusa:claim:v1:default:{CLAIM_ID}", ok({"tenant": "default", "claim_id": CLAIM_ID}))
    add("ok.dash_underscore", "urn:ankusa:claim:v1:team_a-1:x_y-z", ok({"tenant": "team_a-1", "claim_id": "x_y-z"}))
    add("ok.max_lengths", "urn:ankusa:claim:v1:" + "t" * 64 + ":" + "c" * 64, ok({"tenant": "t" * 64, "claim_id": "c" * 64}))
    bad = err("InvalidClaimRefError", "invalid_claim_ref", False, "claim")
    for label, ref in [
        ("empty", ""), ("wrong_version", f"urn:ankusa:claim:v2:acme:{CLAIM_ID}"),
        ("wrong_namespace", f"urn:other:claim:v1:acme:{CLAIM_ID}"), ("no_claim_id", "urn:ankusa:claim:v1:acme"),
        ("empty_claim_id", "urn:ankusa:claim:v1:acme:"), ("empty_tenant", f"urn:ankusa:claim:v1::{CLAIM_ID}"),
        ("extra_part", f"urn:ankusa:claim:v1:acme:{CLAIM_ID}:more"), ("slash", "urn:ankusa:claim:v1:acme:../../etc"),
        ("dot", "urn:ankusa:claim:v1:acme:a.b"), ("space", "urn:ankusa:claim:v1:ac me:x"),
        ("tenant_too_long", "urn:ankusa:claim:v1:" + "t" * 65 + ":x"), ("id_too_long", "urn:ankusa:claim:v1:acme:" + "c" * 65),
        ("uppercase_prefix", f"URN:ANKUSA:CLAIM:V1:acme:{CLAIM_ID}"), ("trailing_newline", f"urn:ankusa:claim:v1:acme:{CLAIM_ID}\n"),
        ("percent_encoded", "urn:ankusa:claim:v1:acme:%2e%2e"), ("non_ascii", "urn:ankusa:claim:v1:acmé:x"),
    ]:
        add("invalid." + label, ref, bad)
    return out


CLAIM_BODY = b'{"big":"' + b"b" * 200 + b'"}'


def claim_message(body=CLAIM_BODY, tenant="acme", **over):
    urn = f"urn:ankusa:claim:v1:{tenant}:{CLAIM_ID}"
    return base_message(body, body_base64=..., claim=urn, tenant_id=None if tenant == "default" else tenant, **over)


def redeem_cases():
    out = []
    path = f"/v1/claims/acme/{CLAIM_ID}"

    def add(cid, inp, expect, requests=None, note=None):
        e = dict(expect)
        if requests is not None:
            e["requests"] = requests
        out.append(case("redeem." + cid, "redeem", "redeem_claim", inp, e, note))

    m = claim_message()
    hook = {"id": HOOK_ID, "source_id": "stripe", "tenant_id": "acme", "idempotency_key": "acme:stripe:evt_1",
            "verification": {"status": "ok", "flagged": False}, "size": len(CLAIM_BODY), "sha256": sha(CLAIM_BODY),
            "body": body_of(CLAIM_BODY)}
    gw_ok = {"status": 200, "headers": {"content-type": "application/octet-stream"}, "body": body_of(CLAIM_BODY)}
    one_get = [{"method": "GET", "path": path}]
    add("ok", dict(msg_input(m), gateway=gw_ok), ok(hook), one_get)
    token = "reader-token-0123456789"
    add("ok.bearer_token", dict(msg_input(m), gateway=gw_ok, token=token), ok(hook),
        [{"method": "GET", "path": path, "headers": {"authorization": "Bearer " + token}}])
    md = claim_message(tenant="default")
    add("ok.default_tenant", dict(msg_input(md), gateway=gw_ok), ok(dict(hook, tenant_id=None)),
        [{"method": "GET", "path": f"/v1/claims/default/{CLAIM_ID}"}])
    me = claim_message(b"")
    add("ok.empty_body", dict(msg_input(me), gateway={"status": 200, "body": {"text": ""}}),
        ok({"size": 0, "body": {"text": ""}}), one_get)
    mi = base_message()
    add("inline.no_request", dict(msg_input(mi), gateway={"unreachable": True}),
        ok({"id": HOOK_ID, "body": body_of(DELIVERY_BODY), "size": len(DELIVERY_BODY)}), [],
        "an inline body needs no claim gateway")

    integ = err("ClaimIntegrityError", "claim_integrity", False, "sha256")
    add("integrity.other_bytes", dict(msg_input(m), gateway=dict(gw_ok, body=body_of(CLAIM_BODY.replace(b"b", b"c", 1)))),
        integ, one_get)
    add("integrity.longer", dict(msg_input(m), gateway=dict(gw_ok, body=body_of(CLAIM_BODY + b"extra"))), integ, one_get)
    add("integrity.shorter", dict(msg_input(m), gateway=dict(gw_ok, body=body_of(CLAIM_BODY[:-1]))), integ, one_get)

    add("not_found", dict(msg_input(m), gateway={"status": 404, "body": {"json": {"error": "claim_not_found"}}}),
        err("ClaimNotFoundError", "claim_not_found", False, status=404), one_get, "the claim is gone (retention)")
    for st in (401, 403, 400, 410, 204, 206):
        add(f"rejected.{st}", dict(msg_input(m), gateway={"status": st, "body": {"text": ""}}),
            err("ClaimRejectedError", "claim_rejected", False, status=st), one_get)
    for st in (408, 429, 500, 502, 503):
        add(f"unavailable.{st}", dict(msg_input(m), gateway={"status": st, "headers": {"retry-after": "1"},
                                                           "body": {"json": {"error": "store_unavailable"}}}),
            err("ClaimCheckUnavailableError", "claim_check_unavailable", True, status=st), one_get)
    add("unavailable.redirect_not_followed",
        dict(msg_input(m), gateway={"status": 302, "headers": {"location": "http://127.0.0.1:9/elsewhere"}}),
        err("ClaimCheckUnavailableError", "claim_check_unavailable", True, status=302), one_get,
        "a redirect is never followed: a claim body comes only from the gateway that was configured")
    add("unavailable.unreachable", dict(msg_input(m), gateway={"unreachable": True}),
        err("ClaimCheckUnavailableError", "claim_check_unavailable", True, status=None))
    add("unavailable.timeout", dict(msg_input(m), gateway=dict(gw_ok, delay_ms=3000), timeout_ms=300),
        err("ClaimCheckUnavailableError", "claim_check_unavailable", True, status=None))
    add("decode_error_first", dict(msg_input(base_message(b"z" * 10, body_base64=..., claim="urn:ankusa:claim:v1:acme")),
                                   gateway={"unreachable": True}),
        dec_err("invalid_claim_ref", "claim"), [], "a bad reference makes no request")
    return out


# ---------------------------------------------------------------------------------------------
# lifecycle.json

EVENT_BASE = {"specversion": "1.0", "id": "019a8c3e-5f00-7a21-9b3c-1d2e3f405163", "source": "/ankusa/node-0",
              "time": "2025-12-04T12:04:05.007Z", "datacontenttype": "application/json"}

CATALOGUE = [
    ("io.ankusa.source.created", "github", {"source": "github", "after": {"sinks": [{"type": "log"}]}}),
    ("io.ankusa.source.updated", "stripe", {"source": "stripe", "changed": ["sinks"],
                                             "before": {"sinks": [{"type": "http", "secret": "[redacted]"}]},
                                             "after": {"sinks": [{"type": "log"}]}}),
    ("io.ankusa.source.deleted", "legacy", {"source": "legacy", "before": {"sinks": [{"type": "log"}]}}),
    ("io.ankusa.hook.dead_lettered", HOOK_ID, {"hook_id": HOOK_ID, "source": "stripe", "tenant": "acme", "sink": 0,
                                                "sink_name": "sinks[0]", "sink_type": "http", "error_class": "permanent",
                                                "attempts": 1, "replay_id": None}),
    ("io.ankusa.sink.breaker_opened", "stripe/sinks[0]", {"tenant": "acme", "source": "stripe", "sink": 0,
                                                          "sink_type": "http", "period_ms": 5000}),
    ("io.ankusa.sink.breaker_closed", "stripe/sinks[0]", {"tenant": "acme", "source": "stripe", "sink": 0,
                                                          "sink_type": "http", "period_ms": None}),
    ("io.ankusa.replay.succeeded", "job-1", {"job": "job-1", "kind": "dlq", "state": "completed", "moved": 120,
                                             "released": 0, "skipped": 0, "reason": None}),
    ("io.ankusa.replay.failed", "job-2", {"job": "job-2", "kind": "archive", "state": "completed", "moved": 0,
                                          "released": 310, "skipped": 0, "reason": "1 segment(s) failed"}),
    ("io.ankusa.replay.paused", "job-3", {"job": "job-3", "kind": "dlq", "state": "paused", "moved": 40,
                                          "released": 0, "skipped": 0, "reason": "paused itself"}),
    ("io.ankusa.quarantine.held", "github", {"tenant": "acme", "source": "github", "count": 17, "interval_s": 60}),
    ("io.ankusa.quarantine.released", "github", {"tenant": "acme", "source": "github", "count": 17, "interval_s": 60}),
]


def event(etype, subj, payload, **over):
    e = dict(EVENT_BASE, type=etype, subject=subj, data=payload)
    for k, v in over.items():
        if v is ...:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def event_ok(e, known=True):
    return {"id": e.get("id"), "type": e.get("type"), "source": e.get("source"), "time": e.get("time"),
            "subject": e.get("subject"), "specversion": e.get("specversion"),
            "datacontenttype": e.get("datacontenttype"), "traceparent": e.get("traceparent"),
            "data": e.get("data"), "known": known}


def lifecycle_cases():
    out = []

    def add(cid, inp, expect, note=None):
        out.append(case("lifecycle." + cid, "lifecycle", "decode_lifecycle_event", inp, expect, note))

    for etype, subject, data in CATALOGUE:
        e = event(etype, subject, data)
        if etype == "io.ankusa.hook.dead_lettered":
            e["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        add("ok." + etype.removeprefix("io.ankusa."), {"event": {"json": e}}, ok(event_ok(e)))
    fut = event("io.ankusa.future.thing", "x", {"new": True}, extension_attr="kept out")
    add("ok.unknown_type_still_decodes", {"event": {"json": fut}}, ok(event_ok(fut, known=False)),
        "forward compatible: a newer node's event type is not an error")
    nodata = event("io.ankusa.source.deleted", "legacy", None, data=..., subject=..., datacontenttype=...)
    add("ok.optional_absent", {"event": {"json": nodata}}, ok(event_ok(nodata)))
    # As a queue sink carries it: a message v1 of the reserved source, its body the event.
    ev = event(*CATALOGUE[3])
    body = json.dumps(ev, separators=(",", ":")).encode()
    lm = base_message(body, source_id="ankusa:lifecycle", tenant_id="ankusa:lifecycle", idempotency_key=ev["id"],
                      id=ev["id"], dedupe_key=None, headers={}, content_type="application/cloudevents+json")
    add("ok.from_queue_message", msg_input(lm), ok(event_ok(ev)))
    other = base_message(body, content_type="application/cloudevents+json")
    add("not_a_lifecycle_event", msg_input(other),
        err("LifecycleEventError", "not_a_lifecycle_event", False, "source_id"),
        "an event-shaped body of an ordinary source is provider data, not the node's event")
    add("message_decode_error_first", msg_input(dict(lm, sha256=sha(b"x"))), dec_err("integrity", "sha256"))

    le = lambda code, field="__unset__": err("LifecycleEventError", code, False, field)  # noqa: E731
    e0 = event(*CATALOGUE[0])
    add("invalid_json", {"event": {"text": "{"}}, le("invalid_json"))
    add("invalid_json.empty", {"event": {"text": ""}}, le("invalid_json"))
    add("not_an_object", {"event": {"text": "[]"}}, le("not_an_object"))
    add("specversion.old", {"event": {"json": dict(e0, specversion="0.3")}}, le("unsupported_specversion", "specversion"))
    add("specversion.absent", {"event": {"json": event(*CATALOGUE[0], specversion=...)}},
        le("unsupported_specversion", "specversion"))
    add("specversion.number", {"event": {"json": dict(e0, specversion=1.0)}}, le("unsupported_specversion", "specversion"))
    for label, over, field in [
        ("id_absent", {"id": ...}, "id"), ("id_empty", {"id": ""}, "id"), ("source_number", {"source": 1}, "source"),
        ("type_absent", {"type": ...}, "type"), ("type_empty", {"type": ""}, "type"), ("time_absent", {"time": ...}, "time"),
        ("time_number", {"time": 1764849600}, "time"), ("subject_number", {"subject": 5}, "subject"),
        ("datacontenttype_bool", {"datacontenttype": True}, "datacontenttype"),
        ("traceparent_number", {"traceparent": 7}, "traceparent"), ("data_array", {"data": [1]}, "data"),
        ("data_string", {"data": "text"}, "data"),
    ]:
        add("invalid_field." + label, {"event": {"json": event(*CATALOGUE[0], **over)}}, le("invalid_field", field))
    add("invalid_field.order_id_first", {"event": {"json": event(*CATALOGUE[0], id=..., type=...)}},
        le("invalid_field", "id"))
    return out


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
