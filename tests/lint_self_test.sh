#!/usr/bin/env bash
# The lint checks must fail when what they check is broken: each form of a
# decision on text fails core_decides_by_codes_test.sh, and
# cli_links_test.sh fails on a binary that carries the core (shoald) and on
# one whose symbols cannot be read. Usage: lint_self_test.sh TESTS_DIR SHOALD
set -euo pipefail
tests="$1"
shoald="$2"
scratch=$(mktemp -d /tmp/shoal-lint.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
failures=0
expect_failure() {  # what, command...
  local what="$1"; shift
  if "$@" >/dev/null 2>&1; then echo "not caught: $what"; failures=$((failures + 1)); fi
}
forms=(
  'if (status.message() == "x") return;'
  'if (reason != "gone") return;'
  'if ("gone" == copy.reason) return;'
  'if (w.reason.find("lost") != std::string::npos) return;'
  'if (copy.message.rfind("x", 0) == 0) return;'
  'if (s.message().ends_with("x")) return;'
  'if (reason_.contains("x")) return;'
  'if (r.message.starts_with("x")) return;'
)
for form in "${forms[@]}"; do
  rm -f "$scratch"/*
  echo "$form" >"$scratch/role.cc"
  touch "$scratch/role.h"
  expect_failure "$form" bash "$tests/core_decides_by_codes_test.sh" "$scratch"
done
rm -f "$scratch"/*
echo 'if (reason == RejectCode::kNoRoom) return;' >"$scratch/role.cc"
touch "$scratch/role.h"
bash "$tests/core_decides_by_codes_test.sh" "$scratch" >/dev/null || {
  echo "a decision by code was flagged"; failures=$((failures + 1)); }
expect_failure "a binary with the core in it" bash "$tests/cli_links_test.sh" "$shoald"
printf 'not an executable' >"$scratch/garbage"
expect_failure "a binary nm cannot read" bash "$tests/cli_links_test.sh" "$scratch/garbage"
if [ "$failures" -ne 0 ]; then exit 1; fi
echo "both lint checks fail on each of $(( ${#forms[@]} + 2 )) broken inputs"
