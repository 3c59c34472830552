# Sourced by the demos (scripts/demo.sh, scripts/demo-slurm.sh): a progress
# line per phase with the time so far, and a build of only what a demo runs.

DEMO_STARTED=$(date +%s)

# One progress line: "[ 12s] what is happening now …".
phase() { printf '[%3ss] %s\n' "$(( $(date +%s) - DEMO_STARTED ))" "$*"; }

# Installs the packages a demo needs (install-deps.sh PROFILE), then
# configures and builds shoald, shoalctl and shoal-exec-monitor alone into
# $BUILD_DIR (default build/). The build's output goes to a log whose path
# is printed, with its last lines, when the build fails. Sets BIN.
build_agent_binaries() {
  local profile=$1
  BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
  mkdir -p "$BUILD_DIR"
  local log
  log="$(cd "$BUILD_DIR" && pwd)/demo-build.log"
  phase "checking packages (scripts/install-deps.sh $profile) …"
  bash scripts/install-deps.sh "$profile"
  local options=()
  # A fresh tree leaves tests and benchmarks out (they need more packages);
  # an existing one keeps the choice it was configured with.
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then options=(-DSHOAL_TESTS=OFF -DSHOAL_BENCH=OFF); fi
  phase "configuring $BUILD_DIR …"
  source scripts/cmake-generator.sh
  # shellcheck disable=SC2046  # the generator's options are words
  if ! cmake $(cmake_generator "$BUILD_DIR") -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${SHOAL_BUILD_TYPE:-RelWithDebInfo}" \
      "${options[@]}" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "configuring failed; the whole output is in $log" >&2
    exit 1
  fi
  phase "building shoald, shoalctl and shoal-exec-monitor (a few minutes the first time; log: $log) …"
  if ! cmake --build "$BUILD_DIR" -j "$(nproc)" --target shoald shoalctl shoal-exec-monitor >>"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "the build failed; the whole output is in $log" >&2
    exit 1
  fi
  BIN="$(cd "$BUILD_DIR" && pwd)/bin"
  phase "built"
}
