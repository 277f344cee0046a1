"""Launching real tessera-worker ranks for benchmarks, as the controller would.

Shared by bench/calibration/calibrate.py and bench/hetero/hetero_matrix.py (and, for
free_port, data_plan and worker_env, by the bench/worker drivers):
  - Runner.profile():  `tessera-worker profile` of a model (per-layer ms on this CPU);
  - Runner.ranks():    one training run of a rank plan, every rank a real process with
                       the torchrun environment, TESSERA_PLAN, TESSERA_DEVICE_SPEED (and
                       TESSERA_DEVICE_MEMORY), optionally inside the network namespace of
                       its emulated node; returns the step time (median after warm-up,
                       from rank 0's progress lines) and per-rank medians;
  - rank_plan_of():    a planner plan (tessera-predict JSON) -> the rank plan the worker
                       reads (ranks numbered replica by replica, stage by stage, as
                       daemon/controller/attempt_launch.cc does), with each stage's predicted peak;
  - NetnsCluster:      one network namespace per emulated node on a bridge, the link of
                       each node shaped with tc (netem rate + delay) when it declares one;
  - worker_env():      the environment a worker process starts from;
  - scratch_folder(), gen_images(): a run's folder (--keep's or a temporary one) and the
                       images `tessera-worker gen-images` makes for it.
Python 3 standard library only.
"""
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT")


