"""Tuning sweep for the full-sum kernels: time kernel variants (template arguments, grid sizes) of a method's plan on
one large input and print GB/s per variant. Used to pick the defaults in tcreduce/plans/*.py (notes/performance.md).

    python benchmarks/tune_flat.py [--n 268435456] [--reps 20] [--methods exact,kahan,tensorcore_kahan] [--only fp32tc]

For "exact" every variant's result is also checked bit for bit against the default plan's (exact sums do not depend
on the plan); the others against a float64 sum (1e-4 relative). --only fp32tc sweeps only the float32 tensor-core
kernels (tc32_flat of "tensorcore" on float32 and of "tensorcore_tf32"), beside shuffle on float32, in the same run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf_floor import timed  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 28)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--methods", default="tensorcore,shuffle,exact,kahan,tensorcore_kahan",
                    help="comma-separated methods whose variants to time")
    ap.add_argument("--only", default="", help="fp32tc: only the float32 tensor-core variants (and shuffle fp32)")
    args = ap.parse_args()
    wanted = set(args.methods.split(","))

    import cupy

    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._launch import run_plan
    from tcreduce._layout import Flat

    dev_id, dev = current_device()
    sm = dev.sm_count
    variants = []
    for load in (0, 1, 2):
        for unroll, minb in ((4, 4), (4, 6), (8, 4), (2, 6)):
            for grid_mult in (1, 2):
                variants.append(("tensorcore", "float16",
                                 f"tc_flat<256, {unroll}, 1, float, {load}, {minb}>", sm * minb * grid_mult))
    for unroll, minb in ((4, 4), (8, 4), (4, 6), (2, 8)):
        for grid_mult in (1, 2):
            variants.append(("shuffle", "float32", f"shuffle_flat<float, float, 256, {unroll}, true, {minb}>",
                             sm * minb * grid_mult))
            variants.append(("shuffle", "float16", f"shuffle_flat<__half, float, 256, {unroll}, true, {minb}>",
                             sm * minb * grid_mult))
    exact16, exact32 = "exact_detail::InF16", "exact_detail::InF32"
    for unroll, minb in ((2, 6), (4, 4), (2, 8), (1, 8), (4, 6)):
        for grid_mult in (1, 2):
            variants.append(("exact", "float16", f"exact_flat<{exact16}, float, 0, 256, {unroll}, {minb}>",
                             sm * minb * grid_mult))
    for unroll, minb in ((4, 3), (2, 4), (8, 2), (2, 6), (4, 2)):
        for grid_mult in (1, 2):
            variants.append(("exact", "float32", f"exact_flat<{exact32}, float, 0, 256, {unroll}, {minb}>",
                             sm * minb * grid_mult))
    for unroll, minb in ((2, 8), (4, 4), (8, 4), (4, 6)):
        for dtype, ct in (("float16", "__half"), ("float32", "float")):
            variants.append(("kahan", dtype, f"kahan_flat<{ct}, float, 256, {unroll}, {minb}>", sm * minb))
    for unroll, minb in ((2, 6), (4, 4), (2, 8)):
        variants.append(("tensorcore_kahan", "float16", f"tc_kahan_flat<256, {unroll}, float, {minb}>", sm * minb))
    # float32 on tensor cores (tc32_flat: 2 vectors per step, so UNROLL is even; no spills at these (UNROLL, MINB))
    fp32tc = []
    for method, fmt in (("tensorcore", "tcr32::Split"), ("tensorcore_tf32", "tcr32::Tf32")):
        for unroll, minb in ((8, 4), (4, 4), (6, 4), (8, 3), (12, 3), (4, 5)):
            for load in (0, 2):
                fp32tc.append((method, "float32", f"tc32_flat<{fmt}, 256, {unroll}, float, {load}, {minb}>", sm * minb))
    if args.only == "fp32tc":
        variants = [v for v in variants if v[0] == "shuffle" and v[1] == "float32"] + fp32tc
    else:
        variants = [v for v in variants if v[0] in wanted] + fp32tc
    inputs = {}
    exact_ref = {}
    for method, dtype, kernel, grid in variants:
        if dtype not in inputs:
            inputs[dtype] = cupy.random.default_rng(0).uniform(-0.25, 0.75, args.n, dtype=cupy.float32).astype(dtype)
        x = inputs[dtype]
        base = get_plan(method, Flat(args.n, 0), dtype, "float32", dev)
        ln = base.launches[0]
        per_block = base.workspace_floats // max(ln.grid[0], 1)  # workspace floats per block of the plan
        plan = base.replace(launches=(ln.__class__(ln.source, kernel, (grid, 1, 1), ln.block, ln.args),),
                            workspace_floats=per_block * grid, counters=1)
        out = cupy.empty((), cupy.float32)
        try:
            run_plan(plan, x.data.ptr, out.data.ptr, dev_id)
            if method == "exact":
                if dtype not in exact_ref:
                    import tcreduce

                    exact_ref[dtype] = float(tcreduce.sum(x, method="exact"))
                ok = float(out) == exact_ref[dtype]
            else:
                ref = float(cupy.sum(x, dtype=cupy.float64))
                ok = abs(float(out) - ref) <= 1e-4 * abs(ref)
            t = timed(lambda plan=plan, x=x, out=out: run_plan(plan, x.data.ptr, out.data.ptr, dev_id), args.reps)
            print(f"{method:16} {dtype:8} {kernel:62} grid={grid:5d} {t * 1e6:8.1f} us "
                  f"{x.nbytes / t / 1e9:7.0f} GB/s {'ok' if ok else 'WRONG'}", flush=True)
        except Exception as e:
            print(f"{method:16} {dtype:8} {kernel:62} grid={grid:5d} failed: {type(e).__name__}: {e}"[:300])


if __name__ == "__main__":
    main()
