// Receive the gateway's HTTP deliveries with a fetch handler: the same `handler` serves Deno
// (`Deno.serve(handler)`), Bun, Cloudflare Workers (`export default { fetch: handler }`) and,
// as here, Node through `toNodeListener`.
import http from 'node:http';
import { createHandler, idempotencyKey, isTrusted } from 'ankusa';
import { toNodeListener } from 'ankusa/node';

const seen = new Set(); // use your database: a unique key on the idempotency key

const handler = createHandler({
  // The http sink's `secret` (comma-separated while rotating); none: every delivery is refused.
  secrets: (process.env.ANKUSA_WEBHOOK_SECRET ?? '').split(',').filter(Boolean),
  async handle(delivery) {
    const key = idempotencyKey(delivery); // at-least-once: a redelivery has the same key
    if (seen.has(key)) return; // already processed: answer 202 again
    if (!isTrusted(delivery)) {
      console.log(`hold ${key}: the gateway could not verify the provider's signature`);
      return;
    }
    const event = JSON.parse(new TextDecoder().decode(delivery.body)); // parse only now
    console.log(`processed ${key} from ${delivery.sourceId}: ${event.type}`);
    seen.add(key);
  },
});

const port = Number(process.env.PORT ?? 8080);
http.createServer(toNodeListener(handler)).listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
