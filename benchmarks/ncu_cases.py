"""Run a few sums, each twice, for Nsight Compute to profile (hardware counters need a Firecracker device machine:
/work/.library/device/H200.md). Only the second call of a case runs between cudaProfilerStart and cudaProfilerStop
(the first compiles, autotunes and warms the caches), so profile with ``--profile-from-start off``:

    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
        python3 benchmarks/ncu_cases.py float32:cols:1024:tensorcore float32:cols:1024:shuffle

A case is dtype:form:n:method with form "rows" (a [TOTAL / n, n] array over the last axis) or "cols" ([n, TOTAL / n]
over axis 0), TOTAL = 512 MiB of input as in the segment study; method a tcreduce method, or "torch.sum" or
"torch.compile" (``torch.sum(t, dim, dtype=float32)``, compiled as the studies' competitor is: inductor's kernels
beside ours). float16 and float32 results are checked against a float64 sum (|error| <= n 2^-23 sum|x|, recursive
summation's bound for any order of fp32 additions), so a profile never describes a wrong kernel; other formats are
not checked here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_floor import make_input, within_fp32_bound  # noqa: E402

TOTAL_BYTES = 1 << 29


def _caller(method: str, x, t, axis: int, kw: dict, torch):
    """The case's sum as a function of nothing, returning a CuPy array: tcreduce's method, or torch's sum (compiled
    once for "torch.compile")."""
    import cupy

    import tcreduce

    if not method.startswith("torch."):
        return lambda: tcreduce.sum(x, axis=axis, method=method, **kw)
    fn = lambda a: torch.sum(a, dim=[axis], dtype=torch.float32)  # noqa: E731
    if method == "torch.compile":
        fn = torch.compile(fn, dynamic=False)
    return lambda: cupy.from_dlpack(fn(t))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("cases", nargs="+", help="dtype:form:n:method, e.g. float32:cols:1024:tensorcore")
    args = ap.parse_args()
    import cupy

    from tcreduce.formats import get_format

    try:
        import torch
    except ImportError:
        torch = None
    for case in args.cases:
        dtype, form, n_text, method = case.split(":")
        n = int(n_text)
        other = TOTAL_BYTES // get_format(dtype).itemsize // n
        shape, axis = ((n, other), 0) if form == "cols" else ((other, n), -1)
        x, t, kw = make_input(cupy.random.default_rng(1), shape, dtype, torch)
        if method.startswith("torch.") and t is None:
            raise SystemExit(f"{case}: needs torch")
        call = _caller(method, x, t, axis, kw, torch)
        call()
        cupy.cuda.runtime.deviceSynchronize()
        cupy.cuda.profiler.start()
        got = call()
        cupy.cuda.runtime.deviceSynchronize()
        cupy.cuda.profiler.stop()
        if dtype in ("float16", "float32") and not within_fp32_bound(got, x, axis):
            raise SystemExit(f"{case}: a sum outside n 2^-23 sum|x|")
        print(f"{case}: shape {shape}, checked: {dtype in ('float16', 'float32')}", flush=True)
        del x, t, got, call


if __name__ == "__main__":
    main()
