#!/usr/bin/env bash
# One federation of three kinds of cluster, each behind its own agent: a
# Kubernetes cluster (scripts/k8s-dev.sh up --real-node: a kubelet over
# containerd and runc),
# a Slurm cluster (scripts/slurm-dev.sh) and a plain host (exec). Needs
# root (the dev Slurm's slurmd runs jobs as their user) and the Kubernetes
# binaries (scripts/k8s-dev.sh build; this script builds them if missing,
# which takes tens of minutes the first time).
#
# kube and hpc invite edge into namespace "default"; edge submits one
# workload with numberOfClusters: 3, and one copy runs in each cluster:
# the script shows the pod (kubectl), the Slurm job (squeue) and the
# process (ps), then reads each copy's output at edge with shoalctl logs.
# The Kubernetes cluster lives in a network namespace of its own (the test
# host, scripts/k8s-dev/real-node.sh), so the three agents and every command
# that talks to them run there too (k8s-dev.sh exec). Its copy is a real
# container on the real node; its output is read through the API server.
# Leaves no process behind.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "demo-mixed.sh needs root: the dev Slurm's slurmd runs jobs as their user" >&2
  exit 2
fi
source scripts/demo-common.sh
build_agent_binaries --slurm
phase "the Kubernetes binaries (scripts/k8s-dev.sh build; cached after the first) …"
bash scripts/k8s-dev.sh build
K8S_BIN=$(bash scripts/k8s-dev.sh bin-dir)
WORK="$(mktemp -d /tmp/shoal-mixed-demo.XXXXXX)"
chmod 711 "$WORK"  # slurmctld and the jobs run as another user: they pass through
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  bash scripts/slurm-dev.sh down "$WORK/slurm" >/dev/null 2>&1 || true
  bash scripts/k8s-dev.sh down "$WORK/k8s" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 scripts/free-ports; }
ctl() { local name=$1; shift; on_host "$BIN/shoalctl" --data "$WORK/$name" "$@"; }

phase "a dev Kubernetes with one real node in $WORK/k8s …"
KUBECONFIG_FILE=$(bash scripts/k8s-dev.sh up "$WORK/k8s" --real-node 2>/dev/null | tail -1)
# Everything that talks to the cluster or its agents runs in its test host.
on_host() { bash scripts/k8s-dev.sh exec "$WORK/k8s" -- "$@"; }
kubectl() { on_host "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
kubectl get nodes
phase "a dev Slurm of 2 nodes x 8 cpus in $WORK/slurm …"
SOCKET=$(bash scripts/slurm-dev.sh up "$WORK/slurm" --nodes 2 --cpus 8 2>/dev/null | tail -1)
export SLURM_CONF="$WORK/slurm/etc/slurm.conf"
sinfo
mkdir -p "$WORK/output" && chmod 1777 "$WORK/output"

cat >"$WORK/kube-cluster.yaml" <<YAML
apiVersion: shoal.dev/v1
kind: Cluster
metadata: {name: kube}
spec:
  backend: kubernetes
  kubernetes: {kubeconfig: $KUBECONFIG_FILE}
YAML
cat >"$WORK/hpc-cluster.yaml" <<YAML
apiVersion: shoal.dev/v1
kind: Cluster
metadata: {name: hpc}
spec:
  backend: slurm
  slurm: {endpoint: "unix://$SOCKET", partition: dev, outputDir: $WORK/output}
YAML
cat >"$WORK/edge-cluster.yaml" <<YAML
apiVersion: shoal.dev/v1
kind: Cluster
metadata: {name: edge}
spec:
  backend: exec
  nodes:
  - {name: host, capacity: {cpu: "2", memory: 4Gi}}
YAML
phase "agents kube (backend kubernetes), hpc (backend slurm) and edge (exec) …"
for name in kube hpc edge; do
  on_host "$BIN/shoald" init --data "$WORK/$name" --cluster "$name" --org "org-$name" \
    --listen "tcp://127.0.0.1:$(free_port)" --cluster-config "$WORK/$name-cluster.yaml" >/dev/null
  # k8s-dev.sh exec execs shoald: $! is its pid.
  bash scripts/k8s-dev.sh exec "$WORK/k8s" -- "$BIN/shoald" run --data "$WORK/$name" 2>"$WORK/$name.log" &
  PIDS+=($!)
done
for name in kube hpc edge; do
  for _ in $(seq 100); do [ -S "$WORK/$name/control.sock" ] && break; sleep 0.1; done
  [ -S "$WORK/$name/control.sock" ] || { echo "$name did not start:"; cat "$WORK/$name.log"; exit 1; }
done

phase "kube and hpc invite edge into namespace default …"
for target in kube hpc; do
  token=$(ctl "$target" invite create --to "$(ctl edge identity)" --namespace default --cpu 8)
  ctl edge invite accept "$token" >/dev/null
done
for _ in $(seq 100); do
  active=$(ctl edge peers -o json | python3 -c '
import json, sys
print(sum(p["state"] == "Active" and bool(p.get("capacity")) for p in json.load(sys.stdin)["items"]))')
  [ "$active" = 2 ] && break
  sleep 0.2
done
ctl edge peers -o wide

phase "edge submits one workload, one copy on each of 3 clusters …"
cat >"$WORK/everywhere.yaml" <<'YAML'
apiVersion: shoal.dev/v1
kind: Workload
metadata:
  name: everywhere
  namespace: default
spec:
  resources: {cpu: 500m, memory: 256Mi}
  command: ["sh", "-c", "echo \"copy of everywhere from $SHOAL_SOURCE_CLUSTER ran at $SHOAL_CLUSTER on $(hostname)\"; sleep 6"]
  placement: {numberOfClusters: 3}
YAML
ctl edge submit -f "$WORK/everywhere.yaml"
for _ in $(seq 150); do
  running=$(ctl edge describe workload default/everywhere -o json | python3 -c '
import json, sys
print(sum(c["phase"] == "Running" for c in json.load(sys.stdin)["status"].get("copies", [])))')
  [ "$running" = 3 ] && break
  sleep 0.2
done
ctl edge describe workload default/everywhere | sed -n '1,25p'

phase "the copy at kube is a pod, bound by the agent to the real node, a container there …"
kubectl get pods -n default -L shoal.dev/cluster,shoal.dev/uid -o wide
phase "the copy at hpc is a Slurm job …"
squeue -o "%.6i %.12j %.8T %.6C %.6N %k"
phase "the copy at edge is a process on this host …"
ps -eo pid,args | grep "[c]opy of" || true

phase "waiting for the copies to finish …"
for _ in $(seq 300); do
  state=$(ctl edge get workloads -o json | python3 -c '
import json, sys
print(next(w["status"]["phase"] for w in json.load(sys.stdin)["items"]))')
  [ "$state" = Succeeded ] || [ "$state" = Failed ] && break
  sleep 0.2
done
ctl edge get workloads -o wide
phase "what each copy printed, read at edge (shoalctl logs) …"
for copy in 1 2 3; do
  ctl edge logs default/everywhere --copy "$copy" 2>&1 || true
done
[ "$state" = Succeeded ] || { echo "the workload ended $state"; exit 1; }
echo "one workload, three copies: a pod in Kubernetes, a job in Slurm, a process on a host"
