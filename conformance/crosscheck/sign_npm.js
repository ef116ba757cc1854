// Signs crosscheck requests with npm `standardwebhooks` (its own Webhook#sign).
//   node sign_npm.js NPM_PREFIX < requests.json > {"version", "signatures"}
// A request is {secret, raw, msg_id, ts, body (base64)}. A raw secret is given with the
// library's `format: "raw"` option; the body as a Buffer, as a server hands over a raw body.
"use strict";
const path = require("path");
const fs = require("fs");

const prefix = process.argv[2];
const moduleDir = path.join(prefix, "node_modules", "standardwebhooks");
const { Webhook } = require(moduleDir);
const version = JSON.parse(fs.readFileSync(path.join(moduleDir, "package.json"), "utf8")).version;

const requests = JSON.parse(fs.readFileSync(0, "utf8"));
const signatures = requests.map((r) => {
  const hook = r.raw ? new Webhook(r.secret, { format: "raw" }) : new Webhook(r.secret);
  return hook.sign(r.msg_id, new Date(r.ts * 1000), Buffer.from(r.body, "base64"));
});
process.stdout.write(JSON.stringify({ version, signatures }));
