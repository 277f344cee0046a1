#!/usr/bin/env bash
# Installs what is missing, builds Tessera and runs every test: a short
# libFuzzer run of the API's request and job-spec handling (clang, ASan and
# UBSan), clang's lock-annotation check of the daemon and agent libraries
# (-Wthread-safety), then the whole CTest suite (unit, integration,
# end-to-end with real processes, and the web UI in headless Chromium).
# Usage: scripts/test.sh            (from anywhere; builds into ./build)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
jobs=$(nproc)
# ccache (CMakeLists.txt uses it when installed): relative paths and no build folder
# in the hash, so a fresh clone in another folder hits the cache a previous build filled; LibTorch's precompiled
# header needs the sloppiness below to be cached at all.
export CCACHE_BASEDIR=$PWD
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}  # -g would otherwise hash the build folder
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}

echo "== fuzz: 20 s per target (fuzz/README.md has the long run)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSERA_FUZZ=ON -DTESSERA_ASAN=ON -DTESSERA_UBSAN=ON -DTESSERA_THREAD_SAFETY=ON \
  -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_router fuzz_job_spec
for target in router job_spec; do
  scratch=$(mktemp -d)
  build-fuzz/fuzz/fuzz_$target -max_total_time=20 -max_len=4096 -print_final_stats=1 \
    "$scratch" "fuzz/corpus/$target" 2>&1 | tail -3
  rm -rf "$scratch"
done

echo "== thread safety: the annotated libraries under clang -Wthread-safety (docs/engineering.md)"
cmake --build build-fuzz -j"$jobs" --target tessera_controller tessera_daemon tessera_agent_lib

echo "== build and test"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure --timeout 600 -j"$jobs"
