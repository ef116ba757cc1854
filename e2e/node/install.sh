#!/usr/bin/env bash
# Installs the Debian packages the real node needs, if any is missing (fast when all are
# there): docker.io (Docker 20.10 with containerd and runc; the kubelet 1.20 runs pods on it
# through dockershim), iptables (kube-proxy), iproute2 (the bridge), util-linux (findmnt), jq (runc-oom-clamp),
# dnsmasq-base (the pods' DNS records, start.sh).
# Debian's package does not start a daemon here (policy-rc.d); e2e/node/start.sh starts a
# private one and e2e/node/stop.sh stops it.
set -euo pipefail
need=()
for p in docker.io iptables iproute2 util-linux jq dnsmasq-base; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing node packages: ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
