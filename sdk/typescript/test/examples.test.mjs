// The examples of examples/ (the code blocks of the SDK docs) run as a user runs them: each is
// started with node, fed deliveries signed here with node:crypto (or queue messages and a mock
// claim port), and judged on its answers and its output.

import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { HOOK_ID, SECRET, deliveryHeaders, freePort, serve, sha256Hex, startNode } from './helpers.mjs';

const EXAMPLES = join(dirname(fileURLToPath(import.meta.url)), '..', 'examples');
const BODY = '{"id":"evt_1","type":"invoice.paid"}';

async function receiverExample(file) {
  const port = await freePort();
  const p = await startNode(join(EXAMPLES, file), {
    env: { PORT: String(port), ANKUSA_WEBHOOK_SECRET: `whsec_${Buffer.from('an old secret, still listed').toString('base64')},${SECRET}` },
    ready: /^listening on /,
  });
  const url = `http://127.0.0.1:${port}/ankusa`;
  try {
    const send = (headers, body = BODY) => fetch(url, { method: 'POST', headers, body });
    let r = await send(deliveryHeaders(BODY));
    assert.equal(r.status, 202);
    await p.waitFor(/^processed acme:stripe:evt_1 from stripe: invoice\.paid$/);
    r = await send(deliveryHeaders(BODY)); // a redelivery: accepted, not processed again
    assert.equal(r.status, 202);
    r = await send(deliveryHeaders(BODY, { secret: `whsec_${Buffer.from('not the sink secret').toString('base64')}` }));
    assert.equal(r.status, 401);
    assert.deepEqual(await r.json(), { error: 'no_matching_signature' });
    r = await send(deliveryHeaders(BODY, { secret: null }));
    assert.equal(r.status, 401);
    assert.deepEqual(await r.json(), { error: 'missing_header' });
    const untrusted = deliveryHeaders(BODY, { id: 'other-id', extra: { 'x-ankusa-verification-flagged': 'true', 'x-ankusa-idempotency-key': 'k2' } });
    assert.equal((await send(untrusted)).status, 202);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(p.lines.filter((l) => l.startsWith('processed')).length, 1, p.lines.join('\n'));
  } finally {
    await p.stop();
  }
}

describe('examples', () => {
  it('receive-fetch.mjs', () => receiverExample('receive-fetch.mjs'));
  it('receive-express.mjs', () => receiverExample('receive-express.mjs'));

  it('consume-message.mjs', async () => {
    const big = Buffer.from(`{"big":"${'b'.repeat(100_000)}"}`);
    const claimId = HOOK_ID.replaceAll('-', '');
    const claims = await serve((req, res) => {
      if (req.headers.authorization !== 'Bearer claim-token-0123456789') return void res.writeHead(401).end();
      if (req.url === `/v1/claims/acme/${claimId}`) return void res.writeHead(200).end(big);
      if (req.url === '/v1/claims/acme/busy') return void res.writeHead(503).end();
      res.writeHead(404).end('{"error":"claim_not_found"}');
    });
    const base = {
      v: 1,
      id: HOOK_ID,
      source_id: 'stripe',
      tenant_id: 'acme',
      received_at: 1737500000000,
      content_type: 'application/json',
      idempotency_key: 'acme:stripe:evt_1',
      verification: { status: 'ok', flagged: false },
    };
    const inline = { ...base, size: BODY.length, sha256: sha256Hex(BODY), body_base64: Buffer.from(BODY).toString('base64') };
    const claim = (id, key) => ({ ...base, idempotency_key: key, size: big.length, sha256: sha256Hex(big), claim: `urn:ankusa:claim:v1:acme:${id}` });
    const lines = [
      JSON.stringify(inline),
      JSON.stringify(inline), // the same hook again: acked, not processed twice
      JSON.stringify(claim(claimId, 'acme:stripe:evt_2')),
      JSON.stringify(claim('gone', 'acme:stripe:evt_3')),
      JSON.stringify(claim('busy', 'acme:stripe:evt_4')),
      '{"v":1,"id":',
    ];
    const p = await startNode(join(EXAMPLES, 'consume-message.mjs'), {
      env: { ANKUSA_CLAIM_URL: claims.url, ANKUSA_CLAIM_TOKEN: 'claim-token-0123456789' },
      stdin: 'pipe',
    });
    try {
      p.child.stdin.end(`${lines.join('\n')}\n`);
      assert.equal(await p.exited, 0, p.stderr());
      const decisions = p.lines.filter((l) => /^(ack|requeue|dead-letter)$/.test(l));
      assert.deepEqual(decisions, ['ack', 'ack', 'ack', 'dead-letter', 'requeue', 'dead-letter'], p.lines.join('\n'));
      assert.ok(p.lines.includes(`processed acme:stripe:evt_1: ${BODY.length} bytes of application/json`), p.lines.join('\n'));
      assert.ok(p.lines.includes(`processed acme:stripe:evt_2: ${big.length} bytes of application/json`), p.lines.join('\n'));
      assert.ok(p.lines.some((l) => l.startsWith('ClaimNotFoundError claim_not_found')));
      assert.ok(p.lines.some((l) => l.startsWith('ClaimCheckUnavailableError claim_check_unavailable')));
      assert.ok(p.lines.some((l) => l.startsWith('MessageDecodeError invalid_json')));
    } finally {
      await p.stop();
      await claims.close();
    }
  });
});
