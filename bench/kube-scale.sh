#!/usr/bin/env bash
# Scale into Kubernetes: one dev cluster of NODES KWOK nodes (1,000, of
# NODE_CPUS cpus, 16) behind an agent, one source, WORKLOADS one-cpu
# workloads (5,000), beside FOREIGN pods of the cluster's own (0; running
# in namespace others before either client starts, each asking 1m cpu, all
# watched by the agent). Both agents run through both runs, so that the
# API server serves the same watchers in each. Measured in the same run,
# on the same cluster:
#   raw    a plain parallel client: CLIENTS (16) `kubectl create -f`
#          processes, each over one keep-alive connection, create WORKLOADS
#          pods bound to nodes, each the pod the agent makes for one of the
#          workloads (taken from a probe workload's pod: the fields the
#          agent set), with its own name, uid and node;
#   shoal  the source submits WORKLOADS workloads; the agent places, binds
#          and creates their pods (spec.kubernetes.parallelCalls: CALLS, 16);
# each twice: creates per second (from the start until the API server holds
# every pod) and Running per second (until KWOK has moved every pod to
# Running: KWOK bounds that near 185/s here, whatever the client). Then the
# ratios shoal/raw (goals: creates >= 0.8, Running >= 0.9) and the target
# agent's peak RSS in the shoal run, with NODES nodes, WORKLOADS pods of its
# own and FOREIGN others watched (goal: < 200 MiB). Each phase also says
# which process its CPU went to. Needs the Kubernetes binaries (scripts/k8s-dev.sh build) and
# a build (scripts/build.sh). PROFILE=DIR records both agents with perf
# while their pods are created (DIR/target.perf, DIR/source.perf), and the
# target until they are Running (DIR/target-running.perf).
set -euo pipefail
cd "$(dirname "$0")/.."
NODES="${NODES:-1000}"
WORKLOADS="${WORKLOADS:-5000}"
NODE_CPUS="${NODE_CPUS:-16}"
FOREIGN="${FOREIGN:-0}"
CLIENTS="${CLIENTS:-16}"
CALLS="${CALLS:-16}"
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
BIN="$BUILD_DIR/bin"
K8S_BIN=$(bash scripts/k8s-dev.sh bin-dir)
WORK="$(mktemp -d /tmp/shoal-kube-scale.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  bash scripts/k8s-dev.sh down "$WORK/k8s" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }
rate() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.0f}')" "$1" "$2"; }

