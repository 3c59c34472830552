#!/usr/bin/env bash
# The lint checks must fail when what they check is broken: each form of a
# decision on text fails core_decides_by_codes_test.sh, each breach of the
# core's walls (a caller behind its faces among them) fails core_wings_test.sh, and cli_links_test.sh and
# sim_links_test.sh fail on a binary that carries what they forbid (shoald,
# with the core, SQLite and the runners) and on one whose symbols cannot be
# read; code_size_test.py fails on a file or function over its limit, on
# one grown past its allowance, and on an allowance no longer needed. Usage: lint_self_test.sh TESTS_DIR SHOALD
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
# The core's walls: a clean tree passes, each kind of breach fails.
wings_tree() {  # a core with a base, a router, two wings and a caller, each including what it may
  rm -rf "$scratch/core" "$scratch/runtime"
  mkdir -p "$scratch/core/source" "$scratch/core/target" "$scratch/runtime"
  echo '#include "agent/core/views.h"' >"$scratch/core/context.h"
  echo '#include "agent/core/source/role.h"' >"$scratch/core/router.h"
  printf '#include "agent/core/agent.h"\n#include "agent/core/operations.h"\n' >"$scratch/runtime/loop.cc"
  printf '#include "agent/core/source/book.h"\n#include "agent/core/context.h"\n' >"$scratch/core/source/role.h"
  echo '#include "agent/core/target/advertiser.h"' >"$scratch/core/target/role.h"
}
wings_tree
bash "$tests/core_wings_test.sh" "$scratch/core" "$scratch/runtime" >/dev/null || {
  echo "a core within its walls was flagged"; failures=$((failures + 1)); }
breaches=(
  'source/role.cc|#include "agent/core/target/role.h"'
  'target/role.cc|#include "agent/core/source/book.h"'
  'source/role.cc|#include "agent/core/agent.h"'
  'target/role.h|#include "agent/core/batch.h"'
  'context.h|#include "agent/core/source/role.h"'
  'views.h|#include "agent/core/agent.h"'
  '../runtime/loop.cc|#include "agent/core/router.h"'
  '../runtime/loop.cc|#include "agent/core/source/role.h"'
  '../runtime/loop.cc|#include "agent/core/context.h"'
)
for breach in "${breaches[@]}"; do
  wings_tree
  echo "${breach#*|}" >>"$scratch/core/${breach%%|*}"
  expect_failure "${breach%%|*}: ${breach#*|}" \
    bash "$tests/core_wings_test.sh" "$scratch/core" "$scratch/runtime"
done
# Sizes: a tree within its limits and allowance passes; each excess fails.
size_tree() {  # agent/ with one file of $1 lines holding one function of $2 lines
  rm -rf "$scratch/tree"; mkdir -p "$scratch/tree/agent"
  {
    echo 'namespace shoal {'
    echo 'int f(int a) {'
    for ((i = 0; i < $2 - 3; i++)); do echo '  a += 1;'; done
    echo '  return a;'
    echo '}'
    for ((i = $2 + 2; i < $1; i++)); do echo '// a line'; done
    echo '}  // namespace shoal'
  } >"$scratch/tree/agent/x.cc"
}
size_tree 450 80; : >"$scratch/allowance"
python3 "$tests/code_size_test.py" "$scratch/tree" "$scratch/allowance" >/dev/null || {
  echo "code within its limits was flagged"; failures=$((failures + 1)); }
size_tree 451 80
expect_failure "a file of 451 lines" python3 "$tests/code_size_test.py" "$scratch/tree" "$scratch/allowance"
size_tree 300 81
expect_failure "a function of 81 lines" python3 "$tests/code_size_test.py" "$scratch/tree" "$scratch/allowance"
echo 'function agent/x.cc f 85' >"$scratch/allowance"; size_tree 300 86
expect_failure "a function grown past its allowance" python3 "$tests/code_size_test.py" "$scratch/tree" "$scratch/allowance"
size_tree 300 60
expect_failure "an allowance no longer needed" python3 "$tests/code_size_test.py" "$scratch/tree" "$scratch/allowance"
size_tree 300 85
python3 "$tests/code_size_test.py" "$scratch/tree" "$scratch/allowance" >/dev/null || {
  echo "a function within its allowance was flagged"; failures=$((failures + 1)); }
expect_failure "a binary with the core in it" bash "$tests/cli_links_test.sh" "$shoald"
printf 'not an executable' >"$scratch/garbage"
expect_failure "a binary nm cannot read" bash "$tests/cli_links_test.sh" "$scratch/garbage"
expect_failure "a simulator with SQLite and the runners in it (shoald)" bash "$tests/sim_links_test.sh" "$shoald"
expect_failure "a simulator nm cannot read" bash "$tests/sim_links_test.sh" "$scratch/garbage"
if [ "$failures" -ne 0 ]; then exit 1; fi
echo "the five lint checks fail on each of $(( ${#forms[@]} + ${#breaches[@]} + 8 )) broken inputs"
