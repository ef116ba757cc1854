#!/usr/bin/env node
// The cost of verifying one delivery: µs per verifySignature of a 1 KiB body, signed once
// with node:crypto, verified sequentially (one await after another, as a receiver does).
//
//   node sdk/typescript/bench/verify.mjs [iterations]
//
// Two figures: secrets given as strings (the HMAC key is imported on every call) and keys
// imported once with prepareSecrets (what createHandler and expressReceiver do).
import { createHmac, randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';

import { prepareSecrets, verifySignature } from 'ankusa';

const iterations = Number(process.argv[2] ?? 20_000);
const secret = `whsec_${randomBytes(32).toString('base64')}`;
const body = randomBytes(1024);
const id = '0192f1c0-7a3e-7b11-8c2d-3e4f5a6b7c8d';
const ts = Math.floor(Date.now() / 1000);
const mac = createHmac('sha256', Buffer.from(secret.slice(6), 'base64')).update(`${id}.${ts}.`).update(body).digest('base64');
const headers = { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': `v1,${mac}` };
const bytes = new Uint8Array(body);

async function measure(secrets) {
  const run = async (n) => {
    for (let i = 0; i < n; i++) await verifySignature({ headers, body: bytes, secrets, now: ts });
  };
  await run(Math.min(2000, iterations)); // warm up the JIT
  const started = performance.now();
  await run(iterations);
  return ((performance.now() - started) * 1000) / iterations;
}

const perCall = await measure([secret]);
const prepared = await measure(await prepareSecrets([secret]));
console.log(`verifySignature, 1 KiB body, ${iterations} iterations, node ${process.version}`);
console.log(`  secrets as strings:        ${perCall.toFixed(1)} µs per verify`);
console.log(`  keys from prepareSecrets:  ${prepared.toFixed(1)} µs per verify`);
