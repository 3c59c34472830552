#!/usr/bin/env bash
# A throw-away Kubernetes control plane on this host, for shoal's kubernetes
# backend and its tests: etcd, kube-apiserver (its own CA, token
# authentication, RBAC) and KWOK with N fake nodes, all on 127.0.0.1 and
# under one directory. There is no kubelet, container runtime or
# kube-scheduler: a pod bound to a node (spec.nodeName) is moved through its
# phases by KWOK's stages (scripts/k8s-dev/stages.yaml).
#
#   scripts/k8s-dev.sh build
#       builds etcd, kube-apiserver, kubectl, KWOK and helm from source at the
#       versions pinned in scripts/k8s-dev/*/go.mod, into a cache outside the
#       repository ($SHOAL_K8S_CACHE, else ~/.cache/shoal-k8s) keyed by those
#       pins; a second build with the same pins does nothing. Needs Go 1.26
#       and the Go module proxy; the first build takes tens of minutes.
#   scripts/k8s-dev.sh bin-dir
#       prints the folder that holds the built binaries (after build).
#   scripts/k8s-dev.sh up DIR [--nodes N] [--cpus C] [--memory M]
#       starts a cluster of N nodes (4) of C cpus (8) and M memory (32Gi)
#       each, waits until every node is Ready, and prints the path of an
#       admin kubeconfig as its last line. Two DIRs are two independent
#       clusters.
#   scripts/k8s-dev.sh down DIR
#       stops exactly the processes `up` started (by the pids it recorded
#       in DIR/run), and says how many.
#   scripts/k8s-dev.sh status DIR
#       the cluster's nodes and pods.
#
# The API server listens on 127.0.0.1 only. KWOK gives every node the
# address 127.0.0.1 and answers there, on a port of its own, for the
# node's kubelet: a pod's log is the lines of DIR/pod-output.log (CRI log
# format; a test may append to it). The service range (127.96.0.0/24) and
# the pods' addresses (127.244.0.0/16) are bookkeeping on loopback, served
# by nothing, and no endpoint is reconciled for the API server's own
# Service. So nothing a test does leaves this machine. With no
# kube-controller-manager, two admission plugins are off: ServiceAccount
# (nothing creates a namespace's default account) and TaintNodesByCondition
# (nothing would lift the not-ready taint it puts on every new node).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PINS="$ROOT/scripts/k8s-dev"
KUBERNETES_VERSION=v1.36.3
KWOK_VERSION=v0.8.0
HELM_VERSION=v3.22.0
CACHE="${SHOAL_K8S_CACHE:-$HOME/.cache/shoal-k8s}"
BINARIES=(etcd kube-apiserver kubectl kwok helm)

