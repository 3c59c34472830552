#!/usr/bin/env bash
# Installs every Debian 12 package shoal needs to build, test, fuzz and
# benchmark. Idempotent: packages already present are not touched, and apt is
# only consulted when something is missing.
#   install-deps.sh          everything (scripts/test.sh)
#   install-deps.sh --agent  only what building shoald and shoalctl needs
#                            (scripts/demo.sh; configure with SHOAL_TESTS=OFF
#                            SHOAL_BENCH=OFF)
#   install-deps.sh --slurm  that and a Slurm (scripts/demo-slurm.sh)
set -euo pipefail

# What shoald, shoalctl and shoal-exec-monitor need to build.
AGENT_PACKAGES=(
  build-essential cmake pkg-config python3
  # Keeps both cores busy across the libraries (scripts/cmake-generator.sh).
  ninja-build
  # Reuses object files across builds and clones on the same machine.
  ccache
  cppzmq-dev libzmq3-dev
  libmsgpack-cxx-dev
  libsodium-dev
  libsqlite3-dev
  libspdlog-dev
  libcli11-dev
  libyaml-cpp-dev
  nlohmann-json3-dev
  libcpp-httplib-dev
  libcurl4-openssl-dev
)

# A throw-away Slurm cluster for the slurm backend (scripts/slurm-dev.sh).
SLURM_PACKAGES=(slurmctld slurmd slurmrestd slurm-client munge)

PACKAGES=(
  "${AGENT_PACKAGES[@]}"
  python3-yaml
  libgtest-dev libgmock-dev
  libbenchmark-dev
  librapidcheck-dev
  clang-14 libclang-rt-14-dev
  "${SLURM_PACKAGES[@]}"
  # The dev Kubernetes cluster's certificates and readiness checks
  # (scripts/k8s-dev.sh; its binaries are built with Go, not from apt).
  openssl curl
  # The dev cluster's real node (scripts/k8s-dev.sh up --real-node): a
  # container runtime, network namespaces and the busybox its images hold.
  containerd runc iproute2 iptables busybox-static
)

case "${1:-}" in
  --agent) PACKAGES=("${AGENT_PACKAGES[@]}") ;;
  --slurm) PACKAGES=("${AGENT_PACKAGES[@]}" "${SLURM_PACKAGES[@]}") ;;
  "") ;;
  *) echo "install-deps.sh: expected --agent, --slurm or nothing, got $1" >&2; exit 2 ;;
esac

# Go is not a Debian 12 package at the version Kubernetes needs: the tests
# build their cluster with Go 1.26 from the module proxy (scripts/k8s-dev.sh).
if [ -z "${1:-}" ] && ! command -v go >/dev/null; then
  echo "install-deps: Go 1.26 is not on PATH; the Kubernetes tests need it to build their cluster" \
       "(scripts/k8s-dev.sh build; https://go.dev/dl/)" >&2
fi

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
