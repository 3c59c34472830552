#!/usr/bin/env bash
# The federation with a real Slurm behind one agent. Needs root
# (scripts/slurm-dev.sh runs slurmd, which runs jobs as their user).
#
# Starts a throw-away 4-node Slurm on this host (scripts/slurm-dev.sh), an
# agent "hpc" beside it (backend: slurm) and an agent "lab" whose own
# cluster is too small for the work; hpc invites lab into namespace
# "default". lab submits 3 jobs of 4 cpus and a gang of 2 replicas: each
# runs at hpc as one Slurm job (seen in squeue with its tag; the gang's
# replicas are its 2 tasks), and lab reads what each printed with shoalctl
# logs. Leaves no process behind.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "demo-slurm.sh needs root: the dev Slurm's slurmd runs jobs as their user" >&2
  exit 2
fi
source scripts/demo-common.sh
build_agent_binaries --slurm
WORK="$(mktemp -d /tmp/shoal-slurm-demo.XXXXXX)"
chmod 711 "$WORK"  # slurmctld and the jobs run as another user: they pass through
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  bash scripts/slurm-dev.sh down "$WORK/slurm" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 scripts/free-ports; }
ctl() { local name=$1; shift; "$BIN/shoalctl" --data "$WORK/$name" "$@"; }

phase "a dev Slurm of 4 nodes x 8 cpus in $WORK/slurm …"
SOCKET=$(bash scripts/slurm-dev.sh up "$WORK/slurm" --nodes 4 --cpus 8 2>/dev/null | tail -1)
export SLURM_CONF="$WORK/slurm/etc/slurm.conf"
sinfo
# Jobs run as slurmrestd's user; their output goes where it may write.
mkdir -p "$WORK/output" && chmod 1777 "$WORK/output"

cat >"$WORK/hpc-cluster.yaml" <<YAML
apiVersion: shoal.dev/v1
kind: Cluster
metadata: {name: hpc}
spec:
  backend: slurm
  slurm:
    endpoint: unix://$SOCKET
    partition: dev
    outputDir: $WORK/output
    completionLog: $WORK/slurm/log/jobcomp.txt
YAML
cat >"$WORK/lab-cluster.yaml" <<YAML
apiVersion: shoal.dev/v1
kind: Cluster
metadata: {name: lab}
spec:
  backend: exec
  nodes:
  - {name: desk, capacity: {cpu: "1", memory: 2Gi}}
YAML
phase "agents hpc (backend slurm) and lab (one small exec node) …"
for name in hpc lab; do
  "$BIN/shoald" init --data "$WORK/$name" --cluster "$name" --org "org-$name" \
    --listen "tcp://127.0.0.1:$(free_port)" --cluster-config "$WORK/$name-cluster.yaml" >/dev/null
  "$BIN/shoald" run --data "$WORK/$name" 2>"$WORK/$name.log" &
  PIDS+=($!)
done
for name in hpc lab; do
  for _ in $(seq 100); do [ -S "$WORK/$name/control.sock" ] && break; sleep 0.1; done
  [ -S "$WORK/$name/control.sock" ] || { echo "$name did not start:"; cat "$WORK/$name.log"; exit 1; }
done
ctl hpc status

phase "hpc invites lab into namespace default …"
token=$(ctl hpc invite create --to "$(ctl lab identity)" --namespace default --cpu 24)
ctl lab invite accept "$token" >/dev/null
for _ in $(seq 100); do
  free=$(ctl lab peers -o json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    if p["state"] == "Active": print(p.get("capacity", {}).get("default", {}).get("free", {}).get("cpu", ""))')
  [ -n "$free" ] && break
  sleep 0.2
done
ctl lab peers -o wide

phase "lab submits 3 jobs of 4 cpus and a gang of 2 x 2 cpus (its own cluster has 1) …"
MANIFEST="$WORK/jobs.yaml"
for i in 1 2 3; do
  cat >>"$MANIFEST" <<YAML
---
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: sim-$i, namespace: default}
spec:
  resources: {cpu: "4", memory: 1Gi}
  command: ["sh", "-c", "echo \"\$SHOAL_WORKLOAD of \$SHOAL_SOURCE_CLUSTER ran in Slurm job \$SLURM_JOB_ID on \$SLURMD_NODENAME\"; sleep 3"]
YAML
done
cat >>"$MANIFEST" <<'YAML'
---
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: gang, namespace: default}
spec:
  replicas: 2
  resources: {cpu: "2", memory: 512Mi}
  command: ["sh", "-c", "echo \"replica $SHOAL_REPLICA of $SHOAL_WORKLOAD on $SHOAL_NODE: task $SLURM_PROCID of Slurm job $SLURM_JOB_ID\"; sleep 3"]
YAML
ctl lab submit -f "$MANIFEST"

phase "in Slurm: one job per copy, tagged with the copy's key and epoch …"
for _ in $(seq 100); do
  [ "$(squeue -h -t RUNNING | wc -l)" -ge 4 ] && break
  sleep 0.1
done
squeue -o "%.6i %.12j %.8T %.6C %.6N %k"
ctl hpc status | sed -n '1,12p'

phase "waiting for the jobs to finish …"
for _ in $(seq 300); do
  done_count=$(ctl lab get workloads -o json | python3 -c 'import json,sys; print(sum(w["status"]["phase"] in ("Succeeded","Failed") for w in json.load(sys.stdin)["items"]))')
  [ "$done_count" = 4 ] && break
  sleep 0.2
done
ctl lab get workloads -o wide
echo
phase "what they printed, read at lab (shoalctl logs, over the peer link) …"
LOGS="$WORK/logs.txt"
for i in 1 2 3; do ctl lab logs "default/sim-$i" | tee -a "$LOGS"; done
for replica in 0 1; do ctl lab logs default/gang --replica "$replica" | tee -a "$LOGS"; done
ctl lab get workloads -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
ok = sum(w["status"]["phase"] == "Succeeded" and w["status"]["cluster"] == "hpc" for w in items)
text = open(sys.argv[1]).read().splitlines()
lines = [l for l in text if "ran in Slurm job" in l]
tasks = [l for l in text if "of gang on" in l]
print(f"{ok}/{len(items)} Succeeded at hpc; {len(lines)} printed their Slurm job id; "
      f"the gang ran as {len(tasks)} tasks of one job")
sys.exit(0 if ok == 4 and len(lines) == 3 and len(tasks) == 2 else 1)' "$LOGS"
