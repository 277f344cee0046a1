"""Exports the example's colorizer and denoiser (models.py) the way a lab
exports its own: TorchScript files with their image convention in
tessera.json, and with --aoti AOTInductor packages too.

usage: python export.py --out DIR [--aoti] [--fit-steps N] [--seed S]
writes DIR/colorizer.pt, DIR/denoiser.pt (and DIR/colorizer.pt2,
DIR/denoiser.pt2 with --aoti), and DIR/sequence.pt: an untrained scripted
nn.Sequential colorizer for `tessera-worker train --model-file`
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--aoti", action="store_true", help="also AOTInductor packages (.pt2)")
    p.add_argument("--fit-steps", type=int, default=30,
                   help="Adam steps on random smooth images (0: the seed's initialisation)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    for name, convention, align in (("colorizer", models.COLORIZER_CONVENTION, 2),
                                    ("denoiser", models.DENOISER_CONVENTION, 1)):
        model = models.make(name, seed=a.seed, fit_steps=a.fit_steps)
        path = os.path.join(a.out, name + ".pt")
        models.export_torchscript(model, path, convention)
        print(path)
        if a.aoti:
            pt2 = os.path.join(a.out, name + ".pt2")
            models.export_aoti(model, pt2, convention, align=align)
            print(pt2)
    # A sequence of layers for training with planned layouts.
    torch.manual_seed(a.seed)
    seq = os.path.join(a.out, "sequence.pt")
    models.export_torchscript(models.sequential_colorizer(), seq, models.COLORIZER_CONVENTION)
    print(seq)
    return 0


if __name__ == "__main__":
    sys.exit(main())
