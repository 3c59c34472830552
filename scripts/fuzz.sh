#!/usr/bin/env bash
# Runs every libFuzzer target for $SHOAL_FUZZ_SECONDS (default 30) each,
# starting from the seed corpus and the saved regressions, with a per-input
# time limit ($SHOAL_FUZZ_INPUT_SECONDS, default 5): an input whose decoding
# takes longer is a finding, like a crash. Needs the sanitizer build
# (scripts/sanitize.sh builds it). As many fuzzers run at once as there are
# cores ($SHOAL_FUZZ_PARALLEL). Fails when a fuzzer exits non-zero, leaves
# an artifact (crash, timeout, leak, out of memory), or runs fewer than
# $SHOAL_FUZZ_MIN_INPUTS (default 1000) inputs; the input stays in
# build-asan/fuzz-artifacts/: copy it into tests/fuzz/regressions/ with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${SHOAL_ASAN_BUILD_DIR:-build-asan}"
SECONDS_EACH="${SHOAL_FUZZ_SECONDS:-30}"
INPUT_SECONDS="${SHOAL_FUZZ_INPUT_SECONDS:-5}"
MIN_INPUTS="${SHOAL_FUZZ_MIN_INPUTS:-1000}"
FAMILIES="${SHOAL_FUZZ_FAMILIES:-wire wire_bodies token id_card manifests flags}"
if [ ! -x "$BUILD_DIR/bin/fuzz_wire" ]; then
  echo "fuzz.sh: $BUILD_DIR/bin/fuzz_wire is missing; run scripts/sanitize.sh first" >&2
  exit 2
fi
ARTIFACTS="$BUILD_DIR/fuzz-artifacts"
mkdir -p "$ARTIFACTS"
"$BUILD_DIR/bin/fuzz_decoders_replay" --write-seeds "$BUILD_DIR/fuzz-seeds" >/dev/null
# Runs one fuzzer; its exit code goes to $ARTIFACTS/$family.status.
run_fuzzer() {
  local family=$1 corpus="$BUILD_DIR/fuzz-corpus/$1" status=0
  mkdir -p "$corpus"
  "$BUILD_DIR/bin/fuzz_$family" -max_total_time="$SECONDS_EACH" -timeout="$INPUT_SECONDS" \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$ARTIFACTS/$family-" \
    "$corpus" "$BUILD_DIR/fuzz-seeds" tests/fuzz/regressions >"$ARTIFACTS/$family.log" 2>&1 || status=$?
  echo "$status" >"$ARTIFACTS/$family.status"
}
# Judges one fuzzer's run: a non-zero exit, an artifact, or too few inputs fails.
judge_fuzzer() {
  local family=$1 log="$ARTIFACTS/$1.log" status executed
  status=$(cat "$ARTIFACTS/$family.status")
  echo "fuzz_$family: $(grep -E "^stat::number_of_executed_units" "$log" | tail -n 1)"
  grep -E "^(==[0-9]+== ?ERROR|SUMMARY|Test unit written)" "$log" || true
  if [ "$status" -ne 0 ] || ls "$ARTIFACTS/$family-"* >/dev/null 2>&1; then
    echo "fuzz_$family failed (exit $status): $(ls "$ARTIFACTS/$family-"* 2>/dev/null | tr '\n' ' ')" >&2
    tail -n 20 "$log" >&2
    return 1
  fi
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  if [ -z "$executed" ] || [ "$executed" -lt "$MIN_INPUTS" ]; then
    echo "fuzz_$family ran ${executed:-no} inputs, fewer than $MIN_INPUTS: it tested nothing (log: $log)" >&2
    tail -n 20 "$log" >&2
    return 1
  fi
}
# One fuzzer per core at a time (each is single-threaded).
PARALLEL="${SHOAL_FUZZ_PARALLEL:-$(nproc)}"
set -- $FAMILIES
while [ $# -gt 0 ]; do
  batch=()
  while [ $# -gt 0 ] && [ ${#batch[@]} -lt "$PARALLEL" ]; do batch+=("$1"); shift; done
  echo "fuzzing ${batch[*]}: ${SECONDS_EACH}s each, ${INPUT_SECONDS}s per input"
  for family in "${batch[@]}"; do run_fuzzer "$family" & done
  wait
  for family in "${batch[@]}"; do judge_fuzzer "$family" || exit 1; done
done
echo "fuzz: every target ran ${SECONDS_EACH}s, at least $MIN_INPUTS inputs each, without a finding"
