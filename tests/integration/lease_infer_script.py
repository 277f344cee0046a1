#!/usr/bin/python3
"""A lab's own PyTorch inference script as Tessera runs it: a cmd: entrypoint
of an infer job, one process per rank, its items leased through
python/tessera_lease.py. Outside Tessera (no TESSERA_JOB_ID) the same script
runs the whole input in one process: the reference of the e2e test.

The model is a fixed 3x3 convolution (weights from seed 0) with a tanh; each
image's output is its float32 result, raw bytes, at <output>/<item>.bin.
One intra-op thread and one image at a time, so every run writes the same
bytes. DELAY_S of sleep per image keeps a rank busy long enough to be killed.

Usage: lease_infer_script.py [--data DIR] [--output DIR] [--delay DELAY_S]
(under Tessera, the job's dataset and output are the defaults)
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

import tessera_lease  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    # Under Tessera both come from TESSERA_INFER_DATASET / TESSERA_INFER_OUTPUT.
    p.add_argument("--data")
    p.add_argument("--output")
    p.add_argument("--delay", type=float, default=0.0)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Tanh()).eval()
    device = torch.device(os.environ.get("TESSERA_DEVICE", "cpu"))
    model.to(device)

    leases = tessera_lease.Leases(data=args.data, output=args.output, suffix=".bin")
    with torch.no_grad():
        for item in leases:
            pixels = np.asarray(Image.open(item.input_path).convert("RGB"), dtype=np.float32)
            x = torch.from_numpy(pixels / 255.0).permute(2, 0, 1).unsqueeze(0)
            y = model(x.to(device)).cpu().numpy().astype(np.float32)
            item.write_bytes(y.tobytes())
            time.sleep(args.delay)
    leases.close()
    print(f"rank {os.environ.get('RANK', '0')}: wrote {leases.written}, "
          f"skipped {leases.skipped}", flush=True)


if __name__ == "__main__":
    main()
