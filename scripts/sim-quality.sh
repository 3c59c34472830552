#!/usr/bin/env bash
# Scheduling quality, shoal against the ideal central scheduler
# (docs/simulation.md): runs the same seeded traces through the federation
# simulator and through the ideal scheduler for each dispatcher, readyWindow
# and load, and writes the results tables into docs/simulation.md between
# its quality-table and priority-table markers (and prints them).
#   scripts/sim-quality.sh            every row (about 6 minutes)
#   scripts/sim-quality.sh --print    print the tables, leave the docs alone
set -euo pipefail
cd "$(dirname "$0")/.."
write_docs=1
[ "${1:-}" = --print ] && write_docs=0
BUILD_DIR="${SHOAL_BUILD_DIR:-build}"
if [ ! -x "$BUILD_DIR/bin/shoal-sim" ] || [ "${SHOAL_SKIP_BUILD:-0}" != 1 ]; then
  bash scripts/build.sh >/dev/null
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One row per line: a label, then shoal-sim flags. Every trace: Poisson
# arrivals over 15 minutes, lognormal run times (sigma 1) whose mean sets
# the offered load, cpu sizes 1/2/4/8, three namespaces of equal weight.
rows=(
  "Preferred|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 0.8"
  "AllAtOnce|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 0.8 --dispatcher AllAtOnce"
  "readyWindow 2s|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 0.8 --ready-window 2s"
  "Incremental|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 0.8 --dispatcher Incremental"
  "Sample|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 0.8 --dispatcher Sample"
  "Preferred|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 0.95"
  "AllAtOnce|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 0.95 --dispatcher AllAtOnce"
  "Sample|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 0.95 --dispatcher Sample"
  "Preferred|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 1.1"
  "Preferred|20 agents, 4 orgs|--agents 20 --nodes 4 --workloads 6000 --load 0.8 --graph orgs"
  "Preferred|100 agents, random 10|--agents 100 --nodes 4 --invited-by 10 --workloads 30000 --load 0.8"
)
# Two priority classes (one job in five at 100, the rest at 0), clusters
# that preempt lower priority, invitations preemptible or not with a
# ceiling of 50: the second table, high-priority waits against the ideal
# scheduler with the same preemption rules.
priority_rows=(
  "Preferred|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 0.95 --preemption"
  "Preferred|20 agents, random 4|--agents 20 --nodes 4 --workloads 6000 --load 1.1 --preemption"
)
rows+=("${priority_rows[@]}")
plain_rows=$(( ${#rows[@]} - ${#priority_rows[@]} ))
i=0
for row in "${rows[@]}"; do
  IFS='|' read -r label shape flags <<<"$row"
  # shellcheck disable=SC2086
  "$BUILD_DIR/bin/shoal-sim" --seed 1 --arrivals 15m --check-every 10s --compare-ideal -o json $flags \
    > "$out/$i.json"
  printf '%s|%s|%s\n' "$label" "$shape" "$flags" > "$out/$i.label"
  echo "sim-quality: $label ($shape, ${flags}) done" >&2
  i=$((i + 1))
done

python3 - "$out" "$plain_rows" "$i" "$write_docs" <<'PY'
import json, re, sys
out, plain, count, write_docs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
lines = [
    "| dispatcher | federation | load | jobs | mean JCT shoal / ideal | p99 JCT | mean wait | utilization | share error | wall |",
    "|---|---|---|---|---|---|---|---|---|---|",
]
for i in range(plain):
    label, shape, flags = open(f"{out}/{i}.label").read().strip().split("|")
    run = json.load(open(f"{out}/{i}.json"))["runs"][0]
    s, d = run["shoal"], run["ideal"]
    load = re.search(r"--load (\S+)", flags).group(1)
    delta = (s["meanJctSeconds"] / d["meanJctSeconds"] - 1) * 100
    ok = "" if run["ok"] else " (invariant FAILED)"
    lines.append(
        f"| {label}{ok} | {shape} | {load} | {run['succeeded']} "
        f"| {s['meanJctSeconds']:.1f} / {d['meanJctSeconds']:.1f} s (**{delta:+.1f} %**) "
        f"| {s['p99JctSeconds']:.0f} / {d['p99JctSeconds']:.0f} s "
        f"| {s['meanWaitSeconds']:.1f} / {d['meanWaitSeconds']:.1f} s "
        f"| {s['utilization']:.3f} / {d['utilization']:.3f} "
        f"| {s['shareError']:.3f} / {d['shareError']:.3f} "
        f"| {run['wallSeconds']:.0f} s |")
table = "\n".join(lines)
print(table)
priority = [
    "| dispatcher | federation | load | jobs (priority 100) | priority-100 mean wait shoal / ideal | priority-100 p99 wait | priority-0 mean wait | mean JCT shoal / ideal | workloads preempted | wall |",
    "|---|---|---|---|---|---|---|---|---|---|",
]
for i in range(plain, count):
    label, shape, flags = open(f"{out}/{i}.label").read().strip().split("|")
    run = json.load(open(f"{out}/{i}.json"))["runs"][0]
    s, d = run["shoal"], run["ideal"]
    load = re.search(r"--load (\S+)", flags).group(1)
    ok = "" if run["ok"] else " (invariant FAILED)"
    priority.append(
        f"| {label}{ok} | {shape} | {load} | {run['succeeded']} ({s['highPriorityJobs']}) "
        f"| {s['highPriorityMeanWaitSeconds']:.2f} / {d['highPriorityMeanWaitSeconds']:.2f} s "
        f"| {s['highPriorityP99WaitSeconds']:.1f} / {d['highPriorityP99WaitSeconds']:.1f} s "
        f"| {s['lowPriorityMeanWaitSeconds']:.1f} / {d['lowPriorityMeanWaitSeconds']:.1f} s "
        f"| {s['meanJctSeconds']:.1f} / {d['meanJctSeconds']:.1f} s "
        f"| {run['preempted']} "
        f"| {run['wallSeconds']:.0f} s |")
priority_table = "\n".join(priority)
print()
print(priority_table)
if write_docs:
    path = "docs/simulation.md"
    text = open(path).read()
    for name, body in (("quality-table", table), ("priority-table", priority_table)):
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        if begin not in text or end not in text:
            sys.exit(f"{path}: the {name} markers are missing")
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + begin + "\n" + body + "\n" + end + tail
    open(path, "w").write(text)
    print(f"sim-quality: wrote the tables into {path}", file=sys.stderr)
PY
