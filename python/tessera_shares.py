"""Uneven batch shares for any PyTorch DDP script that Tessera runs.

Tessera's planner gives each replica (each DDP rank) a share of the global
batch in proportion to its device's speed: on a box with an A100 and a T4 the
A100's rank may take 6 samples of every 8 and the T4's rank 2. Every rank gets
its share in its environment (daemon/controller/attempt_launch.h):

    TESSERA_LOCAL_BATCH    samples of this rank's replica per step
    TESSERA_GLOBAL_BATCH   samples of all replicas per step
    TESSERA_SAMPLE_OFFSET  first sample of this rank's replica within each
                           global batch (the stages of one pipeline replica
                           share it)

This file, standard library and torch only, turns that into three changes to
a DDP script:

    sampler = tessera_shares.UnevenDistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=tessera_shares.local_batch(), sampler=sampler)
    ...
    loss = tessera_shares.scale_loss(criterion(model(x), y))
    loss.backward()

Import it by path (no install needed):

    import importlib.util, sys
    spec = importlib.util.spec_from_file_location("tessera_shares", "/opt/tessera/python/tessera_shares.py")
    tessera_shares = importlib.util.module_from_spec(spec); spec.loader.exec_module(tessera_shares)

or put its folder on sys.path / PYTHONPATH and `import tessera_shares`.

Outside Tessera (no TESSERA_* variables), shares are even: the global batch
you pass is split over WORLD_SIZE ranks as torch's DistributedSampler would
(the first `global % world` ranks take one sample more), so the same script
runs under torchrun unchanged.

Why scale_loss: DDP all-reduces gradients and divides by WORLD_SIZE, i.e. it
averages the ranks' gradients with equal weights. Rank i computes the mean
loss of its b_i samples, L_i = (1/b_i) * sum_{s in B_i} l_s. The loss of the
global batch of G = sum_i b_i samples is

    L = (1/G) * sum_i sum_{s in B_i} l_s = sum_i (b_i / G) * L_i.

DDP yields (1/W) * sum_i grad(X_i) when rank i back-propagates X_i. Setting
X_i = W * (b_i / G) * L_i gives (1/W) * sum_i W * (b_i/G) * grad(L_i) =
grad(L): exactly the gradient of the global-batch mean, as one process on the
whole batch would compute it. With even shares (b_i = G/W) the factor is 1,
so plain DDP is the special case. scale_loss expects a *mean* loss (the
default reduction of torch's losses); for a summed loss divide by G instead.
"""

import datetime
import math
import os
import tempfile
from typing import Iterator, List, Optional

import torch
from torch.utils.data import Sampler

__all__ = [
    "UnevenDistributedSampler",
    "collective_timeout",
    "global_batch",
    "local_batch",
    "loss_scale",
    "rank",
    "sample_offset",
    "save_checkpoint",
    "scale_loss",
    "shares",
    "world_size",
]


def _env_int(name: str) -> Optional[int]:
    value = os.environ.get(name, "")
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def world_size() -> int:
    """WORLD_SIZE, 1 when absent."""
    w = _env_int("WORLD_SIZE")
    return 1 if w is None else w


def rank() -> int:
    """RANK, 0 when absent."""
    r = _env_int("RANK")
    return 0 if r is None else r


def shares(global_batch_size: int, world: int) -> List[int]:
    """Even shares of `global_batch_size` over `world` ranks, torch's way:
    the first `global_batch_size % world` ranks take one sample more."""
    if world < 1:
        raise ValueError(f"world size must be positive, got {world}")
    base, extra = divmod(global_batch_size, world)
    return [base + (1 if i < extra else 0) for i in range(world)]


def global_batch(default: Optional[int] = None) -> int:
    """TESSERA_GLOBAL_BATCH; outside Tessera, `default` (your script's global
    batch). Raises ValueError when neither is there."""
    g = _env_int("TESSERA_GLOBAL_BATCH")
    if g is None:
        g = default
    if g is None:
        raise ValueError("TESSERA_GLOBAL_BATCH is not set: pass the global batch as default")
    if g < 1:
        raise ValueError(f"the global batch must be positive, got {g}")
    return g


def local_batch(default_global: Optional[int] = None) -> int:
    """TESSERA_LOCAL_BATCH; outside Tessera, this rank's even share of
    global_batch(default_global) over WORLD_SIZE ranks."""
    b = _env_int("TESSERA_LOCAL_BATCH")
    if b is None:
        b = shares(global_batch(default_global), world_size())[rank()]
    if b < 0:
        raise ValueError(f"TESSERA_LOCAL_BATCH must not be negative, got {b}")
    return b


def sample_offset(default_global: Optional[int] = None) -> int:
    """TESSERA_SAMPLE_OFFSET; outside Tessera, the sum of the even shares of
    the ranks before this one."""
    o = _env_int("TESSERA_SAMPLE_OFFSET")
    if o is None:
        o = sum(shares(global_batch(default_global), world_size())[: rank()])
    if o < 0:
        raise ValueError(f"TESSERA_SAMPLE_OFFSET must not be negative, got {o}")
    return o


