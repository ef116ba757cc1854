// What the vectors cannot reach: the input shapes (Headers, arrays of pairs, ArrayBuffer
// bodies), pre-imported keys, the many-entries path of signature matching, hostile input
// (huge, deep, malformed) staying fast, the error classes' shape, and the claim client's
// bounds (a server that never ends its body, a fetch that ignores the abort signal).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import * as ankusa from 'ankusa';
import {
  AnkusaError,
  ClaimCheckUnavailableError,
  ClaimClient,
  ClaimIntegrityError,
  InvalidSignatureError,
  LifecycleEventError,
  MessageDecodeError,
  decodeLifecycleEvent,
  decodeMessage,
  idempotencyKey,
  isTrusted,
  parseHeaders,
  prepareSecrets,
  receiveDelivery,
  toHook,
  verifySignature,
} from 'ankusa';

import { HOOK_ID, SECRET, deliveryHeaders, serve, sha256Hex, sign } from './helpers.mjs';

const TS = 1_764_849_600;
const BODY = '{"id":"evt_1"}';

function signed(body = BODY, secret = SECRET) {
  return { 'webhook-id': 'msg_1', 'webhook-timestamp': String(TS), 'webhook-signature': sign(secret, 'msg_1', TS, body) };
}

async function rejects(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
}

describe('verifySignature inputs', () => {
  it('takes Headers, plain objects with arrays, pairs; string, Uint8Array and ArrayBuffer bodies', async () => {
    const h = signed();
    const bytes = new TextEncoder().encode(BODY);
    for (const headers of [new Headers(h), Object.entries(h), h, new Map(Object.entries(h))]) {
      for (const body of [BODY, bytes, bytes.buffer.slice(0), new DataView(bytes.buffer.slice(0))]) {
        assert.deepEqual(await verifySignature({ headers, body, secrets: [SECRET], now: TS }), { id: 'msg_1', timestamp: TS });
      }
    }
  });

  it('accepts keys imported once (prepareSecrets) and refuses a bad secret there', async () => {
    const keys = await prepareSecrets(['whsec_AAAA', SECRET]);
    assert.equal(keys.size, 2);
    const r = await verifySignature({ headers: signed(), body: BODY, secrets: keys, now: TS });
    assert.equal(r.id, 'msg_1');
    const e = await rejects(prepareSecrets(['whsec_not base64!']));
    assert.ok(e instanceof InvalidSignatureError);
    assert.equal(e.code, 'invalid_secret');
    assert.doesNotMatch(e.message, /not base64!/, 'a secret is never echoed');
  });

  it('finds a match among many entries and many secrets (the hash-once path)', async () => {
    const junk = Array.from({ length: 40 }, (_, i) => sign(`other-${i}`, 'msg_1', TS, BODY));
    const header = [...junk, 'v2,zzz', 'v1,!!', sign(SECRET, 'msg_1', TS, BODY)].join(' ');
    const secrets = Array.from({ length: 5 }, (_, i) => `raw-secret-${i}`).concat(SECRET);
    const headers = { ...signed(), 'webhook-signature': header };
    assert.equal((await verifySignature({ headers, body: BODY, secrets, now: TS })).id, 'msg_1');
    const none = { ...signed(), 'webhook-signature': junk.join(' ') };
    const e = await rejects(verifySignature({ headers: none, body: BODY, secrets, now: TS }));
    assert.equal(e.code, 'no_matching_signature');
  });

  it('stays fast on hostile headers: a megabyte of entries, of digits, of spaces', async () => {
    const started = Date.now();
    const entry = sign('nope', 'msg_1', TS, BODY);
    const many = Array.from({ length: 20_000 }, (_, i) => `${entry.slice(0, -5)}${String(i).padStart(4, '0')}=`).join(' ');
    let e = await rejects(verifySignature({ headers: { ...signed(), 'webhook-signature': many }, body: BODY, secrets: [SECRET], now: TS }));
    assert.equal(e.code, 'no_matching_signature');
    e = await rejects(verifySignature({ headers: { ...signed(), 'webhook-timestamp': '9'.repeat(1_000_000) }, body: BODY, secrets: [SECRET], now: TS }));
    assert.equal(e.code, 'timestamp_out_of_tolerance');
    const spaces = `v1,${' '.repeat(500_000)}x${' '.repeat(500_000)}`;
    e = await rejects(verifySignature({ headers: { ...signed(), 'webhook-signature': spaces }, body: BODY, secrets: [SECRET], now: TS }));
    assert.equal(e.code, 'no_matching_signature');
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
  });

  it('reads the clock by default', async () => {
    const now = Math.floor(Date.now() / 1000);
    const headers = { 'webhook-id': 'm', 'webhook-timestamp': String(now), 'webhook-signature': sign(SECRET, 'm', now, BODY) };
    assert.equal((await verifySignature({ headers, body: BODY, secrets: [SECRET] })).timestamp, now);
  });
});

