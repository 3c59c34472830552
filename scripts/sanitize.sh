#!/usr/bin/env bash
# Builds shoal with clang, AddressSanitizer and UBSan (and the libFuzzer
# targets) into build-asan/ (or $SHOAL_ASAN_BUILD_DIR), and runs the unit and
# integration suites under them. Any sanitizer report fails the test it
# happens in. SHOAL_TSAN=ON builds build-tsan/ with ThreadSanitizer instead.
# --build-only builds and stops; --test-only runs the tests of a build made
# before (scripts/test.sh builds while the plain build's tests run).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-all}"
case "$MODE" in
  all | --build-only | --test-only) ;;
  *) echo "sanitize.sh: expected --build-only, --test-only or nothing, got $MODE" >&2; exit 2 ;;
esac
bash scripts/install-deps.sh
if [ "${SHOAL_TSAN:-OFF}" = ON ]; then
  BUILD_DIR="${SHOAL_TSAN_BUILD_DIR:-build-tsan}"
  FLAGS=(-DSHOAL_TSAN=ON -DSHOAL_FUZZ=OFF)
else
  BUILD_DIR="${SHOAL_ASAN_BUILD_DIR:-build-asan}"
  FLAGS=(-DSHOAL_ASAN=ON -DSHOAL_FUZZ=ON)
fi
if [ "$MODE" != --test-only ]; then
  # -O1 keeps the build and the instrumented runs quick; line tables are all
  # a sanitizer report needs to name the lines.
  source scripts/cmake-generator.sh
  # shellcheck disable=SC2046  # the generator's options are words
  cmake $(cmake_generator "$BUILD_DIR") -S . -B "$BUILD_DIR" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" -DSHOAL_BENCH=OFF -DSHOAL_WERROR="${SHOAL_WERROR:-OFF}" \
    "${FLAGS[@]}" >/dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
if [ "$MODE" = --build-only ]; then exit 0; fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1}"
cd "$BUILD_DIR"
# What the sanitizers can say something about: the C++ the tests run. The
# checks of scripts, source text and the package's layout run in the plain
# build (scripts/test.sh) and would say nothing more here.
# One more at a time than cores: the integration tests mostly wait on
# timers and processes, and would leave the cores idle.
ctest --output-on-failure -j "$(($(nproc) + 1))" --timeout 900 -LE "script"
