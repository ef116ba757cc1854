"""claim_ref.json, redeem.json: claim references and their redemption."""

from common import (CLAIM_ID, DELIVERY_BODY, HOOK_ID, b64, base_message, body_of, case, dec_err, err, msg_input, ok,
                    sha)


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
