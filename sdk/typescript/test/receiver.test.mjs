// The receiver helpers (createHandler, expressReceiver, toNodeListener): what each outcome
// answers, that the body reaches `handle` byte for byte, and that a parsed body is refused.

import assert from 'node:assert/strict';
import * as http from 'node:http';
import { describe, it } from 'node:test';

import express from 'express';
import { ClaimCheckUnavailableError, createHandler, expressReceiver } from 'ankusa';
import { toNodeListener } from 'ankusa/node';

import { HOOK_ID, SECRET, deliveryHeaders, serve } from './helpers.mjs';

const BODY = '{"id":"evt_1","type":"invoice.paid"}';

function post(body, headers, url = 'http://x/ankusa') {
  return new Request(url, { method: 'POST', headers, body });
}

async function answer(handler, request) {
  const response = await handler(request);
  return { status: response.status, json: await response.json() };
}

describe('createHandler', () => {
  it('answers 202 and hands handle the delivery, body byte for byte', async () => {
    const body = new Uint8Array([0, 1, 2, 250, 255, 10, 13]);
    /** @type {any} */
    let got;
    const handler = createHandler({ secrets: [SECRET], handle: (d) => void (got = d) });
    const a = await answer(handler, post(body, deliveryHeaders(body)));
    assert.equal(a.status, 202);
    assert.deepEqual(a.json, { id: HOOK_ID, status: 'accepted' });
    assert.deepEqual([...got.body], [...body]);
    assert.equal(got.signed, true);
    assert.equal(got.tenant, 'acme');
    assert.equal(got.sourceId, 'stripe');
    assert.deepEqual(got.verification, { status: 'ok', flagged: false });
  });

  it('refuses a bad signature 401 before handle runs', async () => {
    let ran = false;
    const handler = createHandler({ secrets: [SECRET], handle: () => void (ran = true) });
    const h = deliveryHeaders(BODY);
    const a = await answer(handler, post(`${BODY} `, h));
    assert.deepEqual(a, { status: 401, json: { error: 'no_matching_signature' } });
    assert.equal(ran, false);
  });

  it('is closed without a secret, open only with allowUnsigned', async () => {
    const closed = createHandler({ handle: () => {} });
    assert.deepEqual(await answer(closed, post(BODY, deliveryHeaders(BODY, { secret: null }))), {
      status: 401,
      json: { error: 'invalid_secret' },
    });
    const open = createHandler({ allowUnsigned: true, handle: () => {} });
    assert.equal((await answer(open, post(BODY, deliveryHeaders(BODY, { secret: null })))).status, 202);
  });

  it('reports a malformed secret and refuses every delivery', async () => {
    const logs = [];
    const handler = createHandler({ secrets: ['whsec_%%%'], handle: () => {}, log: (m) => logs.push(m) });
    assert.deepEqual(await answer(handler, post(BODY, deliveryHeaders(BODY))), {
      status: 401,
      json: { error: 'invalid_secret' },
    });
    assert.match(logs.join('\n'), /invalid_secret|secrets\[0\]/);
    assert.doesNotMatch(logs.join('\n'), /%%%/, 'the secret is never logged');
  });

  it('answers 400 on unusable headers once the signature verified', async () => {
    const handler = createHandler({ secrets: [SECRET], handle: () => {} });
    const h = deliveryHeaders(BODY);
    delete h['x-ankusa-id'];
    assert.deepEqual(await answer(handler, post(BODY, h)), { status: 400, json: { error: 'missing_header' } });
    const m = deliveryHeaders(BODY, { extra: { 'x-ankusa-id': 'another' } });
    assert.deepEqual(await answer(handler, post(BODY, m)), { status: 400, json: { error: 'id_mismatch' } });
  });

  it('answers 503 when handle declines or throws a retryable error, 500 on anything else', async () => {
    const logs = [];
    const log = (m) => logs.push(m);
    const h = () => deliveryHeaders(BODY);
    const declined = createHandler({ secrets: [SECRET], handle: async () => false, log });
    assert.deepEqual(await answer(declined, post(BODY, h())), { status: 503, json: { error: 'handler_declined' } });
    const retry = createHandler({
      secrets: [SECRET],
      log,
      handle: () => {
        throw new ClaimCheckUnavailableError('later', 503);
      },
    });
    assert.deepEqual(await answer(retry, post(BODY, h())), { status: 503, json: { error: 'claim_check_unavailable' } });
    const own = createHandler({
      secrets: [SECRET],
      log,
      handle: () => {
        throw Object.assign(new Error('db down'), { retryable: true });
      },
    });
    assert.deepEqual(await answer(own, post(BODY, h())), { status: 503, json: { error: 'handler_unavailable' } });
    const broken = createHandler({
      secrets: [SECRET],
      log,
      handle: () => {
        throw new TypeError('bug');
      },
    });
    assert.deepEqual(await answer(broken, post(BODY, h())), { status: 500, json: { error: 'handler_failed' } });
    assert.ok(logs.some((l) => l.includes(HOOK_ID)));
  });

  it('refuses a body over maxBodyBytes 413 without handing it on, and non-POST 405', async () => {
    const handler = createHandler({ secrets: [SECRET], maxBodyBytes: 8, handle: () => assert.fail('not called') });
    const big = 'x'.repeat(100);
    assert.deepEqual(await answer(handler, post(big, deliveryHeaders(big))), {
      status: 413,
      json: { error: 'body_too_large' },
    });
    // Chunked (no content-length): the limit holds while reading.
    const stream = new ReadableStream({
      pull(c) {
        c.enqueue(new TextEncoder().encode(big));
      },
    });
    const chunked = new Request('http://x/', /** @type {RequestInit} */ ({ method: 'POST', headers: deliveryHeaders(big), body: stream, duplex: 'half' }));
    assert.equal((await handler(chunked)).status, 413);
    assert.equal((await handler(new Request('http://x/'))).status, 405);
  });
});

