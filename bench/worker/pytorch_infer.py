#!/usr/bin/python3
"""Folder inference in plain PyTorch, the way a lab would write it.

One process: torch.set_num_threads(--threads), the model in eval mode under
torch.inference_mode(), then for each image of --data (sorted by path): decode
(PIL, from the project's .venv), to a tensor, forward, encode and save a PNG under
--output. With --batch B, consecutive images of the same size are stacked into
one forward pass of up to B images (a batch is cut where the size changes).

Same models as `tessera-worker infer`, ported layer by layer, with the weights
read from a checkpoint the worker wrote (worker/runtime/checkpoint.cc: the
newest step-N/manifest.json of --checkpoint; its "TSRT1" tensor files are
read with struct + torch.frombuffer, names such as "enc0.block.conv1.conv.weight"
map one to one onto the modules below):

  colorize-unet (worker/model/unet.cc, depth 3): enc0 DoubleConv(1 -> W);
      downK maxpool 2 + DoubleConv(c -> 2c); upK ConvTranspose 2x2 stride 2
      (2c -> c), concat [skip, up], DoubleConv(2c -> c); head 1x1 conv (W -> 2),
      tanh. DoubleConv = 2 x (conv3x3 no bias, batch norm, ReLU).
      Input L/50 - 1 of the image (CIE L*a*b*, D65, worker/data/color.cc; a gray
      image counts as R = G = B); output ab/110; written as RGB (L + ab).
  denoiser-dncnn (worker/model/denoiser_dncnn.cc): in conv3x3 3 -> W (bias),
      ReLU; midK conv3x3 W -> W (no bias), batch norm, ReLU; out conv3x3 W -> 3
      (bias); output = input - predicted noise, clamped to [0, 1]; a gray image
      is read as RGB and written back as gray (Rec. 601).
Images are padded (edge replicate) to a multiple of 8 and cropped back, as the
worker does.

Output name: <output>/<path relative to --data>, with ".png" appended unless it
already ends so (the worker's naming). PNGs are written with PIL's defaults
(zlib level 6), not fsynced.

On stderr, right after the model is loaded: "pytorch_infer: <model> from
<dir>/step-N loaded" (the comparison times the run from that line). With
--result, a JSON file with {"images", "t_start", "t_loaded", "t_first_output",
"t_last_output"} (time.time()).
With --compare-with DIR, after the run every output is compared pixel by pixel
with the same name under DIR (e.g. the worker's outputs): prints one JSON line
{"images", "max_abs_diff", "pixels_over_1"} and exits 1 when an output is
missing or differs in size.

usage: pytorch_infer.py --model colorize-unet --checkpoint CKPT --data IMAGES
           --output OUT [--threads 1] [--batch 1] [--result R.json]
           [--compare-with WORKER_OUT]
"""
import argparse
import json
import os
import struct
import sys
import time

T_START = time.time()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from PIL import Image  # noqa: E402

ALIGN = 8
IMAGE_EXT = (".png", ".jpg", ".jpeg")

# c10::ScalarType numbers of the tensor files.
DTYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
          5: torch.float16, 6: torch.float32, 7: torch.float64, 11: torch.bool,
          15: torch.bfloat16}


# ----- checkpoint -----

def newest_manifest(ckpt_dir):
    steps = []
    for name in os.listdir(ckpt_dir):
        if name.startswith("step-") and name[5:].isdigit() and os.path.exists(
                os.path.join(ckpt_dir, name, "manifest.json")):
            steps.append(int(name[5:]))
    if not steps:
        sys.exit(f"no checkpoint in {ckpt_dir}")
    step_dir = os.path.join(ckpt_dir, f"step-{max(steps)}")
    with open(os.path.join(step_dir, "manifest.json")) as f:
        return step_dir, json.load(f)


def read_tensor_file(path):
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b"TSRT1\n"):
        sys.exit(f"{path}: not a tessera tensor file")
    pos = 6

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    (count,) = take("I")
    out = {}
    for _ in range(count):
        (name_len,) = take("I")
        name = data[pos:pos + name_len].decode()
        pos += name_len
        dtype, ndim = take("iI")
        shape = take(f"{ndim}q") if ndim else ()
        (nbytes,) = take("Q")
        raw = bytearray(data[pos:pos + nbytes])
        pos += nbytes
        if name.startswith("__") or "#" in name:  # RNG state, optimizer slots
            continue
        t = torch.frombuffer(raw, dtype=DTYPES[dtype]) if nbytes else torch.empty(0,
                                                                                  dtype=DTYPES[dtype])
        out[name] = t.reshape(shape)
    return out


def load_state(ckpt_dir):
    step_dir, manifest = newest_manifest(ckpt_dir)
    state = {}
    for entry in manifest["files"]:
        state.update(read_tensor_file(os.path.join(step_dir, entry["path"])))
    return step_dir, manifest["model"], state


# ----- models (module names = the worker's tensor names) -----

