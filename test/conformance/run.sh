#!/usr/bin/env bash
# Upstream's conformance suite against mizzen: builds e2e.test, ginkgo and agnhost of
# k8s.io/kubernetes $K8S_VERSION from the Go module proxy (no git clone), writes the
# images the suite runs as OCI archives (no registry is reachable), then runs the suite
# against a fresh single-node `mizzen server` (or, with CONFORMANCE_KUBECONFIG, against a
# running cluster whose node already has those images) and writes a summary by SIG.
#
#   make conformance                                         # every non-[Serial] [Conformance] spec
#   make conformance FOCUS='\[sig-node\].*\[Conformance\]' PROCS=2 MINUTES=30
#   make conformance SKIP='\[Disruptive\]' PROCS=1            # [Serial] specs too, one at a time
#
# Output in _output/conformance: bin/ (the suite), images/, data/ (the fresh cluster),
# server.log, e2e.log, report/ (junit) and summary.txt. A fresh cluster uses the default
# ports (6443, 10250, 10257...) and the bridge mizzen0, so nothing else may be using them.
# A fresh cluster's containerd also pulls those images from a registry of the harness's
# own (./test/conformance/registry on a loopback port, registry.log), mirrored for every
# registry the images name (registries.yaml, --private-registry), for pods that pull with
# imagePullPolicy Always.
#
# containerd: image volumes (the ImageVolume spec) need containerd 2.1 or later, which
# mounts CRI's Mount.image; Debian 12's is 1.6.20 and ignores it. When the containerd in
# PATH is older and CONTAINERD is not given, the script builds containerd,
# containerd-shim-runc-v2 and ctr of CONTAINERD_VERSION (v2.4.2) from the Go module proxy
# into $OUT/containerd/bin (hack/build-containerd.sh: static, no git clone; 20 minutes
# or more on a shared 2-core machine with a cold Go build cache, under one with a warm
# one; reused while its .version stamp matches) and runs the server's and the other
# nodes' agents on it, with the shim beside it. It prints which containerd the run uses.
# CONTAINERD=/path/to/containerd runs the agents on that binary instead;
# CONTAINERD=containerd on the one in PATH.
#
# Several nodes: NODES=N (default 1) adds N-1 nodes to the fresh cluster, each a `mizzen
# agent` joined with a token, in a network namespace of its own (NODES_NETNS1, 2, ...),
# with its own data directory (nodes/NAME), containerd and the suite's images. The
# nodes' LAN is the bridge NODES_BRIDGE in this script's network namespace, with an
# address of the server in NODES_SUBNET (made with the subnet's first address when the
# bridge is missing), which the server's node takes as its InternalIP (--node-ip) and
# advertises; each agent's namespace hangs on it by a veth (NODES_BRIDGE-nI) and takes
# the addresses after the server's. Pods reach each other across nodes by the vxlan pod
# network. The namespaces, veths, bridge and agents go when the script ends,
# however it ends. Specs that need two nodes ("at least two untainted nodes", DaemonSet
# rollback), in a namespace n-0 of their own:
#
#   ip netns add n-0 && ip -n n-0 link set lo up
#   NODES=2 NODES_BRIDGE=nbr NODES_SUBNET=10.1.2.0/24 NODES_NETNS=n- \
#     FOCUS='at least two untainted nodes|\[sig-apps\] Daemon set.*\[Conformance\]' SKIP='\[Disruptive\]' PROCS=1 \
#     nsenter --net=/var/run/netns/n-0 ./test/conformance/run.sh
# SERVER_FLAGS='--flag value ...' adds flags (split at spaces) to the fresh cluster's
# `mizzen server`, e.g. SERVER_FLAGS='--service-account-signing-key-file /path/ec.key'.
# SEED=N passes --seed N to ginkgo, which fixes the order the specs run in (`ginkgo
# --dry-run -v --seed N` lists it): a [Serial] spec can then be run after the one it
# suffers from.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
COMMIT=$(git rev-parse --short HEAD 2>/dev/null)
K8S_VERSION=${K8S_VERSION:-v1.37.2}
OUT=${CONFORMANCE_OUT:-$ROOT/_output/conformance}
FOCUS=${FOCUS:-'\[Conformance\]'}
SKIP=${SKIP:-'\[Serial\]|\[Disruptive\]'}
PROCS=${PROCS:-2}
MINUTES=${MINUTES:-90}
NODES=${NODES:-1}
NODES_BRIDGE=${NODES_BRIDGE:-mzconf0}
NODES_SUBNET=${NODES_SUBNET:-10.254.0.0/24}
NODES_NETNS=${NODES_NETNS:-mzconf-}
MIZZEN=$ROOT/_output/bin/mizzen
BIN=$OUT/bin
SRC=$OUT/src
log() { printf '[conformance %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { log "$*"; exit 1; }

# ------------------------------------------------------------------ build the suite
export GOWORK=off CGO_ENABLED=0
mkdir -p "$BIN" "$SRC"
K8S_DIR=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",*$/\1/p')
K8S_GOMOD=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",*$/\1/p')
[ -d "$K8S_DIR" ] || die "cannot fetch k8s.io/kubernetes@$K8S_VERSION from the module proxy"
if [ ! -x "$BIN/e2e.test" ] || [ ! -x "$BIN/ginkgo" ] || [ ! -x "$BIN/agnhost" ] || [ "$(cat "$BIN/.version" 2>/dev/null)" != "$K8S_VERSION" ]; then
  # k8s.io/kubernetes replaces its staging modules (k8s.io/api, ...) with local paths;
  # the proxy publishes each as v0.X.Y, which a build module names instead.
  staging_version=v0.${K8S_VERSION#v1.}
  {
    printf 'module mizzen.local/conformance-build\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
    sed -n 's#^\s*\(k8s\.io/[^ ]*\) => \./staging/src/.*#\1#p' "$K8S_GOMOD" | sed "s#.*#\t& => & $staging_version#"
    printf ')\n'
  } > "$SRC/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    printf '\t_ "k8s.io/kubernetes/test/e2e"\n\t_ "k8s.io/kubernetes/test/images/agnhost"\n\t_ "github.com/onsi/ginkgo/v2/ginkgo"\n'
    # what e2e_test.go imports (only the test binary pulls these in)
    sed -n '/^import (/,/^)/p' "$K8S_DIR/test/e2e/e2e_test.go" | grep -o '"k8s\.io/kubernetes/[^"]*"' | sort -u | sed 's#.*#\t_ &#'
    printf ')\n'
  } > "$SRC/tools.go"
  rm -f "$SRC/go.sum"
  log "resolving the suite's dependencies (go mod tidy)"
  (cd "$SRC" && go mod tidy) || die "go mod tidy failed"
  # The suite reads its own major and minor version too (pod security's fixtures for the
  # restricted level of "this" version, in the PodCertificate spec), not only gitVersion.
  ldflags="-s -w"
  major=${K8S_VERSION#v}; major=${major%%.*}
  minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.gitCommit=$K8S_VERSION-goproxy"
  done
  log "building e2e.test (the longest step: about 10 minutes on 2 cores)"
  (cd "$SRC" && go test -c -vet=off -ldflags "$ldflags" -o "$BIN/e2e.test" k8s.io/kubernetes/test/e2e) || die "building e2e.test failed"
  (cd "$SRC" && go build -ldflags "-s -w" -o "$BIN/ginkgo" github.com/onsi/ginkgo/v2/ginkgo) || die "building ginkgo failed"
  (cd "$SRC" && go build -ldflags "-s -w -X main.Version=$(cat "$K8S_DIR/test/images/agnhost/VERSION")" -o "$BIN/agnhost" k8s.io/kubernetes/test/images/agnhost) || die "building agnhost failed"
  echo "$K8S_VERSION" > "$BIN/.version"
fi

# ------------------------------------------------------------------ images
# The suite's image table (test/utils/image/manifest.go): id, registry, name, version.
MANIFEST=$K8S_DIR/test/utils/image/manifest.go
declare -A REG=()
while read -r key val; do REG[$key]=$val; done < <(
  sed -n '/initRegistry = RegistryList{/,/^\t}/s/^\s*\([A-Za-z0-9]*\):\s*"\([^"]*\)",*$/\1 \2/p' "$MANIFEST")
sed -n 's/^\s*configs\[\([A-Za-z0-9]*\)\] = Config{list\.\([A-Za-z0-9]*\), "\([^"]*\)", "\([^"]*\)"}.*/\1 \2 \3 \4/p' "$MANIFEST" |
  while read -r id list name version; do echo "$id ${REG[$list]:-$list} $name $version"; done > "$OUT/images.txt"
[ -x "$MIZZEN" ] || die "no $MIZZEN: make build first"
rm -rf "$OUT/images" && mkdir -p "$OUT/images"
go build -o "$OUT/nc" ./test/conformance/netcat || die "building the netcat stand-in failed"
go build -o "$OUT/dig" ./test/conformance/dnsutils || die "building the dig and getent stand-in failed"
go build -o "$OUT/sh" ./test/conformance/sh || die "building the busybox image's sh failed"
# nonewprivs' nnp is one file of package main; built as a module of its own (the
# kubernetes module's vendor directory does not build from the module cache).
mkdir -p "$SRC/nnp" && cp -f "$K8S_DIR/test/images/nonewprivs/nnp.go" "$SRC/nnp/" && chmod u+w "$SRC/nnp/nnp.go" &&
  printf 'module nnp\n\ngo 1.21\n' > "$SRC/nnp/go.mod" && (cd "$SRC/nnp" && go build -o "$OUT/nnp" .) || die "building nonewprivs' nnp failed"
# The aggregator spec's images: k8s.io/sample-apiserver of the suite's version and the
# etcd server mizzen's go.mod pins, each built static in a module of its own.
build_main() { # build_main DIR MODULE VERSION PACKAGE OUTPUT
  mkdir -p "$SRC/$1" &&
    printf 'module mizzen.local/%s-build\n\ngo 1.26.0\n\nrequire %s %s\n' "$1" "$2" "$3" > "$SRC/$1/go.mod" &&
    printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$4" > "$SRC/$1/tools.go" &&
    (cd "$SRC/$1" && rm -f go.sum && go mod tidy && go build -ldflags "-s -w" -o "$5" "$4")
}
if [ ! -x "$BIN/sample-apiserver" ] || [ "$(cat "$BIN/.sample-apiserver-version" 2>/dev/null)" != "$K8S_VERSION" ]; then
  build_main sample-apiserver k8s.io/sample-apiserver "v0.${K8S_VERSION#v1.}" k8s.io/sample-apiserver "$BIN/sample-apiserver" || die "building the sample-apiserver failed"
  echo "$K8S_VERSION" > "$BIN/.sample-apiserver-version"
fi
ETCD_VERSION=$(sed -n 's#^\s*go\.etcd\.io/etcd/server/v3 \(v[^ ]*\).*#\1#p' go.mod)
if [ ! -x "$OUT/etcd" ] || [ "$(cat "$OUT/.etcd-version" 2>/dev/null)" != "$ETCD_VERSION" ]; then
  build_main etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3 "$OUT/etcd" || die "building etcd failed"
  echo "$ETCD_VERSION" > "$OUT/.etcd-version"
fi
go run ./test/conformance/images -list "$OUT/images.txt" -agnhost "$BIN/agnhost" -netcat "$OUT/nc" -dnsutils "$OUT/dig" -sh "$OUT/sh" -nnp "$OUT/nnp" -agnhost-src "$K8S_DIR/test/images/agnhost" -pause "$ROOT/_output/bin/mizzen-pause" -sample-apiserver "$BIN/sample-apiserver" -etcd "$OUT/etcd" -out "$OUT/images" ||
  die "writing the images failed"

# ------------------------------------------------------------------ containerd
# Image volumes need containerd 2.1 or later (CRI Mount.image); Debian 12's is 1.6. A
# fresh cluster whose CONTAINERD is not given runs on the one in PATH when that is new
# enough, else on containerd CONTAINERD_VERSION built here (hack/build-containerd.sh,
# reused while its stamp says that version). CONTAINERD=containerd keeps PATH's.
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
if [ -z "${CONFORMANCE_KUBECONFIG:-}" ]; then
  if [ -z "${CONTAINERD:-}" ]; then
    path_version=$(containerd --version 2>/dev/null | awk '{print $3}')
    major_minor=$(echo "$path_version" | sed -n 's/^v\{0,1\}\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
    if [ -z "$major_minor" ] || [ "${major_minor% *}" -lt 2 ] || { [ "${major_minor% *}" -eq 2 ] && [ "${major_minor#* }" -lt 1 ]; }; then
      log "containerd in PATH is ${path_version:-missing}; image volumes need 2.1 or later: containerd $CONTAINERD_VERSION in $OUT/containerd/bin"
      CONTAINERD=$(./hack/build-containerd.sh "$OUT/containerd/bin" "$CONTAINERD_VERSION") || die "building containerd $CONTAINERD_VERSION failed"
    fi
  fi
  log "containerd: ${CONTAINERD:-containerd from PATH} ($("${CONTAINERD:-containerd}" --version 2>&1))"
fi

# ------------------------------------------------------------------ the other nodes
# NODES-1 agents, each in its network namespace on NODES_BRIDGE (see the header).
AGENTS=()
ip2int() { local IFS=.; set -- $1; echo $(( ($1 << 24) + ($2 << 16) + ($3 << 8) + $4 )); }
int2ip() { echo "$(( $1 >> 24 & 255 )).$(( $1 >> 16 & 255 )).$(( $1 >> 8 & 255 )).$(( $1 & 255 ))"; }
# nodes_bridge makes sure NODES_BRIDGE is here, before the server starts, and sets
# SERVER_IP, the server's address on it: its node's InternalIP (so that every node is on
# one LAN, whatever this namespace's default route), its advertised address and the one
# the agents join.
nodes_bridge() {
  if ! ip link show dev "$NODES_BRIDGE" >/dev/null 2>&1; then
    CREATED_BRIDGE=1
    ip link add "$NODES_BRIDGE" type bridge && ip link set "$NODES_BRIDGE" up &&
      ip addr add "$(int2ip $(( $(ip2int "${NODES_SUBNET%/*}") + 1 )))/${NODES_SUBNET#*/}" dev "$NODES_BRIDGE" || return 1
  fi
  SERVER_IP=$(ip -o -4 addr show dev "$NODES_BRIDGE" to "$NODES_SUBNET" | awk '{sub("/.*", "", $4); print $4; exit}')
  [ -n "$SERVER_IP" ] || { log "$NODES_BRIDGE has no address in $NODES_SUBNET"; return 1; }
  SERVER_ARGS+=(--node-ip "$SERVER_IP" --advertise-address "$SERVER_IP")
}
SERVER_ARGS=()
start_nodes() {
  local plen=${NODES_SUBNET#*/} server_ip=$SERVER_IP token i ns veth ip dir
  token=$($MIZZEN token create --kubeconfig "$KUBECONFIG_FILE" --description conformance-nodes) || return 1
  mkdir -p "$OUT/nodes"
  for i in $(seq 1 $((NODES - 1))); do
    ns=$NODES_NETNS$i veth=$NODES_BRIDGE-n$i ip=$(int2ip $(( $(ip2int "$server_ip") + i ))) dir=$OUT/nodes/$NODES_NETNS$i
    log "node $ns: $ip in network namespace $ns on $NODES_BRIDGE, data $dir"
    [ -e "/var/run/netns/$ns" ] && { log "network namespace $ns exists: a previous run's? (mizzen killall in it, then ip netns delete $ns)"; return 1; }
    ip netns add "$ns" && NETNS_MADE+=("$ns") &&
      ip link add "$veth" type veth peer name eth0 netns "$ns" && ip link set "$veth" master "$NODES_BRIDGE" up &&
      ip -n "$ns" addr add "$ip/$plen" dev eth0 && ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up &&
      ip -n "$ns" route add default via "$server_ip" || return 1
    awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
    rm -rf "$dir" && mkdir -p "$dir/agent/images" && cp "$OUT"/images/*.tar "$dir/agent/images/" || return 1
    nsenter --net="/var/run/netns/$ns" "$MIZZEN" agent --server "https://$server_ip:6443" --token "$token" \
      --data-dir "$dir" --node-name "$ns" --pod-bridge "mizzen$i" --cluster-dns 10.96.0.10 \
      --private-registry "$OUT/registries.yaml" "${CONTAINERD_FLAG[@]}" > "$OUT/nodes/$ns.log" 2>&1 &
    AGENTS+=("$!:$ns:$dir:mizzen$i")
  done
  local deadline=$((SECONDS + 300))
  until [ "$($K get nodes --no-headers 2>/dev/null | grep -c ' Ready ')" -ge "$NODES" ]; do
    [ $SECONDS -lt $deadline ] || { $K get nodes -o wide; return 1; }
    sleep 2
  done
  $K get nodes -o wide
}
NETNS_MADE=()
stop_nodes() {
  local a pid ns dir br
  for a in "${AGENTS[@]}"; do kill "${a%%:*}" 2>/dev/null; done
  for a in "${AGENTS[@]}"; do
    IFS=: read -r pid ns dir br <<< "$a"
    wait "$pid" 2>/dev/null
    nsenter --net="/var/run/netns/$ns" "$MIZZEN" killall --data-dir "$dir" --pod-bridge "$br" >> "$OUT/nodes/$ns.log" 2>&1
  done
  # Deleting a namespace deletes its eth0, and so the veth on the bridge.
  for ns in "${NETNS_MADE[@]}"; do ip netns delete "$ns" 2>/dev/null; done
  [ -n "${CREATED_BRIDGE:-}" ] && ip link delete "$NODES_BRIDGE" 2>/dev/null
  return 0
}

# ------------------------------------------------------------------ the cluster
rm -rf "$OUT/report" "$OUT/e2e.log" "$OUT/summary.txt" && mkdir -p "$OUT/report"
if [ -n "${CONFORMANCE_KUBECONFIG:-}" ]; then
  [ "$NODES" -gt 1 ] && die "NODES adds nodes to a fresh cluster only; a running cluster brings its own"
  KUBECONFIG_FILE=$CONFORMANCE_KUBECONFIG
  log "running against the cluster of $KUBECONFIG_FILE; its nodes need the images in $OUT/images (mizzen image import)"
else
  DATA=$OUT/data
  # A previous run's pod volumes (tmpfs) may still be mounted under its data directory.
  awk -v d="$DATA/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  rm -rf "$DATA" && mkdir -p "$DATA/agent/images" || die "cannot clear $DATA"
  [ "$NODES" -gt 1 ] && { nodes_bridge || die "cannot make the bridge $NODES_BRIDGE"; }
  cp "$OUT"/images/*.tar "$DATA/agent/images/"
  go build -o "$OUT/registry" ./test/conformance/registry || die "building the registry failed"
  rm -f "$OUT/registry.addr"
  "$OUT/registry" -dir "$OUT/images" -listen "${SERVER_IP:-127.0.0.1}:0" -address-file "$OUT/registry.addr" > "$OUT/registry.log" 2>&1 &
  REGISTRY=$!
  for _ in $(seq 1 100); do [ -s "$OUT/registry.addr" ] && break; sleep 0.1; done
  [ -s "$OUT/registry.addr" ] || die "the registry did not start; see $OUT/registry.log"
  # Every registry of an image written here is mirrored to it; the suite's deliberately
  # unreachable ones (invalid.registry.k8s.io) are not.
  {
    echo "mirrors:"
    for tarball in "$OUT"/images/*.tar; do
      awk -v id="$(basename "$tarball" .tar)" '$1 == id {split($2, p, "/"); print p[1]}' "$OUT/images.txt"
    done | sort -u | grep -v '^invalid\.' | while read -r host; do
      printf '  "%s":\n    endpoint: ["http://%s"]\n' "$host" "$(cat "$OUT/registry.addr")"
    done
  } > "$OUT/registries.yaml"
  CONTAINERD_FLAG=()
  [ -n "${CONTAINERD:-}" ] && CONTAINERD_FLAG=(--containerd "$CONTAINERD")
  "$MIZZEN" server --data-dir "$DATA" --private-registry "$OUT/registries.yaml" "${CONTAINERD_FLAG[@]}" "${SERVER_ARGS[@]}" ${SERVER_FLAGS:-} > "$OUT/server.log" 2>&1 &
  SERVER=$!
  KUBECONFIG_FILE=$DATA/admin.kubeconfig
  K="$MIZZEN kubectl --kubeconfig $KUBECONFIG_FILE"
  # Pods outlive the agent by design: delete them while the nodes run, then stop the
  # agents (and what they leave: containerd, mounts, namespaces), then the server and
  # what its own node left (its pods' mounts, the pod bridge, nftables tables).
  trap '$K delete deploy,sts,ds,rs,rc,job --all -A --wait=false >/dev/null 2>&1; $K delete pods --all -A --wait=true --timeout=120s >/dev/null 2>&1; stop_nodes; kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; "$MIZZEN" killall --data-dir "$DATA" >> "$OUT/server.log" 2>&1; kill $REGISTRY 2>/dev/null' EXIT
  for _ in $(seq 1 180); do $K get nodes 2>/dev/null | grep -q ' Ready' && break; sleep 1; done
  $K get nodes -o wide || die "the server did not come up; see $OUT/server.log"
  [ "$NODES" -gt 1 ] && { start_nodes || die "the other nodes did not join; see $OUT/nodes/*.log"; }
fi

# ------------------------------------------------------------------ the suite
# The kubectl specs run `kubectl` from PATH unless told otherwise; a kubectl of the suite's
# version beside it (copied from an upstream build) is used in preference.
KUBECTL_PATH=kubectl
[ -x "$BIN/kubectl" ] && KUBECTL_PATH=$BIN/kubectl
log "running focus '$FOCUS' skip '$SKIP' with $PROCS processes for at most $MINUTES minutes (kubectl: $KUBECTL_PATH)"
start=$(date +%s)
# Some specs (kubectl's kuberc ones) leave directories in TMPDIR: give the suite its own.
E2E_TMP=$OUT/tmp
rm -rf "$E2E_TMP" && mkdir -p "$E2E_TMP"
TMPDIR=$E2E_TMP timeout $((MINUTES * 60 + 120)) "$BIN/ginkgo" --procs="$PROCS" --focus="$FOCUS" --skip="$SKIP" --no-color --timeout="${MINUTES}m" ${SEED:+--seed="$SEED"} \
  "$BIN/e2e.test" -- --kubeconfig "$KUBECONFIG_FILE" --provider skeleton --kubectl-path "$KUBECTL_PATH" --report-dir "$OUT/report" > "$OUT/e2e.log" 2>&1
log "e2e exit $? after $(( $(date +%s) - start )) s; log $OUT/e2e.log"
rm -rf "$E2E_TMP"
go run ./test/conformance/summary "$OUT/report" | tee "$OUT/summary.txt" | sed -n '/^FAIL\|^PASS/!p'
log "summary: $OUT/summary.txt (commit $COMMIT, $(date -u +%Y-%m-%d))"
