"""tessera-worker profile --model-file on a lab's nn.Sequential: one profile
row per top-level child, each with the FLOPs of the convolutions (plain,
strided, transposed, nested in a block) and linear maps inside it, the
figures the planner times GPUs by.

usage: python test_scripted_profile.py <tessera-worker>
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
from torch import nn


def profile(worker: str, path: str, *extra: str) -> dict:
    cmd = [worker, "profile", "--model-file", path, "--batch", "4", "--repeats", "1", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


def check(rows: list, want: list, label: str) -> int:
    bad = 0
    names = [r["name"] for r in rows]
    if len(rows) != len(want):
        print(f"FAIL {label}: {len(rows)} layers {names}, want {len(want)}")
        return 1
    for row, (name, flops) in zip(rows, want):
        got = row["fwd_flops_per_sample"]
        if row["name"] != name or abs(got - flops) > 1e-6 * max(flops, 1):
            print(f"FAIL {label}: layer {row['name']} has {got} FLOPs, want {name}: {flops}")
            bad += 1
        if row["fwd_ms"] <= 0 or row["bwd_ms"] < 0:
            print(f"FAIL {label}: layer {row['name']} was not timed: {row}")
            bad += 1
    return bad


def main() -> int:
    worker = sys.argv[1]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="tessera-scripted-profile-") as tmp:
        # A gray-to-RGB image model at 64 px (the profile's default crop).
        image = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),                  # 8x1x3x3 at 64x64
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, stride=2, padding=1),        # 8x8x3x3 at 32x32
            nn.ConvTranspose2d(8, 4, 2, stride=2),          # 8x4x2x2 over its 32x32 input
            nn.Sequential(nn.Conv2d(4, 3, 1), nn.Tanh()),   # 3x4x1x1 at 64x64, nested
        )
        path = os.path.join(tmp, "image.pt")
        torch.jit.script(image).save(path)
        rows = profile(worker, path, "--image-input", "gray", "--image-output", "rgb")["layers"]
        bad += check(rows, [("0", 2 * 72 * 64 * 64), ("1", 0), ("2", 2 * 576 * 32 * 32),
                            ("3", 2 * 128 * 32 * 32), ("4", 2 * 12 * 64 * 64)], "image model")
        # A classifier at 32 px: the linear map's weights once per sample.
        classifier = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.Flatten(),
                                   nn.Linear(4 * 16 * 16, 10))
        path = os.path.join(tmp, "classifier.pt")
        torch.jit.script(classifier).save(path)
        rows = profile(worker, path, "--image-input", "rgb", "--image-output", "scores",
                       "--loss", "cross_entropy", "--image-size", "32")["layers"]
        bad += check(rows, [("0", 2 * 108 * 16 * 16), ("1", 0), ("2", 2 * 1024 * 10)],
                     "classifier")
    print("ok" if bad == 0 else f"{bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
