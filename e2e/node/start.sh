#!/usr/bin/env bash
# Start a throw-away one-node Kubernetes 1.20 cluster on this machine: the control plane of
# e2e/controlplane (etcd, kube-apiserver, kube-controller-manager with the persistent-volume
# binder) plus a REAL node -- kube-scheduler, kubelet (dockershim) on a private Docker daemon,
# kube-proxy (iptables) -- and a static provisioner of local PersistentVolumes.
#
#   e2e/node/start.sh <workdir>
#
# On success prints `KUBECONFIG=<workdir>/kubeconfig` and `DOCKER_HOST=<socket>` on stdout
# (progress on stderr). Stop it with e2e/node/stop.sh <workdir>, which also puts the machine
# back as it was (sysctls, iptables, bridge, mounts, cgroups).
#
# Network (everything stays on this machine):
#   - a bridge `ankusa0` (10.250.0.1/24) of our own; pods get 10.250.0.x from a private
#     dockerd started with --iptables=false --ip-forward=false --ip-masq=false, so a pod can
#     reach this host and the other pods, and nothing beyond: this host forwards nothing.
#   - the apiserver binds the bridge address 10.250.0.1, so pods reach it through the
#     `kubernetes` Service (10.251.0.1:443, DNAT by kube-proxy to the host itself) exactly as
#     in-cluster clients do on a real cluster; the host's own clients use the same address.
#   - the kubelet binds 10.250.0.1 (client certificates of the cluster CA only).
#   - pods resolve names with dnsmasq on 10.250.0.1:53, which knows only the pods of
#     StatefulSets under their headless Service (pod-dns.sh) and has no upstream: no DNS leaves.
#
# Storage: StorageClass `ankusa-local` (default class, WaitForFirstConsumer) and
# ANKUSA_NODE_PVS (default 8) `local` PersistentVolumes of 10Gi under <workdir>/volumes. The
# kubelet applies a pod's fsGroup to them, as it does for real local disks; their data outlives
# the pods (the PVs use the Retain policy).
#
# Environment:
#   ANKUSA_K8S_ASSETS     binaries (default $HOME/.cache/ankusa/k8s-1.20.2, e2e/controlplane/build.sh)
#   ANKUSA_DOCKER_ROOT    dockerd --data-root (default $HOME/.cache/ankusa/docker: images cached)
#   ANKUSA_NODE_PVS       number of local PersistentVolumes (default 8)
#   ANKUSA_CP_WATCH_PID   a watchdog runs e2e/node/stop.sh once that process is gone
#   ANKUSA_CP_TIMEOUT     seconds to wait for each component (default 90)
#
# Exit codes: 0 ok, 2 usage, 3 binaries or packages missing, 1 anything else.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CP="$HERE/../controlplane"
ASSETS="${ANKUSA_K8S_ASSETS:-$HOME/.cache/ankusa/k8s-1.20.2}"
TIMEOUT="${ANKUSA_CP_TIMEOUT:-90}"
NPVS="${ANKUSA_NODE_PVS:-8}"
NODE_IP=10.250.0.1
POD_CIDR=10.250.0.0/24
SERVICE_CIDR=10.251.0.0/16
NODE_NAME=ankusa-node
DOCKER_SOCK=/run/ankusa-docker.sock
PAUSE_IMAGE=ankusa.local/pause:3.4

T0=$(date +%s)
log() { printf '[node +%3ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" >&2; }

[[ $# -eq 1 && -n "$1" ]] || { echo "usage: $0 <workdir>" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { log "needs root (a kubelet, a Docker daemon, iptables)"; exit 3; }
mkdir -p "$1"
W=$(cd "$1" && pwd)
N="$W/node"

for b in kubelet kube-scheduler kube-proxy pause; do
  [[ -x "$ASSETS/$b" ]] || { log "missing $ASSETS/$b -- run e2e/controlplane/build.sh"; exit 3; }
done
for tool in dockerd docker iptables ip openssl curl; do
  command -v "$tool" >/dev/null || { log "missing $tool -- run e2e/node/install.sh"; exit 3; }
done

alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }
if [[ -s /run/ankusa-docker.pid ]] && alive "$(cat /run/ankusa-docker.pid)"; then
  log "the project's dockerd already runs (pid $(cat /run/ankusa-docker.pid)): another node? stop it with e2e/node/stop.sh <its workdir>"
  exit 1
fi

fail() {
  log "FAILED: $*"
  local f
  for f in "$W"/logs/*.log; do
    [[ -s "$f" && "$f" != */openssl.log ]] || continue
    echo "----- last lines of $f -----" >&2
    tail -n 25 "$f" >&2
  done
  "$HERE/stop.sh" "$W" >&2 || true
  exit 1
}