echo "== a dev Kubernetes of $NODES KWOK nodes"
KUBECONFIG_FILE=$(bash scripts/k8s-dev.sh up "$WORK/k8s" --nodes "$NODES" --cpus "$NODE_CPUS" --memory 64Gi 2>/dev/null | tail -1)
kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
# How many pods the API server holds: one item asked for, the rest counted
# by the server (cheap beside listing them all while the clients run).
existing() {
  kubectl get --raw "/api/v1/namespaces/default/pods?limit=1" 2>/dev/null | python3 -c '
import json, sys
page = json.load(sys.stdin)
print(len(page["items"]) + page["metadata"].get("remainingItemCount", 0))' 2>/dev/null || echo 0
}
# Waits until COUNT pods of namespace NS (default) are Running (at most 20
# minutes); prints when. One watch of Running pods, each counted once:
# polling a list of thousands of pods would cost the API server and the
# cores more than the clients being measured.
await_running() {  # COUNT [NS]
  python3 - "$1" "${2:-default}" "$K8S_BIN/kubectl" "$KUBECONFIG_FILE" <<'PY'
import subprocess, sys, threading, time
count, ns, kubectl, kubeconfig = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
watch = subprocess.Popen([kubectl, "--kubeconfig", kubeconfig, "get", "pods", "-n", ns, "--watch",
                          "--field-selector=status.phase=Running", "-o", "name"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
deadline = threading.Timer(1200, watch.kill)
deadline.daemon = True
deadline.start()
seen = set()
for line in watch.stdout:
    seen.add(line.strip())
    if len(seen) >= count:
        print(f"{time.time():.3f}")
        watch.kill()
        sys.exit(0)
print(f"only {len(seen)} of {count} pods Running in {ns} after 20 minutes", file=sys.stderr)
sys.exit(1)
PY
}
# CPU seconds each process of the run has used so far, and the machine's
# idle seconds: "NAME SECONDS" lines into FILE. Two snapshots tell which
# process a phase's cores went to (cpu_used).
cpu_snapshot() {  # FILE
  python3 - "$WORK/k8s/run" "$1" "${PIDS[@]}" <<'PY'
import os, sys
run, out, agents = sys.argv[1], sys.argv[2], sys.argv[3:]
tick = os.sysconf("SC_CLK_TCK")
def used(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick
    except (OSError, ValueError, IndexError):
        return 0.0
rows = {}
for name in os.listdir(run):
    if name.endswith(".pid"):
        rows[name[:-4]] = used(open(f"{run}/{name}").read().strip())
for name, pid in zip(["target agent", "source agent"], agents):
    rows[name] = used(pid)
rows["idle (all cores)"] = int(open("/proc/stat").readline().split()[4]) / tick
with open(out, "w") as f:
    for name, seconds in rows.items():
        print(f"{name}\t{seconds}", file=f)
PY
}
# Prints, for the phase between snapshots BEFORE and AFTER, each process's
# CPU seconds and its share of the phase's wall time.
cpu_used() {  # LABEL BEFORE AFTER WALL_SECONDS
  python3 - "$@" <<'PY'
import sys
label, before, after, wall = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
def read(path):
    return {n: float(s) for n, s in (line.rstrip("\n").split("\t") for line in open(path))}
b, a = read(before), read(after)
parts = [f"{n} {a[n] - b.get(n, 0):.1f}s ({(a[n] - b.get(n, 0)) / wall:.0%})" for n in a if a[n] - b.get(n, 0) >= 0.05]
print(f"  cpu, {label} ({wall:.1f}s): " + ", ".join(parts))
PY
}
# Waits until COUNTER (existing) says at least COUNT (at most 20 minutes);
# prints when.
await_count() {
  local counter=$1 count=$2 deadline=$((SECONDS + 1200))
  until [ "$($counter "${@:3}")" -ge "$count" ]; do
    [ $SECONDS -lt $deadline ] || { echo "only $($counter) of $count pods ($counter) after 20 minutes" >&2; exit 1; }
    sleep 0.2
  done
  now
}

# Runs CLIENTS `kubectl create -f` processes at once, client c on the file
# printf PATTERN c names; waits for all.
create_at_once() {  # PATTERN
  local clients=() c
  for c in $(seq 0 $((CLIENTS - 1))); do
    # shellcheck disable=SC2059  # the pattern is the caller's printf format
    kubectl create -f "$(printf "$1" "$c")" >/dev/null &
    clients+=($!)
  done
  for pid in "${clients[@]}"; do wait "$pid"; done
}
# COUNT pods named PREFIX-i asking CPU, bound round the nodes, into
# namespace NS, from CLIENTS kubectl processes at once.
create_pods() {
  local count=$1 prefix=$2 ns=$3 cpu=$4
  python3 - "$count" "$NODES" "$CLIENTS" "$WORK" "$prefix" "$ns" "$cpu" <<'PY'
import sys
count, nodes, clients, work = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
prefix, ns, cpu = sys.argv[5], sys.argv[6], sys.argv[7]
files = [open(f"{work}/pods-{c}.yaml", "w") for c in range(clients)]
for i in range(count):
    print(file=files[i % clients], end=f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {prefix}-{i}, namespace: {ns}}}
spec:
  nodeName: kwok-node-{i % nodes}
  automountServiceAccountToken: false
  restartPolicy: Never
  containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: "{cpu}"}}, limits: {{cpu: "{cpu}"}}}}}}]
