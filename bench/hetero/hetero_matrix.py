#!/usr/bin/env python3
"""Planned layouts against what a lab would run by hand, on a matrix of mixed clusters.

Every mix is a cluster of emulated GPUs on this machine (2 or 3 nodes, 2 to 6 devices,
speed ratios 1:1 to 1:6; one mix whose model does not fit the small devices, one with a
slow inter-node link) and a reference model. For each mix the real planner
(tessera-predict, the library tesserad uses) returns its plan and the two hand-made
baselines it scores with every job: an even split over all devices (what torchrun does)
and an even split over the best homogeneous group (what a lab does when it gives up on
the old box). Each of the three runs as real tessera-worker ranks (Gloo, the torchrun
environment, the emulated device's speed and memory); plans are interleaved within a
round and the step time is the median over rounds of each run's median step.

Emulated devices hold each compute segment for its CPU work / their speed
(worker/runtime/emulated_device.h), so the speeds of the devices that run at once must
fit the host's cores: every mix declares speeds adding up to at most --max-speed-sum.
When this process may create network namespaces (root, iproute2), each node runs in
its own namespace on a bridge and a node that declares a network link gets its veth
shaped to it with tc (netem rate + delay); otherwise everything runs on loopback and
the slow-link mix is skipped. The output says which.

Host figures the cost model needs (loopback and veth all-reduce bandwidth/latency, the
per-micro-batch overhead, the optimizer step's memory bandwidth) are measured first, on
configurations the matrix does not check (calibration never fits on a checked mix).

A lab's own model: --model-file F (a TorchScript sequence of layers, as a model:
entrypoint's train job runs it; --loss, default l1) replaces every chosen mix's model, so
the planner's predicted step for it is set beside the measured one on the same mixes.

usage: hetero_matrix.py --worker build/worker/runtime/tessera-worker
                        --predict build/bench/calibration/tessera-predict
                        [--rounds 3] [--steps 12] [--warmup 4] [--mixes a,b,...] [--json out.json]
                        [--model-file F [--loss l1]]
Python 3 standard library only.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from worker_ranks import (NetnsCluster, Runner, data_plan, gen_images, rank_plan_of,  # noqa: E402
                          scratch_folder, summary)

GIB = 1 << 30

# name: nodes [(node, [speed, ...], network link or None)], model, width, global batch,
# kind ("compute" | "memory" | "link"). Speeds are in units of one host core.
SLOW_LINK = {"bandwidth_bytes_per_s": 12.5e6, "latency_s": 2e-3}  # 100 Mbit/s, 2 ms
MIXES = [
    ("even-2", [("a", [0.6], None), ("b", [0.6], None)], "colorize-unet", 16, 32, "compute"),
    ("1:2-2", [("a", [0.8], None), ("b", [0.4], None)], "colorize-unet", 16, 32, "compute"),
    ("1:3-3", [("a", [0.75, 0.25], None), ("b", [0.25], None)], "denoiser-dncnn", 32, 32,
     "compute"),
    ("issue-4", [("a", [0.5, 0.175], None), ("b", [0.5, 0.175], None)], "tiny-skip", 1024, 48,
     "compute"),
    ("1:4-4", [("a", [0.6, 0.15], None), ("b", [0.6, 0.15], None)], "colorize-unet", 16, 48,
     "compute"),
    ("1:6-6", [("a", [0.6, 0.1], None), ("b", [0.3, 0.1], None), ("c", [0.2, 0.1], None)],
     "denoiser-dncnn", 32, 48, "compute"),
    ("1:2:4-3", [("a", [0.6], None), ("b", [0.3], None), ("c", [0.15], None)], "tiny-skip", 1024,
     42, "compute"),
    ("small-mem", [("a", [0.6], None), ("b", [0.3, 0.3], None)], "colorize-unet", 16, 32,
     "memory"),
    ("slow-link", [("a", [0.5, 0.25], SLOW_LINK), ("b", [0.5, 0.25], SLOW_LINK)], "tiny-skip",
     1024, 48, "link"),
]


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def whole_model_bytes(profile):
    """What the cost model says one device needs for the whole model with one sample."""
    k = 2 + 1  # parameters, gradients, SGD momentum
    params = sum(l["param_bytes"] for l in profile["layers"])
    acts = sum(l.get("activation_bytes_per_sample", 0) for l in profile["layers"])
    return params * k + acts


class Matrix:
    def __init__(self, args, tmp):
        self.a = args
        self.tmp = tmp
        self.run = Runner(args, tmp)
        self.profiles = {}
        self.opt_bw = {}
        self.links = {}
        self.mb_overhead = 2e-4
        self.netns = NetnsCluster("hx")
        self.mode = "namespaces" if (not args.loopback and self.netns.available()) else "loopback"

    # -- host calibration (configurations the matrix does not check) -----------------------
    def profile(self, model, width):
        key = (model, width)
        if key not in self.profiles:
            p = self.run.profile(model, width, self.a.profile_batch, self.a.fixed_batch,
                                 self.a.repeats)
            stem = os.path.basename(model) if model.startswith("file:") else model
            path = os.path.join(self.tmp, f"profile-{stem}-{width}.json")
            with open(path, "w") as f:
                json.dump(p, f)
            self.profiles[key] = (p, path)
        return self.profiles[key]

    def calibrate_optimizer(self, model, width):
        """Single rank at two batches: per-step overhead less the profile's per-call costs
        is the optimizer step -> the bandwidth of its passes over the weights."""
        key = (model, width)
        if key in self.opt_bw:
            return self.opt_bw[key]
        profile, _ = self.profile(model, width)
        fixed = sum(l.get("fwd_fixed_ms", 0) + l.get("bwd_fixed_ms", 0)
                    for l in profile["layers"]) / 1e3
        b1 = 8
        t1 = self.run.single(model, width, b1)
        t2 = self.run.single(model, width, 2 * b1)
        slope = (t2 - t1) / b1
        opt_time = max(0.0, t1 - b1 * slope) - fixed
        weights = sum(l["param_bytes"] for l in profile["layers"]) * 3
        self.opt_bw[key] = 2 * weights / opt_time if opt_time > 1e-4 else 0.0
        return self.opt_bw[key]

    def calibrate_links(self):
        """All-reduce of 2 equal data-parallel ranks with a big and a small gradient
        (tiny-skip 1024 vs 64): inside one node and, with namespaces, across two."""
        pairs = [("intra", "n0", "n0")]
        if self.mode == "namespaces":
            self.netns.up([("n0", None), ("n1", None)])
            self.run.netns = self.netns
            pairs.append(("network", "n0", "n1"))
        for name, na, nb in pairs:
            ar = {}
            for w in (1024, 64):
                _, split = self.run.ranks("tiny-skip", w, data_plan(6, [16, 16]),
                                          [{"node": na, "speed": 1.0}, {"node": nb, "speed": 1.0}])
                ar[w] = (statistics.mean(s["comm_s"] for s in split), 12 * w * w + 64 * w + 16)
            (c_big, g_big), (c_small, g_small) = ar[1024], ar[64]
            bw = (g_big - g_small) / max(c_big - c_small, 1e-6)
            lat = max(1e-6, (c_small - g_small / bw) / 4)
            self.links[name] = {"bandwidth_bytes_per_s": bw, "latency_s": lat}
        if "network" not in self.links:
            self.links["network"] = self.links["intra"]
        # Per micro-batch overhead of a stage: 2 stages of negligible compute, M = 32.
        mb = 32
        pipe = {"layout": "pipeline", "global_batch": mb, "micro_batches": mb, "schedule": "1f1b",
                "replicas": [{"batch": mb, "stages": [{"rank": 0, "device": "h:0", "layers": [0, 3]},
                                                      {"rank": 1, "device": "h:1", "layers": [3, 6]}]}]}
        t_pipe, _ = self.run.ranks("tiny-skip", 16, pipe,
                                   [{"node": "n0", "speed": 1.0}, {"node": "n0", "speed": 1.0}])
        self.mb_overhead = max(2e-4, t_pipe / (mb + 1) - 2 * self.links["intra"]["latency_s"])
        if self.mode == "namespaces":
            self.netns.down()
            self.run.netns = None

    # -- one mix -----------------------------------------------------------------------------
    def snapshot(self, mix, profile, opt_bw):
        name, nodes, model, width, batch, kind = mix
        small_mem = None
        if kind == "memory":
            # The small devices cannot hold the whole model and one sample: ~60% of it.
            small_mem = int(0.6 * whole_model_bytes(profile) / 0.9)
        out = []
        speed_max = max(s for _, speeds, _ in nodes for s in speeds)
        for node, speeds, link in nodes:
            devs = []
            for i, s in enumerate(speeds):
                mem = 16 * GIB
                if small_mem and s < speed_max:
                    mem = small_mem
                devs.append({"index": i, "type": f"emulated-{s:g}", "memory_bytes": mem,
                             "memory_bandwidth_bytes_per_s": opt_bw * s, "measured_as": "cpu",
                             "relative_speed": s})
            if link and self.netns.shaping.startswith("rate only"):
                # tbf shapes the rate only: the link keeps the veth's own latency.
                link = dict(link, latency_s=self.links["network"]["latency_s"])
            out.append({"name": node, "intra_node": self.links["intra"],
                        "network": link or self.links["network"], "devices": devs})
        return {"nodes": out}

    def predict(self, snap_path, prof_path, batch):
        out = subprocess.run([self.a.predict, "--snapshot", snap_path, "--profile", prof_path,
                              "--layout", "auto", "--global-batch", str(batch),
                              "--optimizer-state-multiplier", "1", "--micro-batch-overhead",
                              repr(self.mb_overhead)], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"planner: {out.stderr.strip()}")
        return json.loads(out.stdout)

    def run_mix(self, mix):
        name, nodes, model, width, batch, kind = mix
        if kind == "link" and self.mode != "namespaces":
            return {"name": name, "skipped": "needs network namespaces to shape the link"}
        profile, prof_path = self.profile(model, width)
        opt_bw = self.calibrate_optimizer(model, width)
        snap = self.snapshot(mix, profile, opt_bw)
        snap_path = os.path.join(self.tmp, f"snapshot-{name}.json")
        with open(snap_path, "w") as f:
            json.dump(snap, f, indent=1)
        plan_set = self.predict(snap_path, prof_path, batch)
        with open(os.path.join(self.tmp, f"plans-{name}.json"), "w") as f:
            json.dump(plan_set, f, indent=1)
        device_of = {}
        for node in snap["nodes"]:
            for d in node["devices"]:
                device_of[f"{node['name']}:{d['index']}"] = {
                    "node": node["name"], "speed": d["relative_speed"],
                    "memory_bytes": d["memory_bytes"] if kind == "memory" else 0}
        candidates = [("planner", plan_set["plans"][0])]
        baselines = {b["name"]: b for b in plan_set.get("baselines", [])}
        for bname in ("even_all", "best_group"):
            b = baselines.get(bname)
            if b and b.get("feasible") and b.get("plan"):
                candidates.append((bname, b["plan"]))
        # Identical plans run once.
        runs, seen = [], {}
        for label, plan in candidates:
            key = summary(plan)
            if key in seen:
                runs.append((label, plan, seen[key]))
            else:
                seen[key] = label
                runs.append((label, plan, None))
        if self.mode == "namespaces":
            self.netns.up([(n, link) for n, _, link in nodes])
            self.run.netns = self.netns
        steps = {label: [] for label, _, same in runs if same is None}
        mem = {}
        try:
            for _ in range(self.a.rounds):
                for label, plan, same in runs:
                    if same is not None:
                        continue
                    rank_plan, devs = rank_plan_of(plan, batch)
                    try:
                        step, split = self.run.ranks(model, width, rank_plan,
                                                     [device_of[d] for d in devs])
                    except RuntimeError as e:
                        steps[label].append(None)
                        mem[label] = f"failed: {e}"
                        continue
                    steps[label].append(step)
                    mem[label] = (max(s["peak_memory_bytes"] for s in split),
                                  max(s["predicted_peak_memory_bytes"] for s in split))
        finally:
            if self.mode == "namespaces":
                self.netns.down()
                self.run.netns = None
        shown = os.path.basename(model) if model.startswith("file:") else f"{model} w{width}"
        result = {"name": name, "model": shown, "model_id": model, "width": width,
                  "batch": batch, "kind": kind,
                  "speeds": [s for _, sp, _ in nodes for s in sp], "runs": {}}
        for label, plan, same in runs:
            src = same or label
            ok = [s for s in steps[src] if s is not None]
            result["runs"][label] = {
                "plan": f"{plan['layout']} {summary(plan)}",
                "predicted_s": plan["predicted"]["step_s"],
                "measured_s": statistics.median(ok) if ok else None,
                "rounds": steps[src], "memory": mem.get(src)}
        for bname in ("even_all", "best_group"):
            b = baselines.get(bname)
            if bname not in result["runs"]:
                result["runs"][bname] = {"plan": (b or {}).get("reason", "not scored"),
                                         "predicted_s": None, "measured_s": None,
                                         "infeasible": True}
        result["why"] = plan_set["plans"][0].get("why", "")
        return result


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--predict", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--profile-batch", type=int, default=16)
    ap.add_argument("--fixed-batch", type=int, default=1,
                    help="second profile batch: per-call costs down to 1-sample micro-batches")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--max-speed-sum", type=float, default=0.75,
                    help="largest sum of a mix's speeds, per host core")
    ap.add_argument("--mixes", default="", help="comma-separated mix names (default: all)")
    ap.add_argument("--loopback", action="store_true", help="never use network namespaces")
    ap.add_argument("--keep", default="", help="keep profiles, snapshots and plans here")
    ap.add_argument("--json", default="", help="write the results here")
    ap.add_argument("--nice", type=int, default=0)
    ap.add_argument("--model-file", default="",
                    help="a lab's TorchScript sequence of layers in place of each mix's model")
    ap.add_argument("--loss", default="l1", help="--model-file: mse | l1 | cross_entropy")
    args = ap.parse_args()
    tmp, tmp_holder = scratch_folder(args.keep)
    args.data = os.path.join(tmp, "images")
    if not os.path.isdir(args.data):
        gen_images(args.worker, args.data, args.image_size)
    cores = os.cpu_count() or 1
    mixes = [m for m in MIXES if not args.mixes or m[0] in args.mixes.split(",")]
    if args.model_file:
        # (name, nodes, model, width, batch, kind): the file instead of the builtin model.
        model = "file:" + os.path.abspath(args.model_file)
        mixes = [(m[0], m[1], model, m[3], m[4], m[5]) for m in mixes]
    for m in mixes:
        total = sum(s for _, sp, _ in m[1] for s in sp)
        if total > args.max_speed_sum * cores + 1e-9:
            sys.exit(f"mix {m[0]}: speeds add up to {total:g}, over {args.max_speed_sum:g} x "
                     f"{cores} cores (emulated devices need their speed's share of a core)")
    mx = Matrix(args, tmp)
    t0 = time.time()
    try:
        mx.calibrate_links()
    finally:
        mx.netns.down()
    print(f"hetero matrix: {len(mixes)} mixes, {args.rounds} rounds, {args.steps} steps "
          f"({args.warmup} warm-up), image {args.image_size}, {args.threads} thread/rank, "
          f"{cores} CPUs, network: {mx.mode}"
          + (f", declared links shaped: {mx.netns.shaping}" if mx.mode == "namespaces" else ""))
    print("host (measured on configurations the matrix does not check): "
          + "; ".join(f"{k} link {v['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s "
                      f"{v['latency_s'] * 1e6:.0f} us" for k, v in mx.links.items())
          + f"; micro-batch overhead {mx.mb_overhead * 1e3:.2f} ms")
    results = []
    for m in mixes:
        try:
            r = mx.run_mix(m)
        except RuntimeError as e:
            r = {"name": m[0], "skipped": str(e)}
        results.append(r)
        print_mix(r)
        sys.stdout.flush()
    print_summary(results, mx, args)
    print(f"({time.time() - t0:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mode": mx.mode, "links": mx.links, "results": results}, f, indent=1)


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def print_mix(r):
    if "skipped" in r:
        print(f"\n== {r['name']}: skipped ({r['skipped']})")
        return
    print(f"\n== {r['name']}: {r['model']}, global batch {r['batch']}, speeds "
          f"{'/'.join(f'{s:g}' for s in r['speeds'])} ({r['kind']})")
    print(f"   {'plan':<11} {'predicted s':>11} {'measured s':>10} {'error':>7} "
          f"{'peak MiB':>9} {'pred MiB':>9}  layout")
    for label in ("planner", "even_all", "best_group"):
        x = r["runs"][label]
        err = "-"
        if x.get("predicted_s") and x.get("measured_s"):
            err = f"{(x['predicted_s'] / x['measured_s'] - 1) * 100:+.1f}%"
        mem = x.get("memory")
        peak = pred = "-"
        if isinstance(mem, (list, tuple)):
            peak, pred = f"{mem[0] / 2**20:.1f}", f"{mem[1] / 2**20:.1f}"
        elif isinstance(mem, str):
            peak = mem[:60]
        print(f"   {label:<11} {fmt(x.get('predicted_s')):>11} {fmt(x.get('measured_s')):>10} "
              f"{err:>7} {peak:>9} {pred:>9}  {x['plan']}")


def print_summary(results, mx, args):
    over_even, over_group, worst, errors, effs = [], [], [], [], []
    for r in results:
        if "skipped" in r:
            continue
        runs = r["runs"]
        p = runs["planner"]["measured_s"]
        if p is None:
            continue
        e = runs["even_all"].get("measured_s")
        g = runs["best_group"].get("measured_s")
        if e:
            over_even.append(e / p)
        if g:
            over_group.append(g / p)
        better = min(x for x in (e, g) if x) if (e or g) else None
        if better:
            worst.append((better / p, r["name"]))
        for x in runs.values():
            if x.get("predicted_s") and x.get("measured_s"):
                errors.append(abs(x["predicted_s"] / x["measured_s"] - 1))
        if r["kind"] == "compute":
            effs.append((r["name"], r["batch"], p, sum(r["speeds"]), r["model_id"], r["width"]))
    print("\n== summary")
    print(f"speedup over even split (all devices): geomean {geomean(over_even):.2f}x "
          f"over {len(over_even)} mixes (target >= 1.3x)")
    print(f"speedup over best homogeneous group:   geomean {geomean(over_group):.2f}x "
          f"over {len(over_group)} mixes (target >= 1.15x)")
    if worst:
        w = min(worst)
        print(f"worst planner / better baseline:       {w[0]:.2f}x ({w[1]}) (target >= 0.97x)")
    if errors:
        print(f"cost model |error|:                    median {statistics.median(errors) * 100:.1f}%, "
              f"max {max(errors) * 100:.1f}% over {len(errors)} runs (targets 10%, 20%)")
    # Aggregate-compute efficiency: samples/s over sum(speed) x one device's samples/s,
    # one device = a single rank at speed 1 with the same global batch.
    if effs:
        vals = []
        for name, batch, p, speed_sum, model, width in effs:
            one = mx.run.single(model, width, batch)
            vals.append((batch / p) / (speed_sum * batch / one))
        print(f"aggregate-compute efficiency:          median {statistics.median(vals) * 100:.0f}%, "
              f"min {min(vals) * 100:.0f}% over {len(vals)} compute-bound mixes (target >= 80%)")


if __name__ == "__main__":
    main()
