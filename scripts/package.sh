#!/usr/bin/env bash
# Builds the Debian package (shoal_<version>_<arch>.deb) from the build tree
# (default build/, or $SHOAL_BUILD_DIR) into <build>/packages/, and prints
# its path. Builds first if needed. Install with `sudo apt install ./<deb>`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
if [ ! -x "$BUILD_DIR/bin/shoald" ]; then bash scripts/build.sh >/dev/null; fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target shoald shoalctl shoal-exec-monitor >/dev/null
(cd "$BUILD_DIR" && cpack -G DEB >/dev/null)
ls -t "$BUILD_DIR"/packages/shoal_*.deb | head -1