""")
PY
  create_at_once "$WORK/pods-%d.yaml"
}

if [ "$FOREIGN" -gt 0 ]; then
  echo "== $FOREIGN pods of the cluster's own, in namespace others"
  kubectl create namespace others >/dev/null
  create_pods "$FOREIGN" foreign others 1m
  await_running "$FOREIGN" others >/dev/null
fi

echo "== the agents: a source, and a target beside the cluster (running through both runs)"
cat >"$WORK/target.yaml" <<YAML
apiVersion: shoal.dev/v1
kind: Cluster
metadata: {name: kube}
spec:
  backend: kubernetes
  kubernetes: {kubeconfig: $KUBECONFIG_FILE, parallelCalls: $CALLS}
YAML
cat >"$WORK/source.yaml" <<'YAML'
apiVersion: shoal.dev/v1
kind: Cluster
metadata: {name: lab}
spec:
  nodes:
  - {name: desk, capacity: {cpu: 100m, memory: 1Gi}}
YAML
ctl() { local name=$1; shift; "$BIN/shoalctl" --data "$WORK/$name" "$@"; }
for name in kube lab; do
  config="$WORK/target.yaml"
  [ "$name" = lab ] && config="$WORK/source.yaml"
  "$BIN/shoald" init --data "$WORK/$name" --cluster "$name" --org "org-$name" \
    --listen "tcp://127.0.0.1:$(python3 scripts/free-ports)" --cluster-config "$config" >/dev/null
  if [ "$name" = kube ]; then
    METRICS_PORT=$(python3 scripts/free-ports)
    sed -i "s/^metricsListen:.*/metricsListen: 127.0.0.1:$METRICS_PORT/" "$WORK/$name/agent.yaml"
  fi
  "$BIN/shoald" run --data "$WORK/$name" --log-level warn 2>"$WORK/$name.log" &
  PIDS+=($!)
done
TARGET_PID=${PIDS[0]}
# What the target's API client has had to do so far: whole lists (at start
# and after a 410) and watches that broke and went on, from its /metrics.
api_work() {
  curl -s "http://127.0.0.1:$METRICS_PORT/metrics" |
    awk '/^shoal_backend_api_(lists_total|watches_resumed_total) / {printf "%s=%s ", $1, $2} END {print ""}'
}
# Prints run NAME's rates (its pods created, and all Running, from START)
# and each phase's CPU by process (snapshots $WORK/cpu-NAME-0..2), and sets
# NAME_create_rate and NAME_rate for the ratios at the end.
report_run() {  # NAME START CREATED END
  local name=$1 start=$2 created=$3 end=$4 create_seconds seconds create_rate run_rate
  create_seconds=$(elapsed "$start" "$created")
  seconds=$(elapsed "$start" "$end")
  create_rate=$(rate "$WORKLOADS" "$create_seconds")
  run_rate=$(rate "$WORKLOADS" "$seconds")
  printf -v "${name}_create_rate" '%s' "$create_rate"
  printf -v "${name}_rate" '%s' "$run_rate"
  echo "$name: $WORKLOADS pods created in ${create_seconds}s: $create_rate/s; Running in ${seconds}s: $run_rate/s"
  cpu_used "$name, creating" "$WORK/cpu-$name-0" "$WORK/cpu-$name-1" "$create_seconds"
  cpu_used "$name, until Running" "$WORK/cpu-$name-1" "$WORK/cpu-$name-2" "$(elapsed "$created" "$end")"
  echo "  target's API client after the $name run: $(api_work)"
}
for name in kube lab; do
  for _ in $(seq 300); do [ -S "$WORK/$name/control.sock" ] && break; sleep 0.1; done
done
token=$(ctl kube invite create --to "$(ctl lab identity)" --namespace default)
ctl lab invite accept "$token" >/dev/null
# The free cpu the target advertises to the source ("" before it has).
advertised_cpu() {
  ctl lab peers -o json | python3 -c '
import json, sys
print("".join(p.get("capacity", {}).get("default", {}).get("free", {}).get("cpu", "") for p in json.load(sys.stdin)["items"]))'
}
for _ in $(seq 300); do
  [ -n "$(advertised_cpu)" ] && break
  sleep 0.2
done
idle_cpu=$(advertised_cpu)
# The pod the agent makes for one of the bench's workloads, as it sent it:
# the fields its managedFields entry says it set. The plain client creates
# pods of exactly this shape (its cluster label "raw", so that the agent
# takes them for others'), each with its own uid, copy and node.
cat >"$WORK/probe.yaml" <<'YAML'
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: probe, namespace: default}
spec: {resources: {cpu: "1"}, command: [sleep, "3600"]}
YAML
ctl lab submit -f "$WORK/probe.yaml" >/dev/null
probe_uid=$(ctl lab describe workload default/probe -o json | python3 -c 'import json, sys; print(json.load(sys.stdin)["metadata"]["uid"])')
for _ in $(seq 300); do
  kubectl get pods -n default -l "shoal.dev/uid=$probe_uid" -o json --show-managed-fields >"$WORK/probe.json"
  python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["items"] else 1)' "$WORK/probe.json" && break
  sleep 0.2
done
ctl lab delete workload default/probe >/dev/null
until [ -z "$(kubectl get pods -n default -l "shoal.dev/uid=$probe_uid" -o name)" ]; do sleep 0.2; done

# COUNT pods of the probe's shape named apart, bound round the nodes, from
# CLIENTS kubectl processes at once (each a List of pods over one
# keep-alive connection).
create_probe_copies() {  # COUNT
  python3 - "$1" "$NODES" "$CLIENTS" "$WORK" <<'PY'
import json, sys
count, nodes, clients, work = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pod = json.load(open(f"{work}/probe.json"))["items"][0]
def kept(value, fields):
    """What of `value` the fieldsV1 tree `fields` names: what its writer set."""
    if not fields:
        return value
    if isinstance(value, dict):
        return {k[2:]: kept(value[k[2:]], sub) for k, sub in fields.items() if k.startswith("f:") and k[2:] in value}
    if isinstance(value, list):
        out = []
        for k, sub in fields.items():
            if k.startswith("k:"):
                key = json.loads(k[2:])
                out += [kept(item, sub) for item in value if all(item.get(n) == v for n, v in key.items())]
        return out
    return value
entry = next(m for m in pod["metadata"]["managedFields"] if not m.get("subresource"))
sent = kept(pod, entry["fieldsV1"])
sent["apiVersion"], sent["kind"] = "v1", "Pod"
sent["metadata"]["name"] = pod["metadata"]["name"]  # names are no field
sent["metadata"]["namespace"] = pod["metadata"]["namespace"]
text = json.dumps(sent)
uid, copy = pod["metadata"]["labels"]["shoal.dev/uid"], pod["metadata"]["labels"]["shoal.dev/copy"]
lists = [[] for _ in range(clients)]
for i in range(count):
    one = json.loads(text.replace(uid, format(i, "x").rjust(len(uid), "0"))
                         .replace(copy, format(i, "x").rjust(len(copy), "0")))
    one["metadata"]["labels"]["shoal.dev/cluster"] = "raw"
    one["spec"]["nodeName"] = f"kwok-node-{i % nodes}"
    lists[i % clients].append(one)
for c, items in enumerate(lists):
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(f"{work}/copies-{c}.json", "w"))
PY
  create_at_once "$WORK/copies-%d.json"
}

echo "== raw: $CLIENTS kubectl processes create $WORKLOADS pods of the agent's shape, bound to nodes"
cpu_snapshot "$WORK/cpu-raw-0"
start=$(now)
create_probe_copies "$WORKLOADS"
created=$(now)
cpu_snapshot "$WORK/cpu-raw-1"
end=$(await_running "$WORKLOADS")
cpu_snapshot "$WORK/cpu-raw-2"
report_run raw "$start" "$created" "$end"
kubectl delete pods -n default --all --grace-period=0 --wait=false >/dev/null
until [ "$(kubectl get pods -n default -o name | wc -l)" -eq 0 ]; do sleep 0.5; done


echo "== shoal: the source submits $WORKLOADS workloads; the agent places, binds and creates their pods"
# Once the target has seen the raw pods go (and said so).
for _ in $(seq 600); do [ "$(advertised_cpu)" = "$idle_cpu" ] && break; sleep 0.2; done
python3 - "$WORKLOADS" >"$WORK/workloads.yaml" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f"""---
apiVersion: shoal.dev/v1
kind: Workload
metadata: {{name: w-{i}, namespace: default}}
spec: {{resources: {{cpu: "1"}}, command: [sleep, "3600"]}}""")
PY
profilers=()
if [ -n "${PROFILE:-}" ]; then
  mkdir -p "$PROFILE"
  perf record -q -F 199 --call-graph dwarf,16384 -p "$TARGET_PID" -o "$PROFILE/target.perf" 2>/dev/null &
  profilers+=($!)
  perf record -q -F 199 --call-graph dwarf,16384 -p "${PIDS[1]}" -o "$PROFILE/source.perf" 2>/dev/null &
  profilers+=($!)
fi
# The target's peak RSS from here (the raw run's pods were others' to it).
echo 5 >"/proc/$TARGET_PID/clear_refs" 2>/dev/null || true
cpu_snapshot "$WORK/cpu-shoal-0"
start=$(now)
ctl lab submit -f "$WORK/workloads.yaml" >/dev/null
created=$(await_count existing "$WORKLOADS")
cpu_snapshot "$WORK/cpu-shoal-1"
for pid in "${profilers[@]}"; do kill -INT "$pid"; wait "$pid" || true; done
profilers=()
if [ -n "${PROFILE:-}" ]; then
  perf record -q -F 199 --call-graph dwarf,16384 -p "$TARGET_PID" -o "$PROFILE/target-running.perf" 2>/dev/null &
  profilers+=($!)
fi
end=$(await_running "$WORKLOADS")
for pid in "${profilers[@]}"; do kill -INT "$pid"; wait "$pid" || true; done
cpu_snapshot "$WORK/cpu-shoal-2"
rss_kib=$(awk '/VmHWM/ {print $2}' "/proc/$TARGET_PID/status")
report_run shoal "$start" "$created" "$end"
python3 - "$raw_create_rate" "$shoal_create_rate" "$raw_rate" "$shoal_rate" "$rss_kib" "$NODES" "$WORKLOADS" \
  "$CLIENTS" "$CALLS" "$FOREIGN" <<'PY'
import sys
raw_create, shoal_create, raw, shoal = map(float, sys.argv[1:5])
rss, nodes, pods, clients, calls, foreign = int(sys.argv[5]), *sys.argv[6:11]
print(f"creates shoal/raw: {shoal_create / raw_create:.2f} (goal >= 0.80; {calls} calls out at once "
      f"against {clients} kubectl processes); Running shoal/raw: {shoal / raw:.2f} (goal >= 0.90); "
      f"target agent peak RSS with {nodes} nodes, {pods} pods and {foreign} foreign pods: "
      f"{rss / 1024:.0f} MiB (goal < 200)")
PY
