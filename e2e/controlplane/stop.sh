#!/usr/bin/env bash
# Stop a control plane started by start.sh: kill the PIDs listed in <workdir>/pids
# (newest first), SIGTERM then SIGKILL after ANKUSA_CP_STOP_GRACE seconds (default 10).
# A PID is only signalled if it still runs the binary named in the pids file, so a
# recycled PID is never hit. Safe to run twice. Leaves the workdir (logs, certs) in place.
#
#   e2e/controlplane/stop.sh <workdir>
set -euo pipefail

[[ $# -eq 1 && -n "$1" ]] || { echo "usage: $0 <workdir>" >&2; exit 2; }
W=$1
GRACE="${ANKUSA_CP_STOP_GRACE:-10}"
log() { printf '[controlplane-stop] %s\n' "$*" >&2; }

if [[ ! -s "$W/pids" ]]; then
  log "no $W/pids; nothing to stop"
  exit 0
fi

is_ours() { # pid name -> true if pid is alive and its argv[0] is the named binary
  local pid=$1 name=$2 argv0
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  argv0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1) || return 1
  [[ "$(basename -- "$argv0")" == "$name" ]]
}

mapfile -t lines < <(tac "$W/pids")
for line in "${lines[@]}"; do
  read -r pid name <<<"$line"
  [[ "$pid" =~ ^[0-9]+$ ]] || continue
  if ! is_ours "$pid" "$name"; then
    log "$name (pid $pid) not running"
    continue
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $(( GRACE * 10 ))); do
    is_ours "$pid" "$name" || break
    sleep 0.1
  done
  if is_ours "$pid" "$name"; then
    log "$name (pid $pid) ignored SIGTERM for ${GRACE}s; SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
  fi
  # Reap if it is our child (only when sourced from the starting shell); otherwise init does.
  wait "$pid" 2>/dev/null || true
  log "stopped $name (pid $pid)"
done
: >"$W/pids"
