"""Exported PyTorch models through tessera-worker's inference pipeline
against the same module run in PyTorch on the same images: every output
within one grey level. TorchScript (a colorizer stating its convention in
tessera.json, a denoiser stating nothing: probed) and an AOTInductor package;
whole images, tiles, and a gray scan through an RGB model.

usage: test_exported_model.py <tessera-worker> [--no-aoti]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "own-model"))
import models  # noqa: E402


def write_images(folder: str) -> None:
    """Smooth colour images of several sizes (odd ones too) and a gray scan."""
    os.makedirs(folder)
    gen = torch.Generator().manual_seed(1)
    sizes = [(96, 96), (130, 75), (64, 201), (33, 47)]
    for i, (h, w) in enumerate(sizes):
        rgb = torch.nn.functional.interpolate(torch.rand(1, 3, 6, 6, generator=gen), size=(h, w),
                                              mode="bicubic", align_corners=False)[0]
        arr = (rgb.clamp(0, 1).permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
        Image.fromarray(arr, "RGB").save(os.path.join(folder, f"scan-{i}.png"))
    gray = (np.arange(80 * 90).reshape(80, 90) % 251).astype(np.uint8)
    Image.fromarray(gray, "L").save(os.path.join(folder, "gray-scan.png"))


def reference(model, convention, path: str) -> np.ndarray:
    """What the module gives in PyTorch for one image file, as 8-bit pixels."""
    img = np.asarray(Image.open(path))
    t = torch.from_numpy(img.copy()).float() / 255.0
    t = t.unsqueeze(0) if t.dim() == 2 else t.permute(2, 0, 1)
    if t.shape[0] == 1:
        t = t.expand(3, -1, -1)
    lo, hi = convention.get("range", [0, 1])
    if convention["input"] == "gray":
        t = (0.299 * t[0] + 0.587 * t[1] + 0.114 * t[2]).unsqueeze(0)
    x = t * (hi - lo) + lo
    h, w = x.shape[1:]
    align = convention.get("align", 1)
    ph, pw = (-h) % align, (-w) % align  # pad bottom/right by edge replicate, as Tessera does
    if ph or pw:
        x = torch.nn.functional.pad(x.unsqueeze(0), (0, pw, 0, ph), mode="replicate")[0]
    with torch.no_grad():
        y = model(x.unsqueeze(0))[0][:, :h, :w]
    y = ((y - lo) / (hi - lo)).clamp(0, 1)
    return (y * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()


def run_worker(worker: str, model_file: str, data: str, out: str, *extra: str) -> None:
    cmd = [worker, "infer", "--model-file", model_file, "--data", data, "--output", out,
           "--local", "--threads", "1", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr}")


def compare(model, convention, data: str, out: str, label: str) -> int:
    worst = 0
    for name in sorted(os.listdir(data)):
        want = reference(model, convention, os.path.join(data, name))
        got = np.asarray(Image.open(os.path.join(out, name)).convert("RGB"))
        assert got.shape == want.shape, f"{label} {name}: {got.shape} vs {want.shape}"
        diff = int(np.abs(got.astype(int) - want.astype(int)).max())
        assert diff <= 1, f"{label} {name}: {diff} grey levels from PyTorch"
        worst = max(worst, diff)
    print(f"{label}: {len(os.listdir(data))} images, at most {worst} grey level(s) from PyTorch")
    return worst


def main() -> int:
    worker = sys.argv[1]
    aoti = "--no-aoti" not in sys.argv
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="tessera-exported-") as tmp:
        data = os.path.join(tmp, "scans")
        write_images(data)
        colorizer = models.make("colorizer", seed=3, fit_steps=20)
        denoiser = models.make("denoiser", seed=4, fit_steps=20)
        col_pt = os.path.join(tmp, "colorizer.pt")
        den_pt = os.path.join(tmp, "denoiser.pt")
        models.export_torchscript(colorizer, col_pt, models.COLORIZER_CONVENTION)
        models.export_torchscript(denoiser, den_pt, None)  # nothing stated: probed
        col_conv = dict(models.COLORIZER_CONVENTION, align=2)

        run_worker(worker, col_pt, data, os.path.join(tmp, "col"))
        compare(colorizer, col_conv, data, os.path.join(tmp, "col"), "colorizer (TorchScript)")
        run_worker(worker, den_pt, data, os.path.join(tmp, "den"))
        compare(denoiser, models.DENOISER_CONVENTION, data, os.path.join(tmp, "den"),
                "denoiser (TorchScript, probed)")
        # Tiles of 48 px with the probed halo: still the whole image's output.
        run_worker(worker, den_pt, data, os.path.join(tmp, "den-tiled"), "--max-tile-px", "48")
        compare(denoiser, models.DENOISER_CONVENTION, data, os.path.join(tmp, "den-tiled"),
                "denoiser (TorchScript, tiles of 48 px)")
        # The spec's statement wins over the module's: a colorizer told [0, 1]
        # gives other pixels than PyTorch with [-1, 1] (the flag reaches the model).
        run_worker(worker, col_pt, data, os.path.join(tmp, "col-01"), "--value-range=0,1")
        told = dict(col_conv, range=[0, 1])
        compare(colorizer, told, data, os.path.join(tmp, "col-01"), "colorizer told [0, 1]")
        if aoti:
            den_pt2 = os.path.join(tmp, "denoiser.pt2")
            models.export_aoti(denoiser, den_pt2, models.DENOISER_CONVENTION, align=1)
            run_worker(worker, den_pt2, data, os.path.join(tmp, "den-aoti"))
            compare(denoiser, models.DENOISER_CONVENTION, data, os.path.join(tmp, "den-aoti"),
                    "denoiser (AOTInductor)")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
