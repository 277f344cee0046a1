#!/usr/bin/env python3
"""Tessera on a real GPU: one short check of every part that touches the device.

Run by scripts/gpu-check.sh (--run on a GPU machine with binaries built elsewhere,
--cpu-test on a build tree here). Python 3 standard library and torch only; the
torch work runs in child processes of this script (`--child NAME`), each with a
timeout, so a hung CUDA call costs one section, never the whole check.

Sections (each ok / FAILED (reason, stderr tail) / skipped (why)):
  1. Environment: torch, CUDA, the GPU (torch and nvidia-smi).
  2. NVML inventory and benchmark: `tessera-agent --print-inventory` against the
     same measurement in PyTorch (sustained n x n torch.mm, copy bandwidth).
  3. Training, colorize-unet: `tessera-worker train` against plain PyTorch (AMP
     and fp32 on a GPU), samples/s.
  4. Peak memory: the worker's allocator peak against nvidia-smi's per-process use.
  5. Collectives: `tessera-worker collectives-check` (NCCL at world size 1 on a
     GPU, Gloo on the CPU at world sizes 1 and 2).
  6. Tiled archive inference: `tessera-worker infer --local --max-tile-px`
     against plain PyTorch with bench/worker/pytorch_infer.py's port of the model.
  7. A cmd: job: a small DDP script through tesserad and a tessera-agent.
  8. Model profile: `tessera-worker profile --device` (the layers measured on the
     GPU) against section 3's whole steps.

Writes OUT/gpu-check-report.md and OUT/gpu-check-report.json and prints the
report. Exit status 0 when no section FAILED (a missed performance target is
reported, not failed).

usage: gpu_check.py (--bin DIR | --bin-tree BUILD_DIR) --out OUT
           [--device cuda:0|cpu] [--quick] [--ld-library-path PATHS]
           [--deadline-s 440] [--keep-tmp]
"""
import argparse
import ctypes
import importlib
import json
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
import urllib.error
import urllib.request
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULT_MARK = "GPU_CHECK_RESULT "

# Where each program lies in a build tree (--bin-tree); --bin has them side by side.
BUILD_PATHS = {
    "tesserad": "daemon/tesserad",
    "tessera-agent": "agent/tessera-agent",
    "tessera-device-bench": "agent/tessera-device-bench",
    "tessera-worker": "worker/runtime/tessera-worker",
    "tessera": "cli/tessera",
    "data_loader_bench": "bench/worker/data_loader_bench",
}

# Variables of a surrounding launcher that would change what the binaries do.
DIST_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
             "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def sizes_for(gpu, quick):
    """Problem sizes: a GPU run keeps every section within about 90 s."""
    if gpu:
        return {
            "train": {"batch": 32, "size": 256, "width": 32, "steps": 30 if quick else 60,
                      "warmup": 10, "images": 256},
            "infer": {"images": 50 if quick else 200, "size": 512, "tile": 256, "width": 32,
                      "pt_batches": [1, 16], "compare": 3,
                      "worker_args": ["--batch", "16", "--batch-pixels", str(4 << 20),
                                      "--decode-threads", "4", "--encode-threads", "8"]},
            "collectives": {"size_mb": 64, "iters": 20, "cpu_size_mb": 16, "cpu_iters": 5},
            "ddp_steps": 30,
        }
    return {
        "train": {"batch": 4, "size": 32, "width": 8, "steps": 8, "warmup": 2, "images": 32},
        # Tiles must hold the model's overlap (2 x halo 56 px for colorize-unet: at least
        # 120 px), so the CPU scans are 192 px cut into 128 px tiles.
        "infer": {"images": 20, "size": 192, "tile": 128, "width": 8, "pt_batches": [1, 4],
                  "compare": 3, "worker_args": []},
        "collectives": {"size_mb": 8 if quick else 64, "iters": 5 if quick else 20,
                        "cpu_size_mb": 8 if quick else 64, "cpu_iters": 5 if quick else 20},
        "ddp_steps": 30,
    }


# ----------------------------------------------------------------------------
# PNG (8-bit, not interlaced) with zlib and torch: the GPU machine's Python may
# have neither numpy nor PIL. Inputs are written with filter 0 (fast to read);
# the reader also undoes the other filters (libpng's adaptive ones) for the
# pixel comparison.

PNG_SIG = b"\x89PNG\r\n\x1a\n"


def png_encode(pixels, level=6):
    """uint8 CPU tensor [H, W] (gray) or [H, W, 3] (RGB) -> PNG bytes, filter 0."""
    import torch
    h, w = int(pixels.shape[0]), int(pixels.shape[1])
    c = 1 if pixels.dim() == 2 else int(pixels.shape[2])
    rows = torch.zeros(h, 1 + w * c, dtype=torch.uint8)
    rows[:, 1:] = pixels.reshape(h, w * c)
    raw = ctypes.string_at(rows.data_ptr(), rows.numel())

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0 if c == 1 else 2, 0, 0, 0)
    return (PNG_SIG + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, level))
            + chunk(b"IEND", b""))


def _unfilter_slow(kind, line, prev, bpp):
    cur = bytearray(len(line))
    for i in range(len(line)):
        a = cur[i - bpp] if i >= bpp else 0
        b = prev[i]
        if kind == 3:
            cur[i] = (line[i] + ((a + b) >> 1)) & 255
        else:
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[i] = (line[i] + pred) & 255
    return cur


def png_decode(data):
    """PNG bytes -> uint8 CPU tensor [H, W, C] (C: 1 gray, 2 gray+alpha, 3, 4)."""
    import torch
    if data[:8] != PNG_SIG:
        raise ValueError("not a PNG file")
    pos, idat, hdr = 8, [], None
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if hdr is None:
        raise ValueError("PNG without IHDR")
    w, h, depth, color, _, _, interlace = hdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(color)
    if depth != 8 or interlace != 0 or channels is None:
        raise ValueError(f"unsupported PNG (depth {depth}, color type {color}, "
                         f"interlace {interlace})")
    stride = w * channels
    raw = zlib.decompress(b"".join(idat))
    if len(raw) != h * (stride + 1):
        raise ValueError("PNG data of the wrong size")
    rows = torch.frombuffer(bytearray(raw), dtype=torch.uint8).reshape(h, stride + 1)
    filters = rows[:, 0].tolist()
    body = rows[:, 1:]
    if not any(filters):
        return body.reshape(h, w, channels).clone()
    out = torch.empty(h, stride, dtype=torch.uint8)
    prev = torch.zeros(stride, dtype=torch.int64)
    for y, kind in enumerate(filters):
        line = body[y].to(torch.int64)
        if kind == 0:
            cur = line
        elif kind == 1:  # Sub: running sum along the row, per byte of a pixel
            cur = line.reshape(w, channels).cumsum(0).reshape(-1) % 256
        elif kind == 2:  # Up
            cur = (line + prev) % 256
        elif kind in (3, 4):  # Average, Paeth: sequential along the row
            cur = torch.tensor(list(_unfilter_slow(kind, bytes(line.to(torch.uint8).tolist()),
                                                   prev.tolist(), channels)),
                               dtype=torch.int64)
        else:
            raise ValueError(f"PNG filter {kind}")
        out[y] = cur.to(torch.uint8)
        prev = cur
    return out.reshape(h, w, channels)


# ----------------------------------------------------------------------------
# Children: the torch side, one process per measurement.

def import_pytorch_infer():
    """bench/worker/pytorch_infer.py, with stand-ins for numpy / PIL when missing
    (the parts used here, the model port and the checkpoint reader, need torch only)."""
    import torch  # noqa: F401 (before the stand-ins: torch must see numpy's real absence)
    sys.path.insert(0, os.path.join(REPO, "bench", "worker"))
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    stubbed = []
    for name in ("numpy", "PIL"):
        try:
            importlib.import_module(name)
            if name == "PIL":
                importlib.import_module("PIL.Image")
        except ImportError:
            sys.modules[name] = types.ModuleType(name)
            stubbed.append(name)
    if "PIL" in stubbed:
        sys.modules["PIL.Image"] = types.ModuleType("PIL.Image")
        sys.modules["PIL"].Image = sys.modules["PIL.Image"]
    try:
        module = importlib.import_module("pytorch_infer")
    finally:
        for name in stubbed + (["PIL.Image"] if "PIL" in stubbed else []):
            sys.modules.pop(name, None)  # torch imports numpy lazily: no stand-in for it
    return module, stubbed


def sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def child_env(p):
    import torch
    out = {"python": sys.version.split()[0], "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
           "device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
           "nccl": None, "torch_threads": torch.get_num_threads(),
           "torch_dir": os.path.dirname(torch.__file__)}
    try:
        out["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:  # noqa: BLE001 (no NCCL in this torch)
        pass
    dev = p.get("device", "cpu")
    if dev.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(dev))
        out["gpu"] = {"name": props.name, "total_memory": props.total_memory,
                      "compute_capability": f"{props.major}.{props.minor}",
                      "multi_processor_count": props.multi_processor_count}
        free, total = torch.cuda.mem_get_info(torch.device(dev))
        out["gpu"]["free_memory"] = free
    return out


def child_bench(p):
    """The agent's measurement (agent/device_benchmark.cc) in PyTorch."""
    import torch
    device = torch.device(p["device"])
    gpu = device.type == "cuda"
    per_sync = 8 if gpu else 1
    n = 4096 if gpu else 512
    torch.set_grad_enabled(False)

    def seconds_per_call(budget_s, step):
        for _ in range(2):
            step()
        sync(torch, device)
        calls = 0
        start = time.perf_counter()
        while True:
            for _ in range(per_sync):
                step()
            calls += per_sync
            sync(torch, device)
            elapsed = time.perf_counter() - start
            if elapsed >= budget_s:
                return elapsed / calls

    def matmul_tflops(dtype):
        try:
            a = torch.randn(n, n, dtype=dtype, device=device)
            b = torch.randn(n, n, dtype=dtype, device=device)
            c = torch.empty(n, n, dtype=dtype, device=device)
            torch.mm(a, b, out=c)
        except RuntimeError:
            return 0.0
        s = seconds_per_call(0.25, lambda: torch.mm(a, b, out=c))
        return 2.0 * n * n * n / s / 1e12

    out = {"n": n, "per_sync": per_sync, "threads": torch.get_num_threads()}
    out["tflops"] = matmul_tflops(torch.float32)
    out["tflops_fp16"] = matmul_tflops(torch.float16)
    out["tflops_bf16"] = matmul_tflops(torch.bfloat16)
    out["tflops_half"] = max(out["tflops_fp16"], out["tflops_bf16"])
    nbytes = (1 << 30) if gpu else (64 << 20)
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    s = seconds_per_call(0.15, lambda: dst.copy_(src))
    out["mem_bandwidth_gbps"] = 2.0 * nbytes / s / 1e9
    out["copy_bytes"] = nbytes
    return out


