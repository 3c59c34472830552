#!/usr/bin/env bash
# The Helm chart on the dev cluster's real node (scripts/k8s-dev.sh up
# --real-node), as a new operator installs it:
#  1. the node is Ready within 30 s of `up`;
#  2. `helm install` with the documented values into a namespace that
#     enforces Pod Security "restricted": the agent's pod becomes Ready,
#     runs as uid 10001, binds every address and advertises the name given;
#  3. an agent outside the cluster (on the test host) peers with it through
#     invitations made with `kubectl exec ... shoalctl`, submits a workload
#     that the in-cluster agent runs as a real container, and reads that
#     container's own output with `shoalctl logs`;
#  4. the pod deleted comes back with the same identity and state;
#  5. `helm uninstall` leaves only the volume;
#  6. `down` leaves no process, mount, network namespace, link or cgroup.
# Needs root and the built cluster; skipped (77) otherwise, failed under CI=true.
# Usage: k8s_real_node_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD_DIR="$(cd "$1" && pwd)"
BIN="$BUILD_DIR/bin"
source_dir="$(cd "$2" && pwd)"
dev="$source_dir/scripts/k8s-dev.sh"
skip() {
  echo "skipped: $*"
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 77
}
bin=$("$dev" bin-dir 2>/dev/null) || skip "the test cluster is not built (scripts/k8s-dev.sh build)"
[ "$(id -u)" = 0 ] || skip "a real node needs root"
work=$(mktemp -d /tmp/shoal-real-node-test.XXXXXX)
west_pid=""
cleanup() {
  [ -n "$west_pid" ] && kill -TERM "$west_pid" 2>/dev/null || true
  "$dev" down "$work/k" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- the agent's pod"
  kubectl -n shoal-system logs shoal-0 --tail 20 2>&1 || true
  for log in "$work"/west.log "$work"/k/log/kubelet.log; do
    [ -f "$log" ] && { echo "--- $log"; tail -n 15 "$log"; }
  done
  exit 1
}
# Everything that talks to the cluster runs on its test host.
on_host() { "$dev" exec "$work/k" -- "$@"; }
kubectl() { on_host "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
helm() { on_host "$bin/helm" --kubeconfig "$kubeconfig" "$@"; }

mounts_before=$(wc -l </proc/self/mountinfo)
started=$SECONDS
kubeconfig=$("$dev" up "$work/k" --real-node | tail -n 1)
up_seconds=$((SECONDS - started))
echo "the real node was Ready in ${up_seconds}s"
[ "$up_seconds" -lt 30 ] || fail "the real node took ${up_seconds}s to be Ready (expected < 30)"
netns=$(cat "$work/k/run/netns")

# The agent's image, built from the package, on the node.
SHOAL_BUILD_DIR="$BUILD_DIR" bash "$source_dir/scripts/k8s-images.sh" "$work/shoal.tar" >/dev/null
"$dev" load-images "$work/k" --image "$work/shoal.tar"

# A hardened namespace for the agent, one for the work it lends the node to,
# and a volume on the node for the agent's state (a local PersistentVolume:
# root's directory, as a provisioner gives it).
kubectl create namespace shoal-system >/dev/null
kubectl label namespace shoal-system pod-security.kubernetes.io/enforce=restricted >/dev/null
kubectl create namespace batch >/dev/null
mkdir -p "$work/volume"
chmod 0755 "$work/volume"
kubectl apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: node-local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: shoal-data}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: node-local
  local: {path: $work/volume}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [shoal-node]}]
EOF

helm install shoal "$source_dir/deploy/helm/shoal" --namespace shoal-system \
  --set cluster=east,org=acme --set advertise=tcp://east.example.org:7400 \
  --set persistence.storageClassName=node-local --set 'workloadNamespaces={batch}' >/dev/null
kubectl -n shoal-system wait --for=condition=Ready pod/shoal-0 --timeout=120s >/dev/null ||
  fail "the agent's pod never became Ready: $(kubectl -n shoal-system describe pod shoal-0 | tail -n 20)
$(kubectl -n shoal-system logs shoal-0 2>&1 | tail -n 20)"
[ "$(kubectl -n shoal-system exec shoal-0 -- id -u)" = 10001 ] || fail "the agent does not run as uid 10001"
east_card=$(kubectl -n shoal-system exec shoal-0 -- shoalctl identity)
[[ "$east_card" == *":tcp://east.example.org:7400" ]] || fail "the agent advertises $east_card"
# Whole outputs, then grep: under pipefail, `grep -q` ending early fails the pipe.
agent_log=$(kubectl -n shoal-system logs shoal-0)
grep -q 'listening on tcp://\*:7400' <<<"$agent_log" || fail "the agent does not bind tcp://*:7400"

