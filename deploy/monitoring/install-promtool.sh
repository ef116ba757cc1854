#!/usr/bin/env bash
# Installs promtool (Debian's `prometheus` package provides it) if it is not on PATH (fast when
# it is there). deploy/monitoring/check.sh runs it before checking and testing the alert rules.
set -euo pipefail
if ! command -v promtool >/dev/null 2>&1; then
  echo "installing package: prometheus (for promtool)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
