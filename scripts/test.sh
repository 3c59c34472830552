#!/usr/bin/env bash
# The whole test suite, as CI runs it:
#  1. builds and runs ctest: unit, property, fuzz-corpus replay, chaos-checker
#     and integration tests (real shoald processes on 127.0.0.1);
#  2. the unit and integration tests again under AddressSanitizer + UBSan
#     (scripts/sanitize.sh, a clang build in build-asan/);
#  3. every libFuzzer target for 30 s (scripts/fuzz.sh);
#  4. a 3-minute chaos run (scripts/chaos.sh): kills and pauses of five
#     agents, judged from their durable records.
# SHOAL_QUICK=1 stops after step 1 (the inner loop while developing).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
stage() { echo "== $1 ($(( $(date +%s) - started ))s in)"; }
stage "build and ctest"
bash scripts/build.sh
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" --timeout 600)
if [ "${SHOAL_QUICK:-0}" = 1 ]; then
  exit 0
fi
stage "ASan + UBSan: unit and integration tests"
bash scripts/sanitize.sh
stage "fuzzers, ${SHOAL_FUZZ_SECONDS:-30}s each"
bash scripts/fuzz.sh
stage "chaos, ${SHOAL_CHAOS_DURATION:-3m}"
bash scripts/chaos.sh --duration "${SHOAL_CHAOS_DURATION:-3m}" --quiet
stage "all passed"
