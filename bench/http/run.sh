#!/usr/bin/env bash
# Starts a fresh tesserad on a temp state folder and runs http_load against it.
# Usage: bench/http/run.sh [BUILD_DIR] [http_load options...]
set -euo pipefail
build=${1:-build}; shift || true
state=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$state"' EXIT
# With two or more cores, the daemon and the load generator get one core each,
# so the generator's own threads do not steal the server's CPU (on a 2-core
# box they otherwise dominate the latency tail).
server_cpus="" client_cpus=""
if [ "$(nproc)" -ge 2 ]; then server_cpus="taskset -c 0"; client_cpus="taskset -c 1"; fi
$server_cpus "$build/daemon/tesserad" --state-dir "$state" --port 0 --log-level warn &
pid=$!
for _ in $(seq 100); do [ -s "$state/tesserad.port" ] && break; sleep 0.1; done
$client_cpus "$build/bench/http/http_load" --port "$(cat "$state/tesserad.port")" \
  --token "$(cat "$state/admin-token")" "$@"