describe('toNodeListener', () => {
  it('serves a fetch handler over node:http', async () => {
    /** @type {any} */
    let got;
    const s = await serve(toNodeListener(createHandler({ secrets: [SECRET], handle: (d) => void (got = d) })));
    try {
      const r = await fetch(`${s.url}/ankusa`, { method: 'POST', headers: deliveryHeaders(BODY), body: BODY });
      assert.equal(r.status, 202);
      assert.equal(new TextDecoder().decode(got.body), BODY);
      const bad = await fetch(`${s.url}/ankusa`, { method: 'POST', headers: deliveryHeaders(BODY, { secret: 'whsec_AAAA' }), body: BODY });
      assert.equal(bad.status, 401);
    } finally {
      await s.close();
    }
  });
});

describe('expressReceiver', () => {
  async function app(mount) {
    const a = express();
    mount(a);
    const server = http.createServer(a);
    await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
    const url = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}`;
    return { url, close: () => new Promise((resolve) => server.close(() => resolve(undefined))) };
  }

  it('verifies the raw body express.raw kept', async () => {
    /** @type {any} */
    let got;
    const a = await app((x) =>
      x.post('/ankusa', express.raw({ type: () => true }), expressReceiver({ secrets: [SECRET], handle: (d) => void (got = d) })),
    );
    try {
      const r = await fetch(`${a.url}/ankusa`, { method: 'POST', headers: deliveryHeaders(BODY), body: BODY });
      assert.equal(r.status, 202);
      assert.deepEqual(await r.json(), { id: HOOK_ID, status: 'accepted' });
      assert.equal(new TextDecoder().decode(got.body), BODY);
      const bad = await fetch(`${a.url}/ankusa`, { method: 'POST', headers: deliveryHeaders(BODY), body: `${BODY}\n` });
      assert.equal(bad.status, 401);
      assert.deepEqual(await bad.json(), { error: 'no_matching_signature' });
    } finally {
      await a.close();
    }
  });

  it('refuses to run on a parsed body: 500 and one clear log line', async () => {
    const logs = [];
    const a = await app((x) =>
      x.post(
        '/ankusa',
        express.json(),
        expressReceiver({ secrets: [SECRET], handle: () => assert.fail('not called'), log: (m) => logs.push(m) }),
      ),
    );
    try {
      for (let i = 0; i < 2; i++) {
        const r = await fetch(`${a.url}/ankusa`, { method: 'POST', headers: deliveryHeaders(BODY), body: BODY });
        assert.equal(r.status, 500);
        assert.deepEqual(await r.json(), { error: 'raw_body_required' });
      }
      assert.equal(logs.length, 1);
      assert.match(logs[0], /express\.raw/);
    } finally {
      await a.close();
    }
  });
});

describe('toNodeListener body limit', () => {
  it('answers 413 to a chunked body over the limit, the answer reaching the client', async () => {
    const s = await serve(toNodeListener(createHandler({ secrets: [SECRET], maxBodyBytes: 1024, handle: () => assert.fail('not called') })));
    try {
      const big = 'z'.repeat(256 * 1024);
      const stream = new ReadableStream({
        start(c) {
          for (let i = 0; i < 8; i++) c.enqueue(new TextEncoder().encode(big));
          c.close();
        },
      });
      const r = await fetch(`${s.url}/ankusa`, /** @type {RequestInit} */ ({ method: 'POST', headers: deliveryHeaders(big), body: stream, duplex: 'half' }));
      assert.equal(r.status, 413);
      assert.deepEqual(await r.json(), { error: 'body_too_large' });
      const declared = await fetch(`${s.url}/ankusa`, { method: 'POST', headers: deliveryHeaders(big), body: big });
      assert.equal(declared.status, 413);
    } finally {
      await s.close();
    }
  });
});
