#!/usr/bin/env bash
# Installs the dev dependencies (npm ci, from the lock file, cache under ~/.cache/ankusa/npm)
# when they are missing, and builds dist/ when it is missing or older than its sources.
# Sourced or run by ./check and ./conformance-runner; build output goes to stderr.
set -euo pipefail
sdk="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$sdk"
export npm_config_cache="${npm_config_cache:-$HOME/.cache/ankusa/npm}"
if [ ! -x node_modules/.bin/tsc ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "ankusa sdk/typescript: npm ci" >&2
  npm ci --no-audit --no-fund --prefer-offline --loglevel=error >&2
fi
stamp=dist/.build-stamp
if [ ! -f "$stamp" ] || [ -n "$(find src tsconfig.json tsconfig.node.json package.json -newer "$stamp" -print -quit)" ]; then
  echo "ankusa sdk/typescript: building dist/" >&2
  rm -rf dist
  node_modules/.bin/tsc -p tsconfig.json >&2
  node_modules/.bin/tsc -p tsconfig.node.json >&2
  touch "$stamp"
fi
