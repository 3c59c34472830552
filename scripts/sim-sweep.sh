#!/usr/bin/env bash
# Runs many seeds of the federation simulator (docs/simulation.md), one
# shoal-sim process per core, and prints every failing seed's replay line.
#   scripts/sim-sweep.sh --seeds 10000            the long sweep (the CI scenario)
#   scripts/sim-sweep.sh --seeds 200 --first 1    what CI runs
#   scripts/sim-sweep.sh --seeds 500 -- --agents 50 --graph orgs   other scenarios
# Options: --seeds N (10000), --first S (1), --jobs J (nproc); anything
# after -- replaces the scenario's shoal-sim flags. Exit 1 if any seed failed.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=10000
first=1
jobs=$(nproc)
# The CI scenario: 20 agents invited by 4 peers each, 200 jobs over a minute,
# every kind of fault, clocks 400 ms apart, lifecycle timers in seconds.
scenario=(--agents 20 --workloads 200 --arrivals 1m --mean-duration 10s --faults --fast-timers
  --skew 400ms)
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --first) first="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --) shift; scenario=("$@"); break ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "sim-sweep.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
if [ ! -x "$BUILD_DIR/bin/shoal-sim" ] || [ "${SHOAL_SKIP_BUILD:-0}" != 1 ]; then
  bash scripts/build.sh >/dev/null
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
started=$(date +%s)
per=$(( (seeds + jobs - 1) / jobs ))
for ((j = 0; j < jobs; j++)); do
  from=$((first + j * per))
  count=$(( per < seeds - j * per ? per : seeds - j * per ))
  [ "$count" -gt 0 ] || break
  "$BUILD_DIR/bin/shoal-sim" --seed "$from" --seeds "$count" --keep-going "${scenario[@]}" \
    > "$out/$j.txt" 2>&1 &
done
status=0
wait || status=1
cat "$out"/*.txt > "$out/all"
run=$(grep -c '^seed ' "$out/all" || true)
failed=$(grep -c '^seed .*FAILED' "$out/all" || true)
grep -A1000 -h 'FAILED' "$out"/*.txt | grep -E '^seed .*FAILED|^  ' || true
echo "sim-sweep: $run seeds run, $failed failed, in $(( $(date +%s) - started )) s (${scenario[*]})"
[ "$failed" = 0 ] && [ "$run" = "$seeds" ] && [ "$status" = 0 ]
