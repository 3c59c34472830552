#!/usr/bin/env bash
# Builds shoal and runs the end-to-end placement benchmark (bench/e2e):
# 1 source x 2 targets and 1 source x 8 targets, fresh federations each run.
# Results print and go to bench/results/e2e-<UTC date>.txt. Arguments are
# passed to every configuration, e.g. scripts/bench.sh --workloads 20000 --runs 3
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
mkdir -p bench/results
out="bench/results/e2e-$(date -u +%Y%m%dT%H%M%SZ).txt"
{
  echo "# $(git rev-parse --short HEAD) on $(nproc) cores, $(date -u +%FT%TZ)"
  for targets in 2 8; do
    "$BUILD_DIR/bin/shoal-bench-e2e" --targets "$targets" "$@"
    echo
  done
} | tee "$out"
echo "written to $out"