# ---- the machine as we found it (stop.sh puts it back) ----------------------------------
rm -rf "$N"
mkdir -p "$N"
sysctl_get() { cat "/proc/sys/${1//.//}" 2>/dev/null || echo "-"; }
{
  for k in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables \
    net.ipv4.conf.all.route_localnet; do
    echo "sysctl $k $(sysctl_get "$k")"
  done
  for d in /var/log/pods /var/log/containers; do
    if [[ -d "$d" ]]; then echo "dir $d existed"; else echo "dir $d absent"; fi
  done
} >"$N/machine-state"
# The kubelet and kube-proxy add chains and rules of their own; stop.sh flushes the tables and
# restores these.
iptables-save >"$N/iptables.before"
ip6tables-save >"$N/ip6tables.before" 2>/dev/null || true
mkdir -p /var/log/pods /var/log/containers
ls -A /var/log/pods >"$N/var-log-pods.before"
ls -A /var/log/containers >"$N/var-log-containers.before"

# ---- bridge (before the apiserver, which binds its address) ---------------------------------
"$HERE/docker.sh" bridge "$N"

# ---- control plane on the bridge address ---------------------------------------------------
log "control plane on $NODE_IP"
ANKUSA_CP_WATCH_PID="" ANKUSA_CP_ADDRESS=$NODE_IP ANKUSA_SERVICE_CIDR=$SERVICE_CIDR ANKUSA_CP_NODE=1 \
  "$CP/start.sh" "$W" >/dev/null || { log "control plane failed"; "$HERE/stop.sh" "$W" >&2 || true; exit 1; }
# shellcheck disable=SC1091
source "$W/env"
KUBECONFIG="$W/kubeconfig"
P="$W/pki"

spawn() { # name binary args...
  local name=$1; shift
  nohup "$@" >"$W/logs/$name.log" 2>&1 </dev/null &
  LAST_PID=$!
  echo "$LAST_PID $name" >>"$W/pids"
  log "started $name (pid $LAST_PID)"
}
wait_for() { # name pid description command...
  local name=$1 pid=$2 what=$3; shift 3
  local deadline=$(( $(date +%s) + TIMEOUT ))
  until "$@" >/dev/null 2>&1; do
    alive "$pid" || fail "$name exited before becoming $what (log: $W/logs/$name.log)"
    (( $(date +%s) < deadline )) || fail "$name not $what after ${TIMEOUT}s (log: $W/logs/$name.log)"
    sleep 0.3
  done
  log "$name is $what"
}
used_ports=" $ANKUSA_CP_APISERVER_PORT $ANKUSA_CP_KCM_PORT "
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(( 20000 + RANDOM % 12000 ))
    [[ "$used_ports" == *" $p "* ]] && continue
    [[ -n "$(ss -Hltn "sport = :$p" 2>/dev/null)" ]] && continue
    used_ports+="$p "
    printf -v "$1" '%s' "$p"; return 0
  done
  fail "no free port found"
}
CURL=(curl -fsS --max-time 5 --cacert "$P/ca.crt" -H "Authorization: Bearer $ANKUSA_CP_TOKEN")
KUBECTL=(kubectl --kubeconfig "$KUBECONFIG")

# ---- Docker ----------------------------------------------------------------------------------
"$HERE/docker.sh" start "$N" || fail "dockerd (log: $N/logs/dockerd.log)"
cat "$N/pids" >>"$W/pids"
export DOCKER_HOST="unix://$DOCKER_SOCK"
if ! docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1; then
  mkdir -p "$N/pause-root"
  cp "$ASSETS/pause" "$N/pause-root/pause"
  tar -C "$N/pause-root" -c pause |
    docker import --change 'ENTRYPOINT ["/pause"]' --change 'USER 65535:65535' - "$PAUSE_IMAGE" >/dev/null
  log "imported $PAUSE_IMAGE from the pause built from source"
fi

# ---- kube-scheduler ----------------------------------------------------------------------------
free_port SCHED_PORT
spawn kube-scheduler "$ASSETS/kube-scheduler" \
  --kubeconfig "$KUBECONFIG" \
  --authentication-kubeconfig "$KUBECONFIG" \
  --authorization-kubeconfig "$KUBECONFIG" \
  --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --port 0 \
  --leader-elect=false --profiling=false --v 1
wait_for kube-scheduler "$LAST_PID" healthy curl -fsSk --max-time 2 "https://127.0.0.1:$SCHED_PORT/healthz"

