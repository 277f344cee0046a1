#!/usr/bin/python3
"""Unit tests of python/tessera_shares.py: shares from the environment and
their even fallback, the sampler's slices of every global batch, the loss
scale, and the all-or-nothing checkpoint save. Exits 77 (CTest: skipped) when torch cannot be imported."""
import importlib.util
import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

SKIP = 77
REPO = pathlib.Path(__file__).resolve().parents[2]

try:
    import torch
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torch is not importable by {sys.executable} ({e}); "
          "scripts/setup.sh installs Debian's python3-torch")
    sys.exit(SKIP)

spec = importlib.util.spec_from_file_location("tessera_shares",
                                              REPO / "python" / "tessera_shares.py")
shares = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shares)


def clean_env(**values):
    """The process env without torchrun/Tessera variables, plus `values`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TESSERA_") and k not in ("RANK", "WORLD_SIZE")}
    env.update({k: str(v) for k, v in values.items()})
    return mock.patch.dict(os.environ, env, clear=True)


class Data(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


class SaveCheckpointTest(unittest.TestCase):
    def setUp(self):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="tessera-ckpt-"))

    def tearDown(self):
        for p in self.dir.iterdir():
            p.unlink()
        self.dir.rmdir()

    def test_round_trip_leaves_only_the_file(self):
        path = self.dir / "snapshot.pt"
        shares.save_checkpoint({"epoch": 3, "w": torch.arange(4.0)}, path)
        shares.save_checkpoint({"epoch": 4, "w": torch.arange(5.0)}, str(path))
        got = torch.load(path)
        self.assertEqual(got["epoch"], 4)
        self.assertTrue(torch.equal(got["w"], torch.arange(5.0)))
        self.assertEqual([p.name for p in self.dir.iterdir()], ["snapshot.pt"])

    def test_a_failed_save_keeps_the_old_file_and_no_temporary(self):
        path = self.dir / "snapshot.pt"
        shares.save_checkpoint({"epoch": 1}, path)
        real_save = torch.save

        def cut_save(obj, f, *args, **kwargs):
            f.write(b"PK\x03\x04 half a zip")
            raise OSError(28, "No space left on device")

        with mock.patch.object(torch, "save", cut_save):
            with self.assertRaises(OSError):
                shares.save_checkpoint({"epoch": 2}, path)
        self.assertIs(torch.save, real_save)
        self.assertEqual(torch.load(path)["epoch"], 1)
        self.assertEqual([p.name for p in self.dir.iterdir()], ["snapshot.pt"])

    def test_kill_9_mid_write_leaves_a_whole_checkpoint(self):
        # A child saves a 32 MiB checkpoint over and over; it is killed at
        # random moments. The file must load every time (a plain torch.save
        # to the path leaves it cut when the kill lands mid-write).
        path = self.dir / "snapshot.pt"
        shares.save_checkpoint({"round": -1, "w": torch.zeros(8 << 20)}, path)
        child_code = (
            "import importlib.util, sys, torch\n"
            f"spec = importlib.util.spec_from_file_location('s', {str(REPO / 'python' / 'tessera_shares.py')!r})\n"
            "s = importlib.util.module_from_spec(spec); spec.loader.exec_module(s)\n"
            "i = 0\n"
            "print('ready', flush=True)\n"
            "while True:\n"
            f"    s.save_checkpoint({{'round': i, 'w': torch.full((8 << 20,), float(i))}}, {str(path)!r})\n"
            "    i += 1\n")
        rng = random.Random(7)
        for kill in range(5):
            child = subprocess.Popen([sys.executable, "-c", child_code], stdout=subprocess.PIPE)
            self.assertEqual(child.stdout.readline().strip(), b"ready")
            time.sleep(rng.uniform(0.05, 0.6))
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
            got = torch.load(path)  # raises on a cut file
            self.assertEqual(got["w"].numel(), 8 << 20, f"kill {kill}")
            self.assertTrue(bool((got["w"] == float(max(got["round"], 0))).all())
                            or got["round"] == -1, f"kill {kill}")
        # A killed writer's temporary files stay (they are named after the
        # target, so they are easy to spot); the target itself is whole.
        for p in self.dir.glob(".snapshot.pt.*.tmp"):
            p.unlink()


class SharesFromEnvTest(unittest.TestCase):
    def test_env_wins(self):
        with clean_env(RANK=1, WORLD_SIZE=2, TESSERA_LOCAL_BATCH=2, TESSERA_GLOBAL_BATCH=8,
                       TESSERA_SAMPLE_OFFSET=6):
            self.assertEqual(shares.local_batch(), 2)
            self.assertEqual(shares.global_batch(), 8)
            self.assertEqual(shares.sample_offset(), 6)
            self.assertEqual(shares.local_batch(100), 2, "the env, not the fallback")

    def test_even_fallback_like_distributed_sampler(self):
        rows = [  # world, global, [(local, offset) per rank]
            (1, 8, [(8, 0)]),
            (2, 8, [(4, 0), (4, 4)]),
            (3, 8, [(3, 0), (3, 3), (2, 6)]),
            (4, 2, [(1, 0), (1, 1), (0, 2), (0, 2)]),
        ]
        for world, global_batch, want in rows:
            for r, (local, offset) in enumerate(want):
                with self.subTest(world=world, rank=r), clean_env(RANK=r, WORLD_SIZE=world):
                    self.assertEqual(shares.local_batch(global_batch), local)
                    self.assertEqual(shares.sample_offset(global_batch), offset)
                    self.assertEqual(shares.global_batch(global_batch), global_batch)

    def test_no_env_and_no_default_is_an_error(self):
        with clean_env():
            with self.assertRaises(ValueError):
                shares.global_batch()
            self.assertEqual(shares.local_batch(5), 5, "one process takes the whole batch")

    def test_malformed_values_name_the_variable(self):
        with clean_env(TESSERA_LOCAL_BATCH="six"):
            with self.assertRaisesRegex(ValueError, "TESSERA_LOCAL_BATCH"):
                shares.local_batch(8)

    def test_collective_timeout(self):
        with clean_env(TESSERA_COLLECTIVE_TIMEOUT_S=45):
            self.assertEqual(shares.collective_timeout().total_seconds(), 45)
        with clean_env():
            self.assertEqual(shares.collective_timeout().total_seconds(), 300)


class LossScaleTest(unittest.TestCase):
    def test_table(self):
        rows = [  # local, global, world, factor
            (6, 8, 2, 1.5), (2, 8, 2, 0.5), (4, 8, 2, 1.0), (3, 12, 3, 0.75), (8, 8, 1, 1.0)]
        for local, global_batch, world, factor in rows:
            with self.subTest(local=local, global_batch=global_batch, world=world):
                self.assertAlmostEqual(shares.loss_scale(local, global_batch, world), factor)
                loss = torch.tensor(2.0)
                self.assertAlmostEqual(
                    shares.scale_loss(loss, local, global_batch, world).item(), 2.0 * factor)

    def test_weighted_means_make_the_global_mean(self):
        losses = torch.arange(12, dtype=torch.float64)
        cuts = [0, 7, 9, 12]  # shares 7, 2, 3
        world = len(cuts) - 1
        ddp_average = sum(
            shares.scale_loss(losses[a:b].mean(), b - a, 12, world)
            for a, b in zip(cuts, cuts[1:])) / world
        self.assertAlmostEqual(ddp_average.item(), losses.mean().item())

    def test_from_env(self):
        with clean_env(WORLD_SIZE=2, RANK=0, TESSERA_LOCAL_BATCH=6, TESSERA_GLOBAL_BATCH=8):
            self.assertAlmostEqual(shares.loss_scale(), 1.5)


class SamplerTest(unittest.TestCase):
    def slices(self, n, shares_, drop_last=True, shuffle=True, epoch=0, seed=0):
        out = []
        offset = 0
        for local in shares_:
            s = shares.UnevenDistributedSampler(Data(n), global_batch=sum(shares_),
                                                local_batch=local, sample_offset=offset,
                                                shuffle=shuffle, seed=seed, drop_last=drop_last)
            s.set_epoch(epoch)
            items = list(s)
            self.assertEqual(len(items), len(s))
            out.append(items)
            offset += local
        return out

    def test_ranks_cover_each_global_batch_once(self):
        g = 8
        for n in (40, 43):
            with self.subTest(n=n):
                whole = self.slices(n, [g])[0]
                ranks = self.slices(n, [6, 2])
                self.assertEqual([len(r) for r in ranks], [6 * (n // g), 2 * (n // g)])
                for b in range(n // g):
                    together = ranks[0][6 * b:6 * b + 6] + ranks[1][2 * b:2 * b + 2]
                    self.assertEqual(together, whole[g * b:g * b + g])
                self.assertEqual(len(set(ranks[0]) | set(ranks[1])), g * (n // g))

    def test_drop_last_false_pads_from_the_start(self):
        ranks = self.slices(10, [3, 1], drop_last=False, shuffle=False)
        self.assertEqual(ranks[0], [0, 1, 2, 4, 5, 6, 8, 9, 0])
        self.assertEqual(ranks[1], [3, 7, 1])

    def test_drop_last_drops_the_partial_global_batch(self):
        ranks = self.slices(10, [3, 1], shuffle=False)
        self.assertEqual(ranks[0], [0, 1, 2, 4, 5, 6])
        self.assertEqual(ranks[1], [3, 7])

    def test_shuffle_is_deterministic_per_epoch_and_seed(self):
        a = self.slices(32, [5, 3], epoch=1)
        self.assertEqual(a, self.slices(32, [5, 3], epoch=1))
        self.assertNotEqual(a, self.slices(32, [5, 3], epoch=2))
        self.assertNotEqual(a, self.slices(32, [5, 3], epoch=1, seed=7))
        # The order is torch's DistributedSampler's: randperm seeded seed + epoch.
        g = torch.Generator()
        g.manual_seed(1)
        self.assertEqual(self.slices(32, [32], epoch=1)[0], torch.randperm(32, generator=g).tolist())

    def test_shares_from_env(self):
        with clean_env(WORLD_SIZE=2, RANK=1, TESSERA_LOCAL_BATCH=2, TESSERA_GLOBAL_BATCH=8,
                       TESSERA_SAMPLE_OFFSET=6):
            s = shares.UnevenDistributedSampler(Data(16), shuffle=False)
            self.assertEqual(list(s), [6, 7, 14, 15])

    def test_even_fallback_outside_tessera(self):
        with clean_env(WORLD_SIZE=2, RANK=1):
            s = shares.UnevenDistributedSampler(Data(16), global_batch=8, shuffle=False)
            self.assertEqual(list(s), [4, 5, 6, 7, 12, 13, 14, 15])

    def test_share_outside_the_global_batch_is_refused(self):
        with self.assertRaises(ValueError):
            shares.UnevenDistributedSampler(Data(16), global_batch=8, local_batch=4,
                                            sample_offset=6)

    def test_loader_batches_are_the_shares(self):
        s = shares.UnevenDistributedSampler(Data(24), global_batch=8, local_batch=6,
                                            sample_offset=0, shuffle=False)
        loader = torch.utils.data.DataLoader(Data(24), batch_size=6, sampler=s)
        self.assertEqual([b.tolist() for b in loader],
                         [[0, 1, 2, 3, 4, 5], [8, 9, 10, 11, 12, 13], [16, 17, 18, 19, 20, 21]])


if __name__ == "__main__":
    unittest.main()
