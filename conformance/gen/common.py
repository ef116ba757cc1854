"""Constants and helpers the case modules share: the signer, bodies, expectations."""

import base64
import hashlib
import hmac

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
