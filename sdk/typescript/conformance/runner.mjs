#!/usr/bin/env node
// Runs the conformance vectors (conformance/README.md) through the SDK's PUBLIC entry: the
// package is imported by its name, `ankusa`, exactly as a user imports it (Node resolves a
// package's own name through its `exports`), never its internals.
//
//   node sdk/typescript/conformance/runner.mjs --cases DIR
//
// Every *.json file of DIR (sorted by name) is loaded and every case run; an unknown operation
// fails its case. Prints `FAIL <file> <id>: <why>` per failure, then `N passed, N failed`, and
// exits non-zero on any failure or when DIR held no case.

import { readdirSync, readFileSync } from 'node:fs';
import * as http from 'node:http';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';

import * as ankusa from 'ankusa';

const CASE_TIMEOUT_MS = 30_000;

// ---------------------------------------------------------------------------------------------
// Bodies and results in the vectors' terms

/** The bytes of a vector's Body: {text} | {base64} | {json}. */
function bytesOf(body) {
  if (body === null || typeof body !== 'object') throw new Error(`not a Body: ${JSON.stringify(body)}`);
  if ('text' in body) return new Uint8Array(Buffer.from(body.text, 'utf8'));
  if ('base64' in body) return new Uint8Array(Buffer.from(body.base64, 'base64'));
  if ('json' in body) return new Uint8Array(Buffer.from(JSON.stringify(body.json), 'utf8'));
  throw new Error(`not a Body: ${JSON.stringify(body)}`);
}

/** Whether actual bytes (or null) are what an expected Body (or null) says. */
function bodyMatches(expected, actual) {
  if (expected === null) return actual === null;
  if (!(actual instanceof Uint8Array)) return false;
  if ('json' in expected) {
    try {
      return isDeepStrictEqual(JSON.parse(Buffer.from(actual).toString('utf8')), expected.json);
    } catch {
      return false;
    }
  }
  return Buffer.from(actual).equals(Buffer.from(bytesOf(expected)));
}

function show(v) {
  if (v instanceof Uint8Array) return `<${v.length} bytes: ${JSON.stringify(Buffer.from(v).toString('utf8').slice(0, 80))}>`;
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 200 ? `${s.slice(0, 200)}...` : s;
}

/** The SDK's camelCase results under the vectors' snake_case keys. */
function wireHeaders(h) {
  return {
    id: h.id,
    source_id: h.sourceId,
    tenant_id: h.tenantId,
    tenant: h.tenant,
    idempotency_key: h.idempotencyKey,
    dedupe_key: h.dedupeKey,
    replay_id: h.replayId,
    ordering_key: h.orderingKey,
    content_type: h.contentType,
    verification: h.verification,
    received_at: h.receivedAt,
    body_sha256: h.bodySha256,
  };
}

function wireMessage(m) {
  return {
    v: m.v,
    id: m.id,
    source_id: m.sourceId,
    tenant_id: m.tenantId,
    tenant: m.tenant,
    received_at: m.receivedAt,
    content_type: m.contentType,
    size: m.size,
    sha256: m.sha256,
    dedupe_key: m.dedupeKey,
    replay_id: m.replayId,
    idempotency_key: m.idempotencyKey,
    verification: m.verification,
    headers: m.headers,
    instance: m.instance,
    region: m.region,
    traceparent: m.traceparent,
    tracestate: m.tracestate,
    ordering_key: m.orderingKey,
    body: m.body,
    claim: m.claim === null ? null : { urn: m.claim.urn, tenant: m.claim.tenant, claim_id: m.claim.claimId },
  };
}

// ---------------------------------------------------------------------------------------------
// The mock claim gateway: a real HTTP server on 127.0.0.1, answering every request with the
// current case's `gateway` and recording what it received.

/** Binds a server to a free loopback port; its port. */
async function listen(server) {
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  return /** @type {import('node:net').AddressInfo} */ (server.address()).port;
}

class MockGateway {
  answer = null;
  requests = [];
  timers = new Set();

  async start() {
    this.server = http.createServer((req, res) => {
      this.requests.push({ method: req.method, path: req.url, headers: req.headers });
      req.resume();
      const a = this.answer;
      const reply = () => {
        if (res.destroyed) return;
        if (!a) {
          res.statusCode = 599;
          res.end();
          return;
        }
        res.statusCode = a.status;
        for (const [k, v] of Object.entries(a.headers ?? {})) res.setHeader(k, v);
        res.end(a.body ? Buffer.from(bytesOf(a.body)) : undefined);
      };
      if (a?.delay_ms) {
        const t = setTimeout(() => {
          this.timers.delete(t);
          reply();
        }, a.delay_ms);
        this.timers.add(t);
      } else {
        reply();
      }
    });
    this.url = `http://127.0.0.1:${await listen(this.server)}`;
    // A port that was bound and released: nothing listens there.
    const probe = http.createServer();
    this.closedUrl = `http://127.0.0.1:${await listen(probe)}`;
    await new Promise((resolve) => probe.close(resolve));
  }

