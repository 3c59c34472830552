#!/usr/bin/env bash
# The seed documents' worked examples (../shared/conformance, beside the
# checkout) through shoalctl's offline tools: `place --inventory` for the
# placement cases, `schedule` for the fair-share ones. Fails when any case
# differs or none ran; skipped (77) when ../shared is not beside the
# checkout, failed instead under CI=true.
# Usage: conformance_test.sh SOURCE_DIR SHOALCTL placement|fairshare
set -euo pipefail
source_dir="$1"
shoalctl="$2"
suite="$3"
checker="$source_dir/../shared/conformance/check.py"
if [ ! -f "$checker" ]; then
  echo "skipped: $checker is not beside the checkout"
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 77
fi
out=$(python3 "$checker" "$suite" "$shoalctl") || { echo "$out"; exit 1; }
echo "$out"
summary=$(tail -n 1 <<<"$out")
if ! [[ "$summary" =~ ^([1-9][0-9]*)/([0-9]+)\  ]] || [ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[2]}" ]; then
  echo "expected every case to run and pass, got: $summary"; exit 1
fi
