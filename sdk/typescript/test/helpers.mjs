// Test helpers: a Standard Webhooks signer written with node:crypto (independent of the SDK,
// so a test cannot pass because the SDK agrees with itself), loopback ports, and child
// processes that announce themselves on stdout.

import { spawn } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import * as http from 'node:http';

export const SECRET = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
export const HOOK_ID = '0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d';

/** `v1,<base64 HMAC-SHA256>` of `<id>.<ts>.<body>` under a whsec_ or raw secret. */
export function sign(secret, id, ts, body) {
  const key = secret.startsWith('whsec_') ? Buffer.from(secret.slice(6), 'base64') : Buffer.from(secret);
  const mac = createHmac('sha256', key).update(`${id}.${ts}.`).update(Buffer.from(body)).digest('base64');
  return `v1,${mac}`;
}

export function sha256Hex(bytes) {
  return createHash('sha256').update(Buffer.from(bytes)).digest('hex');
}

/** The headers the gateway's HTTP sink sends with a delivery of `body`, signed with `secret`. */
export function deliveryHeaders(body, { secret = SECRET, id = HOOK_ID, ts = Math.floor(Date.now() / 1000), extra = {} } = {}) {
  const h = {
    'content-type': 'application/json',
    'x-ankusa-id': id,
    'x-ankusa-source': 'stripe',
    'x-ankusa-tenant': 'acme',
    'x-ankusa-idempotency-key': 'acme:stripe:evt_1',
    'x-ankusa-dedupe-key': 'evt_1',
    'x-ankusa-verification': 'ok',
    'x-ankusa-received-at': String(Date.now()),
    'x-ankusa-body-sha256': sha256Hex(body),
    ...extra,
  };
  if (secret !== null) {
    h['webhook-id'] = id;
    h['webhook-timestamp'] = String(ts);
    h['webhook-signature'] = sign(secret, id, ts, body);
  }
  return h;
}

/** A free loopback port (bound, then released). */
export async function freePort() {
  const s = http.createServer();
  await new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve(undefined)));
  const port = /** @type {import('node:net').AddressInfo} */ (s.address()).port;
  await new Promise((resolve) => s.close(() => resolve(undefined)));
  return port;
}

/** Serves `listener` on a free loopback port; `{url, close}`. */
export async function serve(listener) {
  const server = http.createServer(listener);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const port = /** @type {import('node:net').AddressInfo} */ (server.address()).port;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve(undefined));
      }),
  };
}

/**
 * Starts `node file` and waits for a stdout line matching `ready`; `{child, lines, waitFor,
 * stop}`. Every stdout line is kept in `lines`.
 *
 * @param {string} file
 * @param {{env?: Record<string, string>, args?: string[], ready?: RegExp, timeoutMs?: number, stdin?: 'ignore' | 'pipe'}} [options]
 */
export async function startNode(file, { env = {}, args = [], ready, timeoutMs = 10_000, stdin = 'ignore' } = {}) {
  const child = spawn(process.execPath, [file, ...args], {
    env: { ...process.env, ...env },
    stdio: [stdin, 'pipe', 'pipe'],
  });
  if (!child.stdout || !child.stderr) throw new Error('no pipes');
  const lines = [];
  let stderr = '';
  const waiters = [];
  let buffer = '';
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    let nl;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      lines.push(line);
      for (const w of [...waiters]) if (w.re.test(line)) w.resolve(line);
    }
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const waitFor = (re, ms = timeoutMs) =>
    new Promise((resolve, reject) => {
      const hit = lines.find((l) => re.test(l));
      if (hit) return resolve(hit);
      const w = { re, resolve: (l) => (clearTimeout(timer), waiters.splice(waiters.indexOf(w), 1), resolve(l)) };
      const timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(w), 1);
        reject(new Error(`${file}: no line matching ${re} within ${ms} ms; stdout: ${lines.join(' | ')}; stderr: ${stderr}`));
      }, ms);
      waiters.push(w);
    });
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
  if (ready) {
    try {
      await waitFor(ready);
    } catch (e) {
      await stop();
      throw e;
    }
  }
  return { child, lines, waitFor, stop, exited, stderr: () => stderr };
}

/** Polls `fn` until it returns a truthy value (or throws after `ms`). */
export async function eventually(fn, { ms = 15_000, every = 50, what = 'condition' } = {}) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not met within ${ms} ms${last ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, every));
  }
}
