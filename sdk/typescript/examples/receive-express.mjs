// Receive the gateway's HTTP deliveries in an Express app. The route needs the raw body: the
// signature covers the exact bytes, so mount express.raw on it (and no JSON parser ahead).
import express from 'express';
import { expressReceiver, idempotencyKey, isTrusted } from 'ankusa';

const seen = new Set(); // use your database: a unique key on the idempotency key

const app = express();
app.post(
  '/ankusa',
  express.raw({ type: () => true, limit: '16mb' }), // every content type, as bytes
  expressReceiver({
    secrets: (process.env.ANKUSA_WEBHOOK_SECRET ?? '').split(',').filter(Boolean),
    async handle(delivery) {
      const key = idempotencyKey(delivery);
      if (seen.has(key) || !isTrusted(delivery)) return;
      const event = JSON.parse(new TextDecoder().decode(delivery.body));
      console.log(`processed ${key} from ${delivery.sourceId}: ${event.type}`);
      seen.add(key);
    },
  }),
);

const port = Number(process.env.PORT ?? 8080);
app.listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
