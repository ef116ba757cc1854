// The admin client's mapping of answers to AdminError (against stub servers and a stub
// fetch), and the CA bundle path of `ankusa/node` against a node:https server whose
// certificate the openssl CLI makes. The real gateway's admin API is in gateway.test.mjs.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { AdminClient, AdminError } from 'ankusa';
import { nodeFetchWithCa } from 'ankusa/node';

import { freePort, serve } from './helpers.mjs';

async function rejects(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
}

/** A stub admin API answering `reply(req, body)` → [status, headers, body]. */
async function stub(reply) {
  const seen = [];
  const s = await serve((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body });
      const [status, headers, out] = reply(req, body);
      res.writeHead(status, headers);
      res.end(out);
    });
  });
  return { ...s, seen };
}

describe('AdminClient answers', () => {
  it('sends the token, the filters as a query and the JSON body; reads created from 202 vs 200', async () => {
    const job = { id: 'j', kind: 'dlq', filter: {}, state: 'running', delivered: 0, failed: 0, outstanding: 0, done: false };
    let status = 202;
    const s = await stub((req) => {
      if (req.url.startsWith('/v1/dlq')) return [200, { 'content-type': 'application/json' }, '{"entries":[],"next_cursor":null,"total":0,"examined":0}'];
      return [status, {}, JSON.stringify(job)];
    });
    try {
      const c = new AdminClient({ baseUrl: `${s.url}/`, token: 'admin-token-0123456789' });
      const page = await c.listDlq({ tenant: 'acme', error_class: 'permanent', limit: 5, cursor: undefined });
      assert.equal(page.total, 0);
      assert.equal(s.seen[0].url, '/v1/dlq?tenant=acme&error_class=permanent&limit=5');
      assert.equal(s.seen[0].headers.authorization, 'Bearer admin-token-0123456789');
      const created = await c.createReplay({ tenant: 'acme', rate: 10 });
      assert.deepEqual(created, { created: true, job });
      assert.deepEqual(JSON.parse(s.seen[1].body), { tenant: 'acme', rate: 10 });
      assert.equal(s.seen[1].headers['content-type'], 'application/json');
      status = 200;
      assert.equal((await c.createReplay({ tenant: 'acme' })).created, false);
      await c.patchReplay('a/b', 'paused');
      assert.equal(s.seen[3].method, 'PATCH');
      assert.equal(s.seen[3].url, '/v1/replays/a%2Fb');
      assert.deepEqual(JSON.parse(s.seen[3].body), { state: 'paused' });
    } finally {
      await s.close();
    }
  });

  it('maps errors: the API code, field, status, Retry-After, and what is retryable', async () => {
    const answers = {
      '/v1/replays/a': [429, { 'retry-after': '10' }, '{"error":"too_many_jobs","max_live_jobs":64}'],
      '/v1/replays/b': [503, { 'retry-after': '1' }, '{"error":"store_unavailable","class":"io_error"}'],
      '/v1/replays/c': [400, {}, '{"error":"invalid_filter","field":"limit","message":"must be 1..=1000"}'],
      '/v1/replays/d': [405, {}, ''],
      '/v1/replays/e': [200, {}, 'not json'],
      '/v1/replays/f': [403, {}, '{"error":"forbidden","scope":"tenant:beta"}'],
      '/v1/replays/g': [408, {}, ''],
    };
    const s = await stub((req) => answers[req.url]);
    try {
      const c = new AdminClient({ baseUrl: s.url, token: 't' });
      const e = async (id) => rejects(c.getReplay(id));
      let x = await e('a');
      assert.ok(x instanceof AdminError);
      assert.deepEqual([x.code, x.status, x.retryable, x.retryAfterS, x.body.max_live_jobs], ['too_many_jobs', 429, true, 10, 64]);
      x = await e('b');
      assert.deepEqual([x.code, x.status, x.retryable], ['store_unavailable', 503, true]);
      x = await e('c');
      assert.deepEqual([x.code, x.status, x.retryable, x.field], ['invalid_filter', 400, false, 'limit']);
      assert.match(x.message, /must be 1\.\.=1000/);
      x = await e('d');
      assert.deepEqual([x.code, x.status, x.retryable], ['http_error', 405, false]);
      x = await e('e');
      assert.deepEqual([x.code, x.status, x.retryable], ['invalid_response', 200, false]);
      x = await e('f');
      assert.deepEqual([x.code, x.status, x.field, x.body.scope], ['forbidden', 403, null, 'tenant:beta']);
      x = await e('g');
      assert.deepEqual([x.code, x.retryable], ['http_error', true]);
    } finally {
      await s.close();
    }
  });

  it('transport failures and timeouts are retryable, without a status', async () => {
    const closed = new AdminClient({ baseUrl: `http://127.0.0.1:${await freePort()}`, token: 't' });
    let x = await rejects(closed.listQuarantine());
    assert.deepEqual([x.code, x.status, x.retryable], ['transport_error', null, true]);
    const slow = await stub(() => [200, {}, '{}']);
    const hang = await serve(() => {});
    try {
      const c = new AdminClient({ baseUrl: hang.url, token: 't', timeoutMs: 100 });
      x = await rejects(c.listDlq());
      assert.deepEqual([x.code, x.status, x.retryable], ['timeout', null, true]);
    } finally {
      await hang.close();
      await slow.close();
    }
  });
});

