#!/usr/bin/env bash
# Build the Kubernetes 1.20.2 binaries the tests run -- kube-apiserver, kube-controller-manager
# (the control plane), kube-scheduler, kubelet, kube-proxy (the real node of e2e/node) and the
# static `pause` binary of the pod sandbox image -- from Debian bookworm's `kubernetes` SOURCE
# package, fully offline apart from apt, and cache them.
#
#   e2e/controlplane/build.sh
#
# Result (idempotent; exits 0 at once when already present):
#   ${ANKUSA_K8S_ASSETS:-$HOME/.cache/ankusa/k8s-1.20.2}/
#       kube-apiserver  kube-controller-manager  kube-scheduler  kubelet  kube-proxy
#       pause  etcd -> /usr/bin/etcd  VERSION
#
# Environment:
#   ANKUSA_K8S_ASSETS      cache dir (default above)
#   ANKUSA_K8S_BUILD_DIR   parent dir for the throw-away build tree (default: $TMPDIR or /tmp)
#   ANKUSA_K8S_KEEP_BUILD  set to 1 to keep the build tree (debugging)
#   ANKUSA_K8S_FORCE       set to 1 to rebuild even if the cache is complete
#
# Why the reflect2 swap: the vendored github.com/modern-go/reflect2 v1.0.1 is broken
# on Go >= 1.18 (apiserver dies with "unexpected fault address" in
# reflect2.(*UnsafeMapType).UnsafeIterate the first time a custom resource is decoded).
# Debian's golang-github-modern-go-reflect2-dev (1.0.2) fixes it.
set -euo pipefail

ASSETS="${ANKUSA_K8S_ASSETS:-$HOME/.cache/ankusa/k8s-1.20.2}"
BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
SRC_PKG=kubernetes
SUITE=bookworm
MIRROR=http://deb.debian.org/debian
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
REFLECT2_SRC=/usr/share/gocode/src/github.com/modern-go/reflect2
APT_PREREQS=(golang-go rsync jq etcd-server golang-github-modern-go-reflect2-dev make openssl curl gcc libc6-dev)

