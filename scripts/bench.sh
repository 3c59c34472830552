#!/usr/bin/env bash
# Builds shoal and runs the end-to-end benchmarks (bench/e2e),
# fresh federations each run, measured from the agents' own timestamps:
#   1 source x 2 targets      2,000 workloads at once
#   1 source x 8 targets      2,000 and 20,000 at once (the ratio: no collapse)
#   9 agents, all submit      2,000 at once (--mesh)
#   1 source x 8 targets      open loop at 1,000/s (latency below saturation)
#   1 agent, 100,000 queued   control latency, drain rate, SIGTERM (--queue)
# Results print and go to bench/results/e2e-<UTC date>.txt. RUNS (default 3)
# sets the runs per configuration. Takes about 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
RUNS="${RUNS:-3}"
bench="$BUILD_DIR/bin/shoal-bench-e2e"
mkdir -p bench/results
out="bench/results/e2e-$(date -u +%Y%m%dT%H%M%SZ).txt"
{
  echo "# $(git rev-parse --short HEAD) on $(nproc) cores, $(date -u +%FT%TZ)"
  "$bench" --targets 2 --workloads 2000 --runs "$RUNS"
  "$bench" --targets 8 --workloads 2000,20000 --runs "$RUNS"
  echo
  "$bench" --mesh --targets 8 --workloads 2000 --runs "$RUNS"
  "$bench" --targets 8 --workloads 5000 --rate 1000 --runs "$RUNS"
  "$bench" --queue 100000 --queue-seconds 20
} 2>&1 | tee "$out"
echo "written to $out"
