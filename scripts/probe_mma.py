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

PROBE_INDEX = {"float16": 0, "bfloat16": 1, "float8_e4m3fn": 2, "float8_e5m2": 3, "float32": 4}


def run_probe(fmt: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D of one mma.sync of format ``fmt`` per (a, b, c) triple on the current GPU (poisoned output)."""
    import cupy

    from tcreduce._compile import get_function
    from tcreduce._device import current_device

    device_id, spec = current_device()
    fn = get_function("mma_probe.cu", f"mma_probe<{PROBE_INDEX[fmt]}>", device_id, spec.arch)
    n = a.shape[0]
    da, db = cupy.asarray(np.ascontiguousarray(a)), cupy.asarray(np.ascontiguousarray(b))
    dc = cupy.asarray(np.ascontiguousarray(c, dtype=np.float32))
    dd = cupy.full((n, 16, 8), np.nan, dtype=np.float32)
    block = 256
    grid = (n * 32 + block - 1) // block
    args = tuple(np.uint64(p.data.ptr) for p in (da, db, dc, dd)) + (np.int64(n),)
    fn((grid, 1, 1), (block, 1, 1), args, 0, cupy.cuda.get_current_stream(), False)
    return cupy.asnumpy(dd)


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
            d = run_probe(fmt, a, b, c)
            arrays.update({f"{dist}/a": a, f"{dist}/b": b, f"{dist}/c": c, f"{dist}/d": d})
            print(f"{fmt:14s} {dist:18s} nan-d {int(np.isnan(d).sum()):6d}")
        np.savez_compressed(os.path.join(args.out, f"mma_{fmt}.npz"), **arrays)


if __name__ == "__main__":
    main()
