"""signature.json, headers.json, receive.json: the HTTP delivery side."""

import copy

from common import (DELIVERY_BODY, HOOK_ID, OTHER_SECRET, PARSED_FULL, REF_BODY, REF_ID, REF_SECRET, REF_SIG,
                    REF_TS, SECRET, TS, b64, case, delivery_headers, err, ok, sha, sig_err, sign)


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
