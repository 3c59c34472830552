#!/usr/bin/env bash
# What of docker/ can be tested without a container runtime (this machine's
# sandbox refuses the OCI runtime, and no base image can be pulled):
#  1. the image's entrypoint, run directly: first start initializes from the
#     environment into a pre-made volume directory, later starts reuse it;
#  2. the compose file's one-shot bootstrap, run directly against three
#     agents started by that entrypoint: invitations, then a demo that runs;
#  3. the compose file's and Dockerfile's structure (services, volumes, the
#     bootstrap order, a non-root user).
# Usage: docker_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BIN="$(cd "$1" && pwd)/bin"
SOURCE_DIR="$(cd "$2" && pwd)"
SCRATCH="$(mktemp -d /tmp/shoal-docker.XXXXXX)"
declare -A PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
fail() { echo "docker test: $*" >&2; exit 1; }
free_port() { python3 "$SOURCE_DIR/scripts/free-ports"; }

AGENTS="east west north"
METRICS_PORT=$(free_port)
start_agent() {  # name [first-start environment...]
  local name=$1; shift
  env "$@" SHOAL_BIN="$BIN" SHOAL_DATA="$SCRATCH/agents/$name/agent" \
    sh "$SOURCE_DIR/docker/entrypoint.sh" 2>"$SCRATCH/$name.log" &
  PIDS[$name]=$!
}
for name in $AGENTS; do
  # As a fresh volume under fsGroup is: there, empty, open to its group.
  mkdir -p "$SCRATCH/agents/$name" && chmod 2775 "$SCRATCH/agents/$name"
  extra=()
  [ "$name" = east ] && extra=(SHOAL_METRICS_LISTEN="127.0.0.1:$METRICS_PORT")
  endpoint="tcp://127.0.0.1:$(free_port)"
  start_agent "$name" SHOAL_CLUSTER="$name" SHOAL_ORG="org-$name" \
    SHOAL_LISTEN="$endpoint" SHOAL_ADVERTISE="$endpoint" "${extra[@]}"
done
# A first start without its variables says which is missing.
mkdir -m 0700 -p "$SCRATCH/agents/nameless"
if out=$(env SHOAL_BIN="$BIN" SHOAL_DATA="$SCRATCH/agents/nameless/agent" sh "$SOURCE_DIR/docker/entrypoint.sh" 2>&1); then
  fail "a first start without SHOAL_CLUSTER started"
fi
grep -q "SHOAL_CLUSTER" <<<"$out" || fail "missing SHOAL_CLUSTER not named: $out"

SHOAL_BIN="$BIN" SHOAL_AGENTS_DIR="$SCRATCH/agents" SHOAL_AGENTS="$AGENTS" SHOAL_DEMO_WORKLOADS=6 \
  timeout 120 sh "$SOURCE_DIR/docker/bootstrap.sh" >"$SCRATCH/bootstrap.out" 2>&1 ||
  fail "bootstrap failed: $(cat "$SCRATCH/bootstrap.out")"
grep -q "bootstrap: done" "$SCRATCH/bootstrap.out" || fail "bootstrap did not finish"
ctl() { local name=$1; shift; "$BIN/shoalctl" --data "$SCRATCH/agents/$name/agent" "$@"; }
placed=$(ctl east get workloads -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(len({w["status"]["cluster"] for w in items if w["status"]["phase"] == "Succeeded"}))')
[ "$placed" -ge 2 ] || fail "the demo ran on $placed cluster(s); expected the federation to share it"
grep -q '^logFormat: json$' "$SCRATCH/agents/east/agent/agent.yaml" || fail "logFormat not json in a container"
python3 - "$SCRATCH/east.log" <<'PY' || fail "east's log is not one JSON object per line"
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
assert lines, "no log lines"
for line in lines:
    record = json.loads(line)
    assert set(record) == {"time", "level", "cluster", "msg"}, record
PY
python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$METRICS_PORT/readyz').status == 200 else 1)" ||
  fail "east's /readyz"

# A restart reuses the volume: same identity, no variables needed; a
# setting given again is applied (as a changed Helm value is), and the
# volume's own mode is left as it was.
identity=$(ctl west identity)
kill -TERM "${PIDS[west]}"
wait "${PIDS[west]}" || fail "west did not stop cleanly on SIGTERM"
start_agent west SHOAL_LOG_FORMAT=text
for _ in $(seq 100); do ctl west status >/dev/null 2>&1 && break; sleep 0.1; done
ctl west status >/dev/null || fail "west did not come back: $(cat "$SCRATCH/west.log")"
[ "$(ctl west identity)" = "$identity" ] || fail "west's identity changed across a restart"
grep -q '^logFormat: text$' "$SCRATCH/agents/west/agent/agent.yaml" || fail "a setting given at a later start was not applied"
[ "$(stat -c %a "$SCRATCH/agents/west/agent")" = 700 ] || fail "the data directory is not 0700"
if out=$(env SHOAL_BIN="$BIN" SHOAL_DATA="$SCRATCH/agents/west/agent" SHOAL_CLUSTER=other \
           sh "$SOURCE_DIR/docker/entrypoint.sh" 2>&1); then
  fail "a start naming another cluster started"
fi
grep -q "^shoald: --cluster: this agent is \"west\"" <<<"$out" || fail "a changed cluster name not refused: $out"

python3 - "$SOURCE_DIR/docker" <<'PY' || fail "compose.yaml or Dockerfile structure"
import sys, yaml
root = sys.argv[1]
compose = yaml.safe_load(open(root + "/compose.yaml"))
services, volumes = compose["services"], compose["volumes"]
agents = ["east", "west", "north"]
assert set(services) == set(agents) | {"setup"}, services.keys()
for name in agents:
    agent = services[name]
    env = agent["environment"]
    assert env["SHOAL_CLUSTER"] == name and env["SHOAL_ORG"], env
    assert env["SHOAL_ADVERTISE"] == f"tcp://{agent['hostname']}:7400" and "SHOAL_LISTEN" not in env, env
    assert agent["volumes"] == [f"{name}-data:/var/lib/shoal"], agent["volumes"]
    assert f"{name}-data" in volumes
    assert "shoalctl" in agent["healthcheck"]["test"], agent["healthcheck"]
    assert agent["image"] == "shoal:latest" and agent["build"]["dockerfile"] == "docker/Dockerfile"
setup = services["setup"]
assert setup["restart"] == "no"
assert {n: c["condition"] for n, c in setup["depends_on"].items()} == {n: "service_healthy" for n in agents}
for name in agents:
    assert f"{name}-data:/agents/{name}" in setup["volumes"], setup["volumes"]
assert setup["environment"]["SHOAL_AGENTS"].split() == agents
assert any(v.startswith("./bootstrap.sh:") for v in setup["volumes"])
dockerfile = open(root + "/Dockerfile").read().splitlines()
froms = [l for l in dockerfile if l.startswith("FROM ")]
assert len(froms) == 2 and all("debian:12" in l for l in froms), froms
assert "USER 10001:10001" in dockerfile
assert 'VOLUME ["/var/lib/shoal"]' in dockerfile
assert any(l.startswith("ENTRYPOINT") and "shoal-entrypoint" in l for l in dockerfile)
PY
echo "docker test: entrypoint, bootstrap and compose structure hold"