def train_loop(p):
    """The PyTorch side of the training comparison: colorize-unet on synthetic tensors on
    the device, as the worker trains it. Returns (torch, device, amp, pt stand-ins, step),
    step(i) running one optimizer step and returning its loss tensor (not synchronised)."""
    import torch
    import torch.nn.functional as F
    pt, stubbed = import_pytorch_infer()
    device = torch.device(p["device"])
    if p.get("threads"):
        torch.set_num_threads(p["threads"])
    torch.manual_seed(0)
    b, s, width = p["batch"], p["size"], p["width"]
    model = pt.ColorizeUnet(width).to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=p["lr"], momentum=p["momentum"])
    amp = bool(p["amp"]) and device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda") if amp else None
    # Inputs as the worker feeds them: L/50 - 1 in [-1, 1]; targets ab/110.
    xs = [torch.rand(b, 1, s, s, device=device) * 2 - 1 for _ in range(2)]
    ts = [(torch.rand(b, 2, s, s, device=device) - 0.5) * 0.6 for _ in range(2)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=amp):
            out = model(xs[i % 2])
            loss = F.l1_loss(out, ts[i % 2])  # the worker's colorize-unet loss (L1)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    return torch, device, amp, stubbed, step


def child_train(p):
    """colorize-unet training steps in plain PyTorch on synthetic tensors on the device."""
    torch, device, amp, stubbed, step = train_loop(p)
    b = p["batch"]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, losses = [], []
    for i in range(p["steps"]):
        t0 = time.perf_counter()
        losses.append(step(i).item())  # one host sync per step, as the worker's step-end vote
        sync(torch, device)
        times.append(time.perf_counter() - t0)
    timed = times[p["warmup"]:] or times
    return {"samples_per_s": statistics.median(b / t for t in timed),
            "step_ms_median": statistics.median(timed) * 1e3,
            "steps": len(times), "warmup": p["warmup"],
            "peak_memory_bytes": (torch.cuda.max_memory_allocated(device)
                                  if device.type == "cuda" else None),
            "loss_first": losses[0], "loss_last": losses[-1], "amp": amp,
            "numpy_pil_stubbed": stubbed, "threads": torch.get_num_threads()}


def child_train_trace(p):
    """child_train's loop under torch.profiler: a Chrome trace of `trace_steps` steps
    after the warm-up, each step a "pytorch::step" scope (as the worker's tessera::step)."""
    from torch.profiler import ProfilerActivity, profile, record_function
    torch, device, amp, _, step = train_loop(p)

    def synced(i):
        step(i).item()
        sync(torch, device)

    for i in range(p["warmup"]):
        synced(i)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda"
                                           else [])
    with profile(activities=activities) as prof:
        for i in range(p["trace_steps"]):
            with record_function("pytorch::step"):
                synced(i)
    prof.export_chrome_trace(p["out"])
    return {"trace": p["out"], "amp": amp}


def child_gen_png(p):
    """Gray 8-bit scans (smooth shapes and grain), written as filter-0 PNGs."""
    import torch
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(p.get("seed", 7))
    os.makedirs(p["out"], exist_ok=True)
    s = p["size"]
    for i in range(p["count"]):
        low = torch.rand(1, 1, 6, 6, generator=g)
        img = F.interpolate(low, size=(s, s), mode="bicubic", align_corners=False)[0, 0]
        yy = torch.linspace(0, 1, s).unsqueeze(1)
        img = 0.7 * img + 0.3 * yy + 0.04 * torch.randn(s, s, generator=g)
        pixels = (img.clamp(0, 1) * 255).round().to(torch.uint8)
        with open(os.path.join(p["out"], f"scan_{i:04d}.png"), "wb") as f:
            f.write(png_encode(pixels, level=1))
    return {"images": p["count"], "size": s}


def child_infer(p):
    """Folder inference as a lab would write it, on the device: decode, forward
    (eval, inference_mode, batches of --batch same-size images), encode, save."""
    t_start = time.time()
    import torch
    import torch.nn.functional as F
    pt, stubbed = import_pytorch_infer()
    device = torch.device(p["device"])
    torch.set_num_threads(p.get("threads") or torch.get_num_threads())
    step_dir, model_name, state = pt.load_state(p["checkpoint"])
    model = pt.build_model(model_name, state).to(device)
    t_loaded = time.time()
    items = sorted(n for n in os.listdir(p["data"]) if n.lower().endswith(".png"))
    os.makedirs(p["output"], exist_ok=True)
    keep = set(items[:p.get("compare", 0)])
    kept = {}

    def run(batch):
        rgb = torch.stack([a for _, a in batch]).to(device)  # [N,H,W,3] uint8
        h, w = rgb.shape[1], rgb.shape[2]
        x = pt.rgb_to_l_norm(rgb)
        ph, pw = -h % pt.ALIGN, -w % pt.ALIGN
        xp = F.pad(x, (0, pw, 0, ph), mode="replicate") if ph or pw else x
        y = model(xp)[:, :, :h, :w]
        pixels = pt.to_uint8(pt.lab_norm_to_rgb(x, y)).cpu()
        for i, (item, _) in enumerate(batch):
            path = os.path.join(p["output"], item)
            with open(path, "wb") as f:
                f.write(png_encode(pixels[i]))
            if item in keep:
                kept[item] = pixels[i]

    with torch.inference_mode():
        batch = []
        for item in items:
            with open(os.path.join(p["data"], item), "rb") as f:
                a = png_decode(f.read())
            if a.shape[2] == 1:
                a = a.expand(-1, -1, 3)  # gray: R = G = B, as the worker reads it
            a = a[:, :, :3]
            if batch and (len(batch) == p["batch"] or batch[0][1].shape != a.shape):
                run(batch)
                batch = []
            batch.append((item, a))
        if batch:
            run(batch)
        sync(torch, device)
    t_last = time.time()
    out = {"images": len(items), "t_start": t_start, "t_loaded": t_loaded, "t_last": t_last,
           "step_dir": step_dir, "batch": p["batch"], "numpy_pil_stubbed": stubbed}
    if p.get("compare_with") and kept:
        max_diff, over, n = 0, 0, 0
        for item, ours in sorted(kept.items()):
            path = os.path.join(p["compare_with"], item)
            if not os.path.exists(path):
                out["compare_error"] = f"worker output {item} missing"
                break
            with open(path, "rb") as f:
                theirs = png_decode(f.read())[:, :, :3]
            if theirs.shape != ours.shape:
                out["compare_error"] = (f"{item}: worker {tuple(theirs.shape)} vs "
                                        f"PyTorch {tuple(ours.shape)}")
                break
            d = (theirs.to(torch.int16) - ours.to(torch.int16)).abs()
            max_diff = max(max_diff, int(d.max()))
            over += int((d > 1).sum())
            n += 1
        out["compare"] = {"images": n, "max_abs_diff": max_diff, "values_over_1": over}
    return out


CHILDREN = {"env": child_env, "bench": child_bench, "train": child_train,
            "train_trace": child_train_trace, "gen_png": child_gen_png, "infer": child_infer}


def child_main(name, params):
    result = CHILDREN[name](json.loads(params))
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


# ----------------------------------------------------------------------------
# The parent: stdlib only.

class Failed(Exception):
    def __init__(self, reason, stderr_tail=""):
        super().__init__(reason)
        self.reason = reason
        self.stderr_tail = stderr_tail


class Skipped(Exception):
    pass


def tail(text, n=30):
    lines = (text or "").rstrip().splitlines()
    return "\n".join(lines[-n:])


def read_tail(path, n=40):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            return tail(f.read().decode("utf-8", "replace"), n)
    except OSError as e:
        return f"({path}: {e})"


# The ports the check's rendezvous use: above Linux's ephemeral range (32768-60999),
# where no socket's automatic port lands, and above the ranges the integration tests
# give their clusters (tests/integration/harness.cc: 10000-31999), so that a test
# running beside the check cannot take a port between its pick and its use.
PORT_RANGE = (61000, 65000)


def free_port():
    """A port of PORT_RANGE that nothing holds now, picked at random."""
    for _ in range(500):
        port = random.randrange(*PORT_RANGE)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # the range is taken: any port the system gives
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LIVE = []  # every child started, so an interrupted check can stop them all


def spawn(cmd, **kwargs):
    """Popen in a session of its own (kill_group stops it with its children)."""
    p = subprocess.Popen([str(c) for c in cmd], start_new_session=True, **kwargs)
    LIVE.append(p)
    return p


def stop_all():
    for p in LIVE:
        kill_group(p, 3)


class Interrupted(BaseException):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"signal {signum}")