class ConvBnAct(nn.Module):
    def __init__(self, cin, cout, k=3, bn=True, relu=True):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=k // 2, bias=not bn)
        self.bn = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1) if bn else None
        self.relu = relu

    def forward(self, x):
        x = self.conv(x)
        if self.bn is not None:
            x = self.bn(x)
        return F.relu(x) if self.relu else x


class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = ConvBnAct(cin, cout)
        self.conv2 = ConvBnAct(cout, cout)

    def forward(self, x):
        return self.conv2(self.conv1(x))


class Block(nn.Module):
    """Holds one DoubleConv as "block" (the worker's layer objects)."""

    def __init__(self, cin, cout, up=False):
        super().__init__()
        if up:
            self.up = nn.ConvTranspose2d(cin, cout, 2, stride=2)
        self.block = DoubleConv(2 * cout if up else cin, cout)


class Head(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1)


class ColorizeUnet(nn.Module):
    def __init__(self, width, depth=3):
        super().__init__()
        self.depth = depth
        self.enc0 = Block(1, width)
        c = width
        for i in range(1, depth + 1):
            setattr(self, f"down{i}", Block(c, 2 * c))
            c *= 2
        for i in range(depth, 0, -1):
            setattr(self, f"up{i}", Block(c, c // 2, up=True))
            c //= 2
        self.head = Head(c, 2)

    def forward(self, x):
        x = self.enc0.block(x)
        skips = [x]
        for i in range(1, self.depth + 1):
            x = getattr(self, f"down{i}").block(F.max_pool2d(x, 2))
            if i < self.depth:
                skips.append(x)
        for i in range(self.depth, 0, -1):
            up = getattr(self, f"up{i}")
            x = up.block(torch.cat([skips.pop(), up.up(x)], 1))
        return torch.tanh(self.head.conv(x))


class ConvLayer(nn.Module):
    def __init__(self, cin, cout, bn, relu):
        super().__init__()
        self.conv = ConvBnAct(cin, cout, bn=bn, relu=relu)


class DenoiserDncnn(nn.Module):
    def __init__(self, width, middle):
        super().__init__()
        self.middle = middle
        setattr(self, "in", ConvLayer(3, width, bn=False, relu=True))
        for i in range(1, middle + 1):
            setattr(self, f"mid{i}", ConvLayer(width, width, bn=True, relu=True))
        self.out = ConvLayer(width, 3, bn=False, relu=False)

    def forward(self, x):
        y = getattr(self, "in").conv(x)
        for i in range(1, self.middle + 1):
            y = getattr(self, f"mid{i}").conv(y)
        return x - self.out.conv(y)


def build_model(name, state):
    if name == "colorize-unet":
        model = ColorizeUnet(state["enc0.block.conv1.conv.weight"].shape[0])
    elif name == "denoiser-dncnn":
        middle = sum(1 for k in state if k.startswith("mid") and k.endswith(".conv.weight"))
        model = DenoiserDncnn(state["in.conv.conv.weight"].shape[0], middle)
    else:
        sys.exit(f"unsupported model {name} (colorize-unet, denoiser-dncnn)")
    ours = model.state_dict()
    missing = [k for k in ours if k not in state and not k.endswith("num_batches_tracked")]
    extra = [k for k in state if k not in ours]
    if missing or extra:
        sys.exit(f"checkpoint does not fit {name}: missing {missing[:5]}, unexpected {extra[:5]}")
    model.load_state_dict({k: state.get(k, v) for k, v in ours.items()})
    return model.eval()


# ----- colour (worker/data/color.cc, vectorized, float64) -----

def srgb_to_linear(c):
    return torch.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(c):
    return torch.where(c <= 0.0031308, 12.92 * c, 1.055 * c.clamp(min=0) ** (1 / 2.4) - 0.055)


EPS = 216.0 / 24389.0
KAPPA = 24389.0 / 27.0
WHITE = (0.95047, 1.0, 1.08883)


def f_lab(t):
    return torch.where(t > EPS, t.clamp(min=0) ** (1 / 3), (KAPPA * t + 16.0) / 116.0)


def f_inv(f):
    f3 = f * f * f
    return torch.where(f3 > EPS, f3, (116.0 * f - 16.0) / KAPPA)


def rgb_to_l_norm(rgb):
    """uint8 [N,H,W,3] -> L/50 - 1 as float32 [N,1,H,W]."""
    c = srgb_to_linear(rgb.to(torch.float32).div(255.0).to(torch.float64))
    y = 0.2126729 * c[..., 0] + 0.7151522 * c[..., 1] + 0.0721750 * c[..., 2]
    lab_l = (116.0 * f_lab(y / WHITE[1]) - 16.0).to(torch.float32)
    return (lab_l / 50.0 - 1.0).unsqueeze(1)


def lab_norm_to_rgb(l_norm, ab_norm):
    """float32 [N,1,H,W], [N,2,H,W] -> float32 RGB [N,H,W,3] in [0, 1]."""
    lab_l = ((l_norm[:, 0] + 1.0) * 50.0).to(torch.float64)
    a = (ab_norm[:, 0] * 110.0).to(torch.float64)
    b = (ab_norm[:, 1] * 110.0).to(torch.float64)
    fy = (lab_l + 16.0) / 116.0
    fx, fz = fy + a / 500.0, fy - b / 200.0
    x, y, z = WHITE[0] * f_inv(fx), WHITE[1] * f_inv(fy), WHITE[2] * f_inv(fz)
    r = 3.2404542 * x - 1.5371385 * y - 0.4985314 * z
    g = -0.9692660 * x + 1.8760108 * y + 0.0415560 * z
    bl = 0.0556434 * x - 0.2040259 * y + 1.0572252 * z
    rgb = torch.stack([r, g, bl], -1).clamp(0.0, 1.0)
    return linear_to_srgb(rgb).clamp(0.0, 1.0).to(torch.float32)


def to_uint8(x):
    return (x.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8)


# ----- the loop -----

def list_items(root):
    items = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith(".") and name.lower().endswith(IMAGE_EXT):
                items.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(items)


def output_path(out_dir, item):
    return os.path.join(out_dir, item if item.lower().endswith(".png") else item + ".png")


def run_batch(model, name, batch, out_dir):
    """batch: [(item, uint8 HWC RGB array, source channels)], all of one size."""
    rgb = torch.from_numpy(np.stack([a for _, a, _ in batch]))  # [N,H,W,3] uint8
    h, w = rgb.shape[1], rgb.shape[2]
    if name == "colorize-unet":
        x = rgb_to_l_norm(rgb)
    else:
        x = rgb.permute(0, 3, 1, 2).to(torch.float32).div(255.0)
    ph, pw = -h % ALIGN, -w % ALIGN
    xp = F.pad(x, (0, pw, 0, ph), mode="replicate") if ph or pw else x
    y = model(xp)[:, :, :h, :w]
    if name == "colorize-unet":
        pixels = to_uint8(lab_norm_to_rgb(x, y)).numpy()
    else:
        y = y.clamp(0.0, 1.0)
        pixels = to_uint8(y.permute(0, 2, 3, 1)).numpy()
        gray = to_uint8(0.299 * y[:, 0] + 0.587 * y[:, 1] + 0.114 * y[:, 2]).numpy()
    for i, (item, _, channels) in enumerate(batch):
        path = output_path(out_dir, item)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if name != "colorize-unet" and channels == 1:
            Image.fromarray(gray[i], "L").save(path, format="PNG")
        else:
            Image.fromarray(pixels[i], "RGB").save(path, format="PNG")


def compare(ours, theirs, items):
    max_diff, over, n = 0, 0, 0
    for item in items:
        a_path, b_path = output_path(ours, item), output_path(theirs, item)
        if not os.path.exists(b_path):
            print(json.dumps({"error": f"missing {b_path}"}))
            sys.exit(1)
        a = np.asarray(Image.open(a_path)).astype(np.int16)
        b = np.asarray(Image.open(b_path)).astype(np.int16)
        if a.shape != b.shape:
            print(json.dumps({"error": f"{item}: shape {a.shape} vs {b.shape}"}))
            sys.exit(1)
        d = np.abs(a - b)
        max_diff = max(max_diff, int(d.max()))
        over += int((d > 1).sum())
        n += 1
    print(json.dumps({"images": n, "max_abs_diff": max_diff, "pixels_over_1": over}))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="colorize-unet")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1, help="images per forward (same size only)")
    ap.add_argument("--result", default="")
    ap.add_argument("--compare-with", default="")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    step_dir, ckpt_model, state = load_state(args.checkpoint)
    if ckpt_model != args.model:
        sys.exit(f"{step_dir} holds {ckpt_model}, not {args.model}")
    model = build_model(args.model, state)
    t_loaded = time.time()
    print(f"pytorch_infer: {args.model} from {step_dir} loaded", file=sys.stderr, flush=True)

    items = list_items(args.data)
    t_first = None
    with torch.inference_mode():
        batch = []
        for item in items:
            img = Image.open(os.path.join(args.data, item))
            channels = 1 if img.mode in ("L", "LA", "I;16", "I") else 3
            arr = np.asarray(img.convert("RGB"))
            if batch and (len(batch) == args.batch or batch[0][1].shape != arr.shape):
                run_batch(model, args.model, batch, args.output)
                t_first = t_first or time.time()
                batch = []
            batch.append((item, arr, channels))
        if batch:
            run_batch(model, args.model, batch, args.output)
            t_first = t_first or time.time()
    t_last = time.time()
    if args.result:
        with open(args.result, "w") as f:
            json.dump({"images": len(items), "t_start": T_START, "t_loaded": t_loaded,
                       "t_first_output": t_first, "t_last_output": t_last,
                       "torch": torch.__version__}, f)
    if args.compare_with:
        compare(args.output, args.compare_with, items)


if __name__ == "__main__":
    main()
