#!/usr/bin/env bash
# Runs a test binary inside the test host of a fresh dev cluster with a
# real node (scripts/k8s-dev.sh up --real-node) and one KWOK node beside it,
# naming the cluster in SHOAL_REAL_NODE_DIR, then takes the cluster down.
# The KWOK node stays Ready when the real one is lost: with every node of a
# zone lost, the node controller assumes its own connection failed and
# evicts nothing, as in any real cluster. Skipped (77) without
# root or the built cluster, failed instead under CI=true.
# Usage: real_node_run.sh SOURCE_DIR BINARY [ARGS...]
set -euo pipefail
source_dir="$(cd "$1" && pwd)"
shift
dev="$source_dir/scripts/k8s-dev.sh"
skip() {
  echo "skipped: $*"
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 77
}
"$dev" bin-dir >/dev/null 2>&1 || skip "the test cluster is not built (scripts/k8s-dev.sh build)"
[ "$(id -u)" = 0 ] || skip "a real node needs root"
work=$(mktemp -d /tmp/shoal-real-node.XXXXXX)
trap '"$dev" down "$work/k" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$dev" up "$work/k" --real-node --nodes 1 >"$work/up.log" 2>&1 || { cat "$work/up.log"; exit 1; }
status=0
SHOAL_REAL_NODE_DIR="$work/k" "$dev" exec "$work/k" -- "$@" || status=$?
exit "$status"
