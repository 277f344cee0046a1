#!/usr/bin/python3
"""A real two-process DDP run (Gloo, CPU) at 3:1 batch shares through
python/tessera_shares.py ends with the parameters of one process training on
the whole global batch; plain DDP at the same shares does not.

Each rank is a separate process started the way Tessera starts it: RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TESSERA_LOCAL_BATCH,
TESSERA_GLOBAL_BATCH, TESSERA_SAMPLE_OFFSET, TESSERA_COLLECTIVE_TIMEOUT_S in
its environment. Exits 77 (CTest: skipped) when torch cannot be imported.
"""
import os
import pathlib
import socket
import subprocess
import sys
import tempfile

SKIP = 77
REPO = pathlib.Path(__file__).resolve().parents[2]

N = 40             # samples: 5 global batches per epoch
GLOBAL = 8
SHARES = [6, 2]    # 3:1
EPOCHS = 3
LR = 0.05
SEED = 3


def load_shares():
    sys.path.insert(0, str(REPO / "python"))  # as a lab's script imports the helper
    import tessera_shares
    return tessera_shares


def dataset(torch):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, 5, generator=g)
    y = torch.sin(x.sum(dim=1, keepdim=True)) + 0.1 * torch.randn(N, 1, generator=g)
    return torch.utils.data.TensorDataset(x, y)


def model(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def train(torch, net, sampler, batch, scale):
    loader = torch.utils.data.DataLoader(dataset(torch), batch_size=batch, sampler=sampler)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    steps = 0
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            loss = scale(torch.nn.functional.mse_loss(net(x), y))
            loss.backward()
            opt.step()
            steps += 1
    return steps


def flat(torch, net):
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def rank_main(out_path, scaled):
    """One DDP rank, configured by its environment only (as under Tessera)."""
    import torch
    import torch.distributed as dist
    shares = load_shares()
    dist.init_process_group("gloo", timeout=shares.collective_timeout())
    net = torch.nn.parallel.DistributedDataParallel(model(torch))
    sampler = shares.UnevenDistributedSampler(dataset(torch), shuffle=True, seed=SEED)
    steps = train(torch, net, sampler, shares.local_batch(),
                  shares.scale_loss if scaled else (lambda loss: loss))
    rank = dist.get_rank()
    if rank == 0:
        torch.save(flat(torch, net.module), out_path)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {steps} steps of {shares.local_batch()} samples")
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ddp(tmp, scaled):
    out = os.path.join(tmp, f"ddp-{'scaled' if scaled else 'plain'}.pt")
    port = str(free_port())
    procs = []
    for r, share in enumerate(SHARES):
        env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
        env.update({
            "RANK": str(r), "WORLD_SIZE": str(len(SHARES)), "LOCAL_RANK": str(r),
            "LOCAL_WORLD_SIZE": str(len(SHARES)), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
            "TESSERA_LOCAL_BATCH": str(share), "TESSERA_GLOBAL_BATCH": str(GLOBAL),
            "TESSERA_SAMPLE_OFFSET": str(sum(SHARES[:r])),
            "TESSERA_COLLECTIVE_TIMEOUT_S": "60",
        })
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--rank", out, "scaled" if scaled else "plain"], env=env))
    codes = [p.wait(timeout=240) for p in procs]
    if codes != [0] * len(SHARES):
        raise SystemExit(f"DDP ranks exited with {codes}")
    import torch
    return torch.load(out)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--rank":
        return rank_main(sys.argv[2], sys.argv[3] == "scaled")
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"SKIP: torch is not importable by {sys.executable} ({e}); "
              "scripts/setup.sh installs Debian's python3-torch")
        return SKIP
    if not dist.is_available() or not dist.is_gloo_available():
        print(f"SKIP: torch {torch.__version__} has no Gloo backend")
        return SKIP
    torch.set_num_threads(1)
    shares = load_shares()

    # One process, the whole global batch, the same shuffled order.
    ref_net = model(torch)
    sampler = shares.UnevenDistributedSampler(dataset(torch), global_batch=GLOBAL,
                                              local_batch=GLOBAL, sample_offset=0,
                                              shuffle=True, seed=SEED)
    ref_steps = train(torch, ref_net, sampler, GLOBAL, lambda loss: loss)
    assert ref_steps == EPOCHS * N // GLOBAL, ref_steps
    ref = flat(torch, ref_net)
    start = flat(torch, model(torch))

    with tempfile.TemporaryDirectory() as tmp:
        scaled = run_ddp(tmp, scaled=True)
        plain = run_ddp(tmp, scaled=False)
    moved = (ref - start).abs().max().item()
    err = (scaled - ref).abs().max().item()
    plain_err = (plain - ref).abs().max().item()
    print(f"parameters moved up to {moved:.3g}; DDP at {SHARES[0]}:{SHARES[1]} with scale_loss "
          f"differs by {err:.3g}, without it by {plain_err:.3g}")
    failures = []
    if moved < 1e-2:
        failures.append(f"training barely moved the parameters ({moved:.3g})")
    if not err <= 1e-5:
        failures.append(f"scaled DDP differs from one process by {err:.3g} > 1e-5")
    if not plain_err > 1e-4:
        failures.append(f"plain DDP matches too ({plain_err:.3g}): the test shows nothing")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
