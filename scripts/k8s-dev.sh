#!/usr/bin/env bash
# A throw-away Kubernetes cluster on this host, for shoal's kubernetes
# backend and its tests: etcd, kube-apiserver (its own CA, token
# authentication, RBAC) and either KWOK's fake nodes on 127.0.0.1, or a
# real node: kubelet, containerd + runc + the CNI bridge, kube-proxy,
# kube-scheduler and kube-controller-manager (scripts/k8s-dev/real-node.sh).
#
#   scripts/k8s-dev.sh build
#       builds etcd, kube-apiserver, kubectl, the real node's components,
#       the CNI plugins, KWOK and helm from source at the versions pinned in
#       scripts/k8s-dev/*/go.mod, into a cache outside the repository
#       ($SHOAL_K8S_CACHE, else ~/.cache/shoal-k8s) keyed by those pins; a
#       second build with the same pins does nothing. Needs Go 1.26 and the
#       Go module proxy; the first build takes tens of minutes.
#   scripts/k8s-dev.sh fetch
#       only downloads what build compiles (nothing once built): a caller
#       starts it beside other work and builds later.
#   scripts/k8s-dev.sh bin-dir
#       prints the folder that holds the built binaries (after build).
#   scripts/k8s-dev.sh up DIR [--nodes N] [--cpus C] [--memory M] [--real-node]
#       starts a cluster of N KWOK nodes (4; 0 beside a real node) of C
#       cpus (8) and M memory (32Gi) each, waits until every node is Ready,
#       and prints the path of an admin kubeconfig as its last line. Two
#       DIRs are two independent clusters. --real-node (root; one per
#       machine) adds the node shoal-node, whose pods run as containers:
#       the whole cluster then lives in a network namespace of its own,
#       reached through `exec`. Its kubelet runs the static pods whose
#       manifests are in DIR/node/manifests.
#   scripts/k8s-dev.sh exec DIR -- COMMAND...
#       runs COMMAND where the cluster's API server answers (the real
#       node's network namespace, or here).
#   scripts/k8s-dev.sh load-images DIR --image ARCHIVE.tar...
#       imports docker-archive images (scripts/k8s-images.sh) into the
#       real node's containerd.
#   scripts/k8s-dev.sh node DIR stop|start
#       kills or starts again the real node's kubelet alone (its containers
#       keep running): a node lost to the cluster, and back.
#   scripts/k8s-dev.sh down DIR
#       stops exactly the processes `up` started (by the pids it recorded
#       in DIR/run), and says how many; with a real node, also its
#       containers, mounts, cgroups, network namespace and the fixed paths
#       the kubelet made.
#   scripts/k8s-dev.sh status DIR
#       the cluster's nodes and pods.
#
# With KWOK the API server listens on 127.0.0.1 only. KWOK gives every
# node the address 127.0.0.1 and answers there, on a port of its own, for
# the node's kubelet: a pod's log is the lines of DIR/pod-output.log (CRI
# log format; a test may append to it). The service range (127.96.0.0/24)
# and the pods' addresses (127.244.0.0/16) are bookkeeping on loopback,
# served by nothing. So nothing a test does leaves this machine. A real
# node keeps every address it uses inside its own network namespace.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PINS="$ROOT/scripts/k8s-dev"
KUBERNETES_VERSION=v1.36.3
KWOK_VERSION=v0.8.0
HELM_VERSION=v3.22.0
CACHE="${SHOAL_K8S_CACHE:-$HOME/.cache/shoal-k8s}"
BINARIES=(etcd kube-apiserver kubectl kwok helm kubelet kube-proxy kube-scheduler kube-controller-manager
          pause cni/bridge cni/host-local cni/loopback cni/portmap)

