#!/usr/bin/env bash
# Starts a fresh tesserad on a temp state folder and runs http_load against it.
# Usage: bench/http/run.sh [BUILD_DIR] [http_load options...]
set -euo pipefail
build=${1:-build}; shift || true
state=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$state"' EXIT
"$build/daemon/tesserad" --state-dir "$state" --port 0 --log-level warn &
pid=$!
for _ in $(seq 100); do [ -s "$state/tesserad.port" ] && break; sleep 0.1; done
"$build/bench/http/http_load" --port "$(cat "$state/tesserad.port")" \
  --token "$(cat "$state/admin-token")" "$@"
