#!/usr/bin/env bash
# Builds shoal and runs the end-to-end benchmarks (bench/e2e),
# fresh federations each run, measured from the agents' own timestamps:
#   1 source x 2 targets      2,000 workloads at once
#   1 source x 8 targets      2,000 and 20,000 at once (the ratio: no collapse)
#   9 agents, all submit      2,000 at once (--mesh)
#   1 source x 8 targets      open loop at 100/s, 500/s and 1,000/s (10 s each:
#                             a federation's everyday rates, below saturation)
#   1 agent, 100,000 queued   control latency, drain rate, SIGTERM (--queue)
#   30 agents, full mesh      idle: each agent's CPU (--idle)
# Results print and go to bench/results/e2e-<UTC date>.txt. RUNS (default 3)
# sets the runs per configuration. Takes about 14 minutes on 2 cores.
#
# BASE=REV (a commit, e.g. BASE=HEAD~5) measures the build before a change
# beside this one: REV is built in a worktree outside the repository
# (under ${XDG_CACHE_HOME:-~/.cache}/shoal-bench), and every row runs once
# with each build in turn, RUNS times, so both see the same moments of a
# shared, noisy machine. Each pair prints with its ratios (this build /
# REV) of placements/s, p50 latency and all agents' CPU per placement: at
# an open-loop rate the first is the offered rate, the others tell. The
# ratios are the result, not either figure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
RUNS="${RUNS:-3}"
BASE="${BASE:-}"
bench="$BUILD_DIR/bin/shoal-bench-e2e"

base_bench=""
if [ -n "$BASE" ]; then
  rev=$(git rev-parse --short "$BASE")
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/shoal-bench/$rev"
  if [ ! -x "$cache/build/bin/shoal-bench-e2e" ]; then
    echo "building $rev in $cache (once; kept for later runs)" >&2
    rm -rf "$cache"
    mkdir -p "$(dirname "$cache")"
    git worktree add --force --detach "$cache" "$rev" >/dev/null
    cmake -S "$cache" -B "$cache/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$cache/build" -j "$(nproc)" --target shoal-bench-e2e shoald shoalctl >/dev/null
  fi
  base_bench="$cache/build/bin/shoal-bench-e2e"
fi

# The run's row of a bench's output (the line after its header).
row_of() { grep -A1 '^run ' | tail -1; }

# One configuration: its own min/median/max alone, or pairs beside BASE.
measure() {
  echo "== $*"
  if [ -z "$base_bench" ]; then
    "$bench" "$@" --runs "$RUNS"
    return
  fi
  for ((i = 1; i <= RUNS; ++i)); do
    this=$("$bench" "$@" --runs 1 2>&1 | row_of)
    before=$("$base_bench" "$@" --runs 1 2>&1 | row_of)
    echo "this $this"
    echo "base $before"
    # Columns: 2 placements/s, 4 p50 ms, 12 all agents' CPU ms per placement.
    printf '%s\n%s\n' "$this" "$before" | awk '
      NR == 1 { r = $2; p = $4; c = $12 }
      NR == 2 && $2 > 0 && $4 > 0 && $12 > 0 {
        printf "ratio this/base: placements/s %.2f, p50 %.2f, CPU per placement %.2f\n",
               r / $2, p / $4, c / $12 }'
  done
  echo
}

mkdir -p bench/results
out="bench/results/e2e-$(date -u +%Y%m%dT%H%M%SZ).txt"
{
  echo "# $(git rev-parse --short HEAD)${BASE:+ beside $BASE} on $(nproc) cores, $(date -u +%FT%TZ)"
  measure --targets 2 --workloads 2000
  if [ -z "$base_bench" ]; then
    measure --targets 8 --workloads 2000,20000
  else
    measure --targets 8 --workloads 2000
    measure --targets 8 --workloads 20000
  fi
  measure --mesh --targets 8 --workloads 2000
  measure --targets 8 --workloads 1000 --rate 100
  measure --targets 8 --workloads 5000 --rate 500
  measure --targets 8 --workloads 10000 --rate 1000
  echo "== --queue 100000"
  "$bench" --queue 100000 --queue-seconds 20
  if [ -n "$base_bench" ]; then
    echo "== --queue 100000, $BASE"
    "$base_bench" --queue 100000 --queue-seconds 20
  fi
  # Builds before this row existed have no --idle: this build alone.
  echo "== --idle 30"
  "$bench" --idle 30 --idle-seconds 30
} 2>&1 | tee "$out"
echo "written to $out"