  reset(answer) {
    this.answer = answer;
    this.requests = [];
  }

  async stop() {
    for (const t of this.timers) clearTimeout(t);
    this.server.closeAllConnections?.();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

// ---------------------------------------------------------------------------------------------
// Operations: each takes a case's input and returns the result in the vectors' terms.

function hookFrom(input) {
  if ('message' in input) return ankusa.decodeMessage(bytesOf(input.message));
  if ('headers' in input) return ankusa.parseHeaders(input.headers);
  throw new Error('input names neither message nor headers');
}

function signatureOptions(input) {
  const o = { headers: input.headers, body: bytesOf(input.body) };
  if (input.now !== undefined) o.now = input.now;
  if (input.tolerance_s !== undefined) o.toleranceS = input.tolerance_s;
  return o;
}

const operations = {
  async verify_signature(input) {
    const r = await ankusa.verifySignature({ ...signatureOptions(input), secrets: input.secrets });
    return { id: r.id, timestamp: r.timestamp };
  },

  async parse_headers(input) {
    return wireHeaders(ankusa.parseHeaders(input.headers));
  },

  async receive_delivery(input) {
    const o = signatureOptions(input);
    if (input.secrets !== undefined) o.secrets = input.secrets;
    if (input.allow_unsigned !== undefined) o.allowUnsigned = input.allow_unsigned;
    const d = await ankusa.receiveDelivery(o);
    return { ...wireHeaders(d), signed: d.signed, body: d.body };
  },

  async decode_message(input) {
    return wireMessage(await ankusa.decodeMessage(bytesOf(input.message)));
  },

  async trusted(input) {
    return ankusa.isTrusted(await hookFrom(input));
  },

  async idempotency_key(input) {
    return ankusa.idempotencyKey(await hookFrom(input), { includeReplay: input.include_replay === true });
  },

  async parse_claim_ref(input) {
    const r = ankusa.parseClaimRef(input.ref);
    return { tenant: r.tenant, claim_id: r.claimId };
  },

  async redeem_claim(input, gateway) {
    const g = input.gateway;
    let baseUrl;
    if (g.url) baseUrl = g.url;
    else if (g.unreachable) baseUrl = gateway.closedUrl;
    else baseUrl = gateway.url;
    gateway.reset(g.url || g.unreachable ? null : g);
    const message = await ankusa.decodeMessage(bytesOf(input.message));
    const options = { baseUrl };
    if (input.token !== undefined) options.token = input.token;
    if (input.timeout_ms !== undefined) options.timeoutMs = input.timeout_ms;
    const hook = await ankusa.toHook(message, new ankusa.ClaimClient(options));
    const w = wireMessage({ ...hook, claim: hook.claim ?? null });
    return w;
  },

  async decode_lifecycle_event(input) {
    if ('event' in input) return { ...ankusa.decodeLifecycleEvent(bytesOf(input.event)) };
    if ('message' in input) {
      const message = await ankusa.decodeMessage(bytesOf(input.message));
      return { ...ankusa.decodeLifecycleEvent(message) };
    }
    throw new Error('input names neither event nor message');
  },
};

// ---------------------------------------------------------------------------------------------
// Judging a case

/** Why a result does not meet `ok`, or null when it does. */
function judgeOk(expected, actual) {
  if (expected === null || typeof expected !== 'object' || Array.isArray(expected)) {
    return isDeepStrictEqual(actual, expected) ? null : `expected ${show(expected)}, got ${show(actual)}`;
  }
  if (actual === null || typeof actual !== 'object') return `expected an object, got ${show(actual)}`;
  for (const [key, want] of Object.entries(expected)) {
    if (!(key in actual)) return `the result has no key ${key}`;
    const got = actual[key];
    if (key === 'body') {
      if (!bodyMatches(want, got)) return `body: expected ${show(want)}, got ${show(got)}`;
    } else if (!isDeepStrictEqual(got, want)) {
      return `${key}: expected ${show(want)}, got ${show(got)}`;
    }
  }
  return null;
}

/** Why a thrown error does not meet `error`, or null when it does. */
function judgeError(expected, err) {
  if (!(err instanceof ankusa.AnkusaError)) {
    return `expected ${expected.class ?? 'an error'}, got a non-SDK error: ${err?.stack ?? err}`;
  }
  for (const [key, want] of Object.entries(expected)) {
    if (key === 'class') {
      const cls = ankusa[want];
      if (typeof cls !== 'function') return `the SDK exports no class ${want}`;
      if (!(err instanceof cls) || err.name !== want) return `class: expected ${want}, got ${err.name} (${err.message})`;
      continue;
    }
    if (!['code', 'retryable', 'field', 'status'].includes(key)) return `unknown error key ${key}`;
    if (!isDeepStrictEqual(err[key], want)) {
      return `${key}: expected ${show(want)}, got ${show(err[key])} (${err.name} ${err.code}: ${err.message})`;
    }
  }
  return null;
}

function judgeRequests(expected, recorded) {
  if (recorded.length !== expected.length) {
    return `requests: expected ${expected.length}, the mock gateway received ${recorded.length} (${show(recorded.map((r) => `${r.method} ${r.path}`))})`;
  }
  for (let i = 0; i < expected.length; i++) {
    const want = expected[i];
    const got = recorded[i];
    if (want.method !== undefined && want.method !== got.method) return `requests[${i}].method: expected ${want.method}, got ${got.method}`;
    if (want.path !== undefined && want.path !== got.path) return `requests[${i}].path: expected ${want.path}, got ${got.path}`;
    for (const [name, value] of Object.entries(want.headers ?? {})) {
      if (got.headers[name.toLowerCase()] !== value) {
        return `requests[${i}].headers.${name}: expected ${show(value)}, got ${show(got.headers[name.toLowerCase()])}`;
      }
    }
  }
  return null;
}

function withTimeout(promise, ms) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`runner: no outcome within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Runs one case: null when it passes, else why it fails. */
async function runCase(c, gateway) {
  if (c === null || typeof c !== 'object') return 'not a case object';
  const expect = c.expect ?? {};
  const hasOk = Object.prototype.hasOwnProperty.call(expect, 'ok');
  const hasError = Object.prototype.hasOwnProperty.call(expect, 'error');
  if (hasOk === hasError) return 'expect must hold exactly one of ok and error';
  const op = operations[c.operation];
  if (!op || !Object.prototype.hasOwnProperty.call(operations, c.operation)) return `unknown operation ${show(c.operation)}`;
  if (c.operation === 'redeem_claim') gateway.reset(null);

  let result;
  let error;
  let threw = false;
  try {
    result = await withTimeout(op(c.input ?? {}, gateway), CASE_TIMEOUT_MS);
  } catch (e) {
    threw = true;
    error = e;
  }
  let why;
  if (hasOk) why = threw ? `expected ok, got ${error?.name ?? 'an error'} ${error?.code ?? ''}: ${error?.message ?? error}` : judgeOk(expect.ok, result);
  else why = threw ? judgeError(expect.error, error) : `expected ${expect.error.class ?? 'an error'}, got ok ${show(result)}`;
  if (why) return why;
  if (c.operation === 'redeem_claim' && expect.requests !== undefined && !c.input?.gateway?.url) {
    return judgeRequests(expect.requests, gateway.requests);
  }
  return null;
}

// ---------------------------------------------------------------------------------------------

function parseArgs(argv) {
  let cases;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--cases' && i + 1 < argv.length) cases = argv[++i];
    else {
      console.error('usage: runner.mjs --cases DIR');
      process.exit(2);
    }
  }
  if (!cases) {
    console.error('usage: runner.mjs --cases DIR');
    process.exit(2);
  }
  return cases;
}

async function main() {
  const dir = parseArgs(process.argv.slice(2));
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort();
  const gateway = new MockGateway();
  await gateway.start();
  let passed = 0;
  let failed = 0;
  try {
    for (const file of files) {
      let cases;
      try {
        const doc = JSON.parse(readFileSync(join(dir, file), 'utf8'));
        cases = Array.isArray(doc) ? doc : doc?.cases;
        if (!Array.isArray(cases)) throw new Error('neither {"cases": [...]} nor an array of cases');
      } catch (e) {
        console.log(`FAIL ${file} -: the file does not load: ${e.message}`);
        failed++;
        continue;
      }
      for (const c of cases) {
        const why = await runCase(c, gateway);
        if (why) {
          console.log(`FAIL ${file} ${c?.id ?? '?'}: ${why}`);
          failed++;
        } else {
          passed++;
        }
      }
    }
  } finally {
    await gateway.stop();
  }
  if (passed + failed === 0) console.log(`FAIL ${dir} -: no case found`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed > 0 || passed + failed === 0 ? 1 : 0;
}

await main();