# For the sampler, whose arguments share these names.
_global_batch_from_env = global_batch
_local_batch_from_env = local_batch
_sample_offset_from_env = sample_offset


def collective_timeout(default_s: float = 300.0) -> datetime.timedelta:
    """TESSERA_COLLECTIVE_TIMEOUT_S as a timedelta for
    dist.init_process_group(timeout=...): a collective waiting longer for a
    lost peer fails, so the survivors exit and Tessera restarts the job."""
    t = _env_int("TESSERA_COLLECTIVE_TIMEOUT_S")
    return datetime.timedelta(seconds=default_s if t is None else t)


def save_checkpoint(obj, path) -> None:
    """torch.save(obj, path), all or nothing: a rank killed mid-write (its node
    lost, kill -9) leaves the previous file whole, never a cut one that a later
    attempt's torch.load would fail on ("EOFError: Ran out of input").

    Writes a temporary file in the same folder, flushes and fsyncs it, renames
    it over `path` (atomic on POSIX) and fsyncs the folder so the rename
    survives a crash of the machine. On any error the temporary file is
    removed and the error raised; `path` is unchanged."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def loss_scale(local: Optional[int] = None, global_: Optional[int] = None,
               world: Optional[int] = None, default_global: Optional[int] = None) -> float:
    """The factor scale_loss applies: world * local / global (see the module
    docstring). Arguments default to the environment."""
    g = global_batch(default_global) if global_ is None else global_
    b = local_batch(default_global) if local is None else local
    w = world_size() if world is None else world
    return w * b / g


def scale_loss(loss, local: Optional[int] = None, global_: Optional[int] = None,
               world: Optional[int] = None, default_global: Optional[int] = None):
    """Scales this rank's *mean* loss so that DDP's gradient average over
    WORLD_SIZE ranks is the gradient of the global batch's mean loss:
    loss * WORLD_SIZE * TESSERA_LOCAL_BATCH / TESSERA_GLOBAL_BATCH."""
    return loss * loss_scale(local, global_, world, default_global)


class UnevenDistributedSampler(Sampler):
    """Like torch's DistributedSampler, but each rank takes its own share of
    every global batch instead of an equal one.

    The dataset's indices (shuffled by `seed + epoch` when `shuffle`, exactly
    as DistributedSampler does, so all ranks agree) are cut into consecutive
    global batches of `global_batch` indices; this rank yields the slice
    [sample_offset, sample_offset + local_batch) of each of them, in order. Use
    it with DataLoader(batch_size=local_batch): the i-th batch of every rank
    then belongs to the same global batch, and together the ranks cover it
    exactly once.

    drop_last=True (the default): a final global batch with fewer than
    `global_batch` indices is dropped, so every rank runs the same number of
    steps and every step sees exactly `global_batch` samples.
    drop_last=False: the final global batch is completed with indices from the
    start of the (shuffled) order, as DistributedSampler pads, so each sample
    is seen at least once per epoch and a few twice.

    Arguments left as None come from the environment (local_batch(),
    global_batch(), sample_offset(); outside Tessera pass `global_batch`).
    Call set_epoch(epoch) at the start of every epoch, as with
    DistributedSampler, or every epoch repeats the same order.
    """

    def __init__(self, dataset, global_batch: Optional[int] = None,
                 local_batch: Optional[int] = None, sample_offset: Optional[int] = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = True):
        self.dataset = dataset
        # Shares from the environment belong to its global batch; a global
        # batch passed outside Tessera is split evenly.
        fallback = None if _env_int("TESSERA_GLOBAL_BATCH") is not None else global_batch
        if global_batch is None:
            global_batch = _global_batch_from_env()
        if local_batch is None:
            local_batch = _local_batch_from_env(fallback)
        if sample_offset is None:
            sample_offset = _sample_offset_from_env(fallback)
        if global_batch < 1:
            raise ValueError(f"global_batch must be positive, got {global_batch}")
        if local_batch < 0 or sample_offset < 0 or sample_offset + local_batch > global_batch:
            raise ValueError(
                f"share [{sample_offset}, {sample_offset + local_batch}) is not within "
                f"the global batch of {global_batch}")
        self.global_batch = global_batch
        self.local_batch = local_batch
        self.sample_offset = sample_offset
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last:
            self.num_global_batches = n // global_batch
        else:
            self.num_global_batches = math.ceil(n / global_batch) if n > 0 else 0

    def __len__(self) -> int:
        return self.num_global_batches * self.local_batch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _order(self) -> List[int]:
        n = len(self.dataset)
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = torch.randperm(n, generator=g).tolist()
        else:
            order = list(range(n))
        need = self.num_global_batches * self.global_batch
        while 0 < len(order) < need:  # drop_last=False: pad from the start
            order += order[: need - len(order)]
        return order[:need]

    def __iter__(self) -> Iterator[int]:
        order = self._order()
        for b in range(self.num_global_batches):
            start = b * self.global_batch + self.sample_offset
            yield from order[start:start + self.local_batch]
