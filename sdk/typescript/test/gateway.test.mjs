// Against a REAL gateway binary ($ANKUSA_BIN, default ~/.cache/ankusa/target/debug/ankusa):
// its HTTP sink delivers to createHandler (signed by the gateway, verified by the SDK), and
// the admin client lists dead letters, drives a replay job through its states, lists the
// quarantine pen, with an all-scopes and a tenant-limited token, and over TLS with a CA
// bundle. Skipped, saying so, when the binary is not built (ANKUSA_REQUIRE_BIN=1 fails instead).

import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { AdminClient, AdminError, createHandler, idempotencyKey, isTrusted } from 'ankusa';
import { nodeFetchWithCa, toNodeListener } from 'ankusa/node';

import { eventually, freePort, serve, sha256Hex, startNode } from './helpers.mjs';

const EXAMPLES = join(dirname(fileURLToPath(import.meta.url)), '..', 'examples');

const BIN = process.env.ANKUSA_BIN || join(homedir(), '.cache/ankusa/target/debug/ankusa');
const HAVE_BIN = existsSync(BIN);
if (!HAVE_BIN && process.env.ANKUSA_REQUIRE_BIN === '1') throw new Error(`no gateway binary at ${BIN}`);
const SKIP = HAVE_BIN ? false : `no gateway binary at ${BIN} (set ANKUSA_BIN; ANKUSA_REQUIRE_BIN=1 makes this a failure)`;

const SINK_SECRET = `whsec_${Buffer.from('sdk-typescript-sink-secret-32-by').toString('base64')}`;
const PROVIDER_SECRET = 'the-provider-signs-with-this';
const ADMIN_TOKEN = 'admin-token-0123456789';
const ACME_TOKEN = 'acme-token-0123456789';

