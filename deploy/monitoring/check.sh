#!/usr/bin/env bash
# Checks the monitoring files:
#   render.sh --check   the plain rules file and the chart's dashboard equal a fresh render of
#                       their one source (needs helm: charts/fetch-helm.sh)
#   promtool check rules deploy/monitoring/ankusa-rules.yaml
#   promtool test rules  deploy/monitoring/ankusa-rules.test.yaml
#   the dashboard is valid JSON
# Installs promtool first if it is missing. Runs from any directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/install-promtool.sh"
"$here/render.sh" --check
cd "$here"
promtool check rules ankusa-rules.yaml
promtool test rules ankusa-rules.test.yaml
python3 -m json.tool ankusa-dashboard.json >/dev/null