describe('errors', () => {
  it('every class extends AnkusaError, is named after itself and carries the contract fields', () => {
    const names = [
      'InvalidSignatureError',
      'InvalidDeliveryError',
      'MessageDecodeError',
      'InvalidClaimRefError',
      'ClaimNotFoundError',
      'ClaimCheckUnavailableError',
      'ClaimRejectedError',
      'ClaimIntegrityError',
      'LifecycleEventError',
      'AdminError',
    ];
    for (const name of names) assert.equal(typeof ankusa[name], 'function', name);
    const samples = [
      new ankusa.InvalidSignatureError('missing_header', 'webhook-id', 'm'),
      new ankusa.InvalidDeliveryError('id_mismatch', 'x-ankusa-id', 'm'),
      new ankusa.MessageDecodeError('integrity', 'sha256', 'm'),
      new ankusa.InvalidClaimRefError('m'),
      new ankusa.ClaimNotFoundError('m'),
      new ankusa.ClaimCheckUnavailableError('m', null),
      new ankusa.ClaimRejectedError('m', 403),
      new ankusa.ClaimIntegrityError('m'),
      new ankusa.LifecycleEventError('invalid_json', null, 'm'),
      new ankusa.AdminError('forbidden', 'm', { status: 403 }),
    ];
    samples.forEach((e, i) => {
      assert.ok(e instanceof AnkusaError && e instanceof Error);
      assert.equal(e.name, names[i]);
      for (const k of ['code', 'retryable', 'field', 'status']) assert.ok(k in e, `${names[i]}.${k}`);
    });
    assert.equal(samples[5].retryable, true);
    assert.equal(samples.filter((e) => e.retryable).length, 1);
  });
});

describe('deliveries', () => {
  it('keeps every header, the provider ones included, and dedupes with the replay id on request', async () => {
    const d = await receiveDelivery({
      headers: deliveryHeaders(BODY, { extra: { 'X-GitHub-Event': 'push', 'x-ankusa-replay-id': 'job-1' } }),
      body: BODY,
      secrets: [SECRET],
    });
    assert.equal(d.headers['x-github-event'], 'push');
    assert.equal(idempotencyKey(d), 'acme:stripe:evt_1');
    assert.equal(idempotencyKey(d, { includeReplay: true }), 'acme:stripe:evt_1#replay:job-1');
    assert.equal(isTrusted(d), true);
    assert.equal(isTrusted(parseHeaders({ 'x-ankusa-id': HOOK_ID })), false);
  });
});

function message(fields) {
  return JSON.stringify({
    v: 1,
    id: HOOK_ID,
    source_id: 'stripe',
    tenant_id: 'acme',
    received_at: 1,
    size: 3,
    sha256: sha256Hex('abc'),
    body_base64: 'YWJj',
    ...fields,
  });
}