def kill_group(p, grace=5.0):
    """SIGTERM to the child's process group (it has its own session), SIGKILL after grace."""
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def summarize_step_trace(path, step_scope):
    """Per traced step of a Chrome trace (Kineto's, from tessera-worker --trace-out or
    torch.profiler): the step scope's wall ms, the GPU kernels and copies that ran
    within it, their summed ms, the GPU's busy fraction (the union of kernel intervals
    over the step), and each other user scope's host ms; medians over the steps."""
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e and "ts" in e]
    steps = sorted((e for e in spans if e.get("cat") == "user_annotation"
                    and e.get("name") == step_scope), key=lambda e: e["ts"])
    if not steps:
        raise Failed(f"{os.path.basename(path)}: no '{step_scope}' scope in the trace")
    kernels = [(e["ts"], e["ts"] + e["dur"]) for e in spans if e.get("cat") == "kernel"]
    copies = [(e["ts"], e["ts"] + e["dur"]) for e in spans
              if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    phases = [e for e in spans if e.get("cat") == "user_annotation"
              and e.get("name") != step_scope]
    per = {"wall_ms": [], "kernels": [], "kernel_ms": [], "gpu_busy": [], "copies": []}
    phase_ms = {}
    for st in steps:
        a, b = st["ts"], st["ts"] + st["dur"]
        inside = sorted((max(x, a), min(y, b)) for x, y in kernels if x < b and y > a)
        busy, end = 0.0, a
        for x, y in inside:
            if y > end:
                busy += y - max(x, end)
                end = y
        per["wall_ms"].append((b - a) / 1e3)
        per["kernels"].append(len(inside))
        per["kernel_ms"].append(sum(y - x for x, y in inside) / 1e3)
        per["gpu_busy"].append(busy / (b - a) if b > a else 0.0)
        per["copies"].append(sum(1 for x, y in copies if x < b and y > a))
        for e in phases:
            if a <= e["ts"] < b:
                phase_ms.setdefault(e["name"], []).append(e["dur"] / 1e3)
    out = {k: statistics.median(v) for k, v in per.items()}
    out["steps"] = len(steps)
    out["phases_ms"] = {k: sum(v) / len(steps) for k, v in phase_ms.items()}
    return out


def fmt(v, digits=2):
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != 0 and abs(v) < 10 ** -digits:
            return f"{v:.2e}"
        return f"{v:,.{digits}f}"
    return str(v)


def gib(b):
    return "-" if b is None else f"{b / (1 << 30):.2f} GiB"


def mib(b):
    return "-" if b is None else f"{b / (1 << 20):,.0f} MiB"


class Section:
    def __init__(self, number, title):
        self.number, self.title = number, title
        self.status, self.reason, self.stderr_tail = "ok", "", ""
        self.seconds = 0.0
        self.notes, self.tables, self.raw, self.targets = [], [], {}, []
        self.headline = ""  # one line for the summary

    def table(self, headers, rows, caption=""):
        self.tables.append({"caption": caption, "headers": headers, "rows": rows})

    def target(self, what, value, goal, met):
        self.targets.append({"what": what, "value": value, "goal": goal, "met": bool(met)})
        return "yes" if met else "**no**"

    def to_json(self):
        return {"number": self.number, "title": self.title, "status": self.status,
                "reason": self.reason, "seconds": round(self.seconds, 1), "notes": self.notes,
                "tables": self.tables, "targets": self.targets, "raw": self.raw,
                "stderr_tail": self.stderr_tail}


class Check:
    def __init__(self, args):
        self.args = args
        self.training_raw = {}  # section 3's runs, for section 8
        self.device = args.device
        self.gpu = args.device.startswith("cuda")
        self.cfg = sizes_for(self.gpu, args.quick)
        self.started = time.monotonic()
        self.deadline = self.started + args.deadline_s
        self.tmp = tempfile.mkdtemp(prefix="tessera-gpu-check-")
        self.bins = {}
        for name, rel in BUILD_PATHS.items():
            self.bins[name] = (os.path.join(args.bin_tree, rel) if args.bin_tree
                               else os.path.join(args.bin, name))
        # CPU mode: one intra-op thread on every side; OpenMP teams on a shared,
        # busy machine (a build beside the check) can be 100x slower than one thread.
        self.threads = None if self.gpu else 1
        self.torch_ok = None
        self.env_info = {}
        self.amp_run = None  # section 3's AMP worker run, for section 4
        self.train_images_dir = None

    # -- processes --

    def remaining(self):
        return self.deadline - time.monotonic()

    def cap(self, timeout):
        left = self.remaining()
        if left < 5:
            raise Failed("the check's time budget ran out (--deadline-s)")
        return min(timeout, left)

    def bin_env(self, extra=None):
        """Environment of our binaries: no launcher variables, TESSERA_* only as given,
        the library path of the carried shared libraries (--ld-library-path)."""
        env = {k: v for k, v in os.environ.items()
               if k not in DIST_VARS and not k.startswith("TESSERA_")}
        if self.args.ld_library_path:
            old = os.environ.get("LD_LIBRARY_PATH", "")
            env["LD_LIBRARY_PATH"] = self.args.ld_library_path + (":" + old if old else "")
        if self.threads:
            env["OMP_NUM_THREADS"] = str(self.threads)
        for k, v in (extra or {}).items():
            env[k] = str(v)
        return env

    def py_env(self):
        env = {k: v for k, v in os.environ.items()
               if k not in DIST_VARS and not k.startswith("TESSERA_")}
        if self.threads:
            env["OMP_NUM_THREADS"] = str(self.threads)
        return env

    def run(self, cmd, env, timeout, what, check=True, cwd=None, on_start=None):
        """Runs cmd in its own session; Failed on timeout or (check) non-zero exit."""
        timeout = self.cap(timeout)
        t0 = time.monotonic()
        try:
            p = spawn(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True, errors="replace")
        except OSError as e:
            raise Failed(f"{what}: cannot start {cmd[0]}: {e}")
        if on_start:
            on_start(p.pid)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(p)
            try:
                out, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # a grandchild elsewhere holds the pipes
                out, err = "", ""
            raise Failed(f"{what} timed out after {timeout:.0f} s", tail(err) or tail(out))
        seconds = time.monotonic() - t0
        if check and p.returncode != 0:
            raise Failed(f"{what} exited with status {p.returncode}", tail(err) or tail(out))
        return types.SimpleNamespace(rc=p.returncode, out=out, err=err, seconds=seconds,
                                     pid=p.pid)

    def child(self, name, params, timeout, what):
        r = self.run([sys.executable, os.path.abspath(__file__), "--child", name, "--params",
                      json.dumps(params)], self.py_env(), timeout, what)
        for line in reversed(r.out.splitlines()):
            if line.startswith(RESULT_MARK):
                res = json.loads(line[len(RESULT_MARK):])
                res["_wall_s"] = r.seconds
                return res
        raise Failed(f"{what}: no result line", tail(r.err) or tail(r.out))

    def need_gpu(self):
        if not self.gpu:
            raise Skipped("no GPU (CPU mode)")

    def need_binary(self, name):
        path = self.bins[name]
        if not os.access(path, os.X_OK):
            raise Failed(f"{name} not found at {path}")
        return path

    def train_images(self):
        """One folder of the worker's generated sample images for the training runs."""
        if self.train_images_dir:
            return self.train_images_dir
        t = self.cfg["train"]
        out = os.path.join(self.tmp, "train-images")
        self.run([self.need_binary("tessera-worker"), "gen-images", "--out", out, "--count",
                  t["images"], "--size", max(t["size"], 64)], self.bin_env(), 120,
                 "tessera-worker gen-images")
        self.train_images_dir = out
        return out

    # -- sections --

    def sec_environment(self, sec):
        info = {"host": platform.node(), "os": platform.platform(),
                "glibc": os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else "",
                "cpus": os.cpu_count(), "python_exe": sys.executable}
        sec.raw["host"] = info
        rows = [["host", info["host"]], ["OS", info["os"]], ["glibc", info["glibc"]],
                ["CPU cores", info["cpus"]], ["Python", sys.version.split()[0]]]
        try:
            env = self.child("env", {"device": self.device}, 120, "torch environment")
        except Failed:
            self.torch_ok = False
            raise
        self.torch_ok = True
        self.env_info = env
        sec.raw["torch"] = env
        rows += [["torch", env["torch"]], ["torch CUDA", env["torch_cuda"] or "-"],
                 ["cuDNN", env["cudnn"] or "-"], ["NCCL (torch)", env["nccl"] or "-"],
                 ["CUDA available", env["cuda_available"]], ["GPUs visible", env["device_count"]]]
        gpu = env.get("gpu")
        if gpu:
            rows += [["GPU", gpu["name"]], ["GPU memory", gib(gpu["total_memory"])],
                     ["GPU free memory", gib(gpu["free_memory"])],
                     ["compute capability", gpu["compute_capability"]],
                     ["SMs", gpu["multi_processor_count"]]]
        for name, path in self.bins.items():
            rows.append([f"binary {name}", f"`{path}`" + ("" if os.path.exists(path)
                                                         else " (missing)")])
        sec.table(["what", "value"], rows)
        if shutil.which("nvidia-smi"):
            r = self.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                          "--format=csv"], None, 30, "nvidia-smi", check=False)
            sec.raw["nvidia_smi"] = r.out
            sec.notes.append("nvidia-smi --query-gpu=name,memory.total,driver_version:\n\n```\n"
                             + (r.out.strip() or tail(r.err)) + "\n```")
            if self.gpu and r.rc != 0:
                raise Failed(f"nvidia-smi exited with {r.rc}", tail(r.err))
        else:
            sec.notes.append("nvidia-smi: skipped (not installed)")
        sec.headline = (f"torch {env['torch']}, "
                        + (f"{gpu['name']} ({gib(gpu['total_memory'])})" if gpu else "no GPU"))
        if self.gpu and not env["cuda_available"]:
            raise Failed("torch sees no CUDA device")
        if self.gpu and not gpu:
            raise Failed(f"torch has no device {self.device}")

    def sec_inventory(self, sec):
        agent = self.need_binary("tessera-agent")
        state = os.path.join(self.tmp, "inventory-state")
        r = self.run([agent, "--print-inventory", "--state-dir", state, "--rebenchmark",
                      "--log-level", "info"], self.bin_env(), 240,
                     "tessera-agent --print-inventory", check=False)
        sec.raw["agent_stderr_tail"] = tail(r.err, 15)
        agent_err = None
        inv = None
        if r.rc != 0:
            agent_err = Failed(f"tessera-agent --print-inventory exited with status {r.rc}"
                               " (is the flag in this build?)", tail(r.err) or tail(r.out))
        else:
            try:
                inv = json.loads(r.out)
            except ValueError:
                agent_err = Failed("tessera-agent --print-inventory printed no JSON",
                                   tail(r.out) + "\n" + tail(r.err))
        torch_fig = self.child("bench", {"device": self.device}, 120, "PyTorch benchmark")
        sec.raw["torch"] = torch_fig
        if inv is not None:
            sec.raw["inventory"] = inv
            rows = []
            for d in inv.get("devices", []):
                rows.append([d.get("index"), d.get("name"), d.get("type"),
                             gib(d.get("memory_bytes")), fmt(d.get("measured_tflops")),
                             fmt(d.get("measured_tflops_half")),
                             fmt(d.get("mem_bandwidth_gbps"), 1),
                             d.get("compute_capability") or "-", d.get("sm_count") or "-",
                             d.get("measure_error") or ""])
            sec.table(["index", "name", "type", "memory", "TFLOPS fp32", "TFLOPS half",
                       "copy GB/s", "cc", "SMs", "measure error"], rows,
                      "`tessera-agent --print-inventory` (NVML discovery, benchmark child)")
            if inv.get("links"):
                sec.notes.append("links: `" + json.dumps(inv["links"]) + "`")
        want = "cuda" if self.gpu else "cpu"
        dev = None
        if inv is not None:
            dev = next((d for d in inv.get("devices", [])
                        if d.get("type") == want and not d.get("emulated")), None)
            if dev:
                sec.headline = f"agent device {dev.get('index')}: {dev.get('name')}"
            if dev is None:
                agent_err = Failed(f"the agent reports no {want} device"
                                   + (" (NVML discovery failed?)" if self.gpu else ""),
                                   tail(r.err))
        rows = []
        pairs = [("fp32 matmul TFLOPS", "measured_tflops", "tflops"),
                 ("half matmul TFLOPS (max fp16, bf16)", "measured_tflops_half", "tflops_half"),
                 ("copy bandwidth GB/s", "mem_bandwidth_gbps", "mem_bandwidth_gbps")]
        for what, akey, tkey in pairs:
            a = dev.get(akey) if dev else None
            t = torch_fig.get(tkey)
            ratio = a / t if a and t else None
            met = ratio is not None and 0.9 <= ratio <= 1.1
            rows.append([what, fmt(a), fmt(t), fmt(ratio), "within 10 %",
                         sec.target(what + " agent/torch", ratio, "0.9-1.1", met)
                         if a is not None else "-"])
        sec.table(["figure", "agent", "torch", "agent/torch", "target", "met"], rows,
                  f"agent vs PyTorch on {self.device}: n = {torch_fig['n']} torch.mm(out=), "
                  f"warm-up 2, sync every {torch_fig['per_sync']}, 250 ms per dtype; copy "
                  f"{mib(torch_fig['copy_bytes'])} dst.copy_(src), 2 x bytes / s")
        sec.notes.append(f"PyTorch fp16 {fmt(torch_fig['tflops_fp16'])} TFLOPS, bf16 "
                         f"{fmt(torch_fig['tflops_bf16'])} TFLOPS, {torch_fig['threads']} "
                         "intra-op threads")
        gpu = self.env_info.get("gpu")
        if dev and gpu:
            checks = [["memory", gib(dev.get("memory_bytes")), gib(gpu["total_memory"])],
                      ["compute capability", dev.get("compute_capability"),
                       gpu["compute_capability"]],
                      ["SMs", dev.get("sm_count"), gpu["multi_processor_count"]]]
            sec.table(["property", "agent (NVML)", "torch"], checks, "device properties")
            if str(dev.get("compute_capability")) != gpu["compute_capability"] or \
                    int(dev.get("sm_count") or 0) != gpu["multi_processor_count"]:
                sec.notes.append("**NVML and torch disagree on the device's properties**")
        if dev and dev.get("measure_error"):
            raise Failed(f"the agent's benchmark failed: {dev['measure_error']}", tail(r.err))
        if agent_err:
            raise agent_err

    def worker_train(self, amp, sample_smi=False, checkpoint_dir=None, extra=None, tag="",
                     steps=None):
        t = self.cfg["train"]
        worker = self.need_binary("tessera-worker")
        images = self.train_images()
        progress = os.path.join(self.tmp, f"progress-{tag or ('amp' if amp else 'fp32')}.jsonl")
        if os.path.exists(progress):
            os.remove(progress)
        env = {"TESSERA_DEVICE": self.device, "TESSERA_PROGRESS_FILE": progress}
        if checkpoint_dir:
            env["TESSERA_CHECKPOINT_DIR"] = checkpoint_dir
        cmd = [worker, "train", "--model", "colorize-unet", "--data", images,
               "--steps", steps or t["steps"], "--batch", t["batch"], "--image-size", t["size"],
               "--width", t["width"], "--lr", "0.01", "--momentum", "0.9", "--optimizer", "sgd"]
        if not amp:
            cmd.append("--no-amp")
        if self.threads:
            cmd += ["--threads", self.threads]
        cmd += extra or []
        sampler = SmiSampler() if sample_smi and shutil.which("nvidia-smi") else None
        if sampler:
            sampler.start()
        try:
            r = self.run(cmd, self.bin_env(env), 180, f"tessera-worker train ({tag or amp})",
                         on_start=sampler.set_pid if sampler else None)
        finally:
            if sampler:
                sampler.stop()
        lines = []
        with open(progress) as f:
            for line in f:
                line = line.strip()
                if line:
                    lines.append(json.loads(line))
        if not lines:
            raise Failed("the worker wrote no progress lines", tail(r.err))
        timed = [ln for ln in lines if ln.get("step", 0) > t["warmup"]] or lines
        peaks = [ln["peak_memory_bytes"] for ln in lines if "peak_memory_bytes" in ln]
        res = {"samples_per_s": statistics.median(ln["samples_per_s"] for ln in timed),
               "lines": len(lines), "timed_lines": len(timed),
               "peak_memory_bytes": max(peaks) if peaks else None,
               "loss_first": lines[0].get("loss"), "loss_last": lines[-1].get("loss"),
               "wall_s": r.seconds, "pid": r.pid, "stderr_tail": tail(r.err, 8)}
        if sampler:
            res["smi"] = sampler.result(r.pid)
        return res

    def torch_train_params(self, amp, **more):
        """The PyTorch children's training problem: the worker's (sizes, SGD lr 0.01
        momentum 0.9, threads), and `more`."""
        t = self.cfg["train"]
        return {"device": self.device, "batch": t["batch"], "size": t["size"],
                "width": t["width"], "warmup": t["warmup"], "amp": amp, "lr": 0.01,
                "momentum": 0.9, "threads": self.threads, **more}

    def sec_training(self, sec):
        t = self.cfg["train"]
        runs = [("AMP (fp16 autocast)", True), ("fp32", False)] if self.gpu else [("fp32", False)]
        rows, raw = [], {}
        for label, amp in runs:
            w = self.worker_train(amp, sample_smi=amp and self.gpu)
            sec.raw[label] = {"worker": w}
            if amp:
                self.amp_run = w
            p = self.child("train", self.torch_train_params(amp, steps=t["steps"]), 180,
                           f"PyTorch training ({label})")
            if amp:
                self.amp_run["torch_peak_memory_bytes"] = p.get("peak_memory_bytes")
            raw[label] = {"worker": w, "torch": p}
            ratio = w["samples_per_s"] / p["samples_per_s"] if p["samples_per_s"] else None
            rows.append([label, fmt(w["samples_per_s"], 1), fmt(p["samples_per_s"], 1),
                         fmt(ratio), ">= 1.0x",
                         sec.target(f"training samples/s worker/torch, {label}", ratio, ">= 1.0",
                                    ratio is not None and ratio >= 1.0),
                         f"{fmt(w['loss_first'], 3)} -> {fmt(w['loss_last'], 3)}",
                         f"{fmt(p['loss_first'], 3)} -> {fmt(p['loss_last'], 3)}"])
        if not self.gpu:
            rows.append(["AMP (fp16 autocast)", "skipped: no GPU", "", "", "", "", "", ""])
        sec.raw.update(raw)
        self.training_raw = raw
        sec.table(["precision", "worker samples/s", "PyTorch samples/s", "worker/PyTorch",
                   "target", "met", "worker loss", "PyTorch loss"], rows,
                  f"colorize-unet (width {t['width']}, depth 3), batch {t['batch']}, "
                  f"{t['size']} px, SGD lr 0.01 momentum 0.9, {t['steps']} steps, median "
                  f"samples/s of the steps after {t['warmup']} warm-up steps")
        sec.notes.append(
            "The worker reads the generated sample images (`tessera-worker gen-images`, PNG "
            "decode, crop and Lab conversion on its prefetch thread); PyTorch trains on "
            "synthetic tensors already on the device. Both take one host sync per step (the "
            "worker's step-end vote; `loss.item()` in PyTorch). Loss: L1 between predicted "
            "and target ab, the worker's colorize-unet loss (worker/model/unet.h). AMP: "
            "`torch.autocast('cuda', torch.float16)` + `GradScaler` in PyTorch, the worker's "
            "CUDA autocast + dynamic loss scaling."
            + (f" CPU: {self.threads} intra-op threads on both sides." if self.threads else ""))
        self.loader_table(sec)
        stubbed = next(iter(raw.values()))["torch"].get("numpy_pil_stubbed")
        if stubbed:
            sec.notes.append(f"({', '.join(stubbed)} not installed: pytorch_infer.py was "
                             "imported with stand-ins; its model port needs torch only.)")

    def loader_table(self, sec):
        """data_loader_bench on the training images: what the worker's loading allows."""
        t = self.cfg["train"]
        try:
            bench = self.need_binary("data_loader_bench")
        except Failed as e:
            sec.notes.append(f"(no loader figures: {e.reason})")
            return
        cpus = os.cpu_count() or 1
        threads = sorted({1, 2, 4, max(1, min(16, cpus - 1))})
        r = self.run([bench, "--dir", self.train_images(), "--size", t["size"], "--batch",
                      t["batch"], "--batches", 4, "--threads", ",".join(map(str, threads))],
                     self.bin_env(), 120, "data_loader_bench", check=False)
        sec.raw["data_loader_bench"] = r.out + tail(r.err, 8)
        rows = [[c.strip() for c in line.strip().strip("|").split("|")]
                for line in r.out.splitlines() if line.startswith("| ") and line[2:3].isdigit()]
        if r.rc != 0 or not rows:
            sec.notes.append(f"(data_loader_bench exited with status {r.rc}: {tail(r.err, 3)})")
            return
        sec.table(["loader threads", "ms per batch", "images/s", "vs 1 thread"], rows,
                  f"the worker's loading of one batch ({t['batch']} images, {t['size']} px: "
                  f"PNG decode, crop, Lab), `data_loader_bench`; a CUDA rank uses "
                  f"{max(1, min(16, cpus - 1))} loader threads on this {cpus}-thread host "
                  f"(`--loader-threads`)")

    def sec_profile(self, sec):
        """`tessera-worker profile --device` against the step the worker measured."""
        t = self.cfg["train"]
        worker = self.need_binary("tessera-worker")
        batch, small = t["batch"], max(1, t["batch"] // 8)
        cmd = [worker, "profile", "--model", "colorize-unet", "--batch", batch, "--image-size",
               t["size"], "--width", t["width"], "--repeats", 3, "--fixed-batch", small,
               "--optimizer", "sgd", "--device", self.device]
        r = self.run(cmd, self.bin_env(), 150, f"tessera-worker profile --device {self.device}")
        try:
            prof = json.loads(r.out[r.out.index("{"):])
        except ValueError as e:
            raise Failed(f"the profile is not JSON: {e}", tail(r.out))
        with open(os.path.join(self.args.out, "profile-colorize-unet.json"), "w") as f:
            json.dump(prof, f, indent=1)
        layers = prof["layers"]
        fwd = sum(x["fwd_ms"] for x in layers)
        bwd = sum(x["bwd_ms"] for x in layers)
        opt = sum(x.get("opt_ms", 0) for x in layers)
        step = fwd + bwd + opt
        sec.raw["profile"] = {k: v for k, v in prof.items() if k != "layers"}
        sec.raw["profile_wall_s"] = r.seconds
        rows = [[x["name"], fmt(x["fwd_ms"], 3), fmt(x.get("fwd_fixed_ms"), 3), fmt(x["bwd_ms"], 3),
                 fmt(x.get("bwd_fixed_ms"), 3), fmt(x.get("opt_ms"), 3),
                 mib(x["activation_bytes_per_sample"] * batch),
                 mib(x.get("backward_transient_bytes_per_sample", 0) * batch)] for x in layers]
        sec.table(["layer", "fwd ms", "fwd per-call ms", "bwd ms", "bwd per-call ms",
                   "opt ms", "kept for backward", "backward working"], rows,
                  f"`tessera-worker profile --model colorize-unet --device {self.device}`, batch "
                  f"{batch} at {t['size']} px (per-call part from batch {small} and between), "
                  f"clock `{prof.get('clock')}`, {r.seconds:.0f} s")
        measured = []
        fp32 = (getattr(self, "training_raw", {}) or {}).get("fp32", {})
        for who in ("worker", "torch"):
            sps = (fp32.get(who) or {}).get("samples_per_s")
            if sps:
                measured.append((who, batch / sps * 1e3))
        cmp_rows = [["profile: forward + backward + optimizer", fmt(step, 1), "", ""]]
        for who, ms in measured:
            ratio = step / ms if ms else None
            name = "tessera-worker" if who == "worker" else "PyTorch"
            cmp_rows.append([f"{name} fp32 step (section 3)", fmt(ms, 1), fmt(ratio),
                             "within 25 %" if who == "torch" else ""])
            if who == "torch":
                sec.target("profiled step / PyTorch fp32 step", ratio, "0.75 .. 1.25",
                           ratio is not None and 0.75 <= ratio <= 1.25)
        sec.table(["what", "ms per step", "profile / measured", "target"], cmp_rows,
                  "the profile's sum against whole measured steps of the same model and batch")
        sec.headline = f"profiled step {fmt(step, 1)} ms on {prof.get('device')}"
        sec.notes.append(
            "Each layer is timed alone between two device synchronisations (launch costs "
            "included, so the sum is above a whole step, whose kernels queue back to back); "
            "memory from the CUDA caching allocator on a GPU, the counting allocator on the "
            "CPU. The profile is written to `profile-colorize-unet.json` beside this report.")

    def sec_step_trace(self, sec):
        """Where a training step's time goes: profiler traces of the worker and of PyTorch."""
        t = self.cfg["train"]
        amp = bool(self.gpu)
        label = "AMP (fp16 autocast)" if amp else "fp32"
        traced = 5
        worker_trace = os.path.join(self.args.out, "trace-worker-step.json")
        torch_trace = os.path.join(self.args.out, "trace-pytorch-step.json")
        for path in (worker_trace, torch_trace):
            if os.path.exists(path):
                os.remove(path)
        steps = t["warmup"] + traced
        self.worker_train(amp, tag="trace", steps=steps, extra=[
            "--trace-out", worker_trace, "--trace-from", t["warmup"] + 1,
            "--trace-steps", traced])
        self.child("train_trace", self.torch_train_params(amp, trace_steps=traced, out=torch_trace),
                   180, f"PyTorch traced training ({label})")
        w = summarize_step_trace(worker_trace, "tessera::step")
        p = summarize_step_trace(torch_trace, "pytorch::step")
        sec.raw["worker"], sec.raw["torch"] = w, p
        rows = []
        for name, r in (("tessera-worker", w), ("PyTorch", p)):
            rows.append([name, fmt(r["wall_ms"], 1), fmt(r["kernels"], 0), fmt(r["copies"], 0),
                         fmt(r["kernel_ms"], 1),
                         f"{r['gpu_busy'] * 100:.0f} %" if self.gpu else "-"])
        sec.table(["who", "step ms", "GPU kernels a step", "copies a step", "kernel ms a step",
                   "GPU busy"], rows,
                  f"colorize-unet {label}, batch {t['batch']}, {t['size']} px, {traced} traced "
                  f"steps after {t['warmup']} (medians); traces `trace-worker-step.json` and "
                  f"`trace-pytorch-step.json` beside this report")
        phase_rows = [[name, fmt(ms, 2)] for name, ms in sorted(w["phases_ms"].items())]
        sec.table(["worker phase (host, between its start and end)", "ms a step"], phase_rows,
                  "the worker's user scopes within tessera::step (worker/runtime/step_trace.h)")
        if self.gpu and not w["kernels"]:
            sec.notes.append("The worker's trace holds no GPU kernels: its profiler did not "
                             "record CUDA activity (CUPTI, libcupti, not found on the binaries' "
                             "library path?); only its host side is shown.")
        if self.gpu:
            sec.headline = (f"worker {fmt(w['kernels'], 0)} kernels, GPU busy "
                            f"{w['gpu_busy'] * 100:.0f} %; PyTorch {fmt(p['kernels'], 0)}, "
                            f"{p['gpu_busy'] * 100:.0f} %")
        else:
            sec.headline = f"worker step {fmt(w['wall_ms'], 1)} ms, PyTorch {fmt(p['wall_ms'], 1)}"
        sec.notes.append(
            "Both traced by PyTorch's profiler (Kineto): the worker with `tessera-worker train "
            "--trace-out`, PyTorch with `torch.profiler.profile`. GPU busy: the union of the "
            "kernels' intervals over the step's wall time; what is left is the GPU waiting for "
            "the host (launches, synchronisations, data). The profiler adds its own host cost "
            "to both sides; compare the two, not with section 3's untraced rates.")

    def sec_memory(self, sec):
        self.need_gpu()
        run = self.amp_run
        if not run:
            raise Failed("no AMP training run to read (section 3 failed)")
        smi = run.get("smi") or {}
        worker_peak = run.get("peak_memory_bytes")
        rows = [["worker: CUDA allocator peak (progress `peak_memory_bytes`)", mib(worker_peak)],
                ["PyTorch, same model and batch: `torch.cuda.max_memory_allocated`",
                 mib(run.get("torch_peak_memory_bytes"))]]
        proc = smi.get("pid_max_mib")
        if proc is not None:
            rows.append(["nvidia-smi: worker process used memory, max", mib(proc << 20)])
            if worker_peak is not None:
                rows.append(["nvidia-smi minus allocator peak (context, cached blocks)",
                             mib((proc << 20) - worker_peak)])
        if smi.get("gpu_used_delta_mib") is not None:
            rows.append(["nvidia-smi: whole GPU used memory, max minus before the run",
                         mib(smi["gpu_used_delta_mib"] << 20)])
        sec.table(["what", "value"], rows,
                  f"AMP training run of section 3; nvidia-smi sampled every 0.2 s "
                  f"({smi.get('samples', 0)} samples)")
        sec.headline = (f"allocator peak {mib(worker_peak)}, nvidia-smi "
                        + (f"{mib(proc << 20)} (worker pid)" if proc is not None else
                           f"{mib((smi.get('gpu_used_delta_mib') or 0) << 20)} (whole GPU)"))
        sec.raw.update({"worker_peak_memory_bytes": worker_peak, "smi": smi,
                        "torch_peak_memory_bytes": run.get("torch_peak_memory_bytes")})
        if worker_peak is None:
            raise Failed("the worker's progress lines carry no peak_memory_bytes")
        if proc is None:
            pids = smi.get("pids_seen") or []
            sec.notes.append(
                f"The worker's pid ({run.get('pid')}) was not among nvidia-smi's compute apps "
                f"(pids seen: {pids or 'none'}); in a container nvidia-smi may show host pids. "
                "The whole-GPU figure stands in for it.")
            if smi.get("gpu_used_delta_mib") is None:
                raise Failed("nvidia-smi gave neither the worker's memory nor the GPU's")
        sec.notes.append("nvidia-smi counts the CUDA context, cuDNN / cuBLAS workspaces and "
                         "the caching allocator's reserved blocks, so it is above the "
                         "allocator's peak of live tensors.")

    def collectives_run(self, world, device, size_mb, iters):
        worker = self.need_binary("tessera-worker")
        port = free_port()
        procs, files = [], []
        timeout = self.cap(120)
        for rank in range(world):
            env = self.bin_env({"RANK": rank, "WORLD_SIZE": world, "LOCAL_RANK": rank,
                                "LOCAL_WORLD_SIZE": world, "MASTER_ADDR": "127.0.0.1",
                                "MASTER_PORT": port, "TESSERA_DEVICE": device,
                                "TESSERA_COLLECTIVE_TIMEOUT_S": 60})
            base = os.path.join(self.tmp, f"collectives-{device.replace(':', '')}-{world}-{rank}")
            files.append((base + ".out", base + ".err"))
            with open(files[-1][0], "w") as out, open(files[-1][1], "w") as err:
                procs.append(spawn([worker, "collectives-check", "--size-mb", size_mb,
                                    "--iters", iters], env=env, stdout=out, stderr=err))
        end = time.monotonic() + timeout
        try:
            # A rank that fails ends the run: its peers would wait for it until the timeout.
            while time.monotonic() < end:
                codes = [p.poll() for p in procs]
                if all(c is not None for c in codes) or any(c not in (None, 0) for c in codes):
                    break
                time.sleep(0.1)
            timed_out = any(p.poll() is None for p in procs) and time.monotonic() >= end
        finally:
            for p in procs:
                kill_group(p, 2)

        def read(path):
            with open(path, errors="replace") as f:
                return f.read()

        if timed_out:
            raise Failed(f"collectives-check ({device}, world {world}) timed out after "
                         f"{timeout:.0f} s", "\n".join(tail(read(e), 10) for _, e in files))
        reports = []
        for i, p in enumerate(procs):
            out, err = read(files[i][0]), read(files[i][1])
            if p.returncode != 0:
                raise Failed(f"collectives-check rank {i} ({device}, world {world}) exited with "
                             f"status {p.returncode} (is the subcommand in this build?)",
                             tail(err) or tail(out))
            line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("{")), None)
            if line is None:
                raise Failed(f"collectives-check rank {i} printed no JSON", tail(out + err))
            reports.append(json.loads(line))
        return reports

    def sec_collectives(self, sec):
        c = self.cfg["collectives"]
        runs = []
        if self.gpu:
            runs.append((1, self.device, c["size_mb"], c["iters"], "nccl"))
            runs.append((2, "cpu", c["cpu_size_mb"], c["cpu_iters"], "gloo"))
        else:
            runs.append((1, "cpu", c["size_mb"], c["iters"], "gloo"))
            runs.append((2, "cpu", c["size_mb"], c["iters"], "gloo"))
        rows, bad = [], []
        for world, device, size_mb, iters, backend in runs:
            reports = self.collectives_run(world, device, size_mb, iters)
            sec.raw[f"{device} world {world}"] = reports
            for rep in reports:
                ok = all(rep.get(k) for k in ("allreduce_ok", "broadcast_ok", "barrier_ok"))
                if not ok or rep.get("backend") != backend or rep.get("world_size") != world:
                    bad.append(f"{device} world {world} rank {rep.get('rank')}: {json.dumps(rep)}")
                rows.append([device, world, rep.get("rank"), rep.get("backend"),
                             rep.get("device", "-"), size_mb, rep.get("allreduce_ok"),
                             rep.get("broadcast_ok"), rep.get("barrier_ok"),
                             fmt(rep.get("allreduce_ms"), 3), fmt(rep.get("allreduce_busbw_gbps"))])
        sec.table(["TESSERA_DEVICE", "world", "rank", "backend", "device", "MB", "all-reduce",
                   "broadcast", "barrier", "all-reduce ms (median)", "bus GB/s"], rows,
                  "`tessera-worker collectives-check` under the torchrun environment "
                  "(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)")
        sec.headline = "; ".join(
            f"{reps[0].get('backend')} world {len(reps)}: all-reduce "
            f"{fmt(reps[0].get('allreduce_ms'), 2)} ms"
            for reps in sec.raw.values())
        if bad:
            raise Failed("collectives wrong or on the wrong backend: " + "; ".join(bad))

    def sec_inference(self, sec):
        c = self.cfg["infer"]
        t = self.cfg["train"]
        worker = self.need_binary("tessera-worker")
        # 1. A small checkpoint of the worker's own.
        ckpt = os.path.join(self.tmp, "infer-checkpoint")
        images = self.train_images()
        env = self.bin_env({"TESSERA_DEVICE": self.device, "TESSERA_CHECKPOINT_DIR": ckpt})
        cmd = [worker, "train", "--model", "colorize-unet", "--data", images, "--steps", 4,
               "--batch", 4, "--image-size", min(64, t["size"]), "--width", c["width"],
               "--lr", "0.01", "--checkpoint-every-steps", 2]
        if self.threads:
            cmd += ["--threads", self.threads]
        self.run(cmd, env, 120, "tessera-worker train (checkpoint for inference)")
        # 2. Gray scans, one size.
        data = os.path.join(self.tmp, "infer-in")
        self.child("gen_png", {"out": data, "count": c["images"], "size": c["size"]}, 120,
                   "writing the input images")
        n = c["images"]
        threads = self.threads or 1
        # 3. The worker.
        out_w = os.path.join(self.tmp, "infer-worker")
        cmd = [worker, "infer", "--local", "--model", "colorize-unet", "--data", data,
               "--output", out_w, "--checkpoint", ckpt, "--max-tile-px", c["tile"],
               "--threads", threads] + c["worker_args"]
        w = self.timed_worker_infer(cmd, self.bin_env({"TESSERA_DEVICE": self.device}), out_w, n)
        sec.raw["worker"] = w
        # For reference: the worker on whole images (what tiling costs).
        out_w2 = os.path.join(self.tmp, "infer-worker-whole")
        i = cmd.index("--max-tile-px")
        w2 = self.timed_worker_infer(cmd[:i] + cmd[i + 2:], self.bin_env(
            {"TESSERA_DEVICE": self.device}), out_w2, n, output_arg=out_w)
        sec.raw["worker_whole_images"] = w2
        shutil.rmtree(out_w2, ignore_errors=True)
        # 4. PyTorch, whole images, batch 1 and a larger batch.
        pts = []
        for i, b in enumerate(c["pt_batches"]):
            out_p = os.path.join(self.tmp, f"infer-torch-{b}")
            p = self.child("infer", {"checkpoint": ckpt, "data": data, "output": out_p,
                                     "device": self.device, "batch": b,
                                     "threads": self.threads,
                                     "compare": c["compare"] if i == 0 else 0,
                                     "compare_with": out_w}, 240, f"PyTorch inference (batch {b})")
            if p["images"] != n:
                raise Failed(f"PyTorch inference saw {p['images']} images, not {n}")
            p["whole"] = n / p["_wall_s"]
            p["loaded"] = n / max(1e-9, p["t_last"] - p["t_loaded"])
            pts.append(p)
            shutil.rmtree(out_p, ignore_errors=True)
        sec.raw["torch"] = pts
        best = max(pts, key=lambda p: p["loaded"])
        rows = [["tessera-worker infer --local (tiled)", fmt(w["loaded"], 1), fmt(w["whole"], 1),
                 "", ""],
                ["tessera-worker infer --local, whole images (reference)", fmt(w2["loaded"], 1),
                 fmt(w2["whole"], 1), "", ""]]
        for p in pts:
            rows.append([f"PyTorch, whole images, batch {p['batch']}", fmt(p["loaded"], 1),
                         fmt(p["whole"], 1), "", ""])
        ratio = w["loaded"] / best["loaded"]
        rows.append([f"worker / best PyTorch (batch {best['batch']})", fmt(ratio),
                     fmt(w["whole"] / max(p["whole"] for p in pts)), ">= 1.0x",
                     sec.target("inference images/s worker/torch (loaded)", ratio, ">= 1.0",
                                ratio >= 1.0)])
        rows.append([f"worker whole images / best PyTorch (batch {best['batch']})",
                     fmt(w2["loaded"] / best["loaded"]),
                     fmt(w2["whole"] / max(p["whole"] for p in pts)), "", ""])
        sec.table(["program", "images/s (loaded)", "images/s (whole)", "target", "met"], rows,
                  f"{n} gray scans of {c['size']} px, colorize-unet width {c['width']} from the "
                  f"worker's checkpoint, on {self.device}; worker tiles of at most {c['tile']} "
                  "px (`--max-tile-px`)")
        sec.notes.append(
            "*whole* = images / wall seconds of the process; *loaded* = images / (last output "
            "- \"model loaded\": the worker's `tessera-worker: colorize-unet from ...` stderr "
            "line, the PyTorch child's own clock after loading). The worker writes outputs "
            "atomically (temporary file, fsync, rename) with decode / encode threads"
            + (f" (`{' '.join(c['worker_args'])}`)" if c["worker_args"] else "")
            + "; the PyTorch side decodes and encodes PNG on its one thread (zlib level 6, "
            "filter 0; stdlib + torch, no PIL) and does not fsync.")
        cmp = pts[0].get("compare")
        if pts[0].get("compare_error"):
            raise Failed("comparing outputs: " + pts[0]["compare_error"])
        if cmp:
            sec.table(["images compared", "max abs diff (levels)", "values off by more than 1",
                       "target", "met"],
                      [[cmp["images"], cmp["max_abs_diff"], cmp["values_over_1"], "<= 1 level",
                        sec.target("inference max abs diff worker vs torch", cmp["max_abs_diff"],
                                   "<= 1", cmp["max_abs_diff"] <= 1)]],
                      "worker's tiled outputs vs PyTorch's whole-image outputs, RGB 8-bit")
            if cmp["max_abs_diff"] > 8:
                raise Failed(f"the worker's outputs differ from PyTorch's by up to "
                             f"{cmp['max_abs_diff']} levels (tiling or model port wrong?)")

    def timed_worker_infer(self, cmd, env, out_dir, n, output_arg=None):
        if output_arg:  # the same command, writing to out_dir instead
            cmd = [out_dir if c == output_arg else c for c in cmd]
        shutil.rmtree(out_dir, ignore_errors=True)
        timeout = self.cap(300)
        loaded_at, err_lines = [], []
        t0 = time.time()
        p = spawn(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                  errors="replace")

        def read_err():
            for line in p.stderr:
                if not loaded_at and line.startswith("tessera-worker: colorize-unet from "):
                    loaded_at.append(time.time())
                err_lines.append(line)

        reader = threading.Thread(target=read_err, daemon=True)
        reader.start()
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(p)
            reader.join(5)
            raise Failed(f"tessera-worker infer timed out after {timeout:.0f} s",
                         tail("".join(err_lines)))
        reader.join(10)
        wall = time.time() - t0
        if p.returncode != 0:
            raise Failed(f"tessera-worker infer exited with status {p.returncode}",
                         tail("".join(err_lines)))
        outputs = []
        for dirpath, _, names in os.walk(out_dir):
            outputs += [os.path.join(dirpath, x) for x in names
                        if x.endswith(".png") and not x.startswith(".")]
        if len(outputs) != n:
            raise Failed(f"tessera-worker infer wrote {len(outputs)} of {n} outputs",
                         tail("".join(err_lines)))
        last = max(os.stat(x).st_ctime for x in outputs)
        if not loaded_at:
            raise Failed("no \"tessera-worker: colorize-unet from\" line on the worker's stderr",
                         tail("".join(err_lines)))
        return {"whole": n / wall, "loaded": n / max(1e-9, last - loaded_at[0]), "wall_s": wall,
                "stderr_tail": tail("".join(err_lines), 8)}

    def sec_cmd_job(self, sec):
        tesserad = self.need_binary("tesserad")
        agent = self.need_binary("tessera-agent")
        cli = self.bins["tessera"]
        base = os.path.join(self.tmp, "cluster")
        os.makedirs(base)
        ctl_state = os.path.join(base, "controller")
        agent_state = os.path.join(base, "agent-gpucheck")
        result_path = os.path.join(base, "ddp-result.json")
        script = os.path.join(base, "ddp_check.py")
        with open(script, "w") as f:
            f.write(DDP_SCRIPT.replace("@RESULT@", repr(result_path))
                    .replace("@STEPS@", str(self.cfg["ddp_steps"])))
        launcher = os.path.join(base, "ddp-check.sh")
        old_ld = os.environ.get("LD_LIBRARY_PATH")
        with open(launcher, "w") as f:
            f.write("#!/bin/sh\n# The agent's library path is for Tessera's binaries; the "
                    "script gets the one\n# gpu_check.py was started with.\n")
            if old_ld:
                f.write(f"LD_LIBRARY_PATH={shquote(old_ld)}; export LD_LIBRARY_PATH\n")
            else:
                f.write("unset LD_LIBRARY_PATH\n")
            f.write(f"exec {shquote(sys.executable)} {shquote(script)} \"$@\"\n")
        os.chmod(launcher, 0o755)
        config = os.path.join(base, "tesserad.yaml")
        with open(config, "w") as f:
            # dead_after_ms: a loaded 2-core test machine once missed 3 s of beats
            # while the script started; this section checks the GPU path, not that.
            # Its jobs' rendezvous ports in PORT_RANGE too (tesserad's default, 29500,
            # is among the integration tests' ranges).
            blocks = (PORT_RANGE[1] - PORT_RANGE[0]) // 100
            port_base = PORT_RANGE[0] + random.randrange(blocks) * 100
            f.write(f"state_dir: {ctl_state}\nport: 0\nlog_level: info\n"
                    f"master_port_base: {port_base}\nmaster_port_span: 100\n"
                    f"stop_grace_ms: 2000\ndead_after_ms: 10000\ndata_roots:\n"
                    f"  - {{path: \"{self.tmp}\", access: read}}\n")
        procs = {}
        logs = {"tesserad": os.path.join(base, "tesserad.log"),
                "agent": os.path.join(base, "agent.log")}
        job_id = None
        try:
            with open(logs["tesserad"], "w") as log:
                procs["tesserad"] = spawn(
                    [tesserad, "--config", config], env=self.bin_env(), stdout=log,
                    stderr=subprocess.STDOUT)
            port_file = os.path.join(ctl_state, "tesserad.port")
            self.wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(),
                          30, "tesserad to write its port", procs["tesserad"], logs["tesserad"])
            port = int(open(port_file).read().strip())
            with open(os.path.join(ctl_state, "admin-token")) as f:
                token = f.read().strip()
            url = f"http://127.0.0.1:{port}"
            api = Api(url, token)
            agent_cmd = [agent, "--controller", url, "--join-token-file",
                         os.path.join(ctl_state, "join-token"), "--node", "gpucheck",
                         "--state-dir", agent_state, "--stop-workers-on-exit"]
            if not self.gpu:
                inventory = os.path.join(base, "inventory.yaml")
                with open(inventory, "w") as f:
                    f.write("devices:\n  - {name: \"GPU check (emulated)\", memory: 8GiB, "
                            "relative_speed: 0.5}\n")
                agent_cmd += ["--inventory", inventory]
            os.makedirs(agent_state, exist_ok=True)
            with open(logs["agent"], "w") as log:
                procs["agent"] = spawn(agent_cmd, env=self.bin_env(), stdout=log,
                                       stderr=subprocess.STDOUT)

            def node_ready():
                nodes = api.get("/api/v1/nodes").get("nodes", [])
                return next((n for n in nodes if n.get("health") == "healthy"
                             and n.get("devices")), None)

            node = self.wait_for(node_ready, 120, "the agent's node to be healthy",
                                 procs["agent"], logs["agent"])
            sec.raw["node"] = node
            sec.table(["node", "device", "type", "emulated", "memory", "TFLOPS fp32",
                       "profiled on it"],
                      [[node.get("name"), d.get("name"), d.get("type"), d.get("emulated", False),
                        gib(d.get("memory_bytes")), fmt(d.get("measured_tflops")),
                        ", ".join(d.get("profiled_models", [])) or "-"]
                       for d in node.get("devices", [])],
                      "the node as tesserad sees it (the agent profiles the builtin models on "
                      "each real GPU type at its start)")
            if self.gpu and not any(d.get("type") == "cuda" and not d.get("emulated")
                                    for d in node.get("devices", [])):
                raise Failed("the agent offers no real GPU (NVML discovery?)",
                             read_tail(logs["agent"]))
            if os.access(cli, os.X_OK):
                r = self.run([cli, "--json", "nodes"],
                             self.bin_env({"TESSERA_SERVER": url, "TESSERA_TOKEN": token}), 30,
                             "tessera nodes", check=False)
                sec.notes.append(f"`tessera --json nodes` (the CLI against this tesserad): "
                                 f"exit status {r.rc}" + ("" if r.rc == 0 else
                                                          f", {tail(r.err, 3)}"))
            api.post("/api/v1/entrypoints", {"name": "cmd:gpu-check-ddp", "command": launcher,
                                             "description": "GPU check DDP script"})
            job = api.post("/api/v1/jobs", {"name": "gpu-check-ddp",
                                            "entrypoint": "cmd:gpu-check-ddp",
                                            "global_batch": 8, "min_devices": 1,
                                            "max_devices": 1, "max_attempts": 1})
            job_id = job["id"]
            state = {"state": ""}

            def done():
                j = api.get(f"/api/v1/jobs/{job_id}")
                state["state"] = j.get("state", "")
                state["job"] = j
                return state["state"] in ("succeeded", "failed", "cancelled")

            try:
                self.wait_for(done, 120, f"job {job_id} to finish")
            except Failed as e:
                e.reason += f" (state {state['state'] or 'unknown'})"
                raise
            events = api.get(f"/api/v1/jobs/{job_id}/events?limit=500").get("events", [])
            sec.raw["events"] = events
            sec.table(["time", "attempt", "from", "to", "reason"],
                      [[time.strftime("%H:%M:%S", time.gmtime(e.get("ts_ms", 0) / 1000)),
                        e.get("attempt"), e.get("from"), e.get("to"), e.get("reason")]
                       for e in events], f"events of job {job_id}")
            if state["state"] != "succeeded":
                raise Failed(f"job {job_id} ended {state['state']}: "
                             f"{state['job'].get('reason', '')}", self.worker_logs(agent_state))
            if not os.path.exists(result_path):
                raise Failed("the script wrote no result", self.worker_logs(agent_state))
            with open(result_path) as f:
                res = json.load(f)
            sec.raw["script"] = res
            want = "cuda:0" if self.gpu else "cpu"
            sec.table(["what", "value"],
                      [["device the script trained on", res.get("device")],
                       ["device name", res.get("device_name")], ["backend", res.get("backend")],
                       ["world size", res.get("world_size")], ["steps", res.get("steps")],
                       ["loss", f"{fmt(res.get('loss_first'), 4)} -> "
                                f"{fmt(res.get('loss_last'), 4)}"],
                       ["CUDA_VISIBLE_DEVICES", res.get("cuda_visible_devices")],
                       ["TESSERA_DEVICE", res.get("tessera_device")],
                       ["seconds (script)", fmt(res.get("seconds"), 1)]],
                      f"the DDP script (`cmd:` job {job_id}, {self.cfg['ddp_steps']} steps, a "
                      "small conv net, torch.distributed + DistributedDataParallel)")
            sec.headline = (f"job {job_id} succeeded; the script trained on {res.get('device')} "
                            f"({res.get('backend')})")
            if res.get("device") != want:
                raise Failed(f"the script trained on {res.get('device')}, expected {want}")
            if self.gpu and res.get("backend") != "nccl":
                raise Failed(f"the script used {res.get('backend')}, expected nccl")
            self.planned_builtin_job(sec, api, agent_state)
        except Failed as e:
            worker_logs = self.worker_logs(agent_state)
            e.stderr_tail = "\n\n".join(
                x for x in (e.stderr_tail if e.stderr_tail != worker_logs else "",
                            "tesserad log:\n" + read_tail(logs["tesserad"], 15),
                            "agent log:\n" + read_tail(logs["agent"], 15), worker_logs) if x)
            raise
        finally:
            # The agent stops its workers when it exits (--stop-workers-on-exit).
            for name in ("agent", "tesserad"):
                if name in procs:
                    kill_group(procs[name], 15)
            self.stop_leftover_workers(agent_state)

    def planned_builtin_job(self, sec, api, agent_state):
        """builtin:colorize-unet through tesserad: the plan's prediction against its steps."""
        t = self.cfg["train"]
        steps = t["steps"]
        job = api.post("/api/v1/jobs", {
            "name": "gpu-check-colorize", "kind": "train", "entrypoint": "builtin:colorize-unet",
            "dataset": self.train_images(), "global_batch": t["batch"], "steps": steps,
            "min_devices": 1, "max_devices": 1, "max_attempts": 1,
            "args": ["--image-size", str(t["size"]), "--width", str(t["width"]), "--lr", "0.01",
                     "--momentum", "0.9", "--optimizer", "sgd", "--no-amp"]})
        job_id = job["id"]
        state = {}

        def done():
            state["job"] = api.get(f"/api/v1/jobs/{job_id}")
            return state["job"].get("state") in ("succeeded", "failed", "cancelled")

        # Pending first while tesserad profiles the builtin models on its CPU.
        self.wait_for(done, 240, f"builtin job {job_id} to finish")
        j = state["job"]
        if j.get("state") != "succeeded":
            raise Failed(f"builtin job {job_id} ended {j.get('state')}: {j.get('reason', '')}",
                         self.worker_logs(agent_state))
        predicted = ((j.get("plan") or {}).get("predicted") or {}).get("samples_per_s")
        points = api.get(f"/api/v1/jobs/{job_id}/metrics?limit=5000").get("points", [])
        timed = [p["samples_per_s"] for p in points
                 if p.get("samples_per_s") and p.get("step", 0) > t["warmup"]]
        measured = statistics.median(timed) if timed else None
        ratio = predicted / measured if predicted and measured else None
        sec.raw["builtin_job"] = {"id": job_id, "predicted_samples_per_s": predicted,
                                  "measured_samples_per_s": measured, "points": len(points)}
        sec.table(["what", "samples/s"],
                  [["the plan's prediction", fmt(predicted, 1)],
                   [f"measured (median of the steps after {t['warmup']})", fmt(measured, 1)],
                   ["predicted / measured", fmt(ratio)]],
                  f"builtin:colorize-unet through tesserad (job {job_id}): batch {t['batch']} at "
                  f"{t['size']} px, width {t['width']}, fp32, {steps} steps, planned with the "
                  "times the agent measured on this device type" if self.gpu else
                  f"builtin:colorize-unet through tesserad (job {job_id}) on the emulated device")
        sec.target("builtin job: predicted / measured samples/s", ratio, "0.67 .. 1.5",
                   ratio is not None and 0.67 <= ratio <= 1.5)

    def wait_for(self, cond, timeout, what, proc=None, log=None):
        end = time.monotonic() + self.cap(timeout)
        last_err = ""
        while time.monotonic() < end:
            if proc is not None and proc.poll() is not None:
                raise Failed(f"waiting for {what}: the process exited with status "
                             f"{proc.returncode}", read_tail(log) if log else "")
            try:
                v = cond()
                if v:
                    return v
            except (OSError, ValueError, urllib.error.URLError) as e:
                last_err = str(e)
            time.sleep(0.25)
        raise Failed(f"timed out waiting for {what}" + (f" ({last_err})" if last_err else ""),
                     read_tail(log) if log else "")

    def worker_logs(self, agent_state):
        parts = []
        for dirpath, _, names in os.walk(agent_state):
            for x in sorted(names):
                if x.startswith("worker.log"):
                    p = os.path.join(dirpath, x)
                    parts.append(f"{os.path.relpath(p, agent_state)}:\n{read_tail(p, 25)}")
        return "\n\n".join(parts) or "(no worker logs under the agent's state dir)"

    def stop_leftover_workers(self, agent_state):
        """Workers are their own process groups (agent/supervisor.cc): stop any left."""
        for dirpath, _, names in os.walk(agent_state):
            if "worker.pid" not in names:
                continue
            try:
                with open(os.path.join(dirpath, "worker.pid")) as f:
                    pgid = int(json.load(f).get("pgid", 0))
                if pgid > 1:
                    os.killpg(pgid, signal.SIGKILL)
            except (OSError, ValueError, ProcessLookupError):
                pass


