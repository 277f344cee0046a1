#!/usr/bin/env python3
"""Predicted vs measured step time of the planner's data, pipeline and hybrid plans.

On this one machine:
  1. profiles the model with `tessera-worker profile` (per-layer forward/backward ms
     on this CPU, at the threads every rank trains with);
  2. calibrates the host on configurations that are NOT checked below:
       - single rank at two batch sizes: per-sample compute vs the profile, and the
         per-step overhead (optimizer step) -> effective memory bandwidth of that step;
       - two equal data-parallel ranks with a large and a small gradient -> Gloo
         loopback all-reduce bandwidth and latency;
       - a 2-stage pipeline of negligible compute, 32 micro-batches -> the per
         micro-batch overhead of a stage (message wake-ups on this host);
     The profile is taken at two batch sizes (--profile-batch and --fixed-batch) so
     every layer's time splits into a per-call part and a per-sample part.
  3. builds an emulated mixed cluster: 2 "nodes" on this host, each with one fast
     and one slow emulated GPU (--speeds; they must add up to at most the host's
     cores: an emulated device holds each compute segment for its CPU work / its
     speed, worker/runtime/emulated_device.h); every device measured as "cpu";
  4. asks the real planner (tessera-predict) for the best plan of each layout;
  5. runs the real worker ranks with that plan (the rank plan as the controller
     builds it: ranks numbered replica by replica, stage by stage; torchrun
     environment; TESSERA_DEVICE_SPEED), reads the step time from rank 0's
     progress lines (median after warm-up) and prints the table.

usage: calibrate.py --worker build-sched-rel/worker/runtime/tessera-worker
                    --predict build-sched-rel/bench/calibration/tessera-predict
                    [--model tiny-skip --width 1024 --global-batch 48 --steps 16 --warmup 4]
                    [--rounds 2] [--nice -10]
The matrix of mixes against hand-made baselines is bench/hetero/hetero_matrix.py.
Python 3 standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from worker_ranks import (Runner, data_plan, gen_images, rank_plan_of, scratch_folder,  # noqa: E402
                          summary)


def param_bytes(profile):
    return sum(l["param_bytes"] for l in profile["layers"])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--predict", required=True)
    ap.add_argument("--model", default="tiny-skip")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--data", default="", help="image folder (reference models; made if empty)")
    ap.add_argument("--global-batch", type=int, default=48)
    ap.add_argument("--profile-batch", type=int, default=16)
    ap.add_argument("--fixed-batch", type=int, default=4,
                    help="second, smaller profile batch for per-call layer costs (0: off)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2, help="measure each layout this many times")
    ap.add_argument("--nice", type=int, default=0, help="run the worker processes at this nice")
    ap.add_argument("--speeds", default="0.6,0.3,0.6,0.3",
                    help="emulated speeds of nodeA:0, nodeA:1, nodeB:0, nodeB:1")
    ap.add_argument("--keep", default="", help="keep the profile, snapshot and plans here")
    args = ap.parse_args()
    tmp, tmp_holder = scratch_folder(args.keep)
    if args.model not in ("tiny-skip", "tiny-mlp") and not args.data:
        args.data = os.path.join(tmp, "images")
        gen_images(args.worker, args.data, args.image_size)
    run = Runner(args, tmp)
    t_start = time.time()

    # 1. Profile.
    profile = run.profile(args.model, args.width, args.profile_batch, args.fixed_batch,
                          args.repeats)
    prof_path = os.path.join(tmp, "profile.json")
    with open(prof_path, "w") as f:
        json.dump(profile, f)
    n_layers = len(profile["layers"])
    fixed_total = sum(l.get("fwd_fixed_ms", 0) + l.get("bwd_fixed_ms", 0)
                      for l in profile["layers"]) / 1e3
    per_sample = (sum(l["fwd_ms"] + l["bwd_ms"] for l in profile["layers"]) / 1e3
                  - fixed_total) / profile["batch"]

    # 2. Host calibration (configurations not checked below).
    b1 = max(2, args.global_batch // 4)
    t1 = run.single(args.model, args.width, b1)
    t2 = run.single(args.model, args.width, 2 * b1)
    slope = (t2 - t1) / b1
    overhead = max(0.0, t1 - b1 * slope)
    # The step overhead of one rank (M = 1) is the optimizer plus one micro-batch's
    # per-call layer costs, which the profile already accounts for.
    opt_time = overhead - fixed_total
    weights = param_bytes(profile) * 3  # parameters, gradients, SGD momentum
    opt_bw = 2 * weights / opt_time if opt_time > 1e-4 else 0.0
    # Loopback all-reduce: 2 equal data-parallel ranks, tiny-skip with a big and a small gradient.
    ar = {}
    for w in (1024, 64):
        step, split = run.ranks("tiny-skip", w, data_plan(6, [16, 16]),
                                [{"node": "h", "speed": 1.0}, {"node": "h", "speed": 1.0}])
        ar[w] = (statistics.mean(s["comm_s"] for s in split), 12 * w * w + 64 * w + 16)  # bytes
    (c_big, g_big), (c_small, g_small) = ar[1024], ar[64]
    bw = (g_big - g_small) / max(c_big - c_small, 1e-6)
    # comm = G / bw + 2 lat (gradient ring of 2) + 2 lat (step-end vote of 2)
    lat = max(1e-6, (c_small - g_small / bw) / 4)
    link = {"bandwidth_bytes_per_s": bw, "latency_s": lat}
    # Per micro-batch overhead of a pipeline stage on this host (message wake-ups):
    # 2 stages of negligible compute, M = 32: step = (M + 1) x (o + 2 lat).
    mb = 32
    pipe = {"layout": "pipeline", "global_batch": mb, "micro_batches": mb, "schedule": "1f1b",
            "replicas": [{"batch": mb, "stages": [{"rank": 0, "device": "h:0", "layers": [0, 3]},
                                                  {"rank": 1, "device": "h:1", "layers": [3, 6]}]}]}
    t_pipe, _ = run.ranks("tiny-skip", 16, pipe,
                          [{"node": "h", "speed": 1.0}, {"node": "h", "speed": 1.0}])
    mb_overhead = max(2e-4, t_pipe / (mb + 1) - 2 * lat)

    # 3. The emulated mixed cluster.
    speeds = [float(s) for s in args.speeds.split(",")]
    if sum(speeds) > (os.cpu_count() or 1):
        sys.exit(f"--speeds add up to {sum(speeds):g}, more than this host's {os.cpu_count()} "
                 "cores: emulated devices would wait for cores")
    names = ["nodeA", "nodeA", "nodeB", "nodeB"]
    nodes = []
    for name in ("nodeA", "nodeB"):
        devs = [{"index": len([1 for n in names[:i] if n == name]), "type": f"emulated-{s}",
                 "memory_bytes": 16 << 30, "memory_bandwidth_bytes_per_s": opt_bw,
                 "measured_as": profile.get("device", "cpu"), "relative_speed": s}
                for i, (n, s) in enumerate(zip(names, speeds)) if n == name]
        nodes.append({"name": name, "intra_node": link, "network": link, "devices": devs})
    snapshot = {"nodes": nodes}
    snap_path = os.path.join(tmp, "snapshot.json")
    with open(snap_path, "w") as f:
        json.dump(snapshot, f, indent=1)
    speed_of = {}
    for node in nodes:
        for d in node["devices"]:
            speed_of[f"{node['name']}:{d['index']}"] = {"node": node["name"],
                                                        "speed": d["relative_speed"]}

    print(f"model {args.model} width {args.width} image {args.image_size} global batch "
          f"{args.global_batch}, {args.threads} thread/rank, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}, nice {args.nice}")
    print(f"profile: {per_sample * 1e3:.2f} ms/sample + {fixed_total * 1e3:.2f} ms/micro-batch "
          f"fwd+bwd (batches {profile['batch']}, {profile.get('fixed_batch', '-')}); "
          f"single rank: {slope * 1e3:.2f} ms/sample + {overhead * 1e3:.1f} ms/step "
          f"(optimizer bandwidth {opt_bw / 1e9:.2f} GB/s)")
    print(f"host: loopback all-reduce: {bw / 1e9:.2f} GB/s, {lat * 1e6:.0f} us latency; "
          f"micro-batch overhead {mb_overhead * 1e3:.2f} ms")
    print(f"cluster: nodeA {speeds[0]}, {speeds[1]}; nodeB {speeds[2]}, {speeds[3]} "
          f"(emulated, one host, loopback)")

    # 4 + 5. Plans, runs, table.
    results = []
    for layout in ("data", "pipeline", "hybrid"):
        out = subprocess.run([args.predict, "--snapshot", snap_path, "--profile", prof_path,
                              "--layout", layout, "--global-batch", str(args.global_batch),
                              "--optimizer-state-multiplier", "1", "--micro-batch-overhead",
                              repr(mb_overhead)], capture_output=True, text=True)
        if out.returncode != 0:
            results.append((layout, f"no plan: {out.stderr.strip()}", None, None, None))
            continue
        plans = json.loads(out.stdout)["plans"]
        with open(os.path.join(tmp, f"plan-{layout}.json"), "w") as f:
            json.dump(plans, f, indent=1)
        plan = plans[0]
        rank_plan, devices = rank_plan_of(plan, args.global_batch)
        steps, splits = [], []
        for _ in range(args.rounds):
            step, split = run.ranks(args.model, args.width, rank_plan,
                                    [speed_of[d] for d in devices])
            steps.append(step)
            splits.append(split)
        measured = statistics.median(steps)
        results.append((layout, summary(plan), plan["predicted"]["step_s"], measured, splits[-1]))

    print(f"{'layout':<9} {'predicted s':>11} {'measured s':>10} {'error':>7}  plan")
    for layout, plan, pred, meas, split in results:
        if pred is None:
            print(f"{layout:<9} {'-':>11} {'-':>10} {'-':>7}  {plan}")
            continue
        err = (pred - meas) / meas * 100
        print(f"{layout:<9} {pred:>11.3f} {meas:>10.3f} {err:>+6.1f}%  {plan}")
    print("per rank (last round, median ms compute/comm/bubble):")
    for layout, _, pred, _, split in results:
        if pred is not None:
            print(f"  {layout:<9} " + "  ".join(
                f"r{i} {s['compute_s'] * 1e3:.0f}/{s['comm_s'] * 1e3:.0f}/{s['bubble_s'] * 1e3:.0f}"
                for i, s in enumerate(split)))
    print(f"({time.time() - t_start:.0f} s, load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
