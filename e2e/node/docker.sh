#!/usr/bin/env bash
# The project's private Docker daemon (Debian's docker.io, e2e/node/install.sh), kept apart
# from any other Docker on the machine: its own socket (/run/ankusa-docker.sock), exec root,
# data root (ANKUSA_DOCKER_ROOT, default ~/.cache/ankusa/docker, so images are cached across
# runs) and bridge `ankusa0` (10.250.0.1/24). It touches neither iptables nor forwarding nor
# masquerading: containers reach this host and each other, nothing else.
#
#   e2e/node/docker.sh bridge <dir>   create the bridge if missing (noted in <dir>/bridge)
#   e2e/node/docker.sh start <dir>    bridge + dockerd; appends "<pid> dockerd" to <dir>/pids
#   e2e/node/docker.sh stop <dir>     removes every container, stops dockerd, deletes the
#                                     bridge if this script created it
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BRIDGE=ankusa0
BRIDGE_IP=10.250.0.1/24
SOCK=/run/ankusa-docker.sock
PIDFILE=/run/ankusa-docker.pid
ROOT="${ANKUSA_DOCKER_ROOT:-$HOME/.cache/ankusa/docker}"
log() { printf '[docker] %s\n' "$*" >&2; }
[[ $# -eq 2 ]] || { echo "usage: $0 bridge|start|stop <dir>" >&2; exit 2; }
mkdir -p "$2"
D=$(cd "$2" && pwd)
export DOCKER_HOST="unix://$SOCK"

bridge() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    echo created >"$D/bridge"
  fi
  ip addr replace "$BRIDGE_IP" dev "$BRIDGE"
  ip link set "$BRIDGE" up
}

case "$1" in
  bridge) bridge ;;
  start)
    if [[ -s "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      log "dockerd already runs (pid $(cat "$PIDFILE"))"; exit 1
    fi
    bridge
    mkdir -p "$ROOT" "$D/logs"
    nohup dockerd \
      --data-root "$ROOT" \
      --exec-root /run/ankusa-docker \
      --host "unix://$SOCK" \
      --pidfile "$PIDFILE" \
      --bridge "$BRIDGE" \
      --iptables=false --ip-forward=false --ip-masq=false \
      --exec-opt native.cgroupdriver=cgroupfs \
      --add-runtime "oomclamp=$HERE/runc-oom-clamp" --default-runtime oomclamp \
      --storage-driver overlay2 \
      --log-driver json-file --log-opt max-size=10m \
      >"$D/logs/dockerd.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid dockerd" >>"$D/pids"
    for _ in $(seq 1 300); do
      docker version >/dev/null 2>&1 && { log "dockerd ready (pid $pid, $SOCK)"; exit 0; }
      kill -0 "$pid" 2>/dev/null || { tail -20 "$D/logs/dockerd.log" >&2; log "dockerd exited"; exit 1; }
      sleep 0.1
    done
    log "dockerd not ready after 30s"; tail -20 "$D/logs/dockerd.log" >&2; exit 1 ;;
  stop)
    if docker version >/dev/null 2>&1; then
      ids=$(docker ps -aq)
      # shellcheck disable=SC2086
      [[ -z "$ids" ]] || timeout 60 docker rm -f $ids >/dev/null 2>&1 || true
    fi
    if [[ -s "$PIDFILE" ]]; then
      pid=$(cat "$PIDFILE")
      if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        log "stopped dockerd (pid $pid)"
      fi
    fi
    if [[ -f "$D/bridge" ]] && ip link show "$BRIDGE" >/dev/null 2>&1; then
      ip link set "$BRIDGE" down 2>/dev/null || true
      ip link del "$BRIDGE" 2>/dev/null && log "deleted bridge $BRIDGE"
      rm -f "$D/bridge"
    fi ;;
  *) echo "usage: $0 bridge|start|stop <dir>" >&2; exit 2 ;;
esac
