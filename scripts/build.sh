#!/usr/bin/env bash
# Configures and builds shoal into build/ (or $SHOAL_BUILD_DIR).
# SHOAL_WERROR=ON turns warnings into errors (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
source scripts/cmake-generator.sh
# shellcheck disable=SC2046  # the generator's options are words
cmake $(cmake_generator "$BUILD_DIR") -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${SHOAL_BUILD_TYPE:-RelWithDebInfo}" \
  -DSHOAL_WERROR="${SHOAL_WERROR:-OFF}" -DSHOAL_TESTS=ON -DSHOAL_BENCH=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
