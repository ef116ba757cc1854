"""Against the REAL gateway binary (``$ANKUSA_BIN``, default
``~/.cache/ankusa/target/debug/ankusa``): the admin client on the DLQ, replay jobs and the
quarantine pen with a full and a tenant-limited token; the admin API over TLS with a CA
bundle; and the gateway's own signed HTTP delivery accepted by the WSGI receiver.

Skipped when the binary is missing, unless ``ANKUSA_REQUIRE_GATEWAY=1`` (then it fails).
"""

from __future__ import annotations

import json
import tempfile
import threading
import unittest
import uuid
from pathlib import Path
from typing import Any, List
from wsgiref.simple_server import WSGIRequestHandler, make_server

from support import (
    SECRET,
    Gateway,
    free_port,
    gateway_binary,
    gateway_required,
    make_tls,
    openssl,
    wait_for,
)

from ankusa import AdminClient, AdminError, Delivery, is_trusted
from ankusa.wsgi import ReceiverApp

ADMIN_TOKEN = "admin-token-0123456789"
ACME_TOKEN = "acme-ops-token-0123456789"
SINK_SECRET = SECRET


def _skip_reason() -> str:
    return "no gateway binary (set ANKUSA_BIN, or build it: scripts/run)"


def require_gateway(cls: Any) -> Any:
    if gateway_binary() is None and not gateway_required():
        return unittest.skip(_skip_reason())(cls)
    return cls


def config(live_url: str) -> str:
    return f"""
egress: {{allow_http: true, allow_loopback: true}}
dispatch: {{breaker_failures: 0}}
admin:
  tokens:
    - {{token: "{ADMIN_TOKEN}", scopes: ["*"]}}
    - {{token: "{ACME_TOKEN}", scopes: [dlq:read, dlq:write, replays:write, "tenant:acme"]}}
sources:
  dead:
    tenant: acme
    retry: {{base_ms: 20, max_ms: 50, max_attempts: 1}}
    sinks: [{{type: http, url: "http://127.0.0.1:{free_port()}/closed", secret: "{SINK_SECRET}"}}]
  pen:
    verify: {{type: github, secret: "the-source-has-this-secret"}}
    on_verify_failure: quarantine
    sinks: [{{type: log}}]
  live:
    tenant: acme
    sinks: [{{type: http, url: "{live_url}", secret: "{SINK_SECRET}"}}]
"""


class Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@require_gateway
class GatewayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.received: List[Delivery] = []
        cls.receiver = make_server("127.0.0.1", 0, ReceiverApp(cls.received.append, secrets=[SINK_SECRET]),
                                   handler_class=Quiet)
        threading.Thread(target=cls.receiver.serve_forever, daemon=True).start()
        live = f"http://127.0.0.1:{cls.receiver.server_port}/ankusa"
        cls.gw = Gateway(config(live))
        base = f"http://127.0.0.1:{cls.gw.admin}"
        cls.admin = AdminClient(base, ADMIN_TOKEN)
        cls.acme = AdminClient(base, ACME_TOKEN)
        # Three hooks that dead-letter at once (their sink's port is closed).
        for i in range(3):
            status, _ = cls.gw.post("/webhooks/dead", json.dumps({"n": i}).encode(),
                                    {"content-type": "application/json"})
            assert status == 201, status
        wait_for(lambda: len(cls.admin.list_dlq(tenant="acme").entries) == 3,
                 what="three dead letters")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.gw.close()
        cls.receiver.shutdown()
        cls.receiver.server_close()

    def test_dead_letters_typed(self) -> None:
        page = self.admin.list_dlq(tenant="acme", source_id="dead", limit=2)
        self.assertEqual(len(page.entries), 2)
        e = page.entries[0]
        self.assertEqual((e.tenant, e.source_id, e.sink, e.sink_type), ("acme", "dead", 0, "http"))
        self.assertIn(e.error_class, ("permanent", "throttled", "transient"))
        self.assertGreaterEqual(e.attempts, 1)
        self.assertIsNotNone(page.next_cursor)
        rest = self.admin.list_dlq(tenant="acme", source_id="dead", limit=2, cursor=page.next_cursor)
        self.assertEqual(len(rest.entries), 1)
        self.assertEqual(len(list(self.admin.iter_dlq(tenant="acme", limit=1))), 3)

    def test_a_tenant_limited_token(self) -> None:
        self.assertEqual(len(self.acme.list_dlq().entries), 3, "defaults to the token's tenant")
        with self.assertRaises(AdminError) as caught:
            self.acme.list_dlq(tenant="beta")
        e = caught.exception
        self.assertEqual((e.code, e.status, e.scope, e.retryable), ("forbidden", 403, "tenant:beta", False))
        with self.assertRaises(AdminError) as caught:
            AdminClient(f"http://127.0.0.1:{self.gw.admin}", "not-a-known-token-000").list_dlq()
        self.assertEqual((caught.exception.code, caught.exception.status), ("unauthorized", 401))

    def test_replay_jobs(self) -> None:
        job_id = str(uuid.uuid4())
        # rate 1: three rows take seconds to move, so the job is still live to be patched.
        job = self.acme.create_replay(job_id=job_id, source_id="dead", rate=1)
        self.assertEqual((job.id, job.kind, job.rate), (job_id, "dlq", 1))
        self.assertEqual(job.filter.tenant, "acme", "the token's tenant")
        self.assertEqual(self.acme.get_replay(job_id).id, job_id)
        self.assertEqual(self.acme.patch_replay(job_id, "paused").state, "paused")
        self.assertEqual(self.admin.patch_replay(job_id, "cancelled").state, "cancelled")
        with self.assertRaises(AdminError) as caught:
            self.admin.patch_replay(job_id, "running")
        self.assertEqual((caught.exception.code, caught.exception.status), ("invalid_state", 400))
        self.assertIn(job_id, [j.id for j in self.admin.list_replays()])
        with self.assertRaises(AdminError) as caught:
            self.admin.get_replay(str(uuid.uuid4()))
        self.assertEqual((caught.exception.code, caught.exception.status), ("replay_not_found", 404))
        with self.assertRaises(AdminError) as caught:
            self.admin.create_replay(rate=0)
        self.assertEqual((caught.exception.code, caught.exception.field), ("invalid_filter", "rate"))

    def test_the_quarantine_pen(self) -> None:
        status, answer = self.gw.post(
            "/webhooks/pen", b'{"forged":1}',
            {"content-type": "application/json", "x-github-event": "push",
             "x-github-delivery": "d-1", "x-hub-signature-256": "sha256=" + "00" * 32},
        )
        self.assertEqual(status, 202, answer)
        page = wait_for(lambda: (lambda p: p if p.entries else None)(
            self.admin.list_quarantine(source_id="pen")), what="a quarantined hook")
        e = page.entries[0]
        self.assertEqual((e.source_id, e.tenant, e.reason, e.method, e.path, e.url_tenant),
                         ("pen", "default", "no_matching_signature", "POST", "/webhooks/pen", False))
        self.assertGreater(e.size, 0)
        whole = self.admin.list_quarantine()
        self.assertEqual(whole.total, len(whole.entries))

    def test_the_gateway_signs_what_the_receiver_accepts(self) -> None:
        body = b'{"id":"evt_live","amount":42}'
        status, _ = self.gw.post("/webhooks/live", body, {"content-type": "application/json"})
        self.assertEqual(status, 201)
        wait_for(lambda: self.received, what="the delivery at the receiver")
        d = self.received[0]
        self.assertEqual((d.body, d.signed, d.source_id, d.tenant), (body, True, "live", "acme"))
        self.assertEqual(d.content_type, "application/json")
        self.assertIsNotNone(d.received_at)
        self.assertIsNotNone(d.body_sha256)
        self.assertEqual(d.verification.status if d.verification else None, "skipped")
        self.assertFalse(is_trusted(d))


@require_gateway
@unittest.skipUnless(openssl(), "openssl CLI not found: the admin TLS test needs it to make certificates")
class GatewayAdminTlsTest(unittest.TestCase):
    def test_the_admin_api_over_tls_with_a_ca_bundle(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            ca, cert, key = make_tls(Path(d))
            gw = Gateway(f'admin:\n  tokens: [{{token: "{ADMIN_TOKEN}", scopes: ["*"]}}]\nsources: {{}}\n',
                         env={"ANKUSA_ADMIN_TLS_CERT_FILE": str(cert), "ANKUSA_ADMIN_TLS_KEY_FILE": str(key)})
            try:
                trusted = AdminClient(f"https://localhost:{gw.admin}", ADMIN_TOKEN, ca_file=str(ca))
                self.assertEqual(trusted.list_dlq().entries, [])
                self.assertEqual(trusted.list_quarantine().total, 0)
                untrusted = AdminClient(f"https://localhost:{gw.admin}", ADMIN_TOKEN)
                with self.assertRaises(AdminError) as caught:
                    untrusted.list_dlq()
                self.assertEqual((caught.exception.code, caught.exception.retryable), ("transport", True))
                plain = AdminClient(f"http://127.0.0.1:{gw.admin}", ADMIN_TOKEN)
                with self.assertRaises(AdminError) as caught:
                    plain.list_dlq()
                self.assertEqual((caught.exception.code, caught.exception.status), ("tls_required", 400))
            finally:
                gw.close()


if __name__ == "__main__":
    unittest.main()
