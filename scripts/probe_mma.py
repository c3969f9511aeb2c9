"""Record single mma.sync results of every input format on the current GPU, for fitting and checking the tensor-core
models on the CPU (tcreduce/emulate/mma_model.py) without spending more GPU time.

    python3 scripts/probe_mma.py --out DIR [--n 384] [--formats bfloat16,float8_e4m3fn,...]

Writes DIR/mma_<format>.npz with, per distribution of tcreduce.mma_operands: a, b (raw bits), c, d (float32) and the
device name; and prints, per format and distribution, how many D elements the current model reproduces.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from tcreduce.mma_operands import DISTRIBUTIONS, make_operands  # noqa: E402
from tcreduce.testing import run_mma_probe  # noqa: E402

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "probe_out"))
    ap.add_argument("--n", type=int, default=384)
    ap.add_argument("--formats", default="bfloat16,float8_e4m3fn,float8_e5m2,float32")
    args = ap.parse_args()
    from tcreduce._device import current_device

    os.makedirs(args.out, exist_ok=True)
    name = current_device()[1].name
    print("device", name)
    for fmt in args.formats.split(","):
        rng = np.random.default_rng(20261123)
        arrays = {"device": np.array(name)}
        for dist in DISTRIBUTIONS:
            try:
                a, b, c = make_operands(fmt, dist, rng, args.n)
            except ValueError:
                continue
            d = run_mma_probe(fmt, a, b, c)
            arrays.update({f"{dist}/a": a, f"{dist}/b": b, f"{dist}/c": c, f"{dist}/d": d})
            print(f"{fmt:14s} {dist:18s} nan-d {int(np.isnan(d).sum()):6d}")
        np.savez_compressed(os.path.join(args.out, f"mma_{fmt}.npz"), **arrays)


if __name__ == "__main__":
    main()
