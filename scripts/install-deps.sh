#!/usr/bin/env bash
# Installs every Debian 12 package shoal needs to build, test, fuzz and
# benchmark. Idempotent: packages already present are not touched, and apt is
# only consulted when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config python3 python3-yaml
  # Reuses object files across builds and clones on the same machine.
  ccache
  cppzmq-dev libzmq3-dev
  libmsgpack-cxx-dev
  libsodium-dev
  libsqlite3-dev
  libspdlog-dev
  libgtest-dev libgmock-dev
  libcli11-dev
  libyaml-cpp-dev
  nlohmann-json3-dev
  libcpp-httplib-dev
  libcurl4-openssl-dev
  libbenchmark-dev
  librapidcheck-dev
  clang-14 libclang-rt-14-dev
  # A throw-away Slurm cluster for the slurm backend's tests (scripts/slurm-dev.sh).
  slurmctld slurmd slurmrestd slurm-client munge
)

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
