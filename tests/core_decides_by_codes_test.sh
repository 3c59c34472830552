#!/usr/bin/env bash
# The agent core decides by typed codes (RejectCode, CopyCondition,
# InvitationState, ...), never by the text of a reason or message, which is
# for people and may change (issue 13; commit ae6fbe0 fixed a bug of that
# kind). Fails on any comparison or search of such a text in agent/core.
set -euo pipefail
core_dir="$1"
pattern='(reason|message)\)?[[:space:]]*(==|!=)[[:space:]]*"|(reason|message)\.(rfind|find|starts_with|substr|compare)\('
if hits=$(grep -nE "$pattern" "$core_dir"/*.cc "$core_dir"/*.h); then
  echo "agent/core decides on text:"; echo "$hits"; exit 1
fi
echo "agent/core reads no reason or message text"