# ---- kubelet ---------------------------------------------------------------------------------
free_port KUBELET_PORT; free_port KUBELET_HEALTHZ
mkdir -p "$N/kubelet" "$N/dockershim" "$N/kubelet-pki"
echo "nameserver $NODE_IP" >"$N/resolv.conf"
cat >"$N/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $P/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failSwapOn: false
resolvConf: $N/resolv.conf
clusterDomain: cluster.local
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 40
# Pods (and their Secret volumes) are synced every 20 s instead of every minute, so a test sees
# a Secret's change in its volume sooner.
syncFrequency: 20s
EOF
spawn kubelet "$ASSETS/kubelet" \
  --config "$N/kubelet.yaml" \
  --kubeconfig "$KUBECONFIG" \
  --container-runtime docker \
  --docker-endpoint "unix://$DOCKER_SOCK" \
  --experimental-dockershim-root-directory "$N/dockershim" \
  --pod-infra-container-image "$PAUSE_IMAGE" \
  --root-dir "$N/kubelet" \
  --cert-dir "$N/kubelet-pki" \
  --hostname-override "$NODE_NAME" \
  --node-ip "$NODE_IP" \
  --v 1
node_ready() {
  [[ "$("${KUBECTL[@]}" get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}
wait_for kubelet "$LAST_PID" "Ready (node $NODE_NAME)" node_ready

# ---- kube-proxy ------------------------------------------------------------------------------
free_port PROXY_HEALTHZ; free_port PROXY_METRICS
spawn kube-proxy "$ASSETS/kube-proxy" \
  --kubeconfig "$KUBECONFIG" \
  --hostname-override "$NODE_NAME" \
  --proxy-mode iptables \
  --cluster-cidr "$POD_CIDR" \
  --bind-address "$NODE_IP" \
  --healthz-bind-address "127.0.0.1:$PROXY_HEALTHZ" \
  --metrics-bind-address "127.0.0.1:$PROXY_METRICS" \
  --conntrack-max-per-core 0 \
  --conntrack-tcp-timeout-established 0 \
  --conntrack-tcp-timeout-close-wait 0 \
  --v 1
kubernetes_service_proxied() { iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q 'default/kubernetes:https'; }
wait_for kube-proxy "$LAST_PID" "proxying the kubernetes Service" kubernetes_service_proxied

# ---- pod DNS: a StatefulSet's pods by name under their headless Service -----------------------
# dnsmasq on the nameserver the pods use, with no upstream: it answers the names pod-dns.sh
# keeps in a hosts file (`<pod>.<service>.<namespace>.svc`, as a cluster DNS does) and nothing
# else, so no DNS query leaves this machine.
: >"$N/pod-hosts"
spawn dnsmasq dnsmasq --keep-in-foreground --no-resolv --no-hosts --no-poll \
  --addn-hosts="$N/pod-hosts" --listen-address="$NODE_IP" --bind-interfaces --port=53 \
  --user=root --pid-file= --local-ttl=1 --log-facility=-
DNSMASQ_PID=$LAST_PID
sleep 0.3
alive "$DNSMASQ_PID" || fail "dnsmasq exited (log: $W/logs/dnsmasq.log)"
spawn ankusa-pod-dns bash -c 'exec -a ankusa-pod-dns bash "$0" "$@"' "$HERE/pod-dns.sh" "$KUBECONFIG" "$N/pod-hosts" "$W/pids"

# ---- static local PersistentVolumes ---------------------------------------------------------------
mkdir -p "$W/volumes"
{
  cat <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: ankusa-local
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
EOF
  for i in $(seq 1 "$NPVS"); do
    mkdir -p "$W/volumes/pv-$i"
    cat <<EOF
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: ankusa-local-$i
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ankusa-local
  local: {path: $W/volumes/pv-$i}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [$NODE_NAME]}
EOF
  done
} >"$N/storage.yaml"
"${KUBECTL[@]}" apply -f "$N/storage.yaml" >"$W/logs/storage.log" 2>&1 || fail "applying $N/storage.yaml"
log "StorageClass ankusa-local (default) with $NPVS local PersistentVolumes"

cat >>"$W/env" <<EOF
ANKUSA_NODE_NAME=$NODE_NAME
ANKUSA_NODE_IP=$NODE_IP
ANKUSA_NODE_KUBELET_PORT=$KUBELET_PORT
DOCKER_HOST=unix://$DOCKER_SOCK
EOF

if [[ -n "${ANKUSA_CP_WATCH_PID:-}" ]]; then
  setsid nohup bash -c '
    while kill -0 "$1" 2>/dev/null && [[ -s "$2/pids" ]]; do sleep 1; done
    [[ -s "$2/pids" ]] && "$3/stop.sh" "$2"
  ' ankusa-node-watchdog "$ANKUSA_CP_WATCH_PID" "$W" "$HERE" >"$W/logs/watchdog.log" 2>&1 </dev/null &
  echo $! >"$W/watchdog.pid"
  log "watchdog (pid $!) stops this node when pid $ANKUSA_CP_WATCH_PID exits"
fi
log "node $NODE_NAME up in $(( $(date +%s) - T0 ))s (apiserver $ANKUSA_CP_APISERVER_URL)"
echo "KUBECONFIG=$KUBECONFIG"
echo "DOCKER_HOST=unix://$DOCKER_SOCK"
