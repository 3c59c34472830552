#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole suite with ctest:
# unit, property, fuzz-corpus and integration tests (real shoald processes
# on 127.0.0.1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" --timeout 600
