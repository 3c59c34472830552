#!/usr/bin/env bash
# The agent core decides by typed codes (RejectCode, CopyCondition,
# InvitationState, ...), never by the text of a reason or message, which is
# for people and may change. Fails on any comparison or search of such a
# text in agent/core and its wings: `reason == "x"`, `status.message() != "x"`,
# `"x" == reason`, `message.find(...)`, `reason_.ends_with(...)`,
# `message().contains(...)`, and the like.
set -euo pipefail
core_dir="$1"
text='(reason|message)_?(\(\))?'
compared="${text}\)?[[:space:]]*(==|!=)[[:space:]]*\"|\"[[:space:]]*(==|!=)[[:space:]]*[[:alnum:]_.>-]*${text}\b"
searched="${text}\.(rfind|find|find_first_of|starts_with|ends_with|contains|substr|compare)\("
hits=$(grep -rnE --include='*.cc' --include='*.h' "${compared}|${searched}" "$core_dir") || [ $? -eq 1 ]
if [ -n "$hits" ]; then
  echo "agent/core decides on text:"; echo "$hits"; exit 1
fi
echo "agent/core reads no reason or message text"
