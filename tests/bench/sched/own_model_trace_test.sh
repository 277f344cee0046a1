#!/bin/bash
# trace_sim replays a trace of a lab's own model on the profile the worker
# measures of it: examples/own-model's exported sequence, profiled by
# `tessera-worker profile --model-file` (as tesserad profiles a model: job),
# named in the trace's model column through --profile NAME=FILE.json.
# usage: own_model_trace_test.sh TRACE_SIM TESSERA_WORKER PYTHON
set -euo pipefail
trace_sim=$1 worker=$2 py=$3
root=$(cd "$(dirname "$0")/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$root/examples/own-model/export.py" --out "$work" --fit-steps 1 >/dev/null
"$worker" profile --model-file "$work/sequence.pt" --loss l1 >"$work/sequence.json"
cat >"$work/trace.csv" <<'CSV'
submit_s,user,model,global_batch,steps,min_devices,max_devices,priority
0,alice,own-sequence,32,200000,1,0,0
30,bob,denoiser-dncnn,16,3000,1,2,0
60,carol,own-sequence,16,300000,1,2,0
CSV
# Without the profile the trace names a model the simulator does not know.
if "$trace_sim" --trace "$work/trace.csv" --only-trace 2>"$work/err"; then
  echo "a trace of an unknown model replayed" >&2
  exit 1
fi
grep -q "model: .*'own-sequence'" "$work/err"
"$trace_sim" --trace "$work/trace.csv" --only-trace --jobs \
  --profile "own-sequence=$work/sequence.json"
