#!/usr/bin/env python3
"""tessera-worker infer against a plain PyTorch inference script: same model, same images.

For each image size (--sizes) and intra-op thread count (--threads), in one run
on this machine (CPU):
  (a) `tessera-worker infer --local --model M --checkpoint CKPT --data IMAGES
      --output OUT --threads T` (plus --worker-args, e.g. the batching or the
      decode / encode thread flags of the worker);
  (b) pytorch_infer.py (one process, torch.set_num_threads(T), eval mode,
      torch.inference_mode(), PIL decode, forward, PIL PNG encode and save) with
      --batch 1 and with each of --batches (consecutive same-size images stacked
      into one forward).
Both get OMP_NUM_THREADS=T, the same checkpoint (written by `tessera-worker
train`, read by pytorch_infer.py from the worker's tensor files) and the same
folder of images (`tessera-worker gen-images`; sizes >= --gray-from are
converted to 8-bit grayscale, as archive scans are).
Two figures per run, both taken by this script from outside, the same way for
both programs:
  whole     images / wall seconds of the whole process (start to exit: the
            interpreter and torch import, model load, every image, exit);
  loaded    images / (newest output file's ctime - the moment the program's
            "model loaded" stderr line arrived): the worker's
            "tessera-worker: M from CKPT/step-N, ..." line, printed once the
            checkpoint is loaded and the input folder listed; pytorch_infer.py's
            "pytorch_infer: M from ... loaded". The ctime of the worker's outputs
            is their rename after the fsync, of the script's their last write.
Every run starts with an empty output folder and must write every image.
--rounds R interleaves the runs (each round runs every configuration once, in
reverse order every other round) and reports medians over rounds. The machine
may be shared: before each run the script waits (--idle-wait) for an idle
machine and repeats a run (--retries) during which other processes took more
than --max-foreign cores (from /proc/stat minus its own children's CPU).
--check-model first runs both programs (PyTorch with --batch 1 and with the
largest of --batches) on a few images of every size and compares the output
PNGs pixel by pixel (target: max |diff| <= 1 level).
Python 3 standard library only; the PyTorch side runs under --python (default:
an interpreter that imports torch and PIL: the project's .venv (scripts/setup.sh) has torch and Pillow).

usage: pytorch_infer_compare.py --worker build/worker/runtime/tessera-worker
           [--model colorize-unet] [--sizes 64 256] [--threads 1 2]
           [--batches 4 16] [--rounds 3] [--check-model]
           [--worker-args "--batch 1" --worker-args "--batch 8" ...]
"""
import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from quiet_machine import add_measured_arguments, children_cpu_s, measured

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from torch_python import torch_python  # noqa: E402
from worker_ranks import gen_images, worker_env  # noqa: E402

PT_SCRIPT = os.path.join(HERE, "pytorch_infer.py")
# Images per size when --images is not given: a few seconds per run at width 16.
DEFAULT_COUNT = {64: 120, 128: 60, 256: 24, 512: 8}
WORKER_LOADED = re.compile(r"^tessera-worker: \S+ from ")
PT_LOADED = re.compile(r"^pytorch_infer: .* loaded$")
GRAY_CODE = """
import os, sys
from PIL import Image
for name in sorted(os.listdir(sys.argv[1])):
    p = os.path.join(sys.argv[1], name)
    Image.open(p).convert("L").save(p, format="PNG")
"""


def output_files(out_dir):
    files = []
    for dirpath, _, names in os.walk(out_dir):
        files += [os.path.join(dirpath, n) for n in names if n.endswith(".png")
                  and not n.startswith(".")]
    return files


