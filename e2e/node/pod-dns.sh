#!/usr/bin/env bash
# The real node's pod DNS records: every second, the pods that have a hostname and a subdomain
# (a StatefulSet's pods under their headless Service) as `<hostname>.<subdomain>.<namespace>.svc`
# (and `.svc.cluster.local`) → pod IP, written to the hosts file dnsmasq serves (start.sh), which
# is told to re-read it (SIGHUP) when it changed. What a cluster DNS answers for such pods; no
# other name resolves.
#
#   pod-dns.sh <kubeconfig> <hosts file> <pids file>
set -uo pipefail
KUBECONFIG_FILE=$1 HOSTS=$2 PIDS=$3
last="-"
while :; do
  cur=$(kubectl --kubeconfig "$KUBECONFIG_FILE" get pods -A -o jsonpath='{range .items[*]}{.status.podIP}{" "}{.spec.hostname}{" "}{.spec.subdomain}{" "}{.metadata.namespace}{"\n"}{end}' 2>/dev/null |
    awk 'NF == 4 { printf "%s %s.%s.%s.svc %s.%s.%s.svc.cluster.local\n", $1, $2, $3, $4, $2, $3, $4 }' | sort)
  if [[ "$cur" != "$last" ]]; then
    printf '%s\n' "$cur" >"$HOSTS.new" && mv "$HOSTS.new" "$HOSTS"
    pid=$(awk '$2 == "dnsmasq" { p = $1 } END { print p }' "$PIDS")
    [[ -n "$pid" ]] && kill -HUP "$pid" 2>/dev/null
    last=$cur
  fi
  sleep 1
done
