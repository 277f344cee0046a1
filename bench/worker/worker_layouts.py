#!/usr/bin/env python3
"""Throughput of tessera-worker per layout on this machine (Gloo over loopback).

Runs the worker as 1 rank (single process), 2 ranks data parallel, 2 ranks
pipeline (1F1B, 4 micro-batches) and, with --hybrid, 4 ranks hybrid (2 data
replicas of 2-stage pipelines). Prints samples/s (median over the steps after
warm-up, from rank 0's progress lines) and the mean per-step time split of
every rank: compute / comm (gradient all-reduce, sends) / bubble (waiting for
a neighbour stage).

usage: worker_layouts.py --worker build/worker/runtime/tessera-worker
         [--model tiny-skip --width 512 --batch 64 --steps 30] [--hybrid]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from worker_ranks import free_port  # noqa: E402


def layer_count(args):
    # tiny-skip has 6 layers, tiny-mlp 5; reference models: ask the profiler.
    if args.model == "tiny-skip":
        return 6
    if args.model == "tiny-mlp":
        return 5
    out = subprocess.run([args.worker, "profile", "--model", args.model, "--batch", "1",
                          "--image-size", str(args.image_size), "--width", str(args.width),
                          "--repeats", "1"], check=True, capture_output=True, text=True).stdout
    return len(json.loads(out)["layers"])


def plans(n, batch, hybrid):
    half = n // 2
    out = [("single", None, 1)]
    out.append(("data x2", {"layout": "data", "global_batch": batch, "micro_batches": 1,
                            "replicas": [{"batch": batch // 2, "stages": [{"rank": 0, "layers": [0, n]}]},
                                         {"batch": batch - batch // 2, "stages": [{"rank": 1, "layers": [0, n]}]}]}, 2))
    out.append(("pipeline x2", {"layout": "pipeline", "global_batch": batch, "micro_batches": 4,
                                "schedule": "1f1b",
                                "replicas": [{"batch": batch, "stages": [{"rank": 0, "layers": [0, half]},
                                                                         {"rank": 1, "layers": [half, n]}]}]}, 2))
    if hybrid:
        out.append(("hybrid 2x2", {"layout": "hybrid", "global_batch": batch, "micro_batches": 4,
                                   "schedule": "1f1b",
                                   "replicas": [{"batch": batch // 2, "stages": [{"rank": 0, "layers": [0, half]},
                                                                                 {"rank": 1, "layers": [half, n]}]},
                                                {"batch": batch - batch // 2, "stages": [{"rank": 2, "layers": [0, half]},
                                                                                         {"rank": 3, "layers": [half, n]}]}]}, 4))
    return out


def run(args, name, plan, world, tmp):
    port = str(free_port())
    procs = []
    plan_path = os.path.join(tmp, "plan.json")
    if plan:
        with open(plan_path, "w") as f:
            json.dump(plan, f)
    for r in range(world):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("TESSERA_") and k not in ("RANK", "WORLD_SIZE")}
        prog = os.path.join(tmp, f"{name.replace(' ', '_')}-{r}.jsonl")
        env["TESSERA_PROGRESS_FILE"] = prog
        if plan:
            env.update(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r),
                       LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                       TESSERA_PLAN=plan_path)
        cmd = [args.worker, "train", "--model", args.model, "--steps", str(args.steps),
               "--batch", str(args.batch), "--width", str(args.width), "--lr", "0.01",
               "--threads", str(args.threads)]
        if args.data:
            cmd += ["--data", args.data, "--image-size", str(args.image_size)]
        procs.append((subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True), prog))
    rows = []
    for p, prog in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"{name}: worker failed ({p.returncode}): {err}")
        with open(prog) as f:
            rows.append([json.loads(l) for l in f][args.warmup:])
    sps = statistics.median(x["samples_per_s"] for x in rows[0])
    split = lambda k: statistics.mean(statistics.mean(x[k] for x in r) for r in rows) * 1000
    return sps, split("compute_s"), split("comm_s"), split("bubble_s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--model", default="tiny-skip")
    ap.add_argument("--data", default="")
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hybrid", action="store_true", help="also run 4 ranks hybrid")
    args = ap.parse_args()
    n = layer_count(args)
    print(f"model {args.model} width {args.width} global batch {args.batch}, "
          f"{args.steps} steps ({args.warmup} warm-up), {os.cpu_count()} CPU cores, Gloo loopback")
    print(f"{'layout':<12} {'ranks':>5} {'samples/s':>10} {'compute ms':>11} {'comm ms':>8} {'bubble ms':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, plan, world in plans(n, args.batch, args.hybrid):
            sps, c, m, b = run(args, name, plan, world, tmp)
            print(f"{name:<12} {world:>5} {sps:>10.1f} {c:>11.2f} {m:>8.2f} {b:>10.2f}")


if __name__ == "__main__":
    main()
