#!/usr/bin/python3
"""DnCNN denoiser training in plain PyTorch DDP, the way a lab would write it.

The same model and training step as `tessera-worker train --model denoiser-dncnn`
(worker/model/denoiser_dncnn.cc, worker/runtime/trainer.cc):

  in:    conv3x3 3 -> W (bias), ReLU           (the noisy input is kept)
  midK:  conv3x3 W -> W (no bias), batch norm, ReLU     K = 1..--depth (8)
  out:   conv3x3 W -> 3 (bias); output = noisy input - predicted noise
  loss:  MSE against the clean image; SGD, momentum 0.9, no dampening.

Data: every PNG of --data (sorted by name) decoded once into memory before
training (Pillow, from the project's .venv), scaled to [0, 1].
Each step takes the next window of a seeded per-epoch permutation, this
rank's slice of it, random crop to --image-size + horizontal flip, and adds
Gaussian noise of sigma --noise-sigma: the noisy image is the input, the clean
one the target (worker/data/image_folder_dataset.cc, task denoise). The batch
is prepared outside the timed region.

Distributed: torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
...), init_process_group("gloo"), DistributedDataParallel (gradients averaged
over ranks in 25 MB buckets, overlapping backward). Batch norm: with several
ranks, synchronized over the world (the statistics of the global batch, as
tessera-worker does); torch.nn.SyncBatchNorm supports CUDA only in torch 1.13,
so `CpuSyncBatchNorm` below all-reduces [sum, sum of squares, count] as ONE
tensor in forward and [d sum, d sum of squares] as one in backward.
--bn sync3 issues three all-reduces each way instead (sum, sum of squares,
count: tessera-worker's pattern); --bn local uses plain BatchNorm2d with
per-rank statistics (what DDP does without a SyncBatchNorm).

Timing: time.perf_counter around zero_grad + forward + loss + backward (with
the DDP all-reduce) + optimizer step + loss.item(), no barrier. Rank 0 writes
{"step_s": [...], ...} to --result.

usage: RANK=0 WORLD_SIZE=1 ... pytorch_dncnn_ddp.py --data DIR [--width 16]
           [--image-size 32] [--batch 8] [--steps 40] [--threads 1] --result OUT.json
       pytorch_dncnn_ddp.py --count-params [--width 16]
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image


# PIL's modes of 8-bit images, and their channels (anything else is converted).
_CHANNELS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}


def load_images(folder):
    """All PNGs of the folder, sorted by name, as float [0, 1] tensors [3, H, W]."""
    names = sorted(n for n in os.listdir(folder) if n.lower().endswith(".png"))
    if not names:
        raise SystemExit(f"no PNG in {folder}")
    images = []
    for n in names:
        with Image.open(os.path.join(folder, n)) as img:
            if img.mode not in _CHANNELS:
                img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
            w, h, c, pixels = img.width, img.height, _CHANNELS[img.mode], img.tobytes()
        t = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).view(h, w, c)
        t = t.permute(2, 0, 1).float().div(255.0)
        if c in (2, 4):
            t = t[:c - 1]
        if t.size(0) == 1:
            t = t.expand(3, h, w)
        images.append(t.contiguous())
    return images


# ----- model -----

def _all_reduce(flat, parts):
    """Sums `flat` over the world: one all-reduce, or one per piece of `parts` sizes."""
    if len(parts) == 1:
        dist.all_reduce(flat)
        return
    for piece in flat.split(parts):
        buf = piece.clone()
        dist.all_reduce(buf)
        piece.copy_(buf)


class _AllReduceStats(torch.autograd.Function):
    """Sums [sum | sqsum | count] over the world; backward sums the gradients."""

    @staticmethod
    def forward(ctx, stats, parts):
        ctx.parts = parts
        stats = stats.clone()
        _all_reduce(stats, parts)
        return stats

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        _all_reduce(grad, ctx.parts)
        return grad, None


class CpuSyncBatchNorm(nn.BatchNorm2d):
    """BatchNorm2d over the global batch of all ranks (CPU, Gloo).

    split=False: one all-reduce per direction; split=True: three (sum, sum of
    squares, count), the collective pattern of tessera-worker's SyncBatchNorm."""

    split = False

    def forward(self, x):
        if not self.training or not dist.is_initialized() or dist.get_world_size() == 1:
            return super().forward(x)
        c = x.size(1)
        count = torch.full((1,), float(x.numel() // c), dtype=x.dtype)
        parts = [c, c, 1] if self.split else [2 * c + 1]
        stats = _AllReduceStats.apply(
            torch.cat([x.sum((0, 2, 3)), (x * x).sum((0, 2, 3)), count]), parts)
        n = stats[2 * c]
        mean = stats[:c] / n
        var = torch.clamp_min(stats[c:2 * c] / n - mean * mean, 0.0)
        with torch.no_grad():
            nv = float(n)
            self.running_mean.mul_(1 - self.momentum).add_(mean.detach(), alpha=self.momentum)
            self.running_var.mul_(1 - self.momentum).add_(var.detach() * (nv / max(nv - 1, 1)),
                                                          alpha=self.momentum)
            self.num_batches_tracked.add_(1)
        scale = (torch.rsqrt(var + self.eps) * self.weight).view(1, c, 1, 1)
        return (x - mean.view(1, c, 1, 1)) * scale + self.bias.view(1, c, 1, 1)


class DnCNN(nn.Module):
    def __init__(self, channels=3, width=16, depth=8, sync_bn=True):
        super().__init__()
        bn = CpuSyncBatchNorm if sync_bn else nn.BatchNorm2d
        self.inp = nn.Conv2d(channels, width, 3, padding=1, bias=True)
        self.mid = nn.ModuleList()
        for _ in range(depth):
            self.mid.append(nn.Sequential(nn.Conv2d(width, width, 3, padding=1, bias=False),
                                          bn(width), nn.ReLU(inplace=False)))
        self.out = nn.Conv2d(width, channels, 3, padding=1, bias=True)

    def forward(self, noisy):
        h = F.relu(self.inp(noisy))
        for block in self.mid:
            h = block(h)
        return noisy - self.out(h)


def count_params(model):
    return sum(p.numel() for p in model.parameters())


# ----- data -----

class Batches:
    """Global batches in the order of a seeded per-epoch permutation; this rank's slice."""

    def __init__(self, images, size, batch, rank, world, sigma, seed):
        self.images, self.size, self.batch = images, size, batch
        self.rank, self.world, self.sigma, self.seed = rank, world, sigma, seed
        self.gen = torch.Generator().manual_seed(seed * 1000 + rank)
        self.perms = {}

    def _perm(self, epoch):
        if epoch not in self.perms:
            order = list(range(len(self.images)))
            random.Random(self.seed * 7919 + epoch).shuffle(order)
            self.perms = {epoch: order}
        return self.perms[epoch]

    def step(self, step):
        n, s = len(self.images), self.size
        first = step * self.batch * self.world + self.rank * self.batch
        clean = []
        for gid in range(first, first + self.batch):
            epoch = gid // n
            img = self.images[self._perm(epoch)[gid % n]]
            h, w = img.shape[1:]
            if h < s or w < s:
                k = s / min(h, w)
                img = F.interpolate(img[None], size=(max(s, math.ceil(h * k)),
                                                     max(s, math.ceil(w * k))),
                                    mode="bilinear", align_corners=False)[0]
                h, w = img.shape[1:]
            y0 = int(torch.randint(h - s + 1, (1,), generator=self.gen))
            x0 = int(torch.randint(w - s + 1, (1,), generator=self.gen))
            t = img[:, y0:y0 + s, x0:x0 + s]
            if float(torch.rand(1, generator=self.gen)) < 0.5:
                t = t.flip(2)
            clean.append(t)
        clean = torch.stack(clean).contiguous()
        noisy = clean + self.sigma * torch.randn(clean.shape, generator=self.gen)
        return noisy, clean


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="folder of PNG images")
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--depth", type=int, default=8, help="middle layers (conv + BN + ReLU)")
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8, help="per rank")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--noise-sigma", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bn", choices=["sync", "sync3", "local"], default="sync",
                    help="batch-norm statistics over all ranks (as tessera-worker; sync3: "
                         "three all-reduces each way as tessera-worker issues them) or per rank")
    ap.add_argument("--broadcast-buffers", action="store_true",
                    help="DDP default: broadcast BN buffers from rank 0 every forward")
    ap.add_argument("--result", default="", help="rank 0 writes its per-step times here (JSON)")
    ap.add_argument("--count-params", action="store_true", help="print the parameter count, exit")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    CpuSyncBatchNorm.split = args.bn == "sync3"
    torch.manual_seed(args.seed)
    if args.count_params:
        model = DnCNN(width=args.width, depth=args.depth)
        print(json.dumps({"params": count_params(model), "torch": torch.__version__}))
        return

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")  # env:// rendezvous (MASTER_ADDR / MASTER_PORT)

    images = load_images(args.data)  # preloaded: decoding is not timed
    batches = Batches(images, args.image_size, args.batch, rank, world, args.noise_sigma,
                      args.seed)
    model = DnCNN(width=args.width, depth=args.depth, sync_bn=args.bn != "local")
    model.train()
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model,
                                                    broadcast_buffers=args.broadcast_buffers)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    step_s, losses = [], []
    for step in range(args.steps):
        noisy, clean = batches.step(step)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.mse_loss(model(noisy), clean)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        step_s.append(time.perf_counter() - t0)

    if rank == 0 and args.result:
        with open(args.result, "w") as f:
            json.dump({"step_s": step_s, "loss": losses, "world": world, "batch": args.batch,
                       "params": count_params(model), "torch": torch.__version__,
                       "threads": torch.get_num_threads()}, f)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
