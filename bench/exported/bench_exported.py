"""Images/s of an exported colorizer through Tessera (`tessera-worker infer
--local`: decode, batched forward and encode threads, atomic outputs) against
the same TorchScript module in a plain PyTorch loop (PIL decode, forward,
PIL save), on the same images and the same intra-op threads, side by side in
one run, several rounds alternating. Prints the ratio.

usage: bench_exported.py <tessera-worker> [--images N] [--side PX] [--threads T]
                         [--rounds R] [--model colorizer|denoiser]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "own-model"))
import models  # noqa: E402


def write_images(folder, count, side):
    os.makedirs(folder)
    gen = torch.Generator().manual_seed(5)
    for i in range(count):
        rgb = torch.nn.functional.interpolate(torch.rand(1, 3, 8, 8, generator=gen),
                                              size=(side, side), mode="bicubic",
                                              align_corners=False)[0]
        arr = (rgb.clamp(0, 1).permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
        Image.fromarray(arr, "RGB").save(os.path.join(folder, f"scan-{i:04d}.png"))


def pytorch_loop(model_file, convention, data, out, threads):
    """What a lab's own inference loop does, image by image."""
    torch.set_num_threads(threads)
    os.makedirs(out, exist_ok=True)
    module = torch.jit.load(model_file).eval()
    lo, hi = convention["range"]
    with torch.inference_mode():
        for name in sorted(os.listdir(data)):
            img = np.asarray(Image.open(os.path.join(data, name)).convert("RGB"))
            t = torch.from_numpy(img.copy()).float().permute(2, 0, 1) / 255.0
            if convention["input"] == "gray":
                t = (0.299 * t[0] + 0.587 * t[1] + 0.114 * t[2]).unsqueeze(0)
            y = module((t * (hi - lo) + lo).unsqueeze(0))[0]
            y = ((y - lo) / (hi - lo)).clamp(0, 1)
            arr = (y * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
            Image.fromarray(arr, "RGB").save(os.path.join(out, name))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("worker")
    p.add_argument("--images", type=int, default=48)
    p.add_argument("--side", type=int, default=384)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--model", default="colorizer", choices=["colorizer", "denoiser"])
    a = p.parse_args()
    convention = models.COLORIZER_CONVENTION if a.model == "colorizer" else \
        models.DENOISER_CONVENTION
    with tempfile.TemporaryDirectory(prefix="tessera-bench-exported-") as tmp:
        data = os.path.join(tmp, "scans")
        write_images(data, a.images, a.side)
        model_file = os.path.join(tmp, a.model + ".pt")
        models.export_torchscript(models.make(a.model, seed=1), model_file, convention)
        rates = {"tessera": [], "pytorch": []}
        for r in range(a.rounds):
            out = os.path.join(tmp, f"tessera-{r}")
            t0 = time.perf_counter()
            subprocess.run([a.worker, "infer", "--model-file", model_file, "--data", data,
                            "--output", out, "--local", "--threads", str(a.threads),
                            "--chunk-size", "16"], check=True, capture_output=True)
            rates["tessera"].append(a.images / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            pytorch_loop(model_file, convention, data, os.path.join(tmp, f"pytorch-{r}"),
                         a.threads)
            rates["pytorch"].append(a.images / (time.perf_counter() - t0))
        ts, pt = statistics.median(rates["tessera"]), statistics.median(rates["pytorch"])
        print(f"{a.model}, {a.images} images of {a.side} px, {a.threads} intra-op thread(s), "
              f"{a.rounds} rounds (median):")
        print(f"  tessera-worker infer --local  {ts:7.2f} images/s  "
              f"(rounds: {', '.join(f'{x:.2f}' for x in rates['tessera'])})")
        print(f"  plain PyTorch loop            {pt:7.2f} images/s  "
              f"(rounds: {', '.join(f'{x:.2f}' for x in rates['pytorch'])})")
        print(f"  ratio {ts / pt:.2f}x (target >= 1.0x)")


if __name__ == "__main__":
    main()