def worker_env(threads):
    """This process's environment without TESSERA_* and torchrun variables, with
    OMP_NUM_THREADS=threads: what every worker process (or PyTorch script) starts from."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TESSERA_") and k not in TORCHRUN_VARS}
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def scratch_folder(keep):
    """(folder, holder): `keep` (made when missing) when given, else a new temporary folder
    that lives as long as `holder` (a TemporaryDirectory) does."""
    holder = tempfile.TemporaryDirectory()
    folder = keep or holder.name
    os.makedirs(folder, exist_ok=True)
    return folder, holder


def gen_images(worker, folder, size, count=256):
    """`tessera-worker gen-images`: `count` images of `size` px into `folder`."""
    subprocess.run([worker, "gen-images", "--out", folder, "--count", str(count), "--size",
                    str(size)], check=True, capture_output=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_plan_of(plan, global_batch):
    """As daemon/controller/attempt_launch.cc BuildAttemptLaunch: ranks replica by replica, stage by
    stage. Returns (rank plan, device id per rank)."""
    peaks = plan.get("predicted", {}).get("peak_mem_bytes", {})
    replicas, devices = [], []
    for rep in plan["replicas"]:
        stages = []
        for st in rep["stages"]:
            (dev,) = st["devices"]
            stage = {"rank": len(devices), "device": dev, "layers": st["layers"]}
            if dev in peaks:
                stage["peak_memory_bytes"] = int(peaks[dev])
            stages.append(stage)
            devices.append(dev)
        replicas.append({"batch": rep["batch"], "stages": stages})
    return {"layout": plan["layout"], "global_batch": global_batch,
            "micro_batches": plan["micro_batches"], "schedule": plan["schedule"],
            "replicas": replicas}, devices


def data_plan(n_layers, shares):
    return {"layout": "data", "global_batch": sum(shares), "micro_batches": 1, "schedule": "1f1b",
            "replicas": [{"batch": b, "stages": [{"rank": i, "device": f"h:{i}",
                                                 "layers": [0, n_layers]}]}
                         for i, b in enumerate(shares)]}


def summary(plan):
    reps = []
    for rep in plan["replicas"]:
        st = "+".join(f"{s['devices'][0]}[{s['layers'][0]},{s['layers'][1]})" for s in rep["stages"])
        reps.append(f"{rep['batch']}:{st}")
    return f"M={plan['micro_batches']} " + " | ".join(reps)


class NetnsCluster:
    """One network namespace per node on a bridge (198.18.x.0/24, a benchmarking range),
    each node's veth shaped to its declared network link with tc netem (rate + delay on
    both directions). available() is False when this process may not create them
    (not root, no `ip`/`tc`); then every rank runs on loopback."""

    def __init__(self, tag, subnet=77):
        self.tag = tag
        self.subnet = subnet
        self.bridge = f"tsbr{subnet}"
        self.nodes = {}  # name -> (netns, address)
        self.ok = False
        self.shaping = "none"

    @staticmethod
    def _run(*args, check=True):
        return subprocess.run(list(args), capture_output=True, text=True, check=check)

    def available(self):
        if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
            return False
        probe = f"tsprobe{os.getpid()}"
        r = self._run("ip", "netns", "add", probe, check=False)
        if r.returncode != 0:
            return False
        self._run("ip", "-n", probe, "link", "set", "lo", "up", check=False)
        netem = self._run("tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem",
                          "delay", "1ms", "rate", "1mbit", check=False).returncode == 0
        self.shaping = ("rate and latency (netem)" if netem
                        else "rate only (tbf; this kernel has no netem)")
        self._run("ip", "netns", "del", probe, check=False)
        return True

    def up(self, nodes):
        """nodes: list of (name, link or None); link = {"bandwidth_bytes_per_s", "latency_s"}."""
        self.down()
        self._run("ip", "link", "add", self.bridge, "type", "bridge")
        self._run("ip", "addr", "add", f"198.18.{self.subnet}.1/24", "dev", self.bridge)
        self._run("ip", "link", "set", self.bridge, "up")
        for i, (name, link) in enumerate(nodes):
            ns = f"ts-{self.tag}-{i}"
            host_if, ns_if = f"tsv{self.subnet}h{i}", f"tsv{self.subnet}n{i}"
            addr = f"198.18.{self.subnet}.{10 + i}"
            self._run("ip", "link", "del", host_if, check=False)  # a killed run's leftover
            self._run("ip", "netns", "add", ns)
            self._run("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
            self._run("ip", "link", "set", ns_if, "netns", ns)
            self._run("ip", "link", "set", host_if, "master", self.bridge)
            self._run("ip", "link", "set", host_if, "up")
            self._run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", ns_if)
            self._run("ip", "-n", ns, "link", "set", ns_if, "up")
            self._run("ip", "-n", ns, "link", "set", "lo", "up")
            if link:
                # Half the latency each way; the rate on both directions. Without the
                # kernel's netem, tbf shapes the rate alone (self.shaping says which).
                rate = f"{max(1, int(link['bandwidth_bytes_per_s'] * 8 / 1000))}kbit"
                delay = f"{link['latency_s'] * 1e6 / 2:.0f}us"
                for dev, nsargs in ((host_if, []), (ns_if, ["-n", ns])):
                    r = self._run("tc", *nsargs, "qdisc", "add", "dev", dev, "root", "netem",
                                  "delay", delay, "rate", rate, "limit", "100000", check=False)
                    if r.returncode == 0:
                        continue
                    self._run("tc", *nsargs, "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                              rate, "burst", "32kbit", "latency", "400ms")
            self.nodes[name] = (ns, addr)
        self.ok = True

    def prefix(self, node):
        ns, _ = self.nodes[node]
        return ["ip", "netns", "exec", ns]

    def address(self, node):
        return self.nodes[node][1]

    def down(self):
        for ns, _ in self.nodes.values():
            self._run("ip", "netns", "del", ns, check=False)
        out = self._run("ip", "netns", "list", check=False).stdout
        for line in out.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(f"ts-{self.tag}-"):
                self._run("ip", "netns", "del", name, check=False)
        self._run("ip", "link", "del", self.bridge, check=False)
        self.nodes = {}
        self.ok = False


class Runner:
    """Runs tessera-worker processes. args: worker, threads, image_size, data, steps,
    warmup, repeats, nice."""

    def __init__(self, args, tmp):
        self.a = args
        self.tmp = tmp
        self.count = 0
        self.netns = None  # a NetnsCluster that is up, or None (loopback)

    def base_env(self):
        return worker_env(self.a.threads)

    def prefix(self):
        return ["nice", "-n", str(self.a.nice)] if getattr(self.a, "nice", 0) else []

    def model_args(self, model, width):
        """A builtin model and its width, or "file:<path>": a lab's TorchScript sequence
        of layers (tessera-worker --model-file) with the loss of args.loss (default l1)."""
        if model.startswith("file:"):
            return ["--model-file", model[len("file:"):], "--loss",
                    getattr(self.a, "loss", None) or "l1"]
        return ["--model", model, "--width", str(width)]

    def train_cmd(self, model, width, steps, batch=None):
        cmd = [self.a.worker, "train", *self.model_args(model, width), "--steps", str(steps),
               "--threads", str(self.a.threads), "--lr", "0.001", "--image-size",
               str(self.a.image_size)]
        if self.a.data and model not in ("tiny-skip", "tiny-mlp"):
            cmd += ["--data", self.a.data]
        if batch is not None:
            cmd += ["--batch", str(batch)]
        return cmd

    def profile(self, model, width, batch, fixed_batch, repeats):
        cmd = self.prefix() + [self.a.worker, "profile", *self.model_args(model, width),
                               "--batch", str(batch), "--image-size", str(self.a.image_size),
                               "--repeats", str(repeats)]
        if fixed_batch > 0:
            cmd += ["--fixed-batch", str(fixed_batch)]
        out = subprocess.run(cmd, env=self.base_env(), check=True, capture_output=True,
                             text=True).stdout
        return json.loads(out)

    def launch(self, jobs, warmup=None):
        """jobs: list of (cmd, env extra, command prefix). Returns each one's progress rows
        after warm-up; raises RuntimeError when a rank fails."""
        warmup = self.a.warmup if warmup is None else warmup
        procs = []
        for cmd, extra, pre in jobs:
            self.count += 1
            prog = os.path.join(self.tmp, f"progress-{self.count}.jsonl")
            env = self.base_env()
            env.update(extra)
            env["TESSERA_PROGRESS_FILE"] = prog
            procs.append((subprocess.Popen(pre + self.prefix() + cmd, env=env,
                                           stderr=subprocess.PIPE, text=True), prog))
        rows, errors = [], []
        for p, prog in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                errors.append(f"rank exited {p.returncode}: {err.strip()[-600:]}")
                rows.append([])
                continue
            with open(prog) as f:
                rows.append([json.loads(line) for line in f][warmup:])
        if errors:
            raise RuntimeError("; ".join(errors))
        return rows

    def single(self, model, width, batch, copies=1, speed=1.0):
        extra = {"TESSERA_DEVICE_SPEED": repr(speed)}
        rows = self.launch([(self.train_cmd(model, width, self.a.steps, batch), extra, [])] * copies)
        return statistics.median(batch / x["samples_per_s"] for r in rows for x in r)

    def ranks(self, model, width, rank_plan, devices, steps=None):
        """devices: per rank {"node", "speed", "memory_bytes" (optional)}. Returns
        (step_s median of rank 0, per-rank medians of compute/comm/bubble and peak memory)."""
        path = os.path.join(self.tmp, f"plan-{self.count}.json")
        with open(path, "w") as f:
            json.dump(rank_plan, f)
        world = len(devices)
        port = str(free_port())
        per_node = {}
        for d in devices:
            per_node[d["node"]] = per_node.get(d["node"], 0) + 1
        master = "127.0.0.1"
        if self.netns is not None:
            master = self.netns.address(devices[0]["node"])
        local = {}
        jobs = []
        for rank, d in enumerate(devices):
            node = d["node"]
            extra = {"RANK": str(rank), "WORLD_SIZE": str(world),
                     "LOCAL_RANK": str(local.get(node, 0)),
                     "LOCAL_WORLD_SIZE": str(per_node[node]), "MASTER_ADDR": master,
                     "MASTER_PORT": port, "TESSERA_PLAN": path, "TESSERA_DEVICE": "cpu",
                     "TESSERA_DEVICE_SPEED": repr(d["speed"])}
            if d.get("memory_bytes"):
                extra["TESSERA_DEVICE_MEMORY"] = str(int(d["memory_bytes"]))
            local[node] = local.get(node, 0) + 1
            pre = self.netns.prefix(node) if self.netns is not None else []
            jobs.append((self.train_cmd(model, width, steps or self.a.steps), extra, pre))
        rows = self.launch(jobs)
        gb = rank_plan["global_batch"]
        step = statistics.median(gb / x["samples_per_s"] for x in rows[0])
        split = []
        for r in rows:
            s = {k: statistics.median(x[k] for x in r) for k in ("compute_s", "comm_s", "bubble_s")}
            s["peak_memory_bytes"] = max((x.get("peak_memory_bytes", 0) for x in r), default=0)
            s["predicted_peak_memory_bytes"] = max(
                (x.get("predicted_peak_memory_bytes", 0) for x in r), default=0)
            split.append(s)
        return step, split


def fail(msg):
    sys.exit(msg)