usage() {
  sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

fail() {
  echo "k8s-dev: $*" >&2
  exit 1
}

# The cache key: every pin and this script's way of building them.
bin_dir() {
  local key
  key=$(cat "$PINS"/*/go.mod "$PINS"/*/go.sum "$PINS"/*/tools.go \
          <(echo "$KUBERNETES_VERSION $KWOK_VERSION $HELM_VERSION recipe-1") | sha256sum | cut -c1-16)
  echo "$CACHE/bin-$key"
}

built() {
  local dir=$1 name
  for name in "${BINARIES[@]}"; do [ -x "$dir/$name" ] || return 1; done
}

build() {
  local dir
  dir=$(bin_dir)
  if built "$dir"; then
    echo "k8s-dev: etcd, kube-apiserver, kubectl, kwok and helm are built ($dir)" >&2
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
  mkdir -p "$staging"
  : > "$log"
  local minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  local k8s_version="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION"
  k8s_version+=" -X k8s.io/component-base/version.gitMajor=1"
  k8s_version+=" -X k8s.io/component-base/version.gitMinor=$minor"
  k8s_version+=" -X k8s.io/component-base/version.gitTreeState=clean"
  k8s_version+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
  step() {  # NAME MODULE PACKAGE [LDFLAGS]
    local name=$1 module=$2 package=$3 ldflags="-s -w ${4:-}" started=$SECONDS
    echo "k8s-dev: building $name ($package)" >&2
    if ! (cd "$PINS/$module" && GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ldflags" \
            -o "$staging/$name" "$package") >>"$log" 2>&1; then
      tail -n 20 "$log" >&2
      fail "building $name failed (whole log: $log). Is the Go module proxy reachable? (go env GOPROXY: $(go env GOPROXY))"
    fi
    echo "k8s-dev: built $name in $((SECONDS - started)) s" >&2
  }
  step etcd etcd go.etcd.io/etcd/server/v3  # its main package; the binary would be named "server"
  step kwok kwok sigs.k8s.io/kwok/cmd/kwok "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
  step kubectl kubernetes k8s.io/kubernetes/cmd/kubectl "$k8s_version"
  step helm helm helm.sh/helm/v3/cmd/helm "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  step kube-apiserver kubernetes k8s.io/kubernetes/cmd/kube-apiserver "$k8s_version"
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
  setsid "$@" </dev/null >"$DIR/log/$name.log" 2>&1 &
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
  rm -rf "$DIR/etcd" "$DIR/run" "$DIR/log" "$DIR/pki"
  mkdir -p "$DIR/etcd" "$DIR/run" "$DIR/log" "$DIR/pki"
  DIR=$(cd "$DIR" && pwd)
  local etcd_port peer_port api_port kubelet_port
  read -r etcd_port peer_port api_port kubelet_port < <("$ROOT/scripts/free-ports" 4)

  # A CA of its own; the API server's certificate names loopback and the
  # in-cluster names; a key pair signs service account tokens.
  local pki="$DIR/pki"
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=shoal-k8s-dev-ca" -days 30 -out "$pki/ca.crt" 2>/dev/null
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/apiserver.key" 2>/dev/null
  openssl req -new -key "$pki/apiserver.key" -subj "/CN=kube-apiserver" -out "$pki/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,IP:127.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' \
    >"$pki/apiserver.ext"
  openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" 2>/dev/null
  # KWOK serves what a kubelet would (pods' logs) to the API server, which
  # checks its certificate against the same CA.
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/kwok.key" 2>/dev/null
  openssl req -new -key "$pki/kwok.key" -subj "/CN=kwok" -out "$pki/kwok.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$pki/kwok.ext"
  openssl x509 -req -in "$pki/kwok.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile "$pki/kwok.ext" -out "$pki/kwok.crt" 2>/dev/null
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
  await 30 etcd "$DIR/log/etcd.log" curl -sf "http://127.0.0.1:$etcd_port/health"

  start kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
    --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 127.96.0.0/24 --endpoint-reconciler-type none \
    --kubelet-preferred-address-types InternalIP --kubelet-certificate-authority "$pki/ca.crt" \
    --disable-admission-plugins ServiceAccount,TaintNodesByCondition \
    --enable-priority-and-fairness=false --profiling=false --v=1
  local api="https://127.0.0.1:$api_port"
  await 90 kube-apiserver "$DIR/log/kube-apiserver.log" \
    curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $token" "$api/readyz"

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
  start kwok "$bin/kwok" --kubeconfig "$kubeconfig" --config "$PINS/stages.yaml" --config "$DIR/logs.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --node-ip 127.0.0.1 --cidr 127.244.0.0/16 \
    --server-address "127.0.0.1:$kubelet_port" --node-port "$kubelet_port" \
    --tls-cert-file "$pki/kwok.crt" --tls-private-key-file "$pki/kwok.key"
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
  "$bin/kubectl" --kubeconfig "$kubeconfig" create -f "$nodes" >/dev/null
  all_nodes_ready() {
    local ready
    ready=$("$bin/kubectl" --kubeconfig "$kubeconfig" get nodes \
      -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)
    [ "$ready" -ge "$NODES" ]
  }
  await $((60 + NODES / 10)) "the $NODES KWOK nodes" "$DIR/log/kwok.log" all_nodes_ready
  echo "k8s-dev: $NODES nodes of $CPUS cpus and $MEMORY Ready at $api" >&2
  echo "$kubeconfig"
}

down() {
  local pidfile pid pids=()
  for pidfile in "$DIR"/run/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    alive "$pid" && pids+=("$pid")
  done
  # KWOK and the API server before etcd, each given 10 s.
  local name
  for name in kwok kube-apiserver etcd; do
    pid=$(cat "$DIR/run/$name.pid" 2>/dev/null || true)
    alive "$pid" || continue
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$DIR"/run/*.pid
  echo "k8s-dev: stopped ${#pids[@]} processes" >&2
}

status() {
  "$(bin_dir)/kubectl" --kubeconfig "$DIR/admin.kubeconfig" get nodes,pods -A -o wide
}

[ $# -ge 1 ] || usage
command=$1
shift
case "$command" in
  build) build; exit 0 ;;
  bin-dir) built "$(bin_dir)" || fail "not built: run scripts/k8s-dev.sh build first"; bin_dir; exit 0 ;;
  up | down | status) ;;
  *) usage ;;
esac
[ $# -ge 1 ] || usage
DIR=$1
shift
NODES=4
CPUS=8
MEMORY=32Gi
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || fail "$1: expected a value"
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --memory) MEMORY=$2; shift 2 ;;
    *) fail "unknown option $1 (expected --nodes, --cpus or --memory)" ;;
  esac
done
[[ "$NODES" =~ ^[1-9][0-9]*$ ]] && [ "$NODES" -le 5000 ] || fail "--nodes: expected a whole number from 1 to 5000, got '$NODES'"
[[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || fail "--cpus: expected a positive whole number, got '$CPUS'"
[[ "$MEMORY" =~ ^[1-9][0-9]*(Ki|Mi|Gi|Ti)?$ ]] || fail "--memory: expected a quantity like 32Gi, got '$MEMORY'"
mkdir -p "$DIR"
case "$command" in
  up) up ;;
  down) down ;;
  status) status ;;
esac
