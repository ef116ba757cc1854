// Replay a tenant's dead letters with the admin client and follow the job to its end.
//   node admin-replay.mjs acme
import { randomUUID } from 'node:crypto';
import { AdminClient } from 'ankusa';
import { nodeFetchWithCa } from 'ankusa/node';

const caFile = process.env.ANKUSA_ADMIN_CA; // admin.tls with a private CA: its PEM bundle
const admin = new AdminClient({
  baseUrl: process.env.ANKUSA_ADMIN_URL ?? 'http://127.0.0.1:4002',
  token: process.env.ANKUSA_ADMIN_TOKEN, // a tenant-limited token works the same way
  ...(caFile && { fetch: nodeFetchWithCa({ caFile }) }),
});
const tenant = process.argv[2] ?? 'default';

// Newest first; follow next_cursor for more.
const page = await admin.listDlq({ tenant, limit: 20 });
for (const e of page.entries) console.log(`dead ${e.id} ${e.source_id} sinks[${e.sink}]: ${e.reason}`);
if (page.entries.length === 0) {
  console.log('nothing to replay');
  process.exit(0);
}

// A job_id of your own makes the call safe to retry: the same id and filter is the same job.
const { job } = await admin.createReplay({ job_id: randomUUID(), tenant, rate: 100 });
console.log(`replay ${job.id} ${job.state}`);
for (;;) {
  const j = await admin.getReplay(job.id);
  if (j.done || j.state === 'paused' || j.state === 'cancelled') {
    console.log(`replay ${j.id} ${j.state}: moved ${j.moved}, delivered ${j.delivered}, dead again ${j.failed}`);
    break;
  }
  await new Promise((resolve) => setTimeout(resolve, 200));
}
