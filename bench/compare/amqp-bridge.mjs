// The bridge a team writes instead of a gateway: Node.js's http server and amqplib, one
// process per core (cluster). Verifies the GitHub-style signature (HMAC-SHA256 of the body in
// X-Hub-Signature-256) and publishes the body, persistent, to EXCHANGE. CONFIRM=1 answers 200
// after RabbitMQ's publisher confirm; CONFIRM=0 after the publish was handed to the socket
// (lost if the process or broker dies before it is written). Run by bench/compare/run.
import cluster from 'node:cluster';
import crypto from 'node:crypto';
import http from 'node:http';
import amqp from 'amqplib';

const env = process.env;
const workers = Number(env.WORKERS || '1');
const confirm = env.CONFIRM !== '0';
const MAX_BODY = 1 << 20;

if (cluster.isPrimary && workers > 1) {
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on('exit', () => process.exit(1));
} else {
  serve().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}

async function serve() {
  const conn = await amqp.connect(env.AMQP_URL);
  const ch = confirm ? await conn.createConfirmChannel() : await conn.createChannel();
  conn.on('error', () => process.exit(1));
  const key = Buffer.from(env.SECRET);
  http
    .createServer((req, res) => {
      const chunks = [];
      let size = 0;
      req.on('data', (c) => {
        size += c.length;
        if (size > MAX_BODY) {
          res.writeHead(413).end();
          req.destroy();
        } else chunks.push(c);
      });
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const got = Buffer.from(String(req.headers['x-hub-signature-256'] || ''));
        const want = Buffer.from(
          'sha256=' + crypto.createHmac('sha256', key).update(body).digest('hex'),
        );
        if (got.length !== want.length || !crypto.timingSafeEqual(got, want)) {
          res.writeHead(401).end();
          return;
        }
        const opts = {
          persistent: true,
          contentType: 'application/json',
          messageId: String(req.headers['x-github-delivery'] || ''),
        };
        if (confirm) {
          ch.publish(env.EXCHANGE, env.ROUTING_KEY, body, opts, (err) =>
            res.writeHead(err ? 503 : 200).end(),
          );
        } else {
          ch.publish(env.EXCHANGE, env.ROUTING_KEY, body, opts);
          res.writeHead(200).end();
        }
      });
    })
    .listen(Number(env.PORT), '127.0.0.1');
}