def run_timed(cmd, env, out_dir, loaded_re, images, what):
    """Runs one program over the images: {"whole", "loaded"} images/s (see the docstring)."""
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    loaded_at = []
    err_lines = []
    c0, t0 = children_cpu_s(), time.time()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)

    def read_err():
        for line in p.stderr:
            if not loaded_at and loaded_re.search(line.rstrip("\n")):
                loaded_at.append(time.time())
            err_lines.append(line)

    reader = threading.Thread(target=read_err)
    reader.start()
    p.wait()
    t_end = time.time()
    cpu = children_cpu_s() - c0
    reader.join()
    if p.returncode != 0:
        sys.exit(f"{what} failed (exit {p.returncode}): {shlex.join(cmd)}\n"
                 + "".join(err_lines)[-3000:])
    files = output_files(out_dir)
    if len(files) != images:
        sys.exit(f"{what} wrote {len(files)} of {images} outputs: {shlex.join(cmd)}\n"
                 + "".join(err_lines)[-3000:])
    # ctime: the worker's rename (after its fsync) or the script's last write.
    last = max(os.stat(f).st_ctime_ns for f in files) / 1e9
    if not loaded_at:
        sys.exit(f"{what} printed no model-loaded line ({loaded_re.pattern}) on stderr")
    return {"whole": images / (t_end - t0), "loaded": images / max(1e-9, last - loaded_at[0]),
            "load_s": loaded_at[0] - t0, "wall_s": t_end - t0, "cores": cpu / (t_end - t0)}


def worker_cmd(args, data, out, threads, ckpt, variant=0):
    return ([args.worker, "infer", "--local", "--model", args.model, "--checkpoint", ckpt,
             "--data", data, "--output", out, "--threads", str(threads)]
            + shlex.split(args.worker_args[variant]))


def pytorch_cmd(args, data, out, threads, ckpt, batch, extra=()):
    return ([args.python, PT_SCRIPT, "--model", args.model, "--checkpoint", ckpt, "--data", data,
             "--output", out, "--threads", str(threads), "--batch", str(batch)] + list(extra))


def make_images(args, tmp, size, count):
    d = os.path.join(tmp, f"images-{size}")
    gen_images(args.worker, d, size, count)
    gray = args.gray_from > 0 and size >= args.gray_from
    if gray:
        subprocess.run([args.python, "-c", GRAY_CODE, d], check=True)
    return d, gray


