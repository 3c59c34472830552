#!/usr/bin/env bash
# The main job: installs the packages it needs (if missing), builds shoald,
# shoalctl and shoal-exec-monitor (nothing else), starts a three-agent
# federation on loopback
# (east, west, north) whose clusters run work as processes on this host
# (backend: exec), sets up full-mesh invitations for namespace "default",
# submits 10 jobs (and one with a copy on every cluster, and one spread over
# regions) to east, waits for them to finish, shows where each ran and what
# it printed there (shoalctl logs at east, read over the peer link). Leaves
# no process behind. Prints a line per phase with the time so far.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/demo-common.sh
build_agent_binaries --agent
WORK="$(mktemp -d /tmp/shoal-demo.XXXXXX)"
CLUSTERS=(east west north)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 scripts/free-ports; }

ctl() { local name=$1; shift; "$BIN/shoalctl" --data "$WORK/$name" "$@"; }

declare -A REGION=([east]=us-east [north]=us-east [west]=us-west)
phase "starting agents in $WORK (east and north in region us-east, west in us-west) …"
for name in "${CLUSTERS[@]}"; do
  cat >"$WORK/$name-cluster.yaml" <<YAML
apiVersion: shoal.dev/v1
kind: Cluster
metadata:
  name: $name
  labels: {region: ${REGION[$name]}}
spec:
  backend: exec
  nodes:
  - {name: node, count: 4, capacity: {cpu: "8", memory: 32Gi}}
YAML
  "$BIN/shoald" init --data "$WORK/$name" --cluster "$name" --org "org-$name" \
    --listen "tcp://127.0.0.1:$(free_port)" --cluster-config "$WORK/$name-cluster.yaml" >/dev/null
  "$BIN/shoald" run --data "$WORK/$name" 2>"$WORK/$name.log" &
  PIDS+=($!)
done
for name in "${CLUSTERS[@]}"; do
  for _ in $(seq 100); do [ -S "$WORK/$name/control.sock" ] && break; sleep 0.1; done
done

phase "invitations (every cluster invites every other into namespace default) …"
for target in "${CLUSTERS[@]}"; do
  for source in "${CLUSTERS[@]}"; do
    [ "$target" = "$source" ] && continue
    token=$(ctl "$target" invite create --to "$(ctl "$source" identity)" --namespace default)
    ctl "$source" invite accept "$token" >/dev/null
    echo "   $target invited $source"
  done
done

phase "waiting for peers to be Active …"
for _ in $(seq 100); do
  active=$(ctl east peers -o json | python3 -c 'import json,sys; print(sum(p["state"]=="Active" for p in json.load(sys.stdin)["items"]))')
  [ "$active" = 2 ] && break
  sleep 0.2
done
ctl east peers

phase "submitting 10 jobs of 6 cpu to east (the federation runs 12 at once); each prints where it ran …"
MANIFEST="$WORK/workloads.yaml"
# Each job is a real process: it says which cluster ran it (the exec
# backend sets SHOAL_CLUSTER, SHOAL_NODE, SHOAL_SOURCE_CLUSTER) and works 2 s.
JOB='["sh", "-c", "echo \"$SHOAL_WORKLOAD ran on $SHOAL_CLUSTER ($SHOAL_NODE) for $SHOAL_SOURCE_CLUSTER\"; sleep 2"]'
for i in $(seq 1 10); do
  cat >>"$MANIFEST" <<YAML
---
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: job-$i, namespace: default, labels: {demo: "true"}}
spec:
  resources: {cpu: "6", memory: 8Gi}
  command: $JOB
YAML
done
# One more, with a copy on each of the three clusters.
cat >>"$MANIFEST" <<YAML
---
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: everywhere, namespace: default}
spec:
  resources: {cpu: "1", memory: 1Gi}
  command: $JOB
  placement: {numberOfClusters: 3}
YAML
SPREAD="$WORK/spread.yaml"
cat >"$SPREAD" <<YAML
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: one-per-region, namespace: default}
spec:
  resources: {cpu: "1", memory: 1Gi}
  command: $JOB
  placement:
    numberOfClusters: 2
    spreadPolicy:
      spreadConstraints:
      - {topologyKey: region, maxSkew: 1, whenUnsatisfiable: DoNotSchedule}
YAML

phase "the clusters east places on, as its placement engine sees them …"
ctl east get clusters
echo
phase "what east would decide now for a workload spread over regions (place --live) …"
ctl east place --live -f "$SPREAD"
{ echo "---"; cat "$SPREAD"; } >>"$MANIFEST"
ctl east submit -f "$MANIFEST"

phase "waiting for all 12 to finish …"
for _ in $(seq 300); do
  done_count=$(ctl east get workloads -o json | python3 -c 'import json,sys; print(sum(w["status"]["phase"] in ("Succeeded","Failed") for w in json.load(sys.stdin)["items"]))')
  [ "$done_count" = 12 ] && break
  sleep 0.2
done
ctl east get workloads -o wide
ctl east describe workload default/job-8 | tail -12
echo
ctl east describe workload default/everywhere | sed -n '/^Status:/,/^Events:/p'
echo
ctl east describe workload default/one-per-region | sed -n '/^Copies:/,/^Events:/p'
echo
phase "what the jobs printed, read at east wherever they ran (shoalctl logs) …"
LOGS="$WORK/logs.txt"
for i in $(seq 1 10); do ctl east logs "default/job-$i" | tee -a "$LOGS"; done
for copy in 1 2 3; do ctl east logs default/everywhere --copy "$copy" | tee -a "$LOGS"; done
echo
ctl east get workloads -o json | python3 -c '
import json, sys, collections
items = json.load(sys.stdin)["items"]
where = collections.Counter(w["status"]["cluster"] for w in items)
ok = sum(w["status"]["phase"] == "Succeeded" for w in items)
print(f"{ok}/{len(items)} Succeeded; placed per cluster: {dict(sorted(where.items()))}")
regions = {"east": "us-east", "north": "us-east", "west": "us-west"}
spread = next(w for w in items if w["metadata"]["name"] == "one-per-region")
spread_regions = sorted(regions[c] for c in spread["status"]["cluster"].split(","))
print(f"one-per-region ran in {spread_regions}")
singles = [w for w in items if "," not in w["status"]["cluster"]]
# Every job said, in its own output, that it ran where east says it did.
lines = open(sys.argv[1]).read().splitlines()
told = {}
for line in lines:
    name, _, rest = line.partition(" ran on ")
    told.setdefault(name, []).append(rest.split(" ")[0])
logs_agree = all(told.get(w["metadata"]["name"]) == [w["status"]["cluster"]] for w in singles)
everywhere = sorted(told.get("everywhere", []))
print(f"logs read at east agree with where each job ran: {logs_agree}; everywhere printed on {everywhere}")
print(f"demo finished in {int(sys.argv[2])} s")
sys.exit(0 if ok == len(items) and spread_regions == ["us-east", "us-west"] and logs_agree and
         everywhere == ["east", "north", "west"] and
         len({w["status"]["cluster"] for w in singles}) == 3 else 1)' "$LOGS" "$(( $(date +%s) - DEMO_STARTED ))"
