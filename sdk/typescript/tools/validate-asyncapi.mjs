#!/usr/bin/env node
// Validates an AsyncAPI 3.0 JSON document with the independent parser @asyncapi/parser (the
// AsyncAPI initiative's own, with its Spectral rules), so the gateway's GET /asyncapi.json is
// judged by something that did not write it.
//
//   node sdk/typescript/tools/validate-asyncapi.mjs FILE      (FILE may be - for stdin)
//
// Prints every diagnostic (severity, code, path, message) and exits 1 when any has error
// severity or the document does not parse, 2 on a usage or install problem, else 0.
//
// The parser is pinned by tools/asyncapi/package-lock.json and installed with `npm ci` into
// ~/.cache/ankusa/asyncapi-parser/<hash of the lock>/ on first use (never into the repo).

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const deps = join(here, 'asyncapi');
const SEVERITY = ['error', 'warning', 'info', 'hint'];

function usage(message) {
  console.error(`validate-asyncapi: ${message}\nusage: validate-asyncapi.mjs FILE`);
  process.exit(2);
}

/** The install directory of the pinned parser, installed there when it is not yet. */
function parserDir() {
  const lock = readFileSync(join(deps, 'package-lock.json'));
  const hash = createHash('sha256').update(lock).digest('hex').slice(0, 16);
  const root = process.env.ANKUSA_CACHE_DIR ?? join(homedir(), '.cache', 'ankusa');
  const dir = join(root, 'asyncapi-parser', hash);
  if (existsSync(join(dir, 'node_modules', '@asyncapi', 'parser', 'package.json'))) return dir;
  // Install beside, then rename: a concurrent run or an interrupted install never leaves a
  // half-filled directory that looks installed.
  const staging = `${dir}.tmp-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  cpSync(join(deps, 'package.json'), join(staging, 'package.json'));
  cpSync(join(deps, 'package-lock.json'), join(staging, 'package-lock.json'));
  console.error(`validate-asyncapi: installing @asyncapi/parser into ${dir}`);
  try {
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline', '--loglevel=error'], {
      cwd: staging,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, npm_config_cache: process.env.npm_config_cache ?? join(root, 'npm') },
    });
  } catch (e) {
    rmSync(staging, { recursive: true, force: true });
    console.error(`validate-asyncapi: npm ci failed: ${e.message}`);
    process.exit(2);
  }
  if (existsSync(dir)) rmSync(staging, { recursive: true, force: true });
  else renameSync(staging, dir);
  return dir;
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length !== 1) usage('give exactly one file');
  let text;
  try {
    text = args[0] === '-' ? readFileSync(0, 'utf8') : readFileSync(args[0], 'utf8');
  } catch (e) {
    usage(`cannot read ${args[0]}: ${e.message}`);
  }
  let json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    console.log(`error  invalid-json  -  ${e.message}`);
    console.log('1 error(s), 0 warning(s)');
    process.exit(1);
  }
  if (typeof json?.asyncapi !== 'string' || !json.asyncapi.startsWith('3.')) {
    console.log(`error  asyncapi-version  /asyncapi  expected an AsyncAPI 3.x document, got ${JSON.stringify(json?.asyncapi)}`);
    console.log('1 error(s), 0 warning(s)');
    process.exit(1);
  }

  const require = createRequire(join(parserDir(), 'package.json'));
  const name = '@asyncapi/parser'; // not a literal: resolved in the cache dir, not the repo
  const { Parser } = /** @type {{Parser: new () => {parse(text: string): Promise<any>}}} */ (require(name));
  const parser = new Parser();
  const { document, diagnostics } = await parser.parse(text);

  let errors = 0;
  let warnings = 0;
  for (const d of diagnostics) {
    const severity = SEVERITY[d.severity] ?? String(d.severity);
    if (d.severity === 0) errors++;
    if (d.severity === 1) warnings++;
    const path = d.path?.length ? `/${d.path.join('/')}` : '/';
    console.log(`${severity}  ${d.code}  ${path}  ${d.message}`);
  }
  if (!document && errors === 0) {
    console.log('error  unparsed  /  the parser returned no document');
    errors++;
  }
  console.log(`${errors} error(s), ${warnings} warning(s)`);
  process.exit(errors > 0 ? 1 : 0);
}

await main();
