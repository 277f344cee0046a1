#!/usr/bin/env bash
# Installs every build and test dependency of Tessera from Debian 12 packages.
# Idempotent and non-interactive: packages already present are left alone.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libboost1.81-dev
  libsqlite3-dev sqlite3
  nlohmann-json3-dev
  libtorch-dev libgloo-dev
  libssl-dev
  libsystemd-dev systemd
  libcli11-dev libspdlog-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libpng-dev libjpeg-dev
  clang libclang-rt-14-dev
  iproute2 procps curl
  python3-torch python3-numpy python3-pil
  ccache
  chromium nodejs
  slurmctld slurmd slurm-client munge slurmrestd slurm-wlm-basic-plugins slurm-wlm-jwt-plugin
)
# Web UI test (tests/web): npm comes inside some nodejs builds, else apart.
if ! command -v npm >/dev/null 2>&1; then PACKAGES+=(npm); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
