#!/usr/bin/env bash
# The lab's own models through a running Tessera cluster: exports the example's
# colorizer and denoiser (export.py, the project's PyTorch), allows them as
# model: entrypoints (an admin's token), generates scans, submits one infer job
# for each through the CLI, follows them to the end and counts the outputs; then
# trains the example's scripted nn.Sequential (sequence.pt) as model:own-sequence,
# planned by its layers (tesserad profiles the file), and prints its plan and loss.
#
# usage: examples/own-model/run.sh
#   with TESSERA_SERVER and an admin's TESSERA_TOKEN set (scripts/demo.sh prints
#   both). Optional: OWN_MODEL_DIR (work folder, default /tmp/tessera-own-model;
#   agents must see the same paths), OWN_MODEL_IMAGES (default 200),
#   OWN_MODEL_AOTI=1 (AOTInductor packages instead of TorchScript), OWN_MODEL_STEPS
#   (training steps of the sequence, default 60), TESSERA_PYTHON,
#   TESSERA_CLI, TESSERA_WORKER (default: the build's).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${TESSERA_PYTHON:-$root/.venv/bin/python}
cli=${TESSERA_CLI:-$root/build/cli/tessera}
worker=${TESSERA_WORKER:-$root/build/worker/runtime/tessera-worker}
work=${OWN_MODEL_DIR:-/tmp/tessera-own-model}
images=${OWN_MODEL_IMAGES:-200}
: "${TESSERA_SERVER:?set TESSERA_SERVER (scripts/demo.sh prints it)}"
: "${TESSERA_TOKEN:?set TESSERA_TOKEN to an admin token (scripts/demo.sh prints it)}"

mkdir -p "$work"
work=$(cd "$work" && pwd)
ext=pt
if [ -n "${OWN_MODEL_AOTI:-}" ]; then
  "$py" "$here/export.py" --out "$work/models" --aoti
  ext=pt2
else
  "$py" "$here/export.py" --out "$work/models"
fi
rm -rf "$work/scans"
"$worker" gen-images --out "$work/scans" --count "$images" --size 96 >/dev/null

status=0
for model in colorizer denoiser; do
  "$cli" entrypoints add "model:own-$model" --command "$work/models/$model.$ext" \
    --description "examples/own-model $model"
  rm -rf "$work/out-$model"
  submitted=$("$cli" submit --name "own-$model" --kind infer --entrypoint "model:own-$model" \
    --dataset "$work/scans" --output "$work/out-$model" --global-batch 4)
  echo "$submitted"
  id=$(echo "$submitted" | sed -n 's/^submitted job \([0-9]*\).*/\1/p')
  "$cli" job "$id" --watch >/dev/null
  state=$("$cli" --json job "$id" | "$py" -c 'import json, sys; j = json.load(sys.stdin); print(j["state"], j["reason"], sep=": ")')
  written=$(find "$work/out-$model" -name '*.png' | wc -l)
  echo "job $id (model:own-$model): $state; $written of $images outputs in $work/out-$model"
  if [ "${state%%:*}" != succeeded ] || [ "$written" -ne "$images" ]; then status=1; fi
done

# Training the lab's own sequence of layers: tesserad profiles sequence.pt's
# layers on first use (the job waits meanwhile), then plans it like a builtin
# model (data, pipeline or hybrid, whichever it predicts fastest here).
"$cli" entrypoints add model:own-sequence --command "$work/models/sequence.pt" \
  --description "examples/own-model scripted nn.Sequential colorizer"
steps=${OWN_MODEL_STEPS:-60}
submitted=$("$cli" submit --name own-sequence --kind train --entrypoint model:own-sequence \
  --dataset "$work/scans" --global-batch 8 --steps "$steps" \
  --arg=--loss --arg=l1 --arg=--image-size --arg=32 --arg=--optimizer --arg=adam --arg=--lr --arg=0.003)
echo "$submitted"
id=$(echo "$submitted" | sed -n 's/^submitted job \([0-9]*\).*/\1/p')
"$cli" job "$id" --watch >/dev/null
"$cli" --json job "$id" | "$py" -c '
import json, sys
j = json.load(sys.stdin)
plan = j.get("plan") or {}
stages = ", ".join(
    "+".join(s["devices"]) + " layers " + str(s["layers"][0]) + "-" + str(s["layers"][1])
    for r in plan.get("replicas", []) for s in r["stages"])
print("job %s (model:own-sequence): %s: %s; %s layout: %s" % (
    j["id"], j["state"], j["reason"], plan.get("layout", "no"), stages))
'
state=$("$cli" --json job "$id" | "$py" -c 'import json, sys; print(json.load(sys.stdin)["state"])')
if [ "$state" != succeeded ]; then status=1; fi
exit $status
