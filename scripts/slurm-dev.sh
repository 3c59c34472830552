#!/usr/bin/env bash
# A throw-away Slurm cluster on this host, for shoal's slurm backend
# (docs/backends.md): munged, slurmctld, N slurmd nodes and
# slurmrestd on a unix socket, all under one directory.
#
#   scripts/slurm-dev.sh up DIR [--nodes N] [--cpus C] [--memory MIB]
#                               [--min-job-age SECONDS]
#       starts it, waits until sinfo shows every node idle, and prints the
#       path of slurmrestd's socket (the last line of its output). Slurm
#       forgets a finished job once it is --min-job-age seconds old (300)
#       and slurmctld next purges.
#   scripts/slurm-dev.sh down DIR
#       cancels its jobs and stops exactly the processes `up` started (by the
#       pids it recorded in DIR/run) and what they left behind (job steps
#       started with this cluster's configuration).
#   scripts/slurm-dev.sh status DIR
#       sinfo and squeue of that cluster.
#
# Client commands reach it with SLURM_CONF=DIR/etc/slurm.conf. Nodes declare
# C cpus and MIB memory whatever the host has (SlurmdParameters=
# config_overrides), so a 2-core machine can hold a 4 x 8-cpu cluster.
# Run as root: slurmd must be root to run jobs; slurmctld and slurmrestd
# drop to an unprivileged user this script creates (shoal-slurm).
# Needs slurmctld, slurmd, slurmrestd, slurm-client and munge
# (scripts/install-deps.sh installs them).
set -euo pipefail

usage() {
  sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

fail() {
  echo "slurm-dev: $*" >&2
  exit 1
}

[ $# -ge 2 ] || usage
command=$1
DIR=$2
shift 2
NODES=4
CPUS=8
MEMORY=16384
MIN_JOB_AGE=300
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --memory) MEMORY=$2; shift 2 ;;
    --min-job-age) MIN_JOB_AGE=$2; shift 2 ;;
    *) fail "unknown option $1 (expected --nodes, --cpus, --memory or --min-job-age)" ;;
  esac
done
for number in "$NODES" "$CPUS" "$MEMORY" "$MIN_JOB_AGE"; do
  [[ "$number" =~ ^[1-9][0-9]*$ ]] || fail "expected a positive whole number, got '$number'"
done
[ "$NODES" -le 64 ] || fail "--nodes: expected at most 64, got $NODES"

SLURM_USER=shoal-slurm
CONF="$DIR/etc/slurm.conf"
RUN="$DIR/run"

free_ports() { python3 "$(dirname "${BASH_SOURCE[0]}")/free-ports" "$1"; }