/** A running gateway on loopback ports, with its config file and log in a temp dir. */
async function startGateway(config, { tls = null } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'ankusa-ts-gw-'));
  const ports = { http: await freePort(), admin: await freePort(), claims: await freePort() };
  writeFileSync(join(dir, 'ankusa.yml'), config);
  const log = openSync(join(dir, 'gateway.log'), 'a');
  const child = spawn(BIN, ['--config', join(dir, 'ankusa.yml')], {
    env: {
      ...process.env,
      ANKUSA_DATA_DIR: join(dir, 'data'),
      ANKUSA_HTTP_IP: '127.0.0.1',
      ANKUSA_HTTP_PORT: String(ports.http),
      ANKUSA_ADMIN_IP: '127.0.0.1',
      ANKUSA_ADMIN_PORT: String(ports.admin),
      ANKUSA_CLAIM_CHECK_IP: '127.0.0.1',
      ANKUSA_CLAIM_CHECK_PORT: String(ports.claims),
      ...(tls && { ANKUSA_ADMIN_TLS_CERT_FILE: tls.cert, ANKUSA_ADMIN_TLS_KEY_FILE: tls.key }),
      RUST_LOG: '',
    },
    stdio: ['ignore', log, log],
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const g = {
    dir,
    ingest: `http://127.0.0.1:${ports.http}`,
    admin: `${tls ? 'https' : 'http'}://127.0.0.1:${ports.admin}`,
    log: () => readFileSync(join(dir, 'gateway.log'), 'utf8'),
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    // The ingest port serves /ready too, over plain HTTP even when the admin API is HTTPS.
    await eventually(async () => {
      if (child.exitCode !== null) throw new Error(`the gateway exited ${child.exitCode}: ${g.log().slice(-2000)}`);
      return (await fetch(`${g.ingest}/ready`)).status === 200;
    }, { ms: 60_000, every: 100, what: 'gateway ready' });
  } catch (e) {
    const log = g.log();
    await g.stop();
    throw new Error(`${e.message}\n--- gateway log ---\n${log.slice(-3000)}`);
  }
  return g;
}

function github(body) {
  return `sha256=${createHmac('sha256', PROVIDER_SECRET).update(body).digest('hex')}`;
}

async function post(g, source, body, headers = {}) {
  const r = await fetch(`${g.ingest}/webhooks/${source}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: r.status, json: await r.json().catch(() => null) };
}

async function rejects(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
}

describe('a real gateway', { skip: SKIP }, () => {
  let g;
  let receiver;
  const deliveries = [];
  const admin = () => new AdminClient({ baseUrl: g.admin, token: ADMIN_TOKEN });
  const acme = () => new AdminClient({ baseUrl: g.admin, token: ACME_TOKEN });

  before(async () => {
    receiver = await serve(
      toNodeListener(createHandler({ secrets: [SINK_SECRET], handle: (d) => void deliveries.push(d) })),
    );
    const closed = await freePort();
    g = await startGateway(`
egress: {allow_http: true, allow_loopback: true}
dispatch: {breaker_failures: 0}
admin:
  tokens:
    - {token: "${ADMIN_TOKEN}", scopes: ["*"]}
    - {token: "${ACME_TOKEN}", scopes: [dlq:read, dlq:write, replays:write, "tenant:acme"]}
sources:
  live:
    verify: {type: github, secret: "${PROVIDER_SECRET}"}
    dedupe: github
    sinks: [{type: http, url: "${receiver.url}/ankusa", secret: "${SINK_SECRET}"}]
  dead:
    tenant: acme
    retry: {base_ms: 20, max_ms: 50, max_attempts: 1}
    sinks: [{type: http, url: "http://127.0.0.1:${closed}/gone", secret: "${SINK_SECRET}"}]
  pen:
    tenant: acme
    verify: {type: github, secret: "the-source-has-another-secret"}
    on_verify_failure: quarantine
    sinks: [{type: log}]
`);
  });

  after(async () => {
    await g?.stop();
    await receiver?.close();
  });

  it('delivers over HTTP, signed by the gateway and verified by createHandler', async () => {
    const body = '{"action":"opened","n":1}';
    const r = await post(g, 'live', body, {
      'x-github-event': 'push',
      'x-github-delivery': 'd-1',
      'x-hub-signature-256': github(body),
    });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    const d = await eventually(() => deliveries.find((x) => x.id === r.json.id), { what: 'the delivery' });
    assert.equal(new TextDecoder().decode(d.body), body);
    assert.equal(d.signed, true);
    assert.equal(d.sourceId, 'live');
    assert.equal(d.tenantId, null);
    assert.equal(d.tenant, 'default');
    assert.equal(d.dedupeKey, 'd-1');
    assert.equal(idempotencyKey(d), 'default:live:d-1');
    assert.deepEqual(d.verification, { status: 'ok', flagged: false });
    assert.equal(isTrusted(d), true);
    assert.equal(d.bodySha256, sha256Hex(body));
    assert.equal(typeof d.receivedAt, 'number');
    assert.equal(d.contentType, 'application/json');
  });

  it('lists dead letters, with an all-scopes and a tenant-limited token', async () => {
    const ids = [];
    for (let i = 0; i < 5; i++) {
      const r = await post(g, 'dead', JSON.stringify({ n: i }));
      assert.equal(r.status, 201);
      ids.push(r.json.id);
    }
    const page = await eventually(
      async () => {
        const p = await admin().listDlq({ source_id: 'dead' });
        return p.entries.length === 5 ? p : null;
      },
      { what: 'five dead letters' },
    );
    assert.deepEqual(page.entries.map((e) => e.id).sort(), [...ids].sort());
    const e = page.entries[0];
    assert.equal(e.tenant, 'acme');
    assert.equal(e.source_id, 'dead');
    assert.equal(e.sink, 0);
    assert.equal(e.sink_type, 'http');
    assert.ok(['permanent', 'throttled', 'transient'].includes(e.error_class));
    assert.equal(e.attempts, 1);
    assert.equal(e.replay_id, null);
    assert.equal(typeof page.examined, 'number');
    assert.equal((await admin().listDlq({ source_id: 'dead', limit: 2 })).entries.length, 2);

    const own = await acme().listDlq();
    assert.equal(own.entries.length, 5, 'the tenant defaults to the token\'s one');
    let x = await rejects(acme().listDlq({ tenant: 'other' }));
    assert.ok(x instanceof AdminError);
    assert.deepEqual([x.code, x.status, x.retryable, x.body.scope], ['forbidden', 403, false, 'tenant:other']);
    x = await rejects(new AdminClient({ baseUrl: g.admin, token: 'not-a-token-0123456789' }).listDlq());
    assert.deepEqual([x.code, x.status, x.retryable], ['unauthorized', 401, false]);
    x = await rejects(admin().listDlq({ limit: 0 }));
    assert.deepEqual([x.code, x.status, x.field], ['invalid_filter', 400, 'limit']);
  });

  it('creates a replay job and moves it through its states', async () => {
    const jobId = randomUUID();
    const req = { job_id: jobId, tenant: 'acme', source_id: 'dead', rate: 1 };
    const first = await acme().createReplay(req);
    assert.equal(first.created, true);
    assert.equal(first.job.id, jobId);
    assert.equal(first.job.kind, 'dlq');
    assert.deepEqual(first.job.filter, { tenant: 'acme', source_id: 'dead' });
    assert.equal((await acme().createReplay(req)).created, false, 'the same job_id and filter is the same job');

    assert.equal((await acme().getReplay(jobId)).id, jobId);
    assert.ok((await admin().listReplays()).jobs.some((j) => j.id === jobId));
    assert.equal((await acme().patchReplay(jobId, 'paused')).state, 'paused');
    assert.equal((await acme().patchReplay(jobId, 'running')).state, 'running');
    assert.equal((await acme().patchReplay(jobId, 'cancelled')).state, 'cancelled');
    let x = await rejects(acme().patchReplay(jobId, 'running'));
    assert.deepEqual([x.code, x.status, x.retryable], ['invalid_state', 400, false]);
    x = await rejects(acme().getReplay(randomUUID()));
    assert.deepEqual([x.code, x.status], ['replay_not_found', 404]);
    x = await rejects(acme().createReplay({ tenant: 'acme', rate: 0 }));
    assert.deepEqual([x.code, x.field], ['invalid_filter', 'rate']);
  });

  it('examples/admin-replay.mjs replays the dead letters with the tenant-limited token', async () => {
    // A row the cancelled job above may have moved is dead again before the example lists.
    await eventually(async () => (await acme().listDlq()).entries.length === 5, { what: 'five dead letters again' });
    const p = await startNode(join(EXAMPLES, 'admin-replay.mjs'), {
      env: { ANKUSA_ADMIN_URL: g.admin, ANKUSA_ADMIN_TOKEN: ACME_TOKEN },
      args: ['acme'],
    });
    try {
      assert.equal(await p.exited, 0, p.stderr());
      assert.equal(p.lines.filter((l) => l.startsWith('dead ')).length, 5, p.lines.join('\n'));
      assert.ok(p.lines.some((l) => /^replay [0-9a-f-]{36} running$/.test(l)), p.lines.join('\n'));
      // The sink is still down: every moved row dies again, and the job ends done.
      assert.ok(p.lines.some((l) => /^replay [0-9a-f-]{36} completed: moved 5, delivered 0, dead again 5$/.test(l)), p.lines.join('\n'));
    } finally {
      await p.stop();
    }
  });

  it('lists the quarantine pen', async () => {
    const body = '{"forged":true}';
    const r = await post(g, 'pen', body, { 'x-github-event': 'push', 'x-github-delivery': 'p-1', 'x-hub-signature-256': github(body) });
    assert.equal(r.status, 202, JSON.stringify(r.json));
    const page = await eventually(async () => {
      const p = await admin().listQuarantine({ source_id: 'pen' });
      return p.entries.length ? p : null;
    }, { what: 'a quarantined entry' });
    const e = page.entries[0];
    assert.equal(e.id, r.json.id);
    assert.equal(e.tenant, 'acme');
    assert.equal(e.reason, 'no_matching_signature');
    assert.equal(e.method, 'POST');
    assert.equal(e.path, '/webhooks/pen');
    assert.equal(e.url_tenant, false);
    assert.equal(page.total, null, 'totals only without a filter');
    const whole = await admin().listQuarantine();
    assert.equal(typeof whole.total, 'number');
    assert.equal((await acme().listQuarantine()).entries[0].id, r.json.id);
  });
});

describe('a real gateway with an HTTPS admin API', { skip: SKIP }, () => {
  let g;
  let dir;
  let cert;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ankusa-ts-tls-'));
    try {
      execFileSync('openssl', [
        'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
        '-keyout', join(dir, 'tls.key'), '-out', join(dir, 'tls.crt'), '-days', '2',
        '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
      ], { stdio: 'ignore' });
      cert = { cert: join(dir, 'tls.crt'), key: join(dir, 'tls.key') };
    } catch {
      return;
    }
    g = await startGateway(`admin:\n  tokens:\n    - {token: "${ADMIN_TOKEN}", scopes: ["*"]}\nsources:\n  s:\n    sinks: [{type: log}]\n`, { tls: cert });
  });

  after(async () => {
    await g?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is reached with the CA bundle and refused without it', async (t) => {
    if (!cert) return t.skip('no openssl CLI');
    const withCa = new AdminClient({ baseUrl: g.admin, token: ADMIN_TOKEN, fetch: nodeFetchWithCa({ caFile: cert.cert }) });
    const page = await withCa.listDlq();
    assert.deepEqual(page.entries, []);
    assert.equal((await withCa.listQuarantine()).total, 0);
    const x = await rejects(new AdminClient({ baseUrl: g.admin, token: ADMIN_TOKEN }).listDlq());
    assert.deepEqual([x.code, x.retryable, x.status], ['transport_error', true, null]);
    const plain = await rejects(new AdminClient({ baseUrl: g.admin.replace('https:', 'http:'), token: ADMIN_TOKEN }).listDlq());
    assert.deepEqual([plain.code, plain.status], ['tls_required', 400]);
  });
});
