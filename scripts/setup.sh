#!/usr/bin/env bash
# Installs every build and test dependency of Tessera:
#   - Debian 12 packages (compilers, libraries, Chromium, Slurm, ...), and
#   - a project virtual environment (default ./.venv, or $TESSERA_VENV) with
#     PyPI's torch wheel, whose LibTorch (headers, libraries, CMake config) is
#     the one every build links, plus numpy, Pillow and Playwright (the web
#     UI's browser test drives Debian's Chromium with the wheel's driver).
# Idempotent and non-interactive: what is already present is left alone.
#
# The torch version is pinned (TESSERA_TORCH_VERSION): 2.11.0, whose PyPI
# wheel is built with CUDA 13.0, the same major and minor as the CUDA toolkit
# the build machines carry, and the same LibTorch the lent GPU machines' own
# Python holds (so binaries built here run there). A lab that builds against
# its own CUDA LibTorch passes -DTESSERA_TORCH_DIR=... to CMake (README).
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=${TESSERA_TORCH_VERSION:-2.11.0}
PLAYWRIGHT_VERSION=${TESSERA_PLAYWRIGHT_VERSION:-1.61.0}
VENV=${TESSERA_VENV:-$PWD/.venv}

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libboost1.81-dev
  libsqlite3-dev sqlite3
  nlohmann-json3-dev
  libgloo-dev  # headers for c10d's ProcessGroupGloo.hpp (LibTorch carries the library)
  libssl-dev
  libsystemd-dev systemd
  libcli11-dev libspdlog-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libpng-dev libjpeg-dev
  clang libclang-rt-14-dev
  iproute2 procps curl
  python3 python3-venv python3-pip
  ccache
  chromium
  slurmctld slurmd slurm-client munge slurmrestd slurm-wlm-basic-plugins slurm-wlm-jwt-plugin
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} Debian packages already installed"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The project's Python: Debian's interpreter in a virtual environment.
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating the virtual environment $VENV"
  /usr/bin/python3 -m venv "$VENV"
fi
want="torch==$TORCH_VERSION numpy pillow playwright==$PLAYWRIGHT_VERSION"
stamp="$VENV/.tessera-setup"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] ||
   ! "$VENV/bin/python" -c "import torch, numpy, PIL, playwright" 2>/dev/null; then
  echo "setup: installing $want into $VENV (PyPI)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check $want
  echo "$want" >"$stamp"
else
  echo "setup: $VENV already holds $want"
fi
"$VENV/bin/python" - <<'EOF'
import torch
print(f"setup: torch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"CMake prefix {torch.utils.cmake_prefix_path}")
EOF
