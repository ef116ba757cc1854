#!/usr/bin/env bash
# Start a throw-away local control plane (etcd + kube-apiserver + kube-controller-manager
# 1.20.2, built by build.sh) on free 127.0.0.1 ports.
#
#   e2e/controlplane/start.sh <workdir>
#
# On success prints `KUBECONFIG=<workdir>/kubeconfig` on stdout (progress goes to stderr)
# and leaves in <workdir>:
#   kubeconfig          admin kubeconfig (https://127.0.0.1:<port>, inline CA, bearer token)
#   pids                one "<pid> <name>" line per process, in start order (used by stop.sh)
#   env                 shell-sourceable ANKUSA_CP_* variables (URLs, ports, token, paths)
#   pki/                ca.{crt,key}, apiserver.{crt,key}, sa.{key,pub}, tokens.csv
#   logs/               etcd.log kube-apiserver.log kube-controller-manager.log
#   etcd-data/          etcd data dir (wiped on every start)
#
# Environment:
#   ANKUSA_K8S_ASSETS    dir with kube-apiserver, kube-controller-manager, etcd
#                        (default $HOME/.cache/ankusa/k8s-1.20.2, filled by build.sh)
#   ANKUSA_CP_TIMEOUT    seconds to wait for each component (default 90)
#   ANKUSA_CP_VERBOSITY  klog -v for apiserver/controller-manager (default 1)
#   ANKUSA_CP_WATCH_PID  if set, a detached watchdog runs stop.sh as soon as that process is gone
#                        (a test harness passes its own PID, so a killed test run leaves no
#                        etcd/apiserver behind); the watchdog ends when stop.sh empties pids.
#   ANKUSA_SERVICE_CIDR  --service-cluster-ip-range (default 127.100.0.0/16: a LOOPBACK range
#                        on purpose, so that if anything ever dials a ClusterIP -- the apiserver
#                        for a service-ref webhook/APIService, `kubectl proxy` -- it stays on
#                        this machine; 1.20 accepts it. No kube-proxy runs anyway. The real
#                        node of e2e/node sets a private range that its kube-proxy serves.)
#   ANKUSA_CP_ADDRESS    address the apiserver binds and advertises (default 127.0.0.1). The
#                        real node (e2e/node) sets its bridge address so pods reach the
#                        apiserver through the `kubernetes` Service; then the default endpoint
#                        reconciler runs (it refuses loopback addresses, hence `none` otherwise).
#   ANKUSA_CP_NODE       1 = a real kubelet will join (e2e/node): the persistent-volume binder,
#                        attach/detach, node-lifecycle and TTL controllers run too, and the
#                        apiserver gets a client certificate for kubelets (logs, exec).
#
# Exit codes: 0 ok, 2 usage, 3 binaries missing (run build.sh), 1 anything else.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ASSETS="${ANKUSA_K8S_ASSETS:-$HOME/.cache/ankusa/k8s-1.20.2}"
TIMEOUT="${ANKUSA_CP_TIMEOUT:-90}"
VERBOSITY="${ANKUSA_CP_VERBOSITY:-1}"
SERVICE_CIDR="${ANKUSA_SERVICE_CIDR:-127.100.0.0/16}"
ADDRESS="${ANKUSA_CP_ADDRESS:-127.0.0.1}"
NODE_MODE="${ANKUSA_CP_NODE:-0}"