usage() {
  sed -n '2,50p' "$0" | sed -n '/^#/p' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

fail() {
  echo "k8s-dev: $*" >&2
  exit 1
}

# The cache key: every pin and this script's way of building them.
bin_dir() {
  local key
  key=$(cat "$PINS"/*/go.mod "$PINS"/*/go.sum "$PINS"/*/tools.go "$PINS"/pause/pause.c \
          <(echo "$KUBERNETES_VERSION $KWOK_VERSION $HELM_VERSION recipe-3") | sha256sum | cut -c1-16)
  echo "$CACHE/bin-$key"
}

built() {
  local dir=$1 name
  for name in "${BINARIES[@]}"; do [ -x "$dir/$name" ] || return 1; done
}

# The modules' sources into Go's module cache, side by side: downloads wait
# on the network, not on the cores a build keeps busy. A failed download
# shows as the build's error, with its log.
fetch_modules() {  # LOG
  local module started=$SECONDS
  for module in etcd kwok kubernetes helm cni; do
    (cd "$PINS/$module" && GOFLAGS=-mod=readonly go mod download) >>"$1" 2>&1 &
  done
  wait || true
  echo "k8s-dev: fetched the modules in $((SECONDS - started)) s" >&2
}

build() {
  local dir
  dir=$(bin_dir)
  if built "$dir"; then
    echo "k8s-dev: the control plane, the real node's components, kwok and helm are built ($dir)" >&2
    return
  fi
  command -v go >/dev/null ||
    fail "Go is not installed: the test cluster is built from source with Go 1.26 (https://go.dev/dl/)"
  mkdir -p "$CACHE"
  # One build at a time per cache: a second caller waits, then finds it built.
  exec 9>"$CACHE/build.lock"
  flock 9
  if built "$dir"; then
    echo "k8s-dev: built meanwhile ($dir)" >&2
    return
  fi
  local log="$CACHE/build.log" staging="$dir.partial"
  rm -rf "$staging"
  mkdir -p "$staging/cni"
  : > "$log"
  local minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  local k8s_version="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION"
  k8s_version+=" -X k8s.io/component-base/version.gitMajor=1"
  k8s_version+=" -X k8s.io/component-base/version.gitMinor=$minor"
  k8s_version+=" -X k8s.io/component-base/version.gitTreeState=clean"
  k8s_version+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
  # One `go build` per module for all of its commands, so that Go compiles
  # the packages they share once and links them side by side.
  step() {  # MODULE LDFLAGS OUTPUT PACKAGE...: OUTPUT a file for one package, a folder for more
    local module=$1 ldflags="-s -w $2" output=$3 started=$SECONDS
    shift 3
    echo "k8s-dev: building $module: $*" >&2
    # No debug information: -s -w would strip it from the binaries anyway,
    # and not making it saves the compiler part of a cold build.
    if ! (cd "$PINS/$module" && GOFLAGS=-mod=readonly go build -trimpath -gcflags=all=-dwarf=false \
            -ldflags "$ldflags" -o "$output" "$@") >>"$log" 2>&1; then
      tail -n 20 "$log" >&2
      fail "building $module failed (whole log: $log). Is the Go module proxy reachable? (go env GOPROXY: $(go env GOPROXY))"
    fi
    echo "k8s-dev: built $module in $((SECONDS - started)) s" >&2
  }
  fetch_modules "$log"
  step etcd "" "$staging/etcd" go.etcd.io/etcd/server/v3  # its main package; the binary would be named "server"
  step kwok "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" "$staging/kwok" sigs.k8s.io/kwok/cmd/kwok
  step kubernetes "$k8s_version" "$staging/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
  step helm "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" "$staging/helm" helm.sh/helm/v3/cmd/helm
  step cni "" "$staging/cni/" github.com/containernetworking/plugins/plugins/main/bridge \
    github.com/containernetworking/plugins/plugins/ipam/host-local \
    github.com/containernetworking/plugins/plugins/main/loopback \
    github.com/containernetworking/plugins/plugins/meta/portmap
  # The pod sandbox's process, static so that its image needs nothing else.
  gcc -static -Os -o "$staging/pause" "$PINS/pause/pause.c" >>"$log" 2>&1 ||
    fail "building pause failed (log: $log; gcc and libc6-dev are in scripts/install-deps.sh)"
  rm -rf "$dir"
  mv "$staging" "$dir"
  echo "k8s-dev: built into $dir" >&2
}

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# Starts "$@" in the background with its output in DIR/log/NAME.log, its pid
# in DIR/run/NAME.pid.
start() {
  local name=$1
  shift
  node_prefix
  setsid "${NODE_PREFIX[@]}" "$@" </dev/null >"$DIR/log/$name.log" 2>&1 &
  echo $! >"$DIR/run/$name.pid"
}

# Waits up to SECONDS for "$@" to succeed; fails naming WHAT and its log.
await() {
  local seconds=$1 what=$2 log=$3
  shift 3
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      tail -n 20 "$log" >&2 || true
      fail "$what not ready within ${seconds}s (log: $log)"
    fi
    sleep 0.2
  done
}

# Issues a certificate from the cluster's CA: NAME SUBJECT EXTENSIONS.
issue() {
  local pki="$DIR/pki" name=$1 subject=$2 extensions=$3
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$name.key" 2>/dev/null
  openssl req -new -key "$pki/$name.key" -subj "$subject" -out "$pki/$name.csr" 2>/dev/null
  printf '%b\n' "$extensions" >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
  chmod 600 "$pki/$name.key"
}

up() {
  local bin
  bin=$(bin_dir)
  built "$bin" || fail "not built: run scripts/k8s-dev.sh build first"
  command -v openssl >/dev/null || fail "openssl is needed for the cluster's certificates"
  command -v curl >/dev/null || fail "curl is needed to wait for the API server"
  for pidfile in "$DIR"/run/*.pid; do
    [ -e "$pidfile" ] || continue
    alive "$(cat "$pidfile")" && fail "$DIR already runs a cluster (scripts/k8s-dev.sh down $DIR first)"
  done
  [ -e "$DIR/run/netns" ] && fail "$DIR still holds a real node's network namespace (scripts/k8s-dev.sh down $DIR first)"
  rm -rf "$DIR/etcd" "$DIR/run" "$DIR/log" "$DIR/pki"
  mkdir -p "$DIR/etcd" "$DIR/run" "$DIR/log" "$DIR/pki"
  DIR=$(cd "$DIR" && pwd)
  # Where the control plane lives: loopback of this host, or, with a real
  # node, the test host's network namespace (real-node.sh), whose ports are
  # all its own.
  local etcd_port peer_port api_port kubelet_port
  local address=127.0.0.1 service_range=127.96.0.0/24 service_ip=127.96.0.1
  if [ "$REAL_NODE" = 1 ]; then
    real_node_prepare
    read -r etcd_port peer_port api_port kubelet_port <<<"2379 2380 6443 10250"
    address=$NODE_IP service_range=$SERVICE_RANGE service_ip=$SERVICE_IP
  else
    read -r etcd_port peer_port api_port kubelet_port < <("$ROOT/scripts/free-ports" 4)
  fi

  # A CA of its own; the API server's certificate names its addresses and
  # the in-cluster names; a key pair signs service account tokens.
  local pki="$DIR/pki"
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=shoal-k8s-dev-ca" -days 30 -out "$pki/ca.crt" 2>/dev/null
  issue apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:127.0.0.1,IP:$address,IP:$service_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth"
  # KWOK serves what a kubelet would (pods' logs) to the API server, which
  # checks its certificate against the same CA.
  issue kwok "/CN=kwok" "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null
  openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  local token
  token=$(openssl rand -hex 24)
  echo "$token,shoal-admin,shoal-admin,system:masters" >"$pki/tokens.csv"
  chmod 600 "$pki"/*.key "$pki/tokens.csv"

  start etcd "$bin/etcd" --name dev --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "dev=http://127.0.0.1:$peer_port" --log-level warn
  await 30 etcd "$DIR/log/etcd.log" in_node curl -sf "http://127.0.0.1:$etcd_port/health"

  local api_flags=()
  if [ "$REAL_NODE" = 1 ]; then
    # A kubelet: it is authorized as its node, the API server reaches it
    # for logs and exec with a client certificate, and the admission
    # plugins a real cluster runs are on. A pod on a node gone NotReady is
    # evicted after 20 s rather than 5 minutes, so that tests can wait for it.
    issue kubelet-client "/CN=kube-apiserver-kubelet-client/O=system:masters" "extendedKeyUsage=clientAuth"
    api_flags=(--bind-address 0.0.0.0 --advertise-address "$address"
               --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction
               --kubelet-client-certificate "$pki/kubelet-client.crt" --kubelet-client-key "$pki/kubelet-client.key"
               --default-not-ready-toleration-seconds 20 --default-unreachable-toleration-seconds 20)
  else
    # No kube-controller-manager: nothing would create a namespace's default
    # account or lift the not-ready taint a new node gets.
    api_flags=(--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --authorization-mode RBAC
               --endpoint-reconciler-type none --disable-admission-plugins ServiceAccount,TaintNodesByCondition)
  fi
  start kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" --secure-port "$api_port" "${api_flags[@]}" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range "$service_range" \
    --kubelet-preferred-address-types InternalIP --kubelet-certificate-authority "$pki/ca.crt" \
    --enable-priority-and-fairness=false --profiling=false --v=1
  local api="https://127.0.0.1:$api_port"
  await 90 kube-apiserver "$DIR/log/kube-apiserver.log" \
    in_node curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $token" "$api/readyz"

  local kubeconfig="$DIR/admin.kubeconfig"
  cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "$api", certificate-authority: "$pki/ca.crt"}
users:
- name: shoal-admin
  user: {token: "$token"}
contexts:
- name: dev
  context: {cluster: dev, user: shoal-admin}
current-context: dev
EOF
  chmod 600 "$kubeconfig"

  if [ "$NODES" -gt 0 ]; then kwok_nodes "$bin" "$kubeconfig" "$kubelet_port"; fi
  if [ "$REAL_NODE" = 1 ]; then real_node_start "$bin" "$kubeconfig" "$api_port"; fi
  echo "$kubeconfig"
}

# KWOK with NODES fake nodes beside the API server.
kwok_nodes() {
  local bin=$1 kubeconfig=$2 kubelet_port=$3
  # No container runs, so no pod writes output: every pod's log is the
  # lines of DIR/pod-output.log (CRI log format), served by KWOK where the
  # API server asks a node for them (pods/log).
  cat >"$DIR/logs.yaml" <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: every-pod
spec:
  logs:
  - logsFile: $DIR/pod-output.log
EOF
  printf '%s stdout F %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.000000000Z)" \
    "KWOK runs no container: this line of $DIR/pod-output.log stands in for every pod's output" \
    >"$DIR/pod-output.log"
  local heartbeat=()
  # Beside a real node, the node controller runs: KWOK nodes must heartbeat.
  if [ "$REAL_NODE" = 1 ]; then heartbeat=(--config "$PINS/node-heartbeat.yaml"); fi
  start kwok "$bin/kwok" --kubeconfig "$kubeconfig" --config "$PINS/stages.yaml" --config "$DIR/logs.yaml" "${heartbeat[@]}" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --node-ip 127.0.0.1 --cidr 127.244.0.0/16 \
    --server-address "127.0.0.1:$kubelet_port" --node-port "$kubelet_port" \
    --tls-cert-file "$DIR/pki/kwok.crt" --tls-private-key-file "$DIR/pki/kwok.key"
  local nodes="$DIR/nodes.yaml" i
  : >"$nodes"
  for ((i = 0; i < NODES; i++)); do
    cat >>"$nodes" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: kwok-node-$i, kubernetes.io/os: linux, type: kwok}
status:
  allocatable: {cpu: "$CPUS", memory: "$MEMORY", pods: "110"}
  capacity: {cpu: "$CPUS", memory: "$MEMORY", pods: "110"}
---
EOF
  done
  in_node "$bin/kubectl" --kubeconfig "$kubeconfig" create -f "$nodes" >/dev/null
  all_nodes_ready() {
    local ready
    ready=$(in_node "$bin/kubectl" --kubeconfig "$kubeconfig" get nodes -l type=kwok \
      -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)
    [ "$ready" -ge "$NODES" ]
  }
  await $((60 + NODES / 10)) "the $NODES KWOK nodes" "$DIR/log/kwok.log" all_nodes_ready
  echo "k8s-dev: $NODES KWOK nodes of $CPUS cpus and $MEMORY Ready" >&2
}

down() {
  local pidfile pid pids=()
  for pidfile in "$DIR"/run/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    alive "$pid" && pids+=("$pid")
  done
  # Those that call the API server before it, and it before etcd, each
  # given 10 s; the node's containers and runtime after (real-node.sh).
  local name
  for name in kube-proxy kubelet kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    pid=$(cat "$DIR/run/$name.pid" 2>/dev/null || true)
    alive "$pid" || continue
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
  done
  if [ -e "$DIR/run/netns" ]; then real_node_down; fi
  rm -f "$DIR"/run/*.pid
  echo "k8s-dev: stopped ${#pids[@]} processes" >&2
}

status() {
  in_node "$(bin_dir)/kubectl" --kubeconfig "$DIR/admin.kubeconfig" get nodes,pods -A -o wide
}

# Runs "$@" where the cluster's API server answers: in the real node's
# network namespace (with its /etc/netns/NAME files, see `ip netns exec`)
# when there is one, else here.
exec_in() {
  if [ -e "$DIR/run/netns" ]; then
    exec ip netns exec "$(cat "$DIR/run/netns")" "$@"
  fi
  exec "$@"
}

[ $# -ge 1 ] || usage
command=$1
shift
case "$command" in
  build) build; exit 0 ;;
  fetch)
    built "$(bin_dir)" && exit 0
    command -v go >/dev/null || exit 0  # build says what is missing
    mkdir -p "$CACHE"
    fetch_modules "$CACHE/fetch.log"
    exit 0 ;;
  bin-dir) built "$(bin_dir)" || fail "not built: run scripts/k8s-dev.sh build first"; bin_dir; exit 0 ;;
  up | down | status | exec | load-images | node) ;;
  *) usage ;;
esac
[ $# -ge 1 ] || usage
DIR=$1
shift
# shellcheck source=k8s-dev/real-node.sh
source "$PINS/real-node.sh"
if [ "$command" = node ]; then
  [ $# -eq 1 ] || fail "node: expected stop or start"
  DIR=$(cd "$DIR" && pwd)
  real_node_kubelet "$1"
  exit 0
fi
if [ "$command" = exec ]; then
  [ "${1:-}" = -- ] && shift
  [ $# -ge 1 ] || fail "exec: expected a command after DIR"
  exec_in "$@"
fi
REAL_NODE=0
NODES=
CPUS=8
MEMORY=32Gi
IMAGES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --real-node) REAL_NODE=1; shift; continue ;;
  esac
  [ $# -ge 2 ] || fail "$1: expected a value"
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --memory) MEMORY=$2; shift 2 ;;
    --image) IMAGES+=("$2"); shift 2 ;;
    *) fail "unknown option $1 (expected --real-node, --nodes, --cpus, --memory or --image)" ;;
  esac
done
# KWOK nodes: 4 by default, none beside a real node unless asked for.
if [ -z "$NODES" ]; then if [ "$REAL_NODE" = 1 ]; then NODES=0; else NODES=4; fi; fi
[[ "$NODES" =~ ^[0-9]+$ ]] && [ "$NODES" -le 5000 ] || fail "--nodes: expected a whole number from 0 to 5000, got '$NODES'"
[ "$NODES" -gt 0 ] || [ "$REAL_NODE" = 1 ] || fail "--nodes: expected at least 1 without --real-node"
[[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || fail "--cpus: expected a positive whole number, got '$CPUS'"
[[ "$MEMORY" =~ ^[1-9][0-9]*(Ki|Mi|Gi|Ti)?$ ]] || fail "--memory: expected a quantity like 32Gi, got '$MEMORY'"
mkdir -p "$DIR"
case "$command" in
  up) up ;;
  down) down ;;
  status) status ;;
  load-images) DIR=$(cd "$DIR" && pwd); real_node_load_images "${IMAGES[@]}" ;;
esac