# The outside agent lives on the test host, beside the node; it reaches the
# in-cluster agent through the peer Service, under the advertised name.
service_ip=$(kubectl -n shoal-system get service shoal -o jsonpath='{.spec.clusterIP}')
mkdir -p "/etc/netns/$netns"
printf '127.0.0.1 localhost\n%s east.example.org\n' "$service_ip" >"/etc/netns/$netns/hosts"
west_port=$(python3 "$source_dir/scripts/free-ports")
on_host "$BIN/shoald" init --data "$work/west" --cluster west --org globex --listen "tcp://10.88.0.1:$west_port" >/dev/null
# Not through on_host: $! must be shoald's own pid (k8s-dev.sh exec execs it).
"$dev" exec "$work/k" -- "$BIN/shoald" run --data "$work/west" >"$work/west.log" 2>&1 &
west_pid=$!
ctl() { on_host "$BIN/shoalctl" --data "$work/west" "$@"; }
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.1; done
kubectl -n shoal-system exec shoal-0 -- shoalctl invite create --to "$(ctl identity)" --namespace batch \
  --cpu 1 --memory 1Gi --expires 1h >"$work/batch.invite"
ctl invite accept "$work/batch.invite" >/dev/null

cat >"$work/hello.yaml" <<EOF
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: hello, namespace: batch}
spec:
  resources: {cpu: 100m, memory: 32Mi}
  placement: {clusters: [east]}
  command: [sh, -c, 'echo "hello from \$(hostname) as \$(id -u)"']
EOF
ctl submit -f "$work/hello.yaml" >/dev/null
phase=""
for _ in $(seq 150); do
  phase=$(ctl describe workload batch/hello -o json 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["phase"])' 2>/dev/null || true)
  [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
  sleep 0.2
done
[ "$phase" = Succeeded ] || fail "the workload ended $phase: $(ctl describe workload batch/hello | tail -n 20)"
logs=$(ctl logs batch/hello 2>&1) || fail "shoalctl logs: $logs"
grep -q "^hello from " <<<"$logs" || fail "the container's own output is not at the source: $logs"
echo "the container said: $logs"

# The pod deleted comes back from its volume: same identity, same invitations.
kubectl -n shoal-system delete pod shoal-0 --wait=true >/dev/null
kubectl -n shoal-system wait --for=condition=Ready pod/shoal-0 --timeout=120s >/dev/null ||
  fail "the agent's pod did not come back"
[ "$(kubectl -n shoal-system exec shoal-0 -- shoalctl identity)" = "$east_card" ] || fail "the identity changed"
invitations=$(kubectl -n shoal-system exec shoal-0 -- shoalctl invite list)
grep -q batch <<<"$invitations" || fail "the invitation was lost: $invitations"

helm uninstall shoal --namespace shoal-system --wait >/dev/null
kubectl -n shoal-system wait --for=delete pod/shoal-0 --timeout=60s >/dev/null 2>&1 || true
left=$(kubectl -n shoal-system get all -o name 2>/dev/null)
[ -z "$left" ] || fail "helm uninstall left: $left"
[ -n "$(kubectl -n shoal-system get pvc -o name)" ] || fail "the volume's claim is gone (the docs say it is kept)"

kill -TERM "$west_pid" && wait "$west_pid" || true
west_pid=""
"$dev" down "$work/k" >/dev/null
namespaces=$(ip netns list)
grep -q "$netns" <<<"$namespaces" && fail "network namespace $netns left behind"
left=$(pgrep -af "$work/" || true)
[ -z "$left" ] || fail "processes left behind: $left"
grep -q " $work/" /proc/self/mountinfo && fail "mounts left behind: $(grep " $work/" /proc/self/mountinfo)"
[ "$(wc -l </proc/self/mountinfo)" -le "$mounts_before" ] || fail "mounts left behind"
for cgroup in /sys/fs/cgroup/*/kubepods; do [ -e "$cgroup" ] && fail "cgroup $cgroup left behind"; done
[ -e /etc/netns/"$netns" ] && fail "/etc/netns/$netns left behind"
echo "ok: the chart's agent ran under Pod Security restricted, peered, ran a real container, kept its state; down left nothing"
