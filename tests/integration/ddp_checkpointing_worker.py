#!/usr/bin/python3
"""A lab's DDP training script as Tessera runs it (a cmd: entrypoint, one
process per rank, torchrun's environment), using python/tessera_shares.py for
its uneven batch share.

It trains a small regression net for STEPS global steps over Gloo, sleeping
SLEEP_S after each. Rank 0 saves model, optimizer and step to
$TESSERA_CHECKPOINT_DIR/ckpt.pt after every step (write, then rename); every
rank resumes from that file when it starts, so an attempt after a lost node
continues where the last one checkpointed, at the new plan's shares. Each
rank appends "attempt rank world start step local/global" to
$TESSERA_CHECKPOINT_DIR/trace and a progress line per step to
$TESSERA_PROGRESS_FILE. At the end rank 0 trains one process on the whole
global batch from scratch and appends "attempt 0 world done step err E",
E being the largest parameter difference; it exits 1 when E > 1e-5 (the
shares, across every attempt, did not add up to global-batch SGD).

Usage: ddp_checkpointing_worker.py STEPS SLEEP_S
"""
import fcntl
import itertools
import json
import os
import pathlib
import socket
import struct
import sys
import time

import torch
import torch.distributed as dist

REPO = pathlib.Path(__file__).resolve().parents[2]
N = 96
LR = 0.05
SEED = 5


sys.path.insert(0, str(REPO / "python"))  # as a lab's script imports the helper
import tessera_shares as shares  # noqa: E402


def dataset():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, 6, generator=g)
    y = torch.sin(x.sum(dim=1, keepdim=True)) + 0.1 * torch.randn(N, 1, generator=g)
    return torch.utils.data.TensorDataset(x, y)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def interface_with_address(address):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                got = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, req)[20:24])  # SIOCGIFADDR
            except OSError:
                continue
            if got == address:
                return name
    finally:
        s.close()
    return None


def choose_gloo_interface():
    """Gloo binds to the host name's address unless told; on a lab box that
    may be 127.0.1.1. Take the interface on the route to MASTER_ADDR."""
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return
    master = os.environ["MASTER_ADDR"]
    if master == "localhost" or master.startswith("127."):
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        return
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((master, int(os.environ["MASTER_PORT"])))
        local = s.getsockname()[0]
    name = interface_with_address(local)
    if name:
        os.environ["GLOO_SOCKET_IFNAME"] = name


def train_steps(net, opt, sampler, batch, first, last, scale, after_step=None):
    """Runs global steps [first, last) of the epoch-shuffled order."""
    loader = torch.utils.data.DataLoader(sampler.dataset, batch_size=batch, sampler=sampler)
    per_epoch = len(sampler) // batch
    step = first
    while step < last:
        epoch, skip = divmod(step, per_epoch)
        sampler.set_epoch(epoch)
        for x, y in itertools.islice(loader, skip, None):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), y)
            scale(loss).backward()
            opt.step()
            step += 1
            if after_step:
                after_step(step, loss.item())
            if step >= last:
                break
    return step


def flat(net):
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def main():
    total, sleep_s = int(sys.argv[1]), float(sys.argv[2])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    attempt = os.environ["TESSERA_ATTEMPT"]
    ckdir = pathlib.Path(os.environ["TESSERA_CHECKPOINT_DIR"])
    ckdir.mkdir(parents=True, exist_ok=True)
    progress = os.environ.get("TESSERA_PROGRESS_FILE")
    torch.set_num_threads(1)

    choose_gloo_interface()
    dist.init_process_group("gloo", timeout=shares.collective_timeout())
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    step = 0
    ckpt = ckdir / "ckpt.pt"
    if ckpt.exists():
        state = torch.load(ckpt)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
    local, global_batch = shares.local_batch(), shares.global_batch()
    with open(ckdir / "trace", "a") as t:
        t.write(f"{attempt} {rank} {world} start {step} {local}/{global_batch}\n")
    print(f"rank {rank} of {world}, attempt {attempt}: from step {step}, "
          f"{local} of every {global_batch} samples", flush=True)

    ddp = torch.nn.parallel.DistributedDataParallel(net)
    sampler = shares.UnevenDistributedSampler(dataset(), shuffle=True, seed=SEED)

    def after_step(s, loss):
        if rank == 0:
            tmp = ckdir / "ckpt.pt.tmp"
            torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "step": s}, tmp)
            os.replace(tmp, ckpt)
        if progress:
            with open(progress, "a") as p:
                p.write(json.dumps({"step": s, "loss": loss, "samples_per_s": 1.0}) + "\n")
        time.sleep(sleep_s)

    step = train_steps(ddp, opt, sampler, local, step, total, shares.scale_loss, after_step)
    dist.barrier()
    code = 0
    if rank == 0:
        ref = model()
        whole = shares.UnevenDistributedSampler(dataset(), global_batch=global_batch,
                                                local_batch=global_batch, sample_offset=0,
                                                shuffle=True, seed=SEED)
        train_steps(ref, torch.optim.SGD(ref.parameters(), lr=LR), whole, global_batch, 0, total,
                    lambda loss: loss)
        err = (flat(net) - flat(ref)).abs().max().item()
        with open(ckdir / "trace", "a") as t:
            t.write(f"{attempt} {rank} {world} done {step} err {err:.3g}\n")
        print(f"done at step {step}; parameters within {err:.3g} of one process", flush=True)
        code = 0 if err <= 1e-5 else 1
    dist.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main())