# Waits (bounded) until "$@" succeeds.
await() {
  local seconds=$1
  shift
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# Starts "$@" in the background with its output in a log, and records its pid.
start() {
  local name=$1
  shift
  SHOAL_SLURM_DEV="$DIR" "$@" >"$DIR/log/$name.out" 2>&1 &
  echo $! >"$RUN/$name.pid"
}

all_nodes_idle() {
  local idle
  idle=$(SLURM_CONF="$CONF" sinfo -h -N -o '%N %T' | awk '$2 == "idle"' | wc -l)
  [ "$idle" -eq "$NODES" ]
}

up() {
  [ "$(id -u)" -eq 0 ] || fail "up: run as root (slurmd runs jobs as their users)"
  for tool in munged slurmctld slurmd slurmrestd sinfo; do
    command -v "$tool" >/dev/null || fail "up: $tool is not installed (scripts/install-deps.sh)"
  done
  if [ -d "$RUN" ] && ls "$RUN"/*.pid >/dev/null 2>&1; then
    fail "up: $DIR already holds a cluster (scripts/slurm-dev.sh down $DIR first)"
  fi
  id "$SLURM_USER" >/dev/null 2>&1 ||
    useradd --system --no-create-home --shell /usr/sbin/nologin "$SLURM_USER"
  mkdir -p "$DIR"/{etc,state,spool,log,run,munge}
  DIR=$(cd "$DIR" && pwd)
  CONF="$DIR/etc/slurm.conf"
  RUN="$DIR/run"
  chmod 755 "$DIR" "$DIR/etc" "$DIR/run" "$DIR/log"
  chown "$SLURM_USER" "$DIR/state" "$DIR/run" "$DIR/log"

  # munge: its own key and socket, so nothing of the host's is touched.
  chmod 700 "$DIR/munge"
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$DIR/munge/munge.key"
  mkdir -p "$DIR/munge-socket"
  chmod 755 "$DIR/munge-socket"
  start munged munged --foreground --force --key-file="$DIR/munge/munge.key" \
    --socket="$DIR/munge-socket/munge.socket" --pid-file="$DIR/munge/munged.pid" \
    --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
  await 10 test -S "$DIR/munge-socket/munge.socket" || fail "up: munged did not start (see $DIR/log/munged.out)"

  read -r -a ports <<<"$(free_ports $((NODES + 1)))"
  local host
  host=$(hostname)
  {
    echo "# written by scripts/slurm-dev.sh: a throw-away cluster on $host"
    echo "ClusterName=shoaldev"
    echo "SlurmctldHost=$host(127.0.0.1)"
    echo "SlurmctldPort=${ports[0]}"
    echo "SlurmUser=$SLURM_USER"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$DIR/munge-socket/munge.socket"
    echo "StateSaveLocation=$DIR/state"
    echo "SlurmdSpoolDir=$DIR/spool/%n"
    echo "SlurmctldPidFile=$DIR/run/slurmctld.pidfile"
    echo "SlurmdPidFile=$DIR/run/slurmd-%n.pidfile"
    echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
    echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "MpiDefault=none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU_Memory"
    echo "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0"
    echo "SlurmdParameters=config_overrides"
    echo "JobCompType=jobcomp/filetxt"
    echo "JobCompLoc=$DIR/log/jobcomp.txt"
    echo "ReturnToService=2"
    # A job whose node fails ends NODE_FAIL instead of being requeued: its
    # source places it again. (Slurm's default, JobRequeue=1, requeues it
    # behind the agent's back; slurmrestd v0.0.38 ignores a job's
    # "requeue": false, so shoal cannot ask for this per job yet.)
    echo "JobRequeue=0"
    echo "MinJobAge=$MIN_JOB_AGE"
    echo "DefMemPerCPU=1024"
    for ((n = 1; n <= NODES; n++)); do
      echo "NodeName=n$n NodeHostname=$host NodeAddr=127.0.0.1 Port=${ports[$n]} CPUs=$CPUS RealMemory=$MEMORY State=UNKNOWN"
    done
    echo "PartitionName=dev Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$CONF"
  chmod 644 "$CONF"
  touch "$DIR/log/jobcomp.txt" && chown "$SLURM_USER" "$DIR/log/jobcomp.txt"

  start slurmctld env SLURM_CONF="$CONF" slurmctld -D -i -f "$CONF"
  for ((n = 1; n <= NODES; n++)); do
    mkdir -p "$DIR/spool/n$n"
    start "slurmd-n$n" env SLURM_CONF="$CONF" slurmd -D -N "n$n" -f "$CONF"
  done
  if ! await 60 all_nodes_idle; then
    SLURM_CONF="$CONF" sinfo -N >&2 || true
    fail "up: the nodes did not become idle within 60s (logs in $DIR/log)"
  fi

  local socket="$DIR/run/slurmrestd.sock"
  start slurmrestd env SLURM_CONF="$CONF" slurmrestd -u "$SLURM_USER" -g "$SLURM_USER" \
    -a rest_auth/local -s v0.0.36,v0.0.37,v0.0.38 "unix:$socket"
  await 20 test -S "$socket" || fail "up: slurmrestd did not start (see $DIR/log/slurmrestd.out)"
  echo "slurm-dev: $NODES nodes of $CPUS cpus and $MEMORY MiB up; SLURM_CONF=$CONF" >&2
  echo "$socket"
}

# The processes of this cluster: those `up` started carry SHOAL_SLURM_DEV=DIR
# in their environment; a job's slurmstepd (which slurmd starts with an empty
# environment and leaves to init) still holds its node's log under DIR open;
# a job's tasks are found as their descendants. (A process may be gone, or
# not ours to read, as we look.)
processes_of_this_cluster() {
  python3 - "$DIR" <<'EOF'
import os, sys
marker = b"SHOAL_SLURM_DEV=" + sys.argv[1].encode()
log_dir = sys.argv[1] + "/log/"
children, marked = {}, []
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    try:
        with open(f"/proc/{entry}/stat", "rb") as f:
            ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
        with open(f"/proc/{entry}/environ", "rb") as f:
            if marker in f.read().split(b"\0"):
                marked.append(int(entry))
                continue
        for fd in os.listdir(f"/proc/{entry}/fd"):
            target = os.readlink(f"/proc/{entry}/fd/{fd}")
            if target.startswith(log_dir):
                marked.append(int(entry))
                break
    except (OSError, ValueError, IndexError):
        continue
found, todo = set(), list(marked)
while todo:
    pid = todo.pop()
    if pid in found or pid == os.getpid():
        continue
    found.add(pid)
    todo.extend(children.get(pid, []))
print("\n".join(str(pid) for pid in sorted(found)))
EOF
}

down() {
  [ -d "$RUN" ] || fail "down: $DIR holds no cluster started by this script"
  DIR=$(cd "$DIR" && pwd)
  CONF="$DIR/etc/slurm.conf"
  RUN="$DIR/run"
  # Its jobs first, while slurmctld and slurmd still run to end them.
  if [ -f "$RUN/slurmctld.pid" ] && alive "$(cat "$RUN/slurmctld.pid")"; then
    local jobs
    jobs=$(SLURM_CONF="$CONF" timeout 10 squeue -h -o %i 2>/dev/null || true)
    # shellcheck disable=SC2086  # one argument per job id
    [ -z "$jobs" ] || SLURM_CONF="$CONF" timeout 10 scancel --full --quiet $jobs 2>/dev/null || true
  fi
  local pidfile pid pids=()
  for pidfile in "$RUN"/*.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    alive "$pid" && pids+=("$pid")
  done
  while read -r pid; do [ -n "$pid" ] && pids+=("$pid"); done < <(processes_of_this_cluster)
  [ ${#pids[@]} -eq 0 ] || kill -TERM "${pids[@]}" 2>/dev/null || true
  local deadline=$((SECONDS + 10))
  for pid in "${pids[@]}"; do
    while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
  done
  # What a TERM left (a step that outlived its slurmd), once more by force.
  while read -r pid; do [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true; done \
    < <(processes_of_this_cluster)
  rm -f "$RUN"/*.pid
  echo "slurm-dev: stopped ${#pids[@]} processes" >&2
}

status() {
  SLURM_CONF="$CONF" sinfo -N
  SLURM_CONF="$CONF" squeue
}

case "$command" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) usage ;;
esac