def train(args, tmp):
    ckpt = os.path.join(tmp, "checkpoint")
    data = os.path.join(tmp, "train-images")
    gen_images(args.worker, data, args.train_size, 32)
    env = worker_env(1)
    env["TESSERA_CHECKPOINT_DIR"] = ckpt
    env["TESSERA_DEVICE"] = "cpu"
    subprocess.run([args.worker, "train", "--model", args.model, "--data", data, "--steps",
                    str(args.train_steps), "--batch", "8", "--image-size", str(args.train_size),
                    "--width", str(args.width), "--threads", "1"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return ckpt


def check_model(args, tmp, sets, ckpt):
    """Both programs on a few images of each size; the outputs compared pixel by pixel."""
    ok = True
    for size, (data, _, _) in sets.items():
        sub = os.path.join(tmp, f"check-{size}")
        os.makedirs(sub)
        for name in sorted(os.listdir(data))[:6]:
            shutil.copy(os.path.join(data, name), sub)
        wout = os.path.join(tmp, f"check-{size}-worker")
        subprocess.run(worker_cmd(args, sub, wout, 1, ckpt), env=worker_env(1), check=True,
                       capture_output=True)
        for b in sorted({1, max(args.batches)}):
            pout = os.path.join(tmp, f"check-{size}-pytorch-{b}")
            r = subprocess.run(pytorch_cmd(args, sub, pout, 1, ckpt, b,
                                           ["--compare-with", wout]),
                               env=worker_env(1), capture_output=True, text=True)
            try:
                res = json.loads(r.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                res = {"error": (r.stdout + r.stderr)[-2000:]}
            good = r.returncode == 0 and res.get("max_abs_diff", 99) <= 1
            ok = ok and good
            print(f"check-model {size}x{size}, PyTorch batch {b}: "
                  + (f"{res['images']} images, max |diff| {res['max_abs_diff']} levels, "
                     f"{res['pixels_over_1']} values off by more than 1"
                     if "images" in res else res.get("error", "?"))
                  + (" -> same" if good else " -> DIFFERENT"))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", required=True, help="path of tessera-worker")
    ap.add_argument("--python", default="", help="interpreter with torch and PIL")
    ap.add_argument("--model", choices=["colorize-unet", "denoiser-dncnn"],
                    default="colorize-unet")
    ap.add_argument("--width", type=int, default=16, help="the model's base width (training)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256], help="image sides, px")
    ap.add_argument("--images", type=int, default=0,
                    help="images per size (default: " + ", ".join(
                        f"{k} px {v}" for k, v in DEFAULT_COUNT.items()) + ")")
    ap.add_argument("--gray-from", type=int, default=-1,
                    help="sizes from this side on are grayscale (default: 256 for "
                         "colorize-unet, none for denoiser-dncnn; 0: none)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                    help="intra-op thread counts (the same on both sides)")
    ap.add_argument("--batches", type=int, nargs="+", default=[4, 16],
                    help="PyTorch --batch values besides 1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker-args", action="append", default=[],
                    help="extra arguments of tessera-worker infer (one shell-quoted string); "
                         "repeat it to compare several worker settings (one row each)")
    ap.add_argument("--checkpoint", default="",
                    help="a checkpoint directory of --model (default: train one)")
    ap.add_argument("--train-steps", type=int, default=20)
    ap.add_argument("--train-size", type=int, default=64)
    ap.add_argument("--check-model", action="store_true",
                    help="compare the two programs' output images first")
    add_measured_arguments(ap)
    args = ap.parse_args()
    if not os.access(args.worker, os.X_OK):
        sys.exit(f"no tessera-worker at {args.worker}")
    if args.gray_from < 0:
        args.gray_from = 256 if args.model == "colorize-unet" else 0
    args.batches = sorted({b for b in args.batches if b > 1})
    args.worker_args = args.worker_args or [""]
    args.python = torch_python(args.python, ["torch", "numpy", "PIL"],
                               "scripts/setup.sh installs python3-torch python3-numpy python3-pil")
    print("command: " + shlex.join([sys.argv[0]] + sys.argv[1:]))
    st = os.stat(args.worker)
    print(f"worker: {args.worker} ({st.st_size} bytes, modified "
          f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(st.st_mtime))} UTC)")
    t_start = time.time()
    tmp_obj = tempfile.TemporaryDirectory()
    tmp = tmp_obj.name

    ckpt = os.path.abspath(args.checkpoint) if args.checkpoint else train(args, tmp)
    sets = {}
    for size in args.sizes:
        count = args.images or DEFAULT_COUNT.get(size, max(4, int(160 * (64 / size) ** 1.5)))
        data, gray = make_images(args, tmp, size, count)
        sets[size] = (data, count, gray)
    versions = subprocess.run(
        [args.python, "-c", "import torch, PIL; print(torch.__version__, PIL.__version__)"],
        capture_output=True, text=True).stdout.split()
    origin = (f"checkpoint {ckpt}" if args.checkpoint
              else f"trained {args.train_steps} steps by tessera-worker train")
    print(f"model {args.model}{'' if args.checkpoint else f' width {args.width}'} ({origin}); "
          f"images: " + ", ".join(f"{n} x {s}x{s} {'gray' if g else 'RGB'}"
                                  for s, (_, n, g) in sets.items())
          + f"; threads {args.threads}; PyTorch batches 1 {' '.join(map(str, args.batches))}; "
          f"{args.rounds} rounds; torch {versions[0]}, PIL {versions[1]} ({args.python}); "
          f"{os.cpu_count()} CPUs"
          + "".join(f"; worker {i}: args '{a}'" for i, a in enumerate(args.worker_args) if a))
    if args.check_model and not check_model(args, tmp, sets, ckpt):
        sys.exit("the two programs' outputs differ")

    # One run per (size, threads, program); the order alternates between rounds.
    runs = []
    for size, (data, count, _) in sets.items():
        for t in args.threads:
            out = os.path.join(tmp, "out")
            for v in range(len(args.worker_args)):
                runs.append(((size, t, ("worker", v)), worker_cmd(args, data, out, t, ckpt, v),
                             WORKER_LOADED, count, t))
            for b in [1] + args.batches:
                runs.append(((size, t, b), pytorch_cmd(args, data, out, t, ckpt, b), PT_LOADED,
                             count, t))
    res = {key: [] for key, *_ in runs}
    foreign_max = 0.0
    for rnd in range(args.rounds):
        for key, cmd, loaded_re, count, t in (runs if rnd % 2 == 0 else runs[::-1]):
            what = ("tessera-worker" if isinstance(key[2], tuple)
                    else f"pytorch_infer.py --batch {key[2]}")
            r, foreign = measured(args, lambda: run_timed(cmd, worker_env(t),
                                                          os.path.join(tmp, "out"), loaded_re,
                                                          count, what))
            res[key].append(r)
            foreign_max = max(foreign_max, foreign)

    def med(key, field):
        return statistics.median(x[field] for x in res[key])

    print()
    print("images/s (median of rounds); whole = whole process, loaded = after the model-loaded "
          "line to the last output")
    print()
    print("| size | threads | figure | tessera-worker | PyTorch B=1 | PyTorch best B | "
          "worker / B=1 | worker / best B |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    variants = range(len(args.worker_args))

    def wname(v):
        return f" (worker {v})" if len(args.worker_args) > 1 else ""
    verdict = []
    for size, (_, count, gray) in sets.items():
        for t in args.threads:
            for fig in ("whole", "loaded"):
                p1 = med((size, t, 1), fig)
                best_b = max([1] + args.batches, key=lambda b: med((size, t, b), fig))
                pb = med((size, t, best_b), fig)
                for v in variants:
                    w = med((size, t, ("worker", v)), fig)
                    print(f"| {size}x{size} {'gray' if gray else 'RGB'} ({count}) | {t} | {fig} | "
                          f"{w:.1f}{wname(v)} | {p1:.1f} | {pb:.1f} (B={best_b}) | "
                          f"{w / p1:.2f}x | {w / pb:.2f}x |")
                    verdict.append((f"{size}px T={t} {fig}{wname(v)}", w / pb))
    print()
    print("target: tessera-worker >= 1.0x the PyTorch script (best B) -> " + ", ".join(
        f"{k} {'met' if r >= 1.0 else 'NOT met'} ({r:.2f}x)" for k, r in verdict))
    print()
    for size in sets:
        for t in args.threads:
            parts = []
            for prog in [("worker", v) for v in variants] + [1] + args.batches:
                k = (size, t, prog)
                name = f"worker {prog[1]}" if isinstance(prog, tuple) else f"B={prog}"
                whole = "/".join(f"{x['whole']:.1f}" for x in res[k])
                loaded = "/".join(f"{x['loaded']:.1f}" for x in res[k])
                parts.append(f"{name} whole {whole}, loaded {loaded}, "
                             f"start-up {med(k, 'load_s'):.2f} s, {med(k, 'cores'):.2f} cores")
            print(f"{size}px T={t} per round: " + "; ".join(parts))
    print("cores = CPU seconds (user + sys) of the process / its wall seconds; the worker's "
          "decode / encode threads come on top of its intra-op threads.")
    print("differences: tessera-worker writes its outputs atomically and durably (temporary "
          "files, fsync, rename), skips finished items and reports chunks; pytorch_infer.py "
          "saves with PIL and no fsync. Start-up (start-up = until the model-loaded line): the "
          "worker lists the folder before loading; pytorch_infer.py imports torch, numpy and "
          "PIL first and lists the folder after.")
    print(f"({time.time() - t_start:.0f} s; other processes used at most {foreign_max:.2f} "
          f"cores on average during a kept run)")


if __name__ == "__main__":
    main()
