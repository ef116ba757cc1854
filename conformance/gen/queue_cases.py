"""message.json, failure_policy.json, verification.json, idempotency.json: the queue message."""

import json

from common import (CLAIM_ID, DELIVERY_BODY, HOOK_ID, b64, base_message, case, dec_err, decoded, delivery_headers,
                    err, msg_input, ok, sha)


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
