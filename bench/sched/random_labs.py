#!/usr/bin/env python3
"""random_labs: the scheduler's policies on labs nobody tuned them for.

Draws random labs (2-6 machines of 1-8 GPUs of seven kinds, some machines
with a second kind), writes each as a trace_sim cluster file
(bench/sched/cluster_file.h), and replays generated lab days on it
(trace_sim --cluster FILE --seed S --load L, the load scaled with the lab's
size so that work queues on every lab). It prints, over every run, how the
share policy (tesserad's rules) compares with fifo (today's queue): average
JCT and makespan ratios, and each run's worst user against its own queue and
against its fair share; then the runs where share did worse than fifo.
With --limits each lab also draws its users' weights and limits (a users:
block as tesserad's config holds: weights 0.5-3, device and running-job
limits for some users) and the script counts the moments any policy let a
user past a limit (trace_sim checks after every round; none is expected).
With --philly the traces are Gavel's Philly-shaped ones instead of lab days
(trace_sim --generate philly: 60 jobs of the 4 users, Poisson arrivals at a
rate scaled to the lab's throughput so that it is offered --philly-load of
it; lengths 10^x minutes on one A100-like GPU, 1-8 GPUs).

Run (after `cmake --build build --target trace_sim`):

    bench/sched/random_labs.py [--labs 20] [--seeds 1,2,3] [--first 1] [--limits]
        [--philly [--philly-load 0.9]] [--trace-sim build/bench/sched/trace_sim] [--keep DIR]

The labs are drawn from --first .. --first + --labs - 1, so a run is
repeatable; --keep writes the cluster files and trace_sim's outputs there (without it
they go to a temporary folder removed at the end).
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile

# (type, dense fp32 TFLOPS, memory GiB): GPUs a lab buys over the years.
GPU_KINDS = [
    ("A100-80GB", 19.5, 80),
    ("V100-32GB", 15.7, 32),
    ("T4-16GB", 8.1, 16),
    ("RTX3090-24GB", 35.6, 24),
    ("GTX1080Ti-11GB", 11.3, 11),
    ("A6000-48GB", 38.7, 48),
    ("P100-16GB", 9.3, 16),
]

BROKEN = re.compile(r"users' limits broken (\d+) times; the first (.*)$")
ANY_ROW = re.compile(r"^  (\S+)\s+\d+/\d+\s")  # a policy's row (share-nr, share-all too)
ROW = re.compile(
    r"^\s+(fifo|fair|share)\s+(\d+)/(\d+)\s+([\d.]+) h\s+([\d.]+) h\s+([\d.]+) h\s+"
    r"([\d.]+) h\s+(\S+)\s+(\d+)\s+(.*)$")
USER = re.compile(r"(\S+) ([\d.]+)x/([\d.]+)x")


USERS = ["alice", "bob", "carol", "dave"]  # the generated day's users


def draw_users(r, gpus):
    """A users: block: each user a weight, some a device or running-job limit."""
    lines = ["users:"]
    for user in USERS:
        policy = [f"weight: {r.choice([0.5, 1, 1, 2, 3])}"]
        if r.random() < 0.5:
            policy.append(f"max_devices: {max(1, round(gpus * r.uniform(0.25, 0.75)))}")
        if r.random() < 0.4:
            policy.append(f"max_running_jobs: {r.randint(1, 4)}")
        lines.append(f"  {user}: {{{', '.join(policy)}}}")
    return "\n".join(lines) + "\n"


# The mean length of a Philly-shaped job alone on one A100-like GPU, in hours:
# 10^x minutes, x uniform in [1.5, 3] (8 in 10) or [3, 4], as trace_sim draws it.
PHILLY_MEAN_H = (0.8 * (10**3 - 10**1.5) / 1.5 + 0.2 * (10**4 - 10**3)) / 2.302585 / 60
REFERENCE_TFLOPS = 19.5  # the A100-like GPU lengths are drawn for


def draw_lab(number, limits=False):
    """Cluster-file text of lab `number` (with its users' limits), its GPU count and TFLOPS."""
    r = random.Random(number)
    lines = [f"name: lab{number}", "nodes:"]
    gpus = 0
    tflops_sum = 0.0
    for box in range(r.randint(2, 6)):
        lines += [f"  - name: box{box}", "    gpus:"]
        kinds = [r.choice(GPU_KINDS)]
        counts = [r.choice([1, 2, 2, 4, 4, 8])]
        if r.random() < 0.3:
            kinds.append(r.choice(GPU_KINDS))
            counts.append(r.randint(1, 2))
        for (kind, tflops, mem), count in zip(kinds, counts):
            lines.append(f"      - {{type: {kind}, count: {count}, memory: {mem}GiB, "
                         f"tflops: {tflops}}}")
            gpus += count
            tflops_sum += count * tflops
    text = "\n".join(lines) + "\n"
    if limits:
        text += draw_users(random.Random(10_000 + number), gpus)
    return text, gpus, tflops_sum


def parse_rows(text):
    """{policy: {avg, makespan, own, fair, ran}} of the first cluster's rows."""
    rows = {"broken": []}  # and (policy, times, the first) of every policy's broken limits
    last = None  # the policy whose row the lines below belong to
    for line in text.splitlines():
        b = BROKEN.search(line)
        if b and last is not None:
            rows["broken"].append((last, int(b.group(1)), b.group(2)))
            continue
        any_row = ANY_ROW.match(line)
        if any_row:
            last = any_row.group(1)
        m = ROW.match(line)
        if not m or m.group(1) in rows:
            continue
        users = USER.findall(m.group(10))
        rows[m.group(1)] = {
            "avg": float(m.group(4)),
            "makespan": float(m.group(6)),
            "ran": (int(m.group(2)), int(m.group(3))),
            "own": max(float(u[2]) for u in users),
            "fair": max(float(u[1]) for u in users),
        }
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labs", type=int, default=20)
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--trace-sim", default="build/bench/sched/trace_sim")
    ap.add_argument("--keep", help="folder for the cluster files and outputs")
    ap.add_argument("--limits", action="store_true",
                    help="draw each lab's users' weights and limits too")
    ap.add_argument("--philly", action="store_true",
                    help="replay Philly-shaped traces (trace_sim --generate philly)")
    ap.add_argument("--philly-load", type=float, default=0.9,
                    help="with --philly: the work offered, a fraction of the lab's throughput")
    args = ap.parse_args()
    if args.labs < 1:
        ap.error("--labs must be at least 1")
    if not args.philly_load > 0:
        ap.error("--philly-load must be > 0")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        ap.error(f"--seeds: a comma-separated list of whole numbers, not '{args.seeds}'")
    if not os.access(args.trace_sim, os.X_OK):
        sys.exit(f"random_labs: no trace_sim at {args.trace_sim} "
                 "(cmake --build build --target trace_sim)")
    # Without --keep the files live in a folder removed at the end.
    scratch = None if args.keep else tempfile.TemporaryDirectory(prefix="random_labs.")
    out_dir = args.keep or scratch.name
    os.makedirs(out_dir, exist_ok=True)

    runs = []
    for number in range(args.first, args.first + args.labs):
        text, gpus, tflops_sum = draw_lab(number, args.limits)
        path = os.path.join(out_dir, f"lab{number}.yaml")
        with open(path, "w") as f:
            f.write(text)
        load = max(1.0, round(gpus / 5.0, 1))  # the demo lab's 5 devices at load 1
        for seed in seeds:
            cmd = [args.trace_sim, "--cluster", path, "--seed", str(seed), "--load", str(load)]
            if args.philly:
                # Jobs an hour offering philly_load of the lab's A100-like throughput.
                rate = args.philly_load * tflops_sum / REFERENCE_TFLOPS / PHILLY_MEAN_H
                load = f"philly {rate:.3g}/h"
                cmd = [args.trace_sim, "--cluster", path, "--generate", "philly", "--seed",
                       str(seed), "--count", "60", "--rate", f"{rate:.4g}"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            name = f"lab{number} ({gpus} GPUs) seed {seed} load {load}"
            if done.returncode != 0:
                sys.exit(f"random_labs: {' '.join(cmd)} failed ({done.returncode}):\n"
                         f"{done.stderr}")
            with open(os.path.join(out_dir, f"lab{number}-seed{seed}.txt"), "w") as f:
                f.write(done.stdout)
            rows = parse_rows(done.stdout)
            if "fifo" not in rows or "share" not in rows:
                sys.exit(f"random_labs: no fifo and share rows in the output of {' '.join(cmd)}")
            runs.append((name, rows))
            print(f"{name}: average JCT fifo {rows['fifo']['avg']:.2f} h, share "
                  f"{rows['share']['avg']:.2f} h", file=sys.stderr)

    def ratio(key, a, b):
        return [r[a][key] / r[b][key] for _, r in runs]

    jct = ratio("avg", "fifo", "share")           # > 1: share better
    makespan = ratio("makespan", "share", "fifo")  # < 1: share better
    n = len(runs)
    print(f"random_labs: {args.labs} labs x seeds {args.seeds} = {n} runs "
          f"(labs {args.first}-{args.first + args.labs - 1}"
          f"{'; files in ' + out_dir if args.keep else ''})")
    print(f"  average JCT, fifo over share: median {statistics.median(jct):.2f}x, "
          f"min {min(jct):.2f}x, max {max(jct):.2f}x; share at least 1.5x on "
          f"{sum(x >= 1.5 for x in jct)}, worse than fifo (below 0.98x) on "
          f"{sum(x < 0.98 for x in jct)}")
    print(f"  makespan, share over fifo: median {statistics.median(makespan):.2f}x, "
          f"max {max(makespan):.3f}x; longer by over 2 % on {sum(x > 1.02 for x in makespan)}")
    for policy in ("fifo", "fair", "share"):
        own = [r[policy]["own"] for _, r in runs]
        fair = [r[policy]["fair"] for _, r in runs]
        print(f"  {policy:5s} worst user: against its own queue median "
              f"{statistics.median(own):.1f}x (within 2x on {sum(x <= 2.0 for x in own)} of "
              f"{n}), against its fair share median {statistics.median(fair):.1f}x (within 2x "
              f"on {sum(x <= 2.0 for x in fair)})")
    worse = [(name, r) for name, r in runs
             if r["fifo"]["avg"] / r["share"]["avg"] < 0.98 or
             r["share"]["makespan"] / r["fifo"]["makespan"] > 1.02 or
             r["share"]["ran"] != r["fifo"]["ran"]]
    if args.limits:
        broken = [(name, b) for name, r in runs for b in r["broken"]]
        print(f"  users' limits broken: in {len(broken)} policy runs (of 5 policies x {n})")
        for name, (policy, times, first) in broken:
            print(f"    {name} {policy}: {times} times; the first {first}")
    print(f"  runs where share did worse than fifo (JCT, makespan or jobs run): {len(worse)}")
    for name, r in worse:
        print(f"    {name}: average JCT {r['fifo']['avg']:.2f} -> {r['share']['avg']:.2f} h, "
              f"makespan {r['fifo']['makespan']:.2f} -> {r['share']['makespan']:.2f} h, ran "
              f"{r['fifo']['ran'][0]} -> {r['share']['ran'][0]}")


if __name__ == "__main__":
    main()
