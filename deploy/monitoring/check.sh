#!/usr/bin/env bash
# Checks the alert rules and runs their unit tests:
#   promtool check rules deploy/monitoring/ankusa-rules.yaml
#   promtool test rules  deploy/monitoring/ankusa-rules.test.yaml
# Installs promtool first if it is missing. Runs from any directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/install-promtool.sh"
cd "$here"
promtool check rules ankusa-rules.yaml
promtool test rules ankusa-rules.test.yaml
