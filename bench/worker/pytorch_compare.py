#!/usr/bin/env python3
"""tessera-worker against plain PyTorch DDP: the same DnCNN training, side by side.

In one run, on this machine (CPU, Gloo over loopback), for 1 rank and for 2
ranks data parallel:
  (a) `tessera-worker train --model denoiser-dncnn` (ranks launched as
      worker_layouts.py / calibrate.py do: torchrun environment, TESSERA_PLAN with
      even shares for 2 ranks, TESSERA_DEVICE=cpu, progress lines in
      TESSERA_PROGRESS_FILE); samples/s = median over the steps after warm-up of
      rank 0's progress lines' samples_per_s (global batch / step wall time);
  (b) pytorch_dncnn_ddp.py (init_process_group("gloo"), DistributedDataParallel,
      torch.optim.SGD momentum 0.9) with the same environment; samples/s = global
      batch / median step time of rank 0 (perf_counter around zero_grad, forward,
      loss, backward with the all-reduce, optimizer step, loss.item()).
Same model (depth, width, 3x3 kernels, batch norm synchronized over the ranks,
ReLU, output = input - predicted noise), MSE loss, per-rank batch, lr, SGD with
momentum 0.9, threads per rank (--threads, also OMP_NUM_THREADS), image size and
images (one folder made by `tessera-worker gen-images`, read by both).
--rounds R interleaves the runs (every round runs each configuration once, in
reverse order every other round) and reports medians over rounds. The machine
may be shared: before each run the script waits (--idle-wait) for an idle
machine and repeats a run (--retries) during which other processes took more
than --max-foreign cores, counted from /proc/stat minus its own children's CPU.
Besides the table it prints the worker's step split from rank 0's progress lines
(compute includes the synchronized batch norm's all-reduces; comm is the gradient
all-reduce wait and the end-of-step vote; other is the rest of the step wall time);
--also-bn adds PyTorch runs with other batch norms, --worker-env runs the worker
with extra environment (both to take the gap apart). Python 3 standard library only; the PyTorch
side runs under --python (default: an interpreter that imports torch).

usage: pytorch_compare.py --worker build/worker/runtime/tessera-worker
           [--width 32 --image-size 48 --batch 8 --steps 30 --warmup 6 --threads 1]
           [--rounds 5] [--check-model] [--also-bn local sync3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from quiet_machine import add_measured_arguments, measured

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from torch_python import torch_python  # noqa: E402
from worker_ranks import data_plan, free_port, gen_images, worker_env  # noqa: E402

PT_SCRIPT = os.path.join(HERE, "pytorch_dncnn_ddp.py")
MODEL = "denoiser-dncnn"


BN_NOTE = {
    "sync": "Batch norm: both synchronized over the ranks, one all-reduce per layer and "
            "direction.",
    "sync3": "Batch norm: both synchronized over the ranks; PyTorch with 3 all-reduces per layer "
             "and direction (--bn sync3), the worker with one.",
    "local": "Batch norm: PyTorch per-rank statistics (--bn local), tessera-worker synchronized.",
}


def rank_env(rank, world, port):
    return {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}


def wait_all(procs, what):
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            for q in procs:
                if q.poll() is None:
                    q.kill()
            sys.exit(f"{what} failed (exit {p.returncode}):\n{err[-3000:]}")


def profile(args):
    out = subprocess.run([args.worker, "profile", "--model", MODEL, "--batch", "1",
                          "--image-size", str(args.image_size), "--width", str(args.width),
                          "--repeats", "1", "--threads", str(args.threads)],
                         env=worker_env(args.threads), check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def run_tessera(args, world, n_layers, tmp, tag):
    port = str(free_port())
    plan_path = os.path.join(tmp, f"plan-{tag}.json")
    if world > 1:
        with open(plan_path, "w") as f:
            json.dump(data_plan(n_layers, [args.batch] * world), f)
    procs, progs = [], []
    for r in range(world):
        env = worker_env(args.threads)
        prog = os.path.join(tmp, f"tessera-{tag}-{r}.jsonl")
        env["TESSERA_PROGRESS_FILE"] = prog
        env["TESSERA_DEVICE"] = "cpu"
        env.update(kv.split("=", 1) for kv in args.worker_env)
        if world > 1:
            env.update(rank_env(r, world, port))
            env["TESSERA_PLAN"] = plan_path
        cmd = [args.worker, "train", "--model", MODEL, "--data", args.data,
               "--steps", str(args.steps), "--batch", str(args.batch * world),
               "--width", str(args.width), "--image-size", str(args.image_size),
               "--lr", repr(args.lr), "--optimizer", "sgd", "--momentum", "0.9",
               "--threads", str(args.threads)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
        progs.append(prog)
    wait_all(procs, f"tessera-worker ({world} ranks)")
    rows = []
    for prog in progs:
        with open(prog) as f:
            rows.append([json.loads(line) for line in f][args.warmup:])
    sps = statistics.median(x["samples_per_s"] for x in rows[0])
    split = {k: statistics.median(x[k] for x in rows[0]) for k in ("compute_s", "comm_s")}
    step = [args.batch * world / x["samples_per_s"] for x in rows[0]]
    split["step_s"] = statistics.median(step)
    # Wall time outside compute and communication: waiting for the prefetched batch, the
    # progress bookkeeping.
    split["other_s"] = statistics.median(
        s - x["compute_s"] - x["comm_s"] for s, x in zip(step, rows[0]))
    split["loss"] = rows[0][-1]["loss"]
    return sps, split


def run_pytorch(args, world, tmp, tag, bn):
    port = str(free_port())
    result = os.path.join(tmp, f"pytorch-{tag}.json")
    procs = []
    for r in range(world):
        env = worker_env(args.threads)
        if world > 1:
            env.update(rank_env(r, world, port))
        cmd = [args.python, PT_SCRIPT, "--data", args.data, "--width", str(args.width),
               "--depth", str(args.depth), "--image-size", str(args.image_size),
               "--batch", str(args.batch), "--steps", str(args.steps),
               "--threads", str(args.threads), "--lr", repr(args.lr), "--momentum", "0.9",
               "--bn", bn, "--result", result]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
    wait_all(procs, f"PyTorch DDP ({world} ranks)")
    with open(result) as f:
        res = json.load(f)
    step = statistics.median(res["step_s"][args.warmup:])
    return args.batch * world / step, {"step_s": step, "loss": res["loss"][-1],
                                       "torch": res["torch"], "params": res["params"]}


def check_model(args, prof):
    worker_params = sum(l["param_bytes"] for l in prof["layers"]) // 4  # float32
    out = subprocess.run([args.python, PT_SCRIPT, "--count-params", "--width", str(args.width),
                          "--depth", str(args.depth)], env=worker_env(args.threads), check=True,
                         capture_output=True, text=True).stdout
    pt_params = json.loads(out)["params"]
    layers = " ".join(f"{l['name']}:{l['param_bytes'] // 4}" for l in prof["layers"])
    print(f"parameters: tessera-worker {worker_params} ({layers}); PyTorch {pt_params} -> "
          f"{'same size' if worker_params == pt_params else 'DIFFERENT'}")
    return worker_params == pt_params


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", required=True, help="path of tessera-worker")
    ap.add_argument("--python", default="", help="interpreter with torch for the PyTorch side")
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=48)
    ap.add_argument("--batch", type=int, default=8, help="per rank")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--images", type=int, default=64, help="images gen-images writes")
    ap.add_argument("--data", default="", help="image folder (default: generated)")
    ap.add_argument("--bn", choices=list(BN_NOTE), default="sync",
                    help="PyTorch side's batch norm (tessera-worker synchronizes it; see "
                         "pytorch_dncnn_ddp.py)")
    ap.add_argument("--also-bn", choices=list(BN_NOTE), nargs="*", default=[],
                    help="also run PyTorch DDP on 2 ranks with these batch norms (one line each)")
    ap.add_argument("--worker-env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment of the tessera-worker ranks only (e.g. GLIBC_TUNABLES)")
    ap.add_argument("--check-model", action="store_true",
                    help="compare the parameter counts of the two models first")
    add_measured_arguments(ap)
    args = ap.parse_args()
    if any("=" not in kv for kv in args.worker_env):
        sys.exit("--worker-env takes KEY=VALUE")
    if args.steps <= args.warmup:
        sys.exit("--steps must exceed --warmup")
    if not os.access(args.worker, os.X_OK):
        sys.exit(f"no tessera-worker at {args.worker}")
    args.python = torch_python(args.python, ["torch", "PIL"],
                               "run scripts/setup.sh: it puts PyPI's torch and Pillow into .venv")
    t_start = time.time()
    tmp_obj = tempfile.TemporaryDirectory()
    tmp = tmp_obj.name
    if not args.data:
        args.data = os.path.join(tmp, "images")
        gen_images(args.worker, args.data, args.image_size, args.images)
    prof = profile(args)
    n_layers = len(prof["layers"])
    args.depth = sum(1 for l in prof["layers"] if l["name"].startswith("mid"))

    torch_version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    print(f"model {MODEL}: depth {args.depth} middle layers ({n_layers} conv layers, 3x3), "
          f"width {args.width}, image {args.image_size}x{args.image_size}, batch {args.batch}/rank, "
          f"SGD momentum 0.9 lr {args.lr}, {args.threads} thread/rank, {args.steps} steps "
          f"({args.warmup} warm-up), {args.rounds} rounds; torch {torch_version} "
          f"({args.python}), {os.cpu_count()} CPUs, Gloo loopback"
          + "".join(f"; worker env {kv}" for kv in args.worker_env))
    if args.check_model and not check_model(args, prof):
        sys.exit("the two models differ in size")

    # Runs of one round: (key, ranks, function); the order alternates between rounds.
    def tessera(world, tag):
        return run_tessera(args, world, n_layers, tmp, tag)

    def pytorch(world, tag, bn):
        return run_pytorch(args, world, tmp, tag, bn)

    runs = []
    for world in (1, 2):
        runs.append((("tessera", world), lambda w=world, t="": tessera(w, t)))
        runs.append((("pytorch", world), lambda w=world, t="": pytorch(w, t, args.bn)))
    for bn in args.also_bn:
        runs.append(((bn, 2), lambda t="", bn=bn: pytorch(2, t, bn)))
    res = {key: [] for key, _ in runs}
    foreign_max = 0.0
    for rnd in range(args.rounds):
        for i, (key, fn) in enumerate(runs if rnd % 2 == 0 else runs[::-1]):
            tag = f"{rnd}-{i}"
            (rate, split), foreign = measured(args, lambda: fn(t=tag))
            res[key].append((rate, split))
            foreign_max = max(foreign_max, foreign)

    def sps(key):
        return statistics.median(x[0] for x in res[key])

    def med_ms(key, field):
        return statistics.median(x[1][field] for x in res[key]) * 1e3

    print()
    print("| ranks | tessera-worker samples/s | PyTorch DDP samples/s | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    ratios = {}
    for world in (1, 2):
        t, p = sps(("tessera", world)), sps(("pytorch", world))
        ratios[world] = t / p
        print(f"| {world} | {t:.1f} | {p:.1f} | {t / p:.2f}x |")
    print()
    print("target: tessera-worker >= 1.0x PyTorch  -> " + ", ".join(
        f"{w} rank{'s' if w > 1 else ''} {'met' if r >= 1.0 else 'NOT met'} ({r:.2f}x)"
        for w, r in ratios.items()))
    for world in (1, 2):
        tk, pk = ("tessera", world), ("pytorch", world)
        print(f"{world} rank{'s' if world > 1 else ' '}: tessera-worker step "
              f"{med_ms(tk, 'step_s'):.1f} ms (rank 0: compute {med_ms(tk, 'compute_s'):.1f}, "
              f"comm {med_ms(tk, 'comm_s'):.1f}, other {med_ms(tk, 'other_s'):.1f}), "
              f"PyTorch step {med_ms(pk, 'step_s'):.1f} ms; "
              f"samples/s per round: tessera-worker "
              + "/".join(f"{x[0]:.0f}" for x in res[tk]) + ", PyTorch "
              + "/".join(f"{x[0]:.0f}" for x in res[pk])
              + f"; final loss tessera-worker {res[tk][-1][1]['loss']:.4f}, "
              f"PyTorch {res[pk][-1][1]['loss']:.4f}")
    for bn in args.also_bn:
        print(f"PyTorch DDP 2 ranks, --bn {bn}: {sps((bn, 2)):.1f} samples/s, step "
              f"{med_ms((bn, 2), 'step_s'):.1f} ms "
              f"(tessera-worker {sps(('tessera', 2)) / sps((bn, 2)):.2f}x)")
    print("differences: tessera-worker reads, crops and noises each batch from the PNG files on "
          "a background prefetch thread while the step runs, and its step time covers the "
          "whole step (optimizer, a [loss, checkpoint, stop] all-reduce); PyTorch has the "
          "images preloaded, prepares the batch outside the timed region and does not "
          "all-reduce the loss (its final loss is rank 0's). " + BN_NOTE[args.bn]
          + " Same images, different augmentation/noise random streams.")
    print(f"({time.time() - t_start:.0f} s; other processes used at most {foreign_max:.2f} "
          f"cores on average during a kept run)")


if __name__ == "__main__":
    main()
