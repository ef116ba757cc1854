#!/usr/bin/env bash
# Stop a node started by e2e/node/start.sh and put the machine back as start.sh found it:
# kube-proxy, kubelet and scheduler first, then every container of the private Docker daemon,
# dockerd and its bridge, the control plane; then the kubelet's mounts under <workdir>, its
# cgroups, the iptables rules (as saved by start.sh), the sysctls recorded in
# <workdir>/node/machine-state, and the pod log links it left in /var/log. Safe to run twice.
#
#   e2e/node/stop.sh <workdir>
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ $# -eq 1 && -n "$1" ]] || { echo "usage: $0 <workdir>" >&2; exit 2; }
[[ -d "$1" ]] || exit 0
W=$(cd "$1" && pwd)
N="$W/node"
log() { printf '[node-stop] %s\n' "$*" >&2; }

is_ours() { # pid name
  local argv0
  [[ -r "/proc/$1/cmdline" ]] || return 1
  argv0=$(tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | head -n1) || return 1
  [[ "$(basename -- "$argv0")" == "$2" ]]
}
stop_named() { # names...: SIGTERM those listed in pids, wait, SIGKILL
  local pid name want
  [[ -s "$W/pids" ]] || return 0
  while read -r pid name; do
    for want in "$@"; do
      [[ "$name" == "$want" ]] || continue
      is_ours "$pid" "$name" || continue
      kill -TERM "$pid" 2>/dev/null
      for _ in $(seq 1 100); do is_ours "$pid" "$name" || break; sleep 0.1; done
      is_ours "$pid" "$name" && kill -KILL "$pid" 2>/dev/null
      log "stopped $name (pid $pid)"
    done
  done < <(tac "$W/pids")
}

# 1. The node's agents, so nothing restarts the containers.
stop_named ankusa-pod-dns dnsmasq kube-proxy kubelet kube-scheduler

# 2. Every container of our Docker daemon (pods and sandboxes), then the daemon and its bridge.
[[ -d "$N" ]] && "$HERE/docker.sh" stop "$N"

# 3. The control plane, newest first.
"$HERE/../controlplane/stop.sh" "$W" 2>&1 | sed 's/^/  /' >&2

# 4. Mounts the kubelet made under the workdir (secret tmpfs, local volume binds), deepest first.
if command -v findmnt >/dev/null; then
  findmnt -rn -o TARGET | awk -v w="$W/" 'index($0, w) == 1' | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
  done
fi

# 5. The kubelet's cgroups (kubepods/...), deepest first, once their tasks are gone.
for sub in /sys/fs/cgroup/*/; do
  [[ -d "$sub/kubepods" ]] || continue
  find "$sub/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null
done
[[ -d /sys/fs/cgroup/systemd/kubepods ]] && find /sys/fs/cgroup/systemd/kubepods -depth -type d -exec rmdir {} \; 2>/dev/null

# 6. The machine as start.sh found it.
if [[ -s "$N/machine-state" ]]; then
  while read -r kind a b; do
    case "$kind" in
      sysctl) [[ "$b" == "-" ]] || echo "$b" >"/proc/sys/${a//.//}" 2>/dev/null ;;
    esac
  done <"$N/machine-state"
  for fam in iptables ip6tables; do
    if [[ -f "$N/$fam.before" ]]; then
      for t in filter nat mangle raw; do
        "$fam" -t "$t" -F 2>/dev/null; "$fam" -t "$t" -X 2>/dev/null
      done
      "$fam-restore" <"$N/$fam.before" 2>/dev/null || log "cannot restore $fam rules"
    fi
  done
  for d in pods containers; do
    if [[ -f "$N/var-log-$d.before" && -d "/var/log/$d" ]]; then
      comm -13 <(sort "$N/var-log-$d.before") <(ls -A "/var/log/$d" | sort) |
        while read -r e; do [[ -n "$e" ]] && rm -rf "/var/log/$d/$e"; done
    fi
    grep -q "dir /var/log/$d absent" "$N/machine-state" && rmdir "/var/log/$d" 2>/dev/null
  done
  mv "$N/machine-state" "$N/machine-state.restored"
fi
[[ -f "$W/watchdog.pid" ]] && rm -f "$W/watchdog.pid"
log "stopped"
exit 0
