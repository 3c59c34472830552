#!/usr/bin/env bash
# The Debian package, installed on this machine with `dpkg -i` and purged
# afterwards: its layout, its control data, each maintainer script (the
# shoal user, /var/lib/shoal 0700; purge removes both), and an agent started
# from the installed binaries that runs a real command with the exec backend
# (so the installed shoal-exec-monitor is found) and answers shoalctl.
# Installing needs root: without it the package is unpacked into a scratch
# root (dpkg-deb -x), the same checks that can run there run, and the test
# exits 77 (skipped), or fails where CI=true requires it.
# Usage: package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD_DIR="$(cd "$1" && pwd)"
SOURCE_DIR="$(cd "$2" && pwd)"
SCRATCH="$(mktemp -d /tmp/shoal-pkg.XXXXXX)"
AGENT_PID=""
INSTALLED=""
cleanup() {
  if [ -n "$AGENT_PID" ]; then kill -TERM "$AGENT_PID" 2>/dev/null || true; wait "$AGENT_PID" 2>/dev/null || true; fi
  if [ -n "$INSTALLED" ]; then dpkg --purge shoal >/dev/null 2>&1 || true; fi
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
fail() { echo "package test: $*" >&2; exit 1; }

deb=$(SHOAL_BUILD_DIR="$BUILD_DIR" bash "$SOURCE_DIR/scripts/package.sh")
[ -f "$deb" ] || fail "no package built ($deb)"
# Each maintainer script on its own, before anything runs them.
CONTROL="$SCRATCH/control"
dpkg-deb -e "$deb" "$CONTROL"
for script in postinst prerm postrm; do
  [ -x "$CONTROL/$script" ] || fail "$script is missing or not executable"
  sh -n "$CONTROL/$script" 2>"$SCRATCH/syntax" || fail "$script: $(cat "$SCRATCH/syntax")"
done
if [ "$(id -u)" -eq 0 ]; then
  if dpkg-query -W -f='${Status}' shoal 2>/dev/null | grep -q "ok installed"; then
    fail "a shoal package is installed on this machine already; this test installs and purges its own"
  fi
  INSTALLED=yes
  dpkg -i "$deb" >"$SCRATCH/dpkg.log" 2>&1 || fail "dpkg -i failed: $(cat "$SCRATCH/dpkg.log")"
  ROOT=""
  getent passwd shoal >/dev/null || fail "postinst did not create the shoal user"
  [ "$(stat -c '%a %U' /var/lib/shoal)" = "700 shoal" ] ||
    fail "/var/lib/shoal is $(stat -c '%a %U' /var/lib/shoal), expected 700 shoal"
  [ -d /etc/shoal ] || fail "postinst did not create /etc/shoal"
else
  ROOT="$SCRATCH/root"
  dpkg-deb -x "$deb" "$ROOT"
fi
for path in usr/bin/shoald usr/bin/shoalctl usr/lib/shoal/shoal-exec-monitor \
            usr/lib/systemd/system/shoald.service usr/share/bash-completion/completions/shoalctl \
            usr/share/doc/shoal/examples/agent.yaml.example usr/share/doc/shoal/examples/cluster.yaml.example \
            usr/share/doc/shoal/operating.md; do
  [ -e "$ROOT/$path" ] || fail "missing /$path"
done
control=$(dpkg-deb -f "$deb" Package Depends)
grep -q "^Package: shoal$" <<<"$control" || fail "package name: $control"
grep -q "adduser" <<<"$control" || fail "Depends lacks adduser: $control"
grep -q "libzmq5" <<<"$control" || fail "Depends lacks the shared libraries: $control"
grep -q "adduser --system --group --home /var/lib/shoal" "$CONTROL/postinst" || fail "postinst does not create the shoal user"
grep -q "chmod 0700 /var/lib/shoal" "$CONTROL/postinst" || fail "postinst does not make /var/lib/shoal 0700"
grep -q "mkdir -p /var/lib/shoal /etc/shoal" "$CONTROL/postinst" || fail "postinst does not create /etc/shoal"
grep -q "^ExecStart=/usr/bin/shoald run --data /var/lib/shoal$" "$ROOT/usr/lib/systemd/system/shoald.service" ||
  fail "unit ExecStart"
grep -q "^User=shoal$" "$ROOT/usr/lib/systemd/system/shoald.service" || fail "unit User"
bash -c "source '$ROOT/usr/share/bash-completion/completions/shoalctl' && complete -p shoalctl" >/dev/null ||
  fail "bash completion does not register"
"$ROOT/usr/bin/shoald" --help | grep -q "init" || fail "shoald --help"
"$ROOT/usr/bin/shoalctl" --help | grep -q "backup" || fail "shoalctl --help"

# An agent from the installed files: init + run, then real work through it.
port=$(python3 "$SOURCE_DIR/scripts/free-ports")
DATA="$SCRATCH/data"
"$ROOT/usr/bin/shoald" init --data "$DATA" --cluster east --org acme --listen "tcp://127.0.0.1:$port" \
  --cluster-config "$ROOT/usr/share/doc/shoal/examples/cluster.yaml.example" >/dev/null
"$ROOT/usr/bin/shoald" run --data "$DATA" 2>"$SCRATCH/agent.log" &
AGENT_PID=$!
ctl() { "$ROOT/usr/bin/shoalctl" --data "$DATA" "$@"; }
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.1; done
ctl status >/dev/null || fail "the installed agent does not answer: $(cat "$SCRATCH/agent.log")"
cat >"$SCRATCH/hello.yaml" <<YAML
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: hello, namespace: default}
spec:
  resources: {cpu: "1", memory: 1Gi}
  command: [sh, -c, 'echo "hello from \$SHOAL_CLUSTER"']
YAML
ctl submit -f "$SCRATCH/hello.yaml" >/dev/null
phase=""
for _ in $(seq 200); do
  phase=$(ctl describe workload default/hello -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["phase"])')
  [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
  sleep 0.1
done
[ "$phase" = Succeeded ] || fail "the workload ended $phase: $(ctl describe workload default/hello)"
[ "$(ctl logs default/hello)" = "hello from east" ] || fail "logs: $(ctl logs default/hello)"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || fail "the installed agent did not stop cleanly on SIGTERM"
AGENT_PID=""
if [ -z "$INSTALLED" ]; then
  echo "package test: $(basename "$deb") unpacks, starts and runs work; installing it needs root"
  if [ "${CI:-}" = true ]; then fail "CI=true requires the package to be installed (run as root)"; fi
  exit 77
fi
dpkg --purge shoal >"$SCRATCH/dpkg.log" 2>&1 || fail "dpkg --purge failed: $(cat "$SCRATCH/dpkg.log")"
INSTALLED=""
for path in /usr/bin/shoald /usr/bin/shoalctl /usr/lib/shoal/shoal-exec-monitor /var/lib/shoal; do
  [ ! -e "$path" ] || fail "$path is still there after dpkg --purge"
done
! getent passwd shoal >/dev/null || fail "the shoal user is still there after dpkg --purge"
echo "package test: $(basename "$deb") installs with dpkg -i, starts and runs work, and purges clean"
