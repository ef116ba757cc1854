#!/usr/bin/env node
// Checks that every fenced code block of a docs section is preceded by a line
// `<!-- example: sdk/typescript/examples/<file> -->` and holds exactly that file's contents,
// and that every example file is shown: the docs' code is code the check runs.
//
//   node sdk/typescript/tools/check-docs-section.mjs sdk/typescript/DOCS-SECTION.md

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const sdk = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(sdk, '..', '..');
const file = process.argv[2] ?? join(sdk, 'DOCS-SECTION.md');
const lines = readFileSync(file, 'utf8').split('\n');
const MARKER = /^<!-- example: (sdk\/typescript\/examples\/[A-Za-z0-9._-]+) -->$/;

const problems = [];
const shown = new Set();
for (let i = 0; i < lines.length; i++) {
  const fence = /^(```+|~~~+)/.exec(lines[i]);
  if (!fence) continue;
  const close = lines.findIndex((l, j) => j > i && l.startsWith(fence[1]) && l.trim() === fence[1]);
  if (close < 0) {
    problems.push(`line ${i + 1}: a code block that is never closed`);
    break;
  }
  const block = lines.slice(i + 1, close).join('\n') + '\n';
  let j = i - 1;
  while (j >= 0 && lines[j].trim() === '') j--;
  const marker = j >= 0 ? MARKER.exec(lines[j]) : null;
  if (!marker) {
    problems.push(`line ${i + 1}: a code block without a <!-- example: sdk/typescript/examples/<file> --> line before it`);
  } else {
    const path = marker[1];
    shown.add(path);
    let text;
    try {
      text = readFileSync(join(repo, path), 'utf8');
    } catch {
      problems.push(`line ${j + 1}: ${path} does not exist`);
      text = null;
    }
    if (text !== null && text !== block) {
      const a = text.split('\n');
      const b = block.split('\n');
      const at = a.findIndex((l, k) => l !== b[k]);
      problems.push(`line ${i + 1}: the block differs from ${path} at its line ${at + 1}: ${JSON.stringify(b[at])} vs ${JSON.stringify(a[at])}`);
    }
  }
  i = close;
}
for (const f of readdirSync(join(sdk, 'examples')).sort()) {
  if (!shown.has(`sdk/typescript/examples/${f}`)) problems.push(`examples/${f} is not shown`);
}
for (const p of problems) console.log(`   FAIL ${p}`);
if (problems.length) process.exit(1);
console.log(`   ${shown.size} code blocks, each exactly its example file`);
