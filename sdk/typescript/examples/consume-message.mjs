// Consume queue messages (Kafka, RabbitMQ, NATS, Redis, SQS, Pub/Sub: the same bytes) and
// redeem the claim check of a large body. Your broker client hands you each message's bytes;
// here they come one per line on standard input.
import readline from 'node:readline';
import { ClaimClient, decodeMessage, idempotencyKey, isTrusted, toHook } from 'ankusa';

const claims = new ClaimClient({
  baseUrl: process.env.ANKUSA_CLAIM_URL ?? 'http://127.0.0.1:4001', // the claim port
  token: process.env.ANKUSA_CLAIM_TOKEN, // when claim_check.tokens is set
});
const seen = new Set(); // use your database

/** What to do with one message: 'ack', 'requeue' (try later) or 'dead-letter' (never again). */
async function consume(bytes) {
  try {
    const message = await decodeMessage(bytes); // checks the inline body's size and sha256
    const hook = await toHook(message, claims); // fetches and checks a claimed body
    const key = idempotencyKey(hook);
    if (seen.has(key)) return 'ack';
    if (!isTrusted(hook)) return 'dead-letter'; // or hold it for a person to look at
    console.log(`processed ${key}: ${hook.body.length} bytes of ${hook.contentType}`);
    seen.add(key);
    return 'ack';
  } catch (e) {
    // Every SDK error says whether the same message may succeed later.
    console.log(`${e.name} ${e.code ?? ''}: ${e.message}`);
    return e.retryable ? 'requeue' : 'dead-letter';
  }
}

for await (const line of readline.createInterface({ input: process.stdin })) {
  if (line.trim()) console.log(await consume(new TextEncoder().encode(line)));
}
