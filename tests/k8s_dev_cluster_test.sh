#!/usr/bin/env bash
# The dev Kubernetes cluster the kubernetes backend is tested against
# (scripts/k8s-dev.sh): two clusters up side by side are independent; a pod
# bound to a KWOK node runs and ends with the exit code its labels
# give; RBAC is on (an unknown token is refused, a service account holds
# nothing it was not granted); down leaves no etcd, kube-apiserver or KWOK
# process of either behind. Skipped (77) when the binaries are not built
# (scripts/k8s-dev.sh build), failed instead under CI=true.
# Usage: k8s_dev_cluster_test.sh SOURCE_DIR
set -euo pipefail
source_dir="$1"
dev="$source_dir/scripts/k8s-dev.sh"
if ! bin=$("$dev" bin-dir 2>/dev/null); then
  echo "skipped: the test cluster is not built (scripts/k8s-dev.sh build)"
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 77
fi
work=$(mktemp -d /tmp/shoal-k8s-dev-test.XXXXXX)
cleanup() {
  "$dev" down "$work/a" 2>/dev/null || true
  "$dev" down "$work/b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

a=$("$dev" up "$work/a" --nodes 2 --cpus 4 --memory 8Gi | tail -n 1)
b=$("$dev" up "$work/b" --nodes 1 | tail -n 1)
ka() { "$bin/kubectl" --kubeconfig "$a" "$@"; }
kb() { "$bin/kubectl" --kubeconfig "$b" "$@"; }

# Independent: each has its own nodes, as declared.
[ "$(ka get nodes -o name | sort | tr '\n' ' ')" = "node/kwok-node-0 node/kwok-node-1 " ] || fail "cluster a's nodes: $(ka get nodes -o name)"
[ "$(kb get nodes -o name)" = "node/kwok-node-0" ] || fail "cluster b's nodes: $(kb get nodes -o name)"
[ "$(ka get node kwok-node-1 -o jsonpath='{.status.allocatable.cpu} {.status.allocatable.memory}')" = "4 8Gi" ] ||
  fail "allocatable: $(ka get node kwok-node-1 -o jsonpath='{.status.allocatable}')"
[ "$(ka get node kwok-node-0 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')" = 127.0.0.1 ] ||
  fail "a node's InternalIP is not loopback"
[ -z "$(ka get nodes -o jsonpath='{.items[*].spec.taints}')" ] || fail "nodes are tainted: $(ka get nodes -o jsonpath='{.items[*].spec.taints}')"

# A bound pod runs, then ends as its labels say.
pod() {  # NAME EXIT_CODE
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  labels: {shoal.dev/kwok-run-for: 1s, shoal.dev/kwok-exit-code: "$2"}
spec:
  nodeName: kwok-node-0
  automountServiceAccountToken: false
  restartPolicy: Never
  containers: [{name: main, image: none, resources: {requests: {cpu: "1"}}}]
YAML
}
pod ok 0 | ka apply -f - >/dev/null
pod three 3 | ka apply -f - >/dev/null
ka wait --for=jsonpath='{.status.phase}'=Running pod/ok --timeout=30s >/dev/null || fail "pod ok never Running"
ka wait --for=jsonpath='{.status.phase}'=Succeeded pod/ok --timeout=30s >/dev/null || fail "pod ok never Succeeded"
ka wait --for=jsonpath='{.status.phase}'=Failed pod/three --timeout=30s >/dev/null || fail "pod three never Failed"
[ "$(ka get pod three -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')" = 3 ] || fail "exit code not 3"
[ -z "$(kb get pods -o name)" ] || fail "cluster b sees cluster a's pods"

# RBAC: a token the API server does not know is refused; a service account
# may do nothing it was not granted.
server=$(ka config view -o jsonpath='{.clusters[0].cluster.server}')
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$work/a/pki/ca.crt" -H "Authorization: Bearer nope" "$server/api/v1/nodes")
[ "$code" = 401 ] || fail "an unknown token got HTTP $code, expected 401"
ka create serviceaccount nobody >/dev/null
[ "$(ka auth can-i list pods --as system:serviceaccount:default:nobody || true)" = no ] || fail "a bare service account may list pods"

pids=$(cat "$work"/a/run/*.pid "$work"/b/run/*.pid)
[ "$(wc -w <<<"$pids")" = 6 ] || fail "expected 6 recorded processes, got: $pids"
"$dev" down "$work/a"
"$dev" down "$work/b"
for pid in $pids; do
  if kill -0 "$pid" 2>/dev/null; then fail "process $pid ($(tr '\0' ' ' </proc/"$pid"/cmdline)) left behind"; fi
done
left=$(pgrep -af "$work/" || true)
[ -z "$left" ] || fail "left behind: $left"
echo "ok: two clusters up and down, pods run and end, RBAC on, nothing left behind"
