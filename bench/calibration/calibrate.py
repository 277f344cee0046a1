#!/usr/bin/env python3
"""Predicted vs measured step time of the planner's data, pipeline and hybrid plans.

On this one machine:
  1. profiles the model with `tessera-worker profile` (per-layer forward/backward ms
     on this CPU, at the threads every rank trains with);
  2. calibrates the host on configurations that are NOT checked below:
       - single rank at two batch sizes: per-sample compute vs the profile, and the
         per-step overhead (optimizer step) -> effective memory bandwidth of that step;
       - 4 independent single ranks at once -> effective parallel cores of the host;
       - two equal data-parallel ranks with a large and a small gradient -> Gloo
         loopback all-reduce bandwidth and latency;
       - a 2-stage pipeline of negligible compute, 32 micro-batches -> the per
         micro-batch overhead of a stage (message wake-ups on this host);
       - a 2-stage pipeline of the real model, a speed-1.0 device of one node then a
         speed-0.5 device of the other, layers cut where the two stages' compute is most
         even (by the profile), M = 4 -> the per-message delay under compute load (the
         cost model's message_delay_s: it shows only when the 1F1B round trip binds, i.e.
         with balanced stages), fitted by bisection on tessera-predict --evaluate of that
         very plan;
     The profile is taken at two batch sizes (--profile-batch and --fixed-batch) so
     every layer's time splits into a per-call part and a per-sample part.
  3. builds an emulated mixed cluster: 2 "nodes" on this host, each with one fast
     (speed 1.0) and one slow (speed 0.5) emulated GPU; every device measured as
     "cpu" with its relative speed, sharing the host's cores;
  4. asks the real planner (tessera-predict) for the best plan of each layout;
  5. runs the real worker ranks with that plan (the rank plan as the controller
     builds it: ranks numbered replica by replica, stage by stage; torchrun
     environment; TESSERA_DEVICE_SPEED), reads the step time from rank 0's
     progress lines (median after warm-up) and prints the table.

usage: calibrate.py --worker build-sched-rel/worker/runtime/tessera-worker
                    --predict build-sched-rel/bench/calibration/tessera-predict
                    [--model tiny-skip --width 1024 --global-batch 48 --steps 16 --warmup 4]
                    [--rounds 2] [--nice -10]
Python 3 standard library only.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Runner:
    def __init__(self, args, tmp):
        self.a = args
        self.tmp = tmp
        self.count = 0

    def base_env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("TESSERA_") and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                                             "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                                             "MASTER_PORT")}
        env["OMP_NUM_THREADS"] = str(self.a.threads)
        return env

    def prefix(self):
        return ["nice", "-n", str(self.a.nice)] if self.a.nice else []

    def train_cmd(self, model, width, steps, batch=None):
        cmd = self.prefix() + [self.a.worker, "train", "--model", model, "--steps", str(steps),
                               "--width", str(width), "--threads", str(self.a.threads),
                               "--lr", "0.001", "--image-size", str(self.a.image_size)]
        if self.a.data:
            cmd += ["--data", self.a.data]
        if batch is not None:
            cmd += ["--batch", str(batch)]
        return cmd

    def profile(self):
        cmd = self.prefix() + [self.a.worker, "profile", "--model", self.a.model, "--batch",
                               str(self.a.profile_batch), "--image-size", str(self.a.image_size),
                               "--width", str(self.a.width), "--repeats", str(self.a.repeats)]
        if self.a.fixed_batch > 0:
            cmd += ["--fixed-batch", str(self.a.fixed_batch)]
        out = subprocess.run(cmd, env=self.base_env(), check=True, capture_output=True,
                             text=True).stdout
        return json.loads(out)

    def launch(self, jobs):
        """jobs: list of (cmd, env extra). Returns each one's progress rows (after warm-up)."""
        procs = []
        for cmd, extra in jobs:
            self.count += 1
            prog = os.path.join(self.tmp, f"progress-{self.count}.jsonl")
            env = self.base_env()
            env.update(extra)
            env["TESSERA_PROGRESS_FILE"] = prog
            procs.append((subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True), prog))
        rows = []
        for p, prog in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                sys.exit(f"worker failed ({p.returncode}): {err}")
            with open(prog) as f:
                rows.append([json.loads(line) for line in f][self.a.warmup:])
        return rows

    def single(self, model, width, batch, copies=1):
        rows = self.launch([(self.train_cmd(model, width, self.a.steps, batch), {})] * copies)
        return statistics.median(batch / x["samples_per_s"] for r in rows for x in r)

    def ranks(self, model, width, rank_plan, devices):
        """devices: per rank (node, speed). Returns (step_s median, per-rank medians)."""
        path = os.path.join(self.tmp, f"plan-{self.count}.json")
        with open(path, "w") as f:
            json.dump(rank_plan, f)
        world = len(devices)
        port = str(free_port())
        per_node = {}
        for node, _ in devices:
            per_node[node] = per_node.get(node, 0) + 1
        local = {}
        jobs = []
        for rank, (node, speed) in enumerate(devices):
            extra = {"RANK": str(rank), "WORLD_SIZE": str(world),
                     "LOCAL_RANK": str(local.get(node, 0)),
                     "LOCAL_WORLD_SIZE": str(per_node[node]), "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": port, "TESSERA_PLAN": path, "TESSERA_DEVICE": "cpu",
                     "TESSERA_DEVICE_SPEED": repr(speed)}
            local[node] = local.get(node, 0) + 1
            jobs.append((self.train_cmd(model, width, self.a.steps), extra))
        rows = self.launch(jobs)
        gb = rank_plan["global_batch"]
        step = statistics.median(gb / x["samples_per_s"] for x in rows[0])
        split = [{k: statistics.median(x[k] for x in r) for k in ("compute_s", "comm_s", "bubble_s")}
                 for r in rows]
        return step, split