/** A self-signed certificate for 127.0.0.1 from the openssl CLI; null when there is none. */
function makeCert(dir, name) {
  try {
    execFileSync(
      'openssl',
      [
        'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
        '-keyout', join(dir, `${name}.key`), '-out', join(dir, `${name}.crt`), '-days', '2',
        '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
      ],
      { stdio: 'ignore' },
    );
    return { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  } catch {
    return null;
  }
}

describe('ankusa/node CA bundle', () => {
  let dir;
  let server;
  let url;
  let certs;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ankusa-ts-ca-'));
    certs = { own: makeCert(dir, 'own'), other: makeCert(dir, 'other') };
    if (!certs.own) return;
    server = https.createServer({ cert: readFileSync(certs.own.cert), key: readFileSync(certs.own.key) }, (req, res) => {
      res.writeHead(req.headers.authorization === 'Bearer t' ? 200 : 401, { 'content-type': 'application/json' });
      res.end(req.headers.authorization === 'Bearer t' ? '{"entries":[],"total":null,"bytes":null,"next_cursor":null}' : '{"error":"unauthorized"}');
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
    url = `https://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}`;
  });

  after(async () => {
    if (server) await new Promise((resolve) => server.close(() => resolve(undefined)));
    rmSync(dir, { recursive: true, force: true });
  });

  it('trusts the server through a PEM file path, PEM text or {caFile}', async (t) => {
    if (!certs.own) return t.skip('no openssl CLI');
    for (const ca of [certs.own.cert, readFileSync(certs.own.cert, 'utf8'), { caFile: certs.own.cert }]) {
      const c = new AdminClient({ baseUrl: url, token: 't', fetch: nodeFetchWithCa(ca) });
      assert.deepEqual((await c.listQuarantine()).entries, []);
    }
    const wrongToken = new AdminClient({ baseUrl: url, token: 'u', fetch: nodeFetchWithCa(certs.own.cert) });
    const x = await rejects(wrongToken.listQuarantine());
    assert.deepEqual([x.code, x.status, x.retryable], ['unauthorized', 401, false]);
  });

  it('refuses the server without its CA: the system roots, or another CA', async (t) => {
    if (!certs.own || !certs.other) return t.skip('no openssl CLI');
    for (const fetch of [undefined, nodeFetchWithCa(certs.other.cert)]) {
      const c = new AdminClient({ baseUrl: url, token: 't', ...(fetch && { fetch }) });
      const x = await rejects(c.listQuarantine());
      assert.deepEqual([x.code, x.retryable], ['transport_error', true]);
    }
  });
});
