#!/usr/bin/env bash
# Installs what is missing, builds Tessera and runs every test.
# Usage: scripts/test.sh            (from anywhere; builds into ./build)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure --timeout 600 -j"$jobs"
