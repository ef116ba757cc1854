#!/usr/bin/env bash
# Stops what tests/brokers/start.sh <statedir> started (and nothing else): each recorded
# process group, RabbitMQ through rabbitmqctl first, and epmd if start.sh brought it up.
#
# usage: tests/brokers/stop.sh <statedir>
set -uo pipefail
state="${1:?usage: $0 <statedir>}"
[ -f "$state/started" ] || exit 0
while read -r name pid; do
  [ -n "${pid:-}" ] || continue
  case "$name" in
    rabbitmq)
      RABBITMQ_NODENAME=rabbit@localhost rabbitmqctl stop >/dev/null 2>&1 || true
      kill -TERM -- "-$pid" 2>/dev/null || true
      ;;
    epmd)
      kill -TERM "$pid" 2>/dev/null || true
      ;;
    *)
      kill -TERM -- "-$pid" 2>/dev/null || true
      ;;
  esac
done < "$state/started"
# Give them a moment, then make sure.
sleep 0.5
while read -r name pid; do
  [ -n "${pid:-}" ] || continue
  if [ "$name" = epmd ]; then kill -KILL "$pid" 2>/dev/null || true
  else kill -KILL -- "-$pid" 2>/dev/null || true; fi
done < "$state/started"
: > "$state/started"
