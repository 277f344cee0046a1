#!/bin/sh
# A small stand-in for a training program, following the torchrun contract:
# it runs STEPS steps of SLEEP_S seconds; rank 0 checkpoints the step count to
# $TESSERA_CHECKPOINT_DIR/step after every step (write, then rename), and
# every rank resumes from that checkpoint when it starts. Each rank appends
# "attempt rank world step" lines to $TESSERA_CHECKPOINT_DIR/trace and a
# progress line per step to $TESSERA_PROGRESS_FILE (with a made-up step time
# split and a peak memory of (RANK + 1) * 64 MiB, for the views that show them).
# Usage: checkpointing_worker.sh STEPS SLEEP_S
set -eu
steps=${1:?steps}
sleep_s=${2:?sleep seconds}
: "${RANK:?}" "${WORLD_SIZE:?}" "${TESSERA_CHECKPOINT_DIR:?}" "${TESSERA_ATTEMPT:?}"
mkdir -p "$TESSERA_CHECKPOINT_DIR"
step=0
if [ -f "$TESSERA_CHECKPOINT_DIR/step" ]; then
  step=$(cat "$TESSERA_CHECKPOINT_DIR/step")
fi
echo "rank $RANK of $WORLD_SIZE, attempt $TESSERA_ATTEMPT: starting at step $step"
echo "$TESSERA_ATTEMPT $RANK $WORLD_SIZE start $step" >> "$TESSERA_CHECKPOINT_DIR/trace"
while [ "$step" -lt "$steps" ]; do
  sleep "$sleep_s"
  step=$((step + 1))
  if [ "$RANK" = 0 ]; then
    echo "$step" > "$TESSERA_CHECKPOINT_DIR/step.tmp"
    mv "$TESSERA_CHECKPOINT_DIR/step.tmp" "$TESSERA_CHECKPOINT_DIR/step"
  fi
  if [ -n "${TESSERA_PROGRESS_FILE:-}" ]; then
    echo "{\"step\": $step, \"loss\": 1.0, \"samples_per_s\": 10.0, \"compute_s\": 0.06," \
      "\"comm_s\": 0.03, \"bubble_s\": 0.01, \"peak_memory_bytes\": $(( (RANK + 1) * 67108864 ))}" \
      >> "$TESSERA_PROGRESS_FILE"
  fi
done
echo "$TESSERA_ATTEMPT $RANK $WORLD_SIZE done $step" >> "$TESSERA_CHECKPOINT_DIR/trace"
echo "rank $RANK done at step $step"