def shquote(s):
    return "'" + str(s).replace("'", "'\\''") + "'"


class Api:
    def __init__(self, url, token):
        self.url, self.token = url, token

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=15) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as e:
            raise Failed(f"{method} {path}: HTTP {e.code}: {e.read().decode(errors='replace')}")
        return json.loads(text) if text.strip() else {}

    def get(self, path):
        return self.call("GET", path)

    def post(self, path, body):
        return self.call("POST", path, body)


class SmiSampler:
    """nvidia-smi every 0.2 s: per-process used memory, and the whole GPU's."""

    def __init__(self):
        self.pid = None
        self.samples = []
        self.gpu_used = []
        self.baseline = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _query(self, what):
        try:
            r = subprocess.run(["nvidia-smi", what, "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=10)
            return r.stdout if r.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            return ""

    def _gpu_used(self):
        first = self._query("--query-gpu=memory.used").strip().splitlines()
        try:
            return int(float(first[0])) if first else None
        except ValueError:
            return None

    def start(self):
        self.baseline = self._gpu_used()
        self._thread.start()

    def set_pid(self, pid):
        self.pid = pid

    def _loop(self):
        while not self._stop.is_set():
            t0 = time.monotonic()
            apps = {}
            for line in self._query("--query-compute-apps=pid,used_memory").splitlines():
                parts = [x.strip() for x in line.split(",")]
                if len(parts) == 2 and parts[0].isdigit():
                    try:
                        apps[int(parts[0])] = int(float(parts[1]))
                    except ValueError:
                        pass
            self.samples.append(apps)
            used = self._gpu_used()
            if used is not None:
                self.gpu_used.append(used)
            self._stop.wait(max(0.0, 0.2 - (time.monotonic() - t0)))

    def stop(self):
        self._stop.set()
        self._thread.join(15)

    def result(self, pid):
        mine = [s[pid] for s in self.samples if pid in s]
        pids = sorted({p for s in self.samples for p in s})
        delta = (max(self.gpu_used) - self.baseline
                 if self.gpu_used and self.baseline is not None else None)
        return {"samples": len(self.samples), "pid_max_mib": max(mine) if mine else None,
                "pids_seen": pids, "gpu_used_baseline_mib": self.baseline,
                "gpu_used_max_mib": max(self.gpu_used) if self.gpu_used else None,
                "gpu_used_delta_mib": delta}


DDP_SCRIPT = r'''#!/usr/bin/env python3
"""A lab's small DDP script, as Tessera runs it for a cmd: job (torchrun environment)."""
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

RESULT = @RESULT@
STEPS = @STEPS@


def main():
    t0 = time.time()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    want = os.environ.get("TESSERA_DEVICE", "")
    cuda = (want.startswith("cuda") if want else True) and torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, init_method="env://")
    torch.manual_seed(1234 + rank)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).to(device)
    ddp = DDP(model, device_ids=[local_rank] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(16, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (16,), device=device)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ones = torch.ones(1, device=device)
    dist.all_reduce(ones)
    if rank == 0:
        res = {"device": str(device), "backend": backend, "world_size": world,
               "all_reduce_sum": ones.item(), "steps": STEPS, "loss_first": losses[0],
               "loss_last": losses[-1], "seconds": time.time() - t0,
               "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
               "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
               "tessera_device": want, "torch": torch.__version__}
        text = json.dumps(res)
        print(text, flush=True)
        for path in (RESULT, os.path.join(os.environ.get("TESSERA_CHECKPOINT_DIR", "."),
                                          "ddp-result.json")):
            try:
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                with open(path + ".tmp", "w") as f:
                    f.write(text + "\n")
                os.replace(path + ".tmp", path)
            except OSError as e:
                print(f"cannot write {path}: {e}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''


def render(check, sections, total_s):
    a = check.args
    env = check.env_info
    gpu = env.get("gpu") or {}
    lines = ["# Tessera GPU check", ""]
    lines.append(f"- when: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    lines.append(f"- host: {platform.node()}, device: `{check.device}`"
                 + (f" ({gpu.get('name')}, {gib(gpu.get('total_memory'))})" if gpu else "")
                 + f", mode: {'GPU' if check.gpu else 'CPU'}{' quick' if a.quick else ''}")
    lines.append(f"- torch {env.get('torch', '?')}, CUDA {env.get('torch_cuda') or '-'}, "
                 f"Python {sys.version.split()[0]}")
    lines.append(f"- binaries: `{a.bin_tree or a.bin}`" + (" (build tree)" if a.bin_tree else ""))
    lines.append(f"- total: {total_s:.0f} s")
    lines += ["", "## Summary", "", "| section | status | seconds | note |",
              "| --- | --- | --- | --- |"]
    for s in sections:
        status = {"ok": "ok", "FAILED": "**FAILED**"}.get(s.status, s.status)
        note = s.reason or "; ".join(
            ([s.headline] if s.headline else [])
            + [f"{t['what']} {fmt(t['value'])}" + ("" if t["met"] else f" (target {t['goal']})")
               for t in s.targets])
        note = note.replace("|", "\\|").replace("\n", " ")[:300]
        lines.append(f"| {s.number}. {s.title} | {status} | {s.seconds:.0f} | {note} |")
    missed = [(s, t) for s in sections for t in s.targets if not t["met"]]
    met = sum(1 for s in sections for t in s.targets if t["met"])
    lines += ["", f"Targets met: {met} of {met + len(missed)}."]
    for s, t in missed:
        lines.append(f"- missed ({s.number}): {t['what']}: {fmt(t['value'])}, target {t['goal']}")
    for s in sections:
        lines += ["", f"## {s.number}. {s.title}", ""]
        status = {"ok": "ok", "FAILED": "**FAILED**"}.get(s.status, s.status)
        lines.append(f"Status: {status}" + (f": {s.reason}" if s.reason else "")
                     + f" ({s.seconds:.1f} s)")
        for t in s.tables:
            lines.append("")
            if t["caption"]:
                lines += [t["caption"], ""]
            lines.append("| " + " | ".join(t["headers"]) + " |")
            lines.append("|" + " --- |" * len(t["headers"]))
            for row in t["rows"]:
                cells = [str(c).replace("|", "\\|").replace("\n", " ") for c in row]
                lines.append("| " + " | ".join(cells) + " |")
        for n in s.notes:
            lines += ["", n]
        if s.stderr_tail:
            lines += ["", "<details><summary>stderr / log tail</summary>", "", "```",
                      s.stderr_tail.replace("```", "'''"), "```", "", "</details>"]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--params", default="{}", help=argparse.SUPPRESS)
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--bin", help="folder holding tesserad, tessera-agent, "
                       "tessera-device-bench, tessera-worker, tessera")
    where.add_argument("--bin-tree", help="a build folder (daemon/tesserad, agent/..., ...)")
    ap.add_argument("--out", help="folder for gpu-check-report.md / .json")
    ap.add_argument("--device", default="cuda:0", help="cuda:0 or cpu")
    ap.add_argument("--quick", action="store_true", help="smaller problems")
    ap.add_argument("--ld-library-path", default="",
                    help="library path for Tessera's binaries only (not for Python)")
    ap.add_argument("--deadline-s", type=float, default=440,
                    help="sections not started by then are skipped")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    if args.child:
        return child_main(args.child, args.params)
    if not (args.bin or args.bin_tree) or not args.out:
        ap.error("--bin or --bin-tree, and --out, are required")
    if args.device != "cpu" and not args.device.startswith("cuda"):
        ap.error("--device: cuda[:N] or cpu")
    if args.device == "cuda":
        args.device = "cuda:0"
    os.makedirs(args.out, exist_ok=True)
    check = Check(args)
    plan = [(1, "Environment", check.sec_environment, 0),
            (2, "NVML inventory and benchmark vs torch.mm", check.sec_inventory, 20),
            (3, "Training: tessera-worker vs plain PyTorch (colorize-unet)", check.sec_training,
             30),
            (4, "Peak memory: allocator vs nvidia-smi", check.sec_memory, 0),
            (5, "Collectives (tessera-worker collectives-check)", check.sec_collectives, 15),
            (6, "Tiled archive inference vs PyTorch", check.sec_inference, 30),
            (7, "A cmd: DDP job through tesserad and an agent", check.sec_cmd_job, 30),
            (8, "Model profile on the device (tessera-worker profile --device)",
             check.sec_profile, 20),
            (9, "Where a training step goes: profiler traces, worker vs PyTorch",
             check.sec_step_trace, 30)]
    sections = []
    t_all = time.monotonic()
    # An outer timeout (gpu-check.sh) or Ctrl-C: stop the children, still write the report.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    interrupted = None
    try:
        for number, title, fn, min_left in plan:
            sec = Section(number, title)
            sections.append(sec)
            print(f"== {number}. {title}", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            try:
                if check.remaining() < max(min_left, 5):
                    raise Skipped("the check's time budget ran out (--deadline-s)")
                fn(sec)
            except Interrupted as e:
                sec.status = "FAILED"
                sec.reason = f"interrupted ({e}) after {time.monotonic() - t0:.0f} s"
                interrupted = e
            except Skipped as e:
                sec.status, sec.reason = "skipped", str(e)
            except Failed as e:
                sec.status, sec.reason, sec.stderr_tail = "FAILED", e.reason, e.stderr_tail
            except Exception as e:  # noqa: BLE001 (a bug here must not end the check)
                sec.status = "FAILED"
                sec.reason = f"{type(e).__name__}: {e}"
                sec.stderr_tail = traceback.format_exc()
            sec.seconds = time.monotonic() - t0
            print(f"   {sec.status}{': ' + sec.reason if sec.reason else ''} "
                  f"({sec.seconds:.1f} s)", file=sys.stderr, flush=True)
            if interrupted:
                break
    except Interrupted as e:  # between sections
        interrupted = e
    finally:
        for number, title, _, _ in plan[len(sections):]:
            sec = Section(number, title)
            sec.status, sec.reason = "skipped", f"not run: interrupted ({interrupted})"
            sections.append(sec)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop_all()
        total = time.monotonic() - t_all
        report = render(check, sections, total)
        md = os.path.join(args.out, "gpu-check-report.md")
        with open(md, "w") as f:
            f.write(report)
        with open(os.path.join(args.out, "gpu-check-report.json"), "w") as f:
            json.dump({"device": check.device, "quick": args.quick, "seconds": round(total, 1),
                       "env": check.env_info, "sizes": check.cfg,
                       "sections": [s.to_json() for s in sections]}, f, indent=1, default=str)
        if args.keep_tmp:
            print(f"temporary files kept in {check.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(check.tmp, ignore_errors=True)
    print(report)
    failed = [s for s in sections if s.status == "FAILED"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
