#!/usr/bin/env bash
# The lab's own models through a running Tessera cluster: exports the example's
# colorizer and denoiser (export.py, the project's PyTorch), allows them as
# model: entrypoints (an admin's token), generates scans, submits one infer job
# for each through the CLI, follows them to the end and counts the outputs.
#
# usage: examples/own-model/run.sh
#   with TESSERA_SERVER and an admin's TESSERA_TOKEN set (scripts/demo.sh prints
#   both). Optional: OWN_MODEL_DIR (work folder, default /tmp/tessera-own-model;
#   agents must see the same paths), OWN_MODEL_IMAGES (default 200),
#   OWN_MODEL_AOTI=1 (AOTInductor packages instead of TorchScript), TESSERA_PYTHON,
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
exit $status
