#!/usr/bin/env bash
# The core's walls (agent/core/README.md): the source wing (source/) and the
# target wing (target/) never include each other, and reach the rest of the
# core only through its base, the headers both roles read. The base includes
# neither wing nor the router (router.h, the batch driver), which sit above the
# wings. Code above the core (each CALLER_DIR, searched recursively, the core
# itself left out) includes only its faces: the step contract (agent.h), the
# operator's (operations.h), the batch driver and the headers they name.
# Usage: core_wings_test.sh AGENT_CORE_DIR [CALLER_DIR...]
set -euo pipefail
core="$1"
shift
face_headers='agent|operations|batch|config|interfaces|views'
base_headers='config|context|interfaces|invitation_book|peer_table|views'
for wing in source target; do
  [ -d "$core/$wing" ] || { echo "no wing $core/$wing to check"; exit 1; }
done
failures=0
report() {  # what, hits
  if [ -n "$2" ]; then echo "$1:"; echo "$2"; failures=$((failures + 1)); fi
}
core_includes() {  # dir...: every include of agent/core/ in the files of those folders (not below)
  local files=()
  for dir in "$@"; do files+=("$dir"/*.cc "$dir"/*.h); done
  grep -nHE '#include "agent/core/' "${files[@]}" 2>/dev/null || [ $? -eq 1 ]
}
for wing in source target; do
  other=$([ "$wing" = source ] && echo target || echo source)
  report "the $wing wing includes the $other wing" \
    "$(core_includes "$core/$wing" | grep -E "agent/core/$other/" || true)"
  report "the $wing wing includes what is not its own or the base's" \
    "$(core_includes "$core/$wing" | grep -vE "agent/core/($wing/[a-z_]+|($base_headers))\.h\"" || true)"
done
base_files=()
for name in config context interfaces invitation_book peer_table views; do
  for file in "$core/$name.h" "$core/$name.cc"; do [ -f "$file" ] && base_files+=("$file"); done
done
[ "${#base_files[@]}" -gt 0 ] || { echo "no base file found in $core"; exit 1; }
report "the base includes a wing or the router" \
  "$( (grep -nHE '#include "agent/core/' "${base_files[@]}" || [ $? -eq 1 ]) |
      grep -vE "agent/core/($base_headers)\.h\"" || true)"
for callers in "$@"; do
  [ -d "$callers" ] || { echo "no caller folder $callers to check"; exit 1; }
  report "$callers reaches behind the core's faces" \
    "$( (find "$callers" -path "$core" -prune -o \( -name '*.cc' -o -name '*.h' \) -print0 |
         xargs -0 -r grep -nHE '#include "agent/core/' || [ $? -eq 1 ]) |
        grep -vE "agent/core/($face_headers)\.h\"" || true)"
done
if [ "$failures" -ne 0 ]; then exit 1; fi
echo "the wings include neither each other nor the router; the base includes neither wing;" \
  "callers see only the core's faces"
