#!/usr/bin/env bash
# The whole test suite, as CI runs it:
#  1. builds, builds the Kubernetes test cluster from source (scripts/k8s-dev.sh
#     build: tens of minutes the first time, nothing once cached) and runs
#     ctest: unit, property, fuzz-corpus replay, chaos-checker and
#     integration tests (real shoald processes on 127.0.0.1, a dev Slurm, a
#     dev Kubernetes control plane);
#  2. a 3-minute chaos run (scripts/chaos.sh): kills and pauses of five
#     agents, judged from their durable records;
#  3. the unit and integration tests again under AddressSanitizer + UBSan
#     (scripts/sanitize.sh, a clang build in build-asan/), built at low
#     priority while 1 and 2 run: they mostly wait on timers and processes;
#  4. every libFuzzer target for 30 s, one per core at a time (scripts/fuzz.sh).
# A stage whose tests fail does not stop the next; the run ends with one
# line over every stage, "N passed, N failed, N skipped", and fails if any
# failed.
# SHOAL_QUICK=1 stops after step 1 (the inner loop while developing).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
stage() { echo "== $1 ($(( $(date +%s) - started ))s in)"; }
passed=0
failed=0
skipped=0
failed_stages=()
LOGS="$(mktemp -d /tmp/shoal-test.XXXXXX)"

# Adds a ctest run's counts ("97% tests passed, 3 tests failed out of 100").
count_ctest() {  # stage name, log
  local line total failures not_run
  line=$(grep -E "tests passed, [0-9]+ tests? failed out of [0-9]+" "$2" | tail -n 1 || true)
  if [ -z "$line" ]; then
    failed=$((failed + 1)); failed_stages+=("$1 (no ctest summary)"); return
  fi
  failures=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line")
  # ctest counts a skipped test among those that passed; here it is neither.
  not_run=$(grep -cE "^\s+[0-9]+ - .* \(Skipped\)$" "$2" || true)
  passed=$((passed + total - failures - not_run))
  failed=$((failed + failures))
  skipped=$((skipped + not_run))
  if [ "$failures" -ne 0 ]; then failed_stages+=("$1"); fi
}
# A stage that is one check: its exit code.
count_one() {  # stage name, exit code
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failed_stages+=("$1"); fi
}
summary() {
  echo "== $((passed + failed + skipped)) checks in $(( $(date +%s) - started ))s: $passed passed, $failed failed${failed_stages:+ (${failed_stages[*]})}, $skipped skipped"
  rm -rf "$LOGS"
  if [ "$failed" -ne 0 ]; then exit 1; fi
  exit 0
}

stage "build"
# The Kubernetes binaries' sources download while shoal compiles.
bash scripts/k8s-dev.sh fetch >"$LOGS/k8s-fetch.log" 2>&1 &
fetch=$!
bash scripts/build.sh
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
asan_build=""
if [ "${SHOAL_QUICK:-0}" != 1 ]; then
  stage "ASan + UBSan build started beside the tests (log: $LOGS/asan-build.log)"
  nice -n 15 bash scripts/sanitize.sh --build-only >"$LOGS/asan-build.log" 2>&1 &
  asan_build=$!
  # Interrupted, the build beside must not outlive the run.
  trap 'kill "$asan_build" 2>/dev/null || true' EXIT
fi
stage "Kubernetes test cluster (scripts/k8s-dev.sh build; cached after the first)"
wait "$fetch" || true  # what failed to download fails the build, with its log
status=0
bash scripts/k8s-dev.sh build 2>&1 | tail -n 30 || status=$?
count_one "k8s-dev build" "$status"
stage "ctest"
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" --timeout 600) 2>&1 | tee "$LOGS/ctest.log" || true
count_ctest ctest "$LOGS/ctest.log"
if [ "${SHOAL_QUICK:-0}" = 1 ]; then summary; fi

stage "chaos, ${SHOAL_CHAOS_DURATION:-3m}"
status=0
bash scripts/chaos.sh --duration "${SHOAL_CHAOS_DURATION:-3m}" --quiet || status=$?
count_one chaos "$status"

stage "waiting for the ASan + UBSan build"
if ! wait "$asan_build"; then
  tail -n 40 "$LOGS/asan-build.log"
  count_one "ASan + UBSan build" 1
  summary
fi
stage "ASan + UBSan: unit and integration tests"
bash scripts/sanitize.sh --test-only 2>&1 | tee "$LOGS/sanitize.log" || true
count_ctest "ASan + UBSan" "$LOGS/sanitize.log"

stage "fuzzers, ${SHOAL_FUZZ_SECONDS:-30}s each"
status=0
bash scripts/fuzz.sh || status=$?
count_one fuzzers "$status"
summary