describe('decodeMessage', () => {
  it('survives hostile input: deep nesting, a big body, junk bytes', async () => {
    for (const bytes of ['['.repeat(200_000), `{"v":${'['.repeat(100_000)}`, new Uint8Array(1 << 20).fill(0xff), '']) {
      const e = await rejects(decodeMessage(bytes));
      assert.ok(e instanceof MessageDecodeError);
      assert.equal(e.retryable, false);
    }
    const big = new Uint8Array(4 << 20).fill(7);
    const m = await decodeMessage(message({ size: big.length, sha256: sha256Hex(big), body_base64: Buffer.from(big).toString('base64') }));
    assert.equal(m.body.length, big.length);
  });

  it('ignores inherited names: a missing id is missing even though objects have a constructor', async () => {
    const e = await rejects(decodeMessage(message({ id: undefined, constructor: 'x' })));
    assert.equal(e.field, 'id');
  });

  it('an inline message is its own hook; a claim needs a client', async () => {
    const m = await decodeMessage(message({}));
    const hook = await toHook(m);
    assert.equal(new TextDecoder().decode(hook.body), 'abc');
    const claim = await decodeMessage(message({ body_base64: null, claim: `urn:ankusa:claim:v1:acme:${HOOK_ID.replaceAll('-', '')}` }));
    await assert.rejects(toHook(claim), TypeError);
  });
});

describe('decodeLifecycleEvent', () => {
  const event = { specversion: '1.0', id: 'e1', source: '/ankusa/n', type: 'io.ankusa.replay.paused', time: 't', data: { job: 'j' } };

  it('decodes from bytes, from a decoded message and from a hook; refuses other sources', async () => {
    const bytes = JSON.stringify(event);
    assert.equal(decodeLifecycleEvent(bytes).known, true);
    const msg = await decodeMessage(
      message({ source_id: 'ankusa:lifecycle', tenant_id: 'ankusa:lifecycle', size: bytes.length, sha256: sha256Hex(bytes), body_base64: Buffer.from(bytes).toString('base64') }),
    );
    assert.deepEqual(decodeLifecycleEvent(msg).data, { job: 'j' });
    assert.equal(decodeLifecycleEvent(await toHook(msg)).type, 'io.ankusa.replay.paused');
    const other = await decodeMessage(message({}));
    const e = (() => {
      try {
        decodeLifecycleEvent(other);
      } catch (x) {
        return x;
      }
    })();
    assert.ok(e instanceof LifecycleEventError);
    assert.equal(e.code, 'not_a_lifecycle_event');
  });
});

describe('ClaimClient bounds', () => {
  const body = 'x'.repeat(100);
  const claimMessage = () =>
    decodeMessage(message({ size: body.length, sha256: sha256Hex(body), body_base64: null, claim: 'urn:ankusa:claim:v1:acme:c1' }));

  it('stops reading a body that runs past the size', async () => {
    const s = await serve((req, res) => {
      res.writeHead(200);
      const t = setInterval(() => res.write('y'.repeat(65536)), 1);
      res.on('close', () => clearInterval(t));
    });
    try {
      const started = Date.now();
      const e = await rejects(toHook(await claimMessage(), new ClaimClient({ baseUrl: s.url, timeoutMs: 5000 })));
      assert.ok(e instanceof ClaimIntegrityError, String(e));
      assert.ok(Date.now() - started < 2000);
    } finally {
      await s.close();
    }
  });

  it('keeps its deadline with a fetch that ignores the abort signal', async () => {
    const never = () => new Promise(() => {});
    const started = Date.now();
    const e = await rejects(toHook(await claimMessage(), new ClaimClient({ baseUrl: 'http://127.0.0.1:9', timeoutMs: 150, fetch: never })));
    assert.ok(e instanceof ClaimCheckUnavailableError);
    assert.equal(e.status, null);
    assert.ok(Date.now() - started < 1000);
  });

  it('sends the bearer token and never puts it in an error', async () => {
    let auth;
    const s = await serve((req, res) => {
      auth = req.headers.authorization;
      res.writeHead(403).end('{"error":"forbidden"}');
    });
    try {
      const e = await rejects(toHook(await claimMessage(), new ClaimClient({ baseUrl: `${s.url}/`, token: 'tok-0123456789abcdef' })));
      assert.equal(auth, 'Bearer tok-0123456789abcdef');
      assert.equal(e.code, 'claim_rejected');
      assert.doesNotMatch(`${e.message} ${e.stack}`, /tok-0123/);
    } finally {
      await s.close();
    }
  });
});
