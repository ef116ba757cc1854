// Runs the main entry (dist/index.js) in Deno, a runtime that is not Node: what an edge
// runtime offers (Web Crypto, fetch, Request/Response, streams) is all it may need.
//
//   deno run --allow-net=127.0.0.1 sdk/typescript/tools/edge/smoke.mjs
//
// Signs a delivery with Web Crypto directly (not through the SDK), serves it to a
// createHandler, decodes a queue message, and redeems a claim from a Deno.serve claim port.

import * as ankusa from '../../dist/index.js';

const enc = new TextEncoder();
const fail = (why) => {
  console.error(`edge smoke: ${why}`);
  Deno.exit(1);
};
const b64 = (bytes) => btoa(String.fromCharCode(...bytes));
const hex = (bytes) => [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');

if (typeof globalThis.Deno !== 'object') fail('run me with deno');

// 1. A delivery signed here, verified by the handler.
const rawKey = crypto.getRandomValues(new Uint8Array(32));
const secret = `whsec_${b64(rawKey)}`;
const key = await crypto.subtle.importKey('raw', rawKey, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
const id = '0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d';
const ts = Math.floor(Date.now() / 1000);
const body = '{"id":"evt_1","type":"invoice.paid"}';
const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, enc.encode(`${id}.${ts}.${body}`)));
const headers = {
  'content-type': 'application/json',
  'webhook-id': id,
  'webhook-timestamp': String(ts),
  'webhook-signature': `v1,${b64(mac)}`,
  'x-ankusa-id': id,
  'x-ankusa-source': 'stripe',
  'x-ankusa-verification': 'ok',
};
let handled = null;
const handler = ankusa.createHandler({ secrets: [secret], handle: (d) => void (handled = d) });
const ok = await handler(new Request('https://edge.example/ankusa', { method: 'POST', headers, body }));
if (ok.status !== 202 || handled?.id !== id || !ankusa.isTrusted(handled)) fail(`handler answered ${ok.status}`);
const bad = await handler(new Request('https://edge.example/ankusa', { method: 'POST', headers, body: `${body} ` }));
if (bad.status !== 401) fail(`a tampered body answered ${bad.status}`);

// 2. A queue message with a claim, redeemed from a claim port served here.
const claimed = enc.encode('x'.repeat(70_000));
const sha = hex(new Uint8Array(await crypto.subtle.digest('SHA-256', claimed)));
const server = Deno.serve({ hostname: '127.0.0.1', port: 0, onListen() {} }, (req) =>
  new URL(req.url).pathname === '/v1/claims/acme/c1' ? new Response(claimed) : new Response(null, { status: 404 }),
);
try {
  const message = await ankusa.decodeMessage(
    JSON.stringify({ v: 1, id, source_id: 'stripe', tenant_id: 'acme', received_at: 1, size: claimed.length, sha256: sha, claim: 'urn:ankusa:claim:v1:acme:c1' }),
  );
  const client = new ankusa.ClaimClient({ baseUrl: `http://127.0.0.1:${server.addr.port}` });
  const hook = await ankusa.toHook(message, client);
  if (hook.body.length !== claimed.length) fail('the claim was not redeemed');
  const gone = await ankusa
    .toHook({ ...message, claim: ankusa.parseClaimRef('urn:ankusa:claim:v1:acme:c2') }, client)
    .catch((e) => e);
  if (!(gone instanceof ankusa.ClaimNotFoundError)) fail(`a missing claim gave ${gone}`);
} finally {
  await server.shutdown();
}

console.log(`   deno ${Deno.version.deno}: verify, receive (createHandler), decode and redeem all ran`);