def data_plan(n_layers, shares):
    return {"layout": "data", "global_batch": sum(shares), "micro_batches": 1, "schedule": "1f1b",
            "replicas": [{"batch": b, "stages": [{"rank": i, "device": f"h:{i}",
                                                 "layers": [0, n_layers]}]}
                         for i, b in enumerate(shares)]}


def rank_plan_of(plan, global_batch):
    """As daemon/attempt_launch.cc BuildAttemptLaunch: ranks replica by replica, stage by stage."""
    replicas, devices = [], []
    for rep in plan["replicas"]:
        stages = []
        for st in rep["stages"]:
            (dev,) = st["devices"]
            stages.append({"rank": len(devices), "device": dev, "layers": st["layers"]})
            devices.append(dev)
        replicas.append({"batch": rep["batch"], "stages": stages})
    return {"layout": plan["layout"], "global_batch": global_batch,
            "micro_batches": plan["micro_batches"], "schedule": plan["schedule"],
            "replicas": replicas}, devices


def summary(plan):
    reps = []
    for rep in plan["replicas"]:
        st = "+".join(f"{s['devices'][0]}[{s['layers'][0]},{s['layers'][1]})" for s in rep["stages"])
        reps.append(f"{rep['batch']}:{st}")
    return f"M={plan['micro_batches']} " + " | ".join(reps)


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
    ap.add_argument("--speeds", default="1.0,0.5,1.0,0.5",
                    help="emulated speeds of nodeA:0, nodeA:1, nodeB:0, nodeB:1")
    ap.add_argument("--keep", default="", help="keep the profile, snapshot and plans here")
    args = ap.parse_args()
    tmp_obj = tempfile.TemporaryDirectory()
    tmp = args.keep or tmp_obj.name
    os.makedirs(tmp, exist_ok=True)
    if args.model not in ("tiny-skip", "tiny-mlp") and not args.data:
        args.data = os.path.join(tmp, "images")
        subprocess.run([args.worker, "gen-images", "--out", args.data, "--count", "256", "--size",
                        str(args.image_size)], check=True, capture_output=True)
    run = Runner(args, tmp)
    t_start = time.time()

    # 1. Profile.
    profile = run.profile()
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
    t_four = run.single(args.model, args.width, b1, copies=4)
    cores = min(float(os.cpu_count()), max(1.0, 4 * t1 / t_four))
    # Loopback all-reduce: 2 equal data-parallel ranks, tiny-skip with a big and a small gradient.
    ar = {}
    for w in (1024, 64):
        step, split = run.ranks("tiny-skip", w, data_plan(6, [16, 16]), [("h", 1.0), ("h", 1.0)])
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
    t_pipe, _ = run.ranks("tiny-skip", 16, pipe, [("h", 1.0), ("h", 1.0)])
    mb_overhead = max(2e-4, t_pipe / (mb + 1) - 2 * lat)

    # 3. The emulated mixed cluster.
    speeds = [float(s) for s in args.speeds.split(",")]
    names = ["nodeA", "nodeA", "nodeB", "nodeB"]
    nodes = []
    for name in ("nodeA", "nodeB"):
        devs = [{"index": len([1 for n in names[:i] if n == name]), "type": f"emulated-{s}",
                 "memory_bytes": 16 << 30, "memory_bandwidth_bytes_per_s": opt_bw,
                 "measured_as": profile.get("device", "cpu"), "relative_speed": s,
                 "uses_host_cpu": True}
                for i, (n, s) in enumerate(zip(names, speeds)) if n == name]
        nodes.append({"name": name, "host": "localhost", "host_cpu_cores": cores,
                      "intra_node": link, "network": link, "devices": devs})
    snapshot = {"nodes": nodes}
    snap_path = os.path.join(tmp, "snapshot.json")
    with open(snap_path, "w") as f:
        json.dump(snapshot, f, indent=1)
    speed_of = {}
    for node in nodes:
        for d in node["devices"]:
            speed_of[f"{node['name']}:{d['index']}"] = (node["name"], d["relative_speed"])

    # Per-message delay under compute load: a 2-stage pipeline of the real model, fastest
    # device of the first node then slowest of the last, cut where the stages' compute is
    # most even, M = 4 (balanced stages: the round trip binds; not a plan checked below).
    first = max((d for d in speed_of if speed_of[d][0] == nodes[0]["name"]),
                key=lambda d: speed_of[d][1])
    last = min((d for d in speed_of if speed_of[d][0] == nodes[-1]["name"]),
               key=lambda d: speed_of[d][1])
    layer_ms = [l["fwd_ms"] + l["bwd_ms"] for l in profile["layers"]]
    half = min(range(1, n_layers), key=lambda b: abs(sum(layer_ms[:b]) / speed_of[first][1] -
                                                     sum(layer_ms[b:]) / speed_of[last][1]))
    fit_plan = {"layout": "pipeline", "micro_batches": 4, "schedule": "1f1b",
                "replicas": [{"batch": args.global_batch,
                              "stages": [{"devices": [first], "layers": [0, half]},
                                         {"devices": [last], "layers": [half, n_layers]}]}]}
    fit_path = os.path.join(tmp, "plan-delay-fit.json")
    with open(fit_path, "w") as f:
        json.dump(fit_plan, f)
    fit_rank_plan, fit_devices = rank_plan_of(fit_plan, args.global_batch)
    fit_steps = [run.ranks(args.model, args.width, fit_rank_plan,
                           [speed_of[d] for d in fit_devices])[0] for _ in range(args.rounds)]
    fit_measured = statistics.median(fit_steps)

    def evaluate(delay):
        out = subprocess.run([args.predict, "--snapshot", snap_path, "--profile", prof_path,
                              "--layout", "pipeline", "--global-batch", str(args.global_batch),
                              "--optimizer-state-multiplier", "1", "--threads-per-rank",
                              str(args.threads), "--micro-batch-overhead", repr(mb_overhead),
                              "--message-delay", repr(delay), "--evaluate", fit_path],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)["step_s"]

    fit_base = evaluate(0.0)
    lo, hi = 0.0, 0.05
    if fit_base >= fit_measured:
        hi = 0.0
    for _ in range(30):
        if hi - lo < 1e-6:
            break
        mid = (lo + hi) / 2
        if evaluate(mid) < fit_measured:
            lo = mid
        else:
            hi = mid
    msg_delay = hi

    print(f"model {args.model} width {args.width} image {args.image_size} global batch "
          f"{args.global_batch}, {args.threads} thread/rank, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}, nice {args.nice}")
    print(f"profile: {per_sample * 1e3:.2f} ms/sample + {fixed_total * 1e3:.2f} ms/micro-batch "
          f"fwd+bwd (batches {profile['batch']}, {profile.get('fixed_batch', '-')}); "
          f"single rank: {slope * 1e3:.2f} ms/sample + {overhead * 1e3:.1f} ms/step "
          f"(optimizer bandwidth {opt_bw / 1e9:.2f} GB/s)")
    print(f"host: {cores:.2f} effective cores (4 ranks at once: {t_four:.3f} s vs {t1:.3f} s); "
          f"loopback all-reduce: {bw / 1e9:.2f} GB/s, {lat * 1e6:.0f} us latency; "
          f"micro-batch overhead {mb_overhead * 1e3:.2f} ms")
    print(f"message delay under load: {msg_delay * 1e3:.2f} ms (fit: {summary(fit_plan)} "
          f"measured {fit_measured:.3f} s, predicted {fit_base:.3f} s without delay)")
    print(f"cluster: nodeA {speeds[0]}, {speeds[1]}; nodeB {speeds[2]}, {speeds[3]} "
          f"(emulated, one host)")

    # 4 + 5. Plans, runs, table.
    results = []
    for layout in ("data", "pipeline", "hybrid"):
        out = subprocess.run([args.predict, "--snapshot", snap_path, "--profile", prof_path,
                              "--layout", layout, "--global-batch", str(args.global_batch),
                              "--optimizer-state-multiplier", "1", "--threads-per-rank",
                              str(args.threads), "--micro-batch-overhead", repr(mb_overhead),
                              "--message-delay", repr(msg_delay)], capture_output=True, text=True)
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
