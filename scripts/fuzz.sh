#!/usr/bin/env bash
# Runs every libFuzzer target for $SHOAL_FUZZ_SECONDS (default 30) each,
# starting from the seed corpus and the saved regressions. Needs the
# sanitizer build (scripts/sanitize.sh builds it). A crash stops the run,
# leaves the input in build-asan/fuzz-artifacts/, and fails; copy it into
# tests/fuzz/regressions/ with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${SHOAL_ASAN_BUILD_DIR:-build-asan}"
SECONDS_EACH="${SHOAL_FUZZ_SECONDS:-30}"
if [ ! -x "$BUILD_DIR/bin/fuzz_wire" ]; then
  echo "fuzz.sh: $BUILD_DIR/bin/fuzz_wire is missing; run scripts/sanitize.sh first" >&2
  exit 2
fi
ARTIFACTS="$BUILD_DIR/fuzz-artifacts"
mkdir -p "$ARTIFACTS"
"$BUILD_DIR/bin/fuzz_decoders_replay" --write-seeds "$BUILD_DIR/fuzz-seeds" >/dev/null
for family in wire wire_bodies token id_card manifests flags; do
  corpus="$BUILD_DIR/fuzz-corpus/$family"
  mkdir -p "$corpus"
  echo "fuzz_$family: ${SECONDS_EACH}s"
  "$BUILD_DIR/bin/fuzz_$family" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$ARTIFACTS/$family-" \
    "$corpus" "$BUILD_DIR/fuzz-seeds" tests/fuzz/regressions 2>&1 |
    grep -E "^(stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)" || true
  if ls "$ARTIFACTS/$family-"* >/dev/null 2>&1; then
    echo "fuzz_$family found a crash: $(ls "$ARTIFACTS/$family-"*)" >&2
    exit 1
  fi
done
echo "fuzz: every target ran ${SECONDS_EACH}s without a crash"
