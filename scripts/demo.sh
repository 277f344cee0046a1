#!/usr/bin/env bash
# The main job: installs what is missing, builds Tessera, and starts a local
# demo cluster on the embedded defaults: tesserad plus three tessera-agents
# whose inventory files (examples/demo-lab/) declare a mixed lab of emulated
# GPUs. It generates sample images, submits the sample colorization training
# job through the CLI, shows it placed and running, and says where to look.
#
# Usage: scripts/demo.sh [--exit]
#   --exit  stop the cluster once the job is running (used by tests);
#           otherwise it keeps running until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
exit_after=0
[ "${1:-}" = "--exit" ] && exit_after=1

bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tesserad tessera-agent tessera tessera-worker

bin=$root/build
tesserad=$bin/daemon/tesserad
agent=$bin/agent/tessera-agent
cli=$bin/cli/tessera
worker=$bin/worker/runtime/tessera-worker
demo=$root/var/demo
rm -rf "$demo"
mkdir -p "$demo"

pids=()
cleanup() {
  echo
  echo "stopping the demo cluster"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # Workers run in their own process groups (a launcher that carries the
  # agent's command line, and the worker) and outlive a stopped agent by
  # design (re-adoption); the demo stops those groups too.
  for pg in $(pgrep -f "$demo/agent-" 2>/dev/null); do kill -TERM -- "-$pg" 2>/dev/null || true; done
  pkill -TERM -f "$demo/agent-" 2>/dev/null || true
}
trap cleanup EXIT

echo "== generating sample images"
"$worker" gen-images --out "$demo/images" --count 96 --size 64

echo "== starting tesserad"
cat > "$demo/tesserad.yaml" <<YAML
state_dir: $demo/controller
port: 0
log_level: info
data_roots:                     # README "Security": where jobs may read and write
  - {path: "$demo/images", access: read}
YAML
"$tesserad" --config "$demo/tesserad.yaml" >"$demo/tesserad.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$demo/controller/tesserad.port" ] && break; sleep 0.1; done
port=$(cat "$demo/controller/tesserad.port")
export TESSERA_SERVER="http://127.0.0.1:$port"
export TESSERA_TOKEN=$(cat "$demo/controller/admin-token")

echo "== starting three agents (emulated mixed lab)"
for node in boxa boxb boxc; do
  mkdir -p "$demo/agent-$node"
  "$agent" --controller "$TESSERA_SERVER" --join-token-file "$demo/controller/join-token" \
    --node "$node" --state-dir "$demo/agent-$node" \
    --inventory "examples/demo-lab/$node.yaml" >"$demo/agent-$node.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 100); do
  healthy=$("$cli" --json nodes | grep -o '"health": *"healthy"' | wc -l || true)
  [ "$healthy" -ge 3 ] && break
  sleep 0.2
done
"$cli" nodes

echo "== the planner's view of the sample job"
sed "s#@DATASET@#$demo/images#" examples/demo-lab/colorize-job.json > "$demo/colorize-job.json"
"$cli" plan "$demo/colorize-job.json" || true

echo "== submitting the sample colorization training job"
job=$("$cli" --json submit "$demo/colorize-job.json" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p' | head -1)
echo "job $job submitted"
for _ in $(seq 300); do
  state=$("$cli" --json job "$job" | sed -n 's/.*"state": *"\([a-z]*\)".*/\1/p' | head -1)
  [ "$state" = running ] || [ "$state" = succeeded ] || [ "$state" = failed ] && break
  sleep 0.2
done
"$cli" job "$job"
"$cli" events "$job"

cat <<EOF2

The demo cluster is up.
  CLI:     export TESSERA_SERVER=$TESSERA_SERVER TESSERA_TOKEN=\$(cat $demo/controller/admin-token)
           $cli jobs; $cli job $job; $cli events $job; $cli nodes
  API:     curl -H "Authorization: Bearer \$TESSERA_TOKEN" $TESSERA_SERVER/api/v1/jobs/$job
  Web UI:  $TESSERA_SERVER/
  Logs:    $demo/*.log, worker logs under $demo/agent-*/
EOF2
if [ "$exit_after" = 1 ]; then
  [ "$state" = running ] || [ "$state" = succeeded ]
  exit $?
fi
echo "Press Ctrl-C to stop."
wait