T0=$(date +%s)
log() { printf '[controlplane +%3ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" >&2; }

[[ $# -eq 1 && -n "$1" ]] || { echo "usage: $0 <workdir>" >&2; exit 2; }
mkdir -p "$1"
W=$(cd "$1" && pwd)

# ---- binaries -----------------------------------------------------------------------
APISERVER="$ASSETS/kube-apiserver"
KCM="$ASSETS/kube-controller-manager"
ETCD="$ASSETS/etcd"
[[ -x "$ETCD" ]] || ETCD=$(command -v etcd || true)
for b in "$APISERVER" "$KCM" "$ETCD"; do
  if [[ -z "$b" || ! -x "$b" ]]; then
    log "missing binary ${b:-etcd} -- run e2e/controlplane/build.sh first (cache: $ASSETS)"
    exit 3
  fi
done
for tool in openssl curl; do
  command -v "$tool" >/dev/null || { log "missing tool: $tool"; exit 1; }
done

# ---- refuse to clobber a running instance -------------------------------------------
alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }
if [[ -f "$W/pids" ]]; then
  while read -r pid _; do
    if alive "$pid"; then
      log "a control plane from $W/pids is still running (pid $pid); run stop.sh $W first"
      exit 1
    fi
  done <"$W/pids"
fi
rm -rf "$W/pki" "$W/logs" "$W/etcd-data" "$W/kcm-certs" "$W/kubeconfig" "$W/pids" "$W/env"
mkdir -p "$W/pki" "$W/logs" "$W/kcm-certs"
chmod 700 "$W/pki"
: >"$W/pids"

# ---- on failure: show logs, stop what was started -----------------------------------
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

# ---- free loopback ports --------------------------------------------------------------
# Random ports below the kernel's ephemeral range, checked against current listeners.
used_ports=" "
port_in_use() {
  if command -v ss >/dev/null; then
    [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}
free_port() { # VAR -- sets VAR to a free port distinct from the ones already picked
  local lo hi p
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
  hi=$(( lo > 21000 ? lo - 1 : 32767 )); lo=20000
  for _ in $(seq 1 200); do
    p=$(( lo + RANDOM % (hi - lo) ))
    [[ "$used_ports" == *" $p "* ]] && continue
    port_in_use "$p" && continue
    used_ports+="$p "
    printf -v "$1" '%s' "$p"; return 0
  done
  fail "no free port found"
}
free_port ETCD_PORT; free_port ETCD_PEER_PORT; free_port API_PORT; free_port KCM_PORT
API_URL="https://$ADDRESS:$API_PORT"
ETCD_URL="http://127.0.0.1:$ETCD_PORT"

# ---- PKI ------------------------------------------------------------------------------
P="$W/pki"
log "generating CA, serving cert, service-account keys, admin token in $P"
{
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
    -keyout "$P/ca.key" -out "$P/ca.crt" -subj "/CN=ankusa-e2e-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$P/apiserver.key" -out "$P/apiserver.csr" \
    -subj "/CN=kube-apiserver"
  cat >"$P/apiserver.ext" <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$ADDRESS,IP:${SERVICE_CIDR%.*/*}.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EOF
  openssl x509 -req -sha256 -days 3650 -in "$P/apiserver.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" \
    -CAcreateserial -extfile "$P/apiserver.ext" -out "$P/apiserver.crt"
  # The apiserver's client certificate towards kubelets (logs, exec, port-forward).
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$P/kubelet-client.key" \
    -out "$P/kubelet-client.csr" -subj "/O=system:masters/CN=kube-apiserver-kubelet-client"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
    >"$P/kubelet-client.ext"
  openssl x509 -req -sha256 -days 3650 -in "$P/kubelet-client.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" \
    -CAcreateserial -extfile "$P/kubelet-client.ext" -out "$P/kubelet-client.crt"
  openssl genrsa -out "$P/sa.key" 2048
  openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub"
} >"$W/logs/openssl.log" 2>&1 || fail "openssl (see $W/logs/openssl.log)"
TOKEN=$(openssl rand -hex 32)
# token,user,uid,"group1,group2"
echo "$TOKEN,ankusa-admin,ankusa-admin,\"system:masters\"" >"$P/tokens.csv"
chmod 600 "$P"/*.key "$P/tokens.csv"

CA_B64=$(base64 -w0 <"$P/ca.crt")
cat >"$W/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ankusa-e2e
  cluster:
    server: $API_URL
    certificate-authority-data: $CA_B64
users:
- name: ankusa-admin
  user:
    token: $TOKEN
contexts:
- name: ankusa-e2e
  context:
    cluster: ankusa-e2e
    user: ankusa-admin
    namespace: default
current-context: ankusa-e2e
EOF
chmod 600 "$W/kubeconfig"

# ---- process helpers ----------------------------------------------------------------------
spawn() { # name binary args...
  local name=$1; shift
  nohup "$@" >"$W/logs/$name.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid $name" >>"$W/pids"
  log "started $name (pid $pid)"
  LAST_PID=$pid
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
CURL=(curl -fsS --max-time 5 --cacert "$P/ca.crt" -H "Authorization: Bearer $TOKEN")

# ---- etcd -------------------------------------------------------------------------------------
spawn etcd "$ETCD" \
  --name ankusa-e2e \
  --data-dir "$W/etcd-data" \
  --listen-client-urls "$ETCD_URL" \
  --advertise-client-urls "$ETCD_URL" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "ankusa-e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster-state new \
  --logger zap --log-outputs stderr --log-level warn
wait_for etcd "$LAST_PID" healthy curl -fsS --max-time 2 "$ETCD_URL/health"

# ---- kube-apiserver ----------------------------------------------------------------------------
# --insecure-port=0: 1.20 still opens an unauthenticated :8080 by default.
# --requestheader-*: only so that the controller-manager's delegated authn finds a
#   requestheader CA in kube-system/extension-apiserver-authentication (else it logs a burst of
#   "missing content for CA bundle" errors); no front-proxy cert is ever issued.
# --endpoint-reconciler-type=none: Endpoints may not hold loopback IPs, so the default
#   reconciler would fail every 10 s writing 127.0.0.1 into default/kubernetes.
RECONCILER=none
[[ "$ADDRESS" == 127.* ]] || RECONCILER=lease
spawn kube-apiserver "$APISERVER" \
  --etcd-servers "$ETCD_URL" \
  --bind-address "$ADDRESS" \
  --advertise-address "$ADDRESS" \
  --secure-port "$API_PORT" \
  --insecure-port 0 \
  --cert-dir "$W/pki" \
  --tls-cert-file "$P/apiserver.crt" \
  --tls-private-key-file "$P/apiserver.key" \
  --client-ca-file "$P/ca.crt" \
  --requestheader-client-ca-file "$P/ca.crt" \
  --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User \
  --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --token-auth-file "$P/tokens.csv" \
  --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$P/sa.pub" \
  --service-account-signing-key-file "$P/sa.key" \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --endpoint-reconciler-type "$RECONCILER" \
  --kubelet-client-certificate "$P/kubelet-client.crt" \
  --kubelet-client-key "$P/kubelet-client.key" \
  --kubelet-preferred-address-types InternalIP \
  --allow-privileged=true \
  --profiling=false \
  --v "$VERBOSITY"
wait_for kube-apiserver "$LAST_PID" ready "${CURL[@]}" "$API_URL/readyz"

# ---- kube-controller-manager -----------------------------------------------------------------------
# All default controllers except those that need nodes, a cloud, a volume plugin or a signer.
CONTROLLERS='*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-route,-service,-persistentvolume-binder,-attachdetach,-csrsigning,-csrapproving,-csrcleaner,-ttl'
# With a real node: bind PVCs to the node's local PersistentVolumes, track attachments, watch
# the node's heartbeats.
if [[ "$NODE_MODE" == 1 ]]; then
  CONTROLLERS='*,-nodeipam,-cloud-node-lifecycle,-route,-service,-csrsigning,-csrapproving,-csrcleaner'
fi
spawn kube-controller-manager "$KCM" \
  --kubeconfig "$W/kubeconfig" \
  --authentication-kubeconfig "$W/kubeconfig" \
  --authorization-kubeconfig "$W/kubeconfig" \
  --leader-elect=false \
  --bind-address 127.0.0.1 \
  --secure-port "$KCM_PORT" \
  --port 0 \
  --cert-dir "$W/kcm-certs" \
  --service-account-private-key-file "$P/sa.key" \
  --root-ca-file "$P/ca.crt" \
  --use-service-account-credentials=false \
  --controllers "$CONTROLLERS" \
  --profiling=false \
  --v "$VERBOSITY"
KCM_PID=$LAST_PID
wait_for kube-controller-manager "$KCM_PID" healthy \
  curl -fsSk --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz"

# The serviceaccount + serviceaccount-token controllers must have made default/default and its
# token Secret before pods can be admitted in that namespace (ServiceAccount admission plugin).
sa_ready() {
  "${CURL[@]}" "$API_URL/api/v1/namespaces/default/serviceaccounts/default" | grep -q '"secrets"'
}
wait_for kube-controller-manager "$KCM_PID" "serving (default/default SA has a token)" sa_ready

cat >"$W/env" <<EOF
ANKUSA_CP_WORKDIR=$W
ANKUSA_CP_KUBECONFIG=$W/kubeconfig
ANKUSA_CP_APISERVER_URL=$API_URL
ANKUSA_CP_APISERVER_PORT=$API_PORT
ANKUSA_CP_ETCD_URL=$ETCD_URL
ANKUSA_CP_KCM_PORT=$KCM_PORT
ANKUSA_CP_TOKEN=$TOKEN
ANKUSA_CP_CA=$P/ca.crt
ANKUSA_CP_ADDRESS=$ADDRESS
ANKUSA_CP_SERVICE_CIDR=$SERVICE_CIDR
EOF
if [[ -n "${ANKUSA_CP_WATCH_PID:-}" ]]; then
  WATCH=$ANKUSA_CP_WATCH_PID
  setsid nohup bash -c '
    while kill -0 "$1" 2>/dev/null && [[ -s "$2/pids" ]]; do sleep 1; done
    [[ -s "$2/pids" ]] && "$3/stop.sh" "$2"
  ' ankusa-cp-watchdog "$WATCH" "$W" "$HERE" >"$W/logs/watchdog.log" 2>&1 </dev/null &
  echo $! >"$W/watchdog.pid"
  log "watchdog (pid $!) stops this control plane when pid $WATCH exits"
fi
log "control plane up in $(( $(date +%s) - T0 ))s: apiserver $API_URL, etcd $ETCD_URL, logs $W/logs"
echo "KUBECONFIG=$W/kubeconfig"