T0=$(date +%s)
log() { printf '[k8s-build +%4ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

cache_complete() {
  local b
  for b in "${BINS[@]}" pause; do [[ -x "$ASSETS/$b" ]] || return 1; done
  [[ -s "$ASSETS/VERSION" ]] || return 1
  [[ -x "$ASSETS/etcd" ]] || return 1   # symlink must resolve to an installed etcd
  return 0
}

# ---- fast path ---------------------------------------------------------------
if [[ "${ANKUSA_K8S_FORCE:-0}" != 1 ]] && cache_complete; then
  log "cached: $ASSETS ($(head -n1 "$ASSETS/VERSION"))"
  exit 0
fi

# ---- apt prerequisites ---------------------------------------------------------
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=()
for p in "${APT_PREREQS[@]}"; do pkg_installed "$p" || missing+=("$p"); done
if ((${#missing[@]})); then
  log "installing apt prerequisites: ${missing[*]}"
  SUDO=(); [[ $(id -u) == 0 ]] || SUDO=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
ETCD_BIN=$(command -v etcd || true)
[[ -n "$ETCD_BIN" ]] || die "etcd not found after installing etcd-server"

mkdir -p "$ASSETS"
# Serialise concurrent builds (e.g. two test runs on one machine).
exec 9>"$ASSETS/.build.lock"
if ! flock -n 9; then
  log "another build holds $ASSETS/.build.lock; waiting"
  flock 9
fi

link_etcd() { ln -sfn "$ETCD_BIN" "$ASSETS/etcd"; }

# Binaries may be there while only the etcd link was missing (e.g. etcd-server removed).
if [[ "${ANKUSA_K8S_FORCE:-0}" != 1 ]]; then
  have_bins=1
  for b in "${BINS[@]}" pause; do [[ -x "$ASSETS/$b" ]] || have_bins=0; done
  if ((have_bins)) && [[ -s "$ASSETS/VERSION" ]]; then
    link_etcd
    log "cached binaries present; (re)linked etcd -> $ETCD_BIN"
    exit 0
  fi
fi

# ---- fetch the source package with a throw-away apt configuration --------------
BUILD_PARENT="${ANKUSA_K8S_BUILD_DIR:-${TMPDIR:-/tmp}}"
mkdir -p "$BUILD_PARENT"
WORK=$(mktemp -d "$BUILD_PARENT/ankusa-k8s-build.XXXXXX")
cleanup() {
  if [[ "${ANKUSA_K8S_KEEP_BUILD:-0}" == 1 ]]; then
    log "keeping build tree $WORK (ANKUSA_K8S_KEEP_BUILD=1)"
  else
    log "removing build tree $WORK"
    rm -rf "$WORK" 2>/dev/null || { chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"; }
  fi
  log "finished (total $(( $(date +%s) - T0 ))s)"
}
trap cleanup EXIT
log "build tree: $WORK"

APTDIR="$WORK/apt"
mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
echo "deb-src [signed-by=$KEYRING] $MIRROR $SUITE main" >"$APTDIR/sources.list"
APT_OPTS=(
  -o "Dir::Etc::SourceList=$APTDIR/sources.list"
  -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$APTDIR/lists"
  -o "Dir::Cache=$APTDIR/cache"
  -o "APT::Sandbox::User=root"
)
log "apt-get update (throw-away deb-src list: $SUITE main)"
apt-get "${APT_OPTS[@]}" update -qq
DEB_VERSION=$(apt-cache "${APT_OPTS[@]}" showsrc "$SRC_PKG" | awk '/^Version:/{print $2; exit}')
[[ -n "$DEB_VERSION" ]] || die "source package $SRC_PKG not found in $SUITE"
log "apt-get source --download-only $SRC_PKG=$DEB_VERSION"
mkdir -p "$WORK/dl"
(cd "$WORK/dl" && apt-get "${APT_OPTS[@]}" source -qq --download-only "$SRC_PKG=$DEB_VERSION")
ORIG=$(find "$WORK/dl" -maxdepth 1 -name "${SRC_PKG}_*.orig.tar.*" | head -n1)
[[ -n "$ORIG" ]] || die "no orig tarball downloaded"
log "unpacking $(basename "$ORIG")"
tar -xf "$ORIG" -C "$WORK"
rm -rf "$WORK/dl"
TREE=$(find "$WORK" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
[[ -n "$TREE" && -f "$TREE/go.mod" ]] || die "unexpected tarball layout in $WORK"
# Debian's own patches (debian/patches) only touch kubectl/cli-runtime printers, which we
# do not build, so the pristine orig tree is used.

# ---- reflect2 swap ---------------------------------------------------------------
V2="$TREE/vendor/github.com/modern-go/reflect2"
[[ -d "$V2" ]] || die "vendored reflect2 not found at $V2"
[[ -f "$REFLECT2_SRC/reflect2.go" ]] || die "$REFLECT2_SRC missing (golang-github-modern-go-reflect2-dev)"
REFLECT2_DEB=$(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev)
log "replacing vendored reflect2 (v1.0.1) with Debian's $REFLECT2_DEB"
rm -rf "$V2"
mkdir -p "$V2"
cp -a "$REFLECT2_SRC"/. "$V2"/
rm -f "$V2/go.mod" "$V2/go.sum"
find "$V2" -name '*_test.go' -delete
rm -rf "$V2/test" "$V2/tests"

# ---- build (as debian/rules does) --------------------------------------------------
mkdir -p "$TREE/.go/src/k8s.io"
[[ -L "$TREE/.go/src/k8s.io/kubernetes" ]] || ln -s ../../.. "$TREE/.go/src/k8s.io/kubernetes"
export GOPATH="$TREE/.go"
export GOCACHE="$WORK/gocache"        # keep ~/.cache/go-build clean; deleted with the tree
export PATH="/usr/lib/go/bin:$PATH"
export CGO_ENABLED=0 GOPROXY=off GOFLAGS=-mod=vendor GO111MODULE=on GOTOOLCHAIN=local
GO_VERSION=$(GOFLAGS='' go version | awk '{print $3}')
WHAT=$(printf 'cmd/%s ' "${BINS[@]}")
log "make WHAT=\"${WHAT% }\" ($GO_VERSION, $(nproc) cores)"
(cd "$TREE" && make WHAT="${WHAT% }") 2>&1 |
  while IFS= read -r line; do log "make: $line"; done
OUT="$TREE/_output/local/bin/$(go env GOOS)/$(go env GOARCH)"
for b in "${BINS[@]}"; do [[ -x "$OUT/$b" ]] || die "build produced no $OUT/$b"; done
# The pod sandbox ("pause") binary, static, as upstream builds it for its pause image; e2e/node
# imports it into Docker as the sandbox image so dockershim never tries to pull one.
PAUSE_SRC=$(find "$TREE/build/pause" -name pause.c | head -n1)
[[ -n "$PAUSE_SRC" ]] || die "pause.c not found under $TREE/build/pause"
PAUSE_VERSION=$(sed -n 's/^TAG ?\?= *//p' "$TREE/build/pause/Makefile" | head -n1)
gcc -Os -Wall -Werror -static -DVERSION="v${PAUSE_VERSION:-unknown}-ankusa" -o "$OUT/pause" "$PAUSE_SRC"
strip "$OUT/pause"
SERVER_VERSION=$("$OUT/kube-apiserver" --version | awk '{print $2}')
log "built: $SERVER_VERSION"

# ---- install into the cache (atomic per file; stamp last) ---------------------------
for b in "${BINS[@]}" pause; do
  cp "$OUT/$b" "$ASSETS/.$b.tmp"
  mv -f "$ASSETS/.$b.tmp" "$ASSETS/$b"
done
link_etcd
ETCD_DEB=$(dpkg-query -W -f='${Version}' etcd-server 2>/dev/null || echo unknown)
cat >"$ASSETS/.VERSION.tmp" <<EOF
kubernetes $SERVER_VERSION from Debian source package $SRC_PKG=$DEB_VERSION ($SUITE)
kube-apiserver=$SERVER_VERSION
kube-controller-manager=$("$ASSETS/kube-controller-manager" --version | awk '{print $2}')
kube-scheduler=$("$ASSETS/kube-scheduler" --version | awk '{print $2}')
kubelet=$("$ASSETS/kubelet" --version | awk '{print $2}')
kube-proxy=$("$ASSETS/kube-proxy" --version | awk '{print $2}')
pause=${PAUSE_VERSION:-unknown} (build/pause, gcc -static)
debian-source=$SRC_PKG=$DEB_VERSION
go=$GO_VERSION
reflect2-vendor-swap=golang-github-modern-go-reflect2-dev=$REFLECT2_DEB
etcd=$ETCD_BIN (etcd-server=$ETCD_DEB)
built=$(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( $(date +%s) - T0 ))s on $(nproc) cores
EOF
mv -f "$ASSETS/.VERSION.tmp" "$ASSETS/VERSION"
log "done: $ASSETS"
ls -l "$ASSETS" >&2
