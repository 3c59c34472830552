#!/usr/bin/env bash
# Builds shoal and runs the chaos harness (tests/chaos/chaos_main.cc): five
# real agents under a seeded schedule of SIGKILL and SIGSTOP, judged from
# their durable records. Arguments go to shoal-chaos, e.g.
#   scripts/chaos.sh --duration 3m      (what CI runs)
#   scripts/chaos.sh --kills 1000       (the long run, docs/reliability.md)
#   scripts/chaos.sh --seed 42          (replays seed 42's schedule)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
exec "$BUILD_DIR/bin/shoal-chaos" "$@"
