#!/bin/sh
# The compose file's one-shot setup: once every agent answers, each invites
# every other into namespace "default" (id cards and tokens pass through
# this script only), then it submits demo workloads to the first agent and
# waits for them to finish. Agents are data directories under
# $SHOAL_AGENTS_DIR (the agents' volumes, mounted), named in $SHOAL_AGENTS.
set -eu
AGENTS_DIR="${SHOAL_AGENTS_DIR:-/agents}"
AGENTS="${SHOAL_AGENTS:-east west north}"
BIN="${SHOAL_BIN:-/usr/bin}"
# Each agent's data directory is `agent` inside its volume (entrypoint.sh).
ctl() { name=$1; shift; "$BIN/shoalctl" --data "$AGENTS_DIR/$name/agent" "$@"; }

for name in $AGENTS; do
  tries=0
  until ctl "$name" status >/dev/null 2>&1; do
    tries=$((tries + 1))
    [ "$tries" -le 300 ] || { echo "bootstrap: agent $name never answered" >&2; exit 1; }
    sleep 0.2
  done
done
for target in $AGENTS; do
  for source in $AGENTS; do
    [ "$target" = "$source" ] && continue
    # Idempotent: a second run renews the same invitations.
    token=$(ctl "$target" invite create --to "$(ctl "$source" identity)" --namespace default)
    ctl "$source" invite accept "$token" >/dev/null
    echo "bootstrap: $target invited $source"
  done
done
first=$(echo $AGENTS | cut -d' ' -f1)
count=$(echo $AGENTS | wc -w)
tries=0
until [ "$(ctl "$first" peers -o name | wc -l)" -eq $((count - 1)) ] &&
      ! ctl "$first" peers | grep -qv -e Active -e '^CLUSTER'; do
  tries=$((tries + 1))
  [ "$tries" -le 300 ] || { echo "bootstrap: peers never all Active" >&2; exit 1; }
  sleep 0.2
done
manifest=$(mktemp)
i=1
while [ $i -le "${SHOAL_DEMO_WORKLOADS:-6}" ]; do
  cat >>"$manifest" <<YAML
---
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: demo-$i, namespace: default}
spec:
  resources: {cpu: "6", memory: 8Gi}
  sim: {duration: 2s}
YAML
  i=$((i + 1))
done
ctl "$first" submit -f "$manifest" >/dev/null
rm -f "$manifest"
tries=0
until [ "$(ctl "$first" get workloads -o json | grep -c '"phase": "Succeeded"')" -eq "${SHOAL_DEMO_WORKLOADS:-6}" ]; do
  tries=$((tries + 1))
  [ "$tries" -le 600 ] || { echo "bootstrap: demo workloads did not finish" >&2; ctl "$first" get workloads >&2; exit 1; }
  sleep 0.2
done
ctl "$first" get workloads -o wide
echo "bootstrap: done"
