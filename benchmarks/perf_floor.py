"""Smoke benchmark: the performance floor of issue 2, every method beside torch.sum and cupy.sum (CUB on and off),
a tuned Triton kernel and torch.compile'd torch.sum (where torch and Triton are installed: ``pip install -e
".[bench]"``; each checked against a float64 sum first, see experiments/competitors.py), in one run on one GPU.
CUDA events around batches of back-to-back calls, warm-up, median over batches, inputs far larger than L2 (512 MiB
and more).

    python benchmarks/perf_floor.py [--out DIR] [--reps 30] [--cases full,rows16,...]
    python benchmarks/perf_floor.py --cases exact16,exact32,exact_rows,exact_cols   # issue 11

The exact16 / exact32 cases (2^28 fp16 / fp32, full sums) time shuffle, tensorcore, exact, kahan, tensorcore_kahan
(fp16), the float64 sums of torch (torch.sum(dtype=float64)) and CuPy (cupy.sum(dtype=float64)) and, for fp32, CUB
run_to_run (cupy.sum) and CUB gpu_to_gpu (experiments/cub_determinism.py, where nvcc and CCCL >= 3.1 are there); the
column "x shuffle" is each method's speed relative to shuffle's in the same case (issue 11's goals: exact fp16 >=
0.90, fp32 >= 0.80, kahan >= 0.97), "rel. error" its largest relative error against the exact sum (tcreduce's exact
method rounded to float64) on the same data. exact_rows / exact_cols time the other forms.

Prints a table (GB/s counts the input bytes read once; "ceiling" is a device-to-device copy measured in the same
run, bytes read + written) and writes perf_floor.csv with a metadata header.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def graph_timed(fn, reps: int, lib: str = "cupy") -> float:
    """Median seconds per call of ``fn`` inside a CUDA graph of back-to-back calls (:func:`experiments.timing.time_graph`,
    the throughput study's ``graph_us``): the GPU's time without host dispatch, for calls too small to time any other
    way. ``lib``: "cupy" (tcreduce, CuPy) or "torch" (torch.cuda.graph)."""
    from experiments.timing import TimingConfig, time_graph

    return time_graph(lambda _: fn(), [None], TimingConfig(min_reps=reps, max_reps=reps), lib=lib).median_s


def timed(fn, reps: int, warmup: int = 3, batch: int = 10) -> float:
    """Median seconds per call of ``fn``: ``reps`` samples of up to ``batch`` back-to-back calls between CUDA events
    (at least 0.2 ms of calls per sample), after ``warmup`` calls; the studies' timing
    (:func:`experiments.timing.time_gpu`, torch on CuPy's stream): every sample is enqueued before the first is waited
    for, so no sample starts on an idle GPU and neither a launch's latency nor a Python launch path counts (before
    session 15 each sample did, which charged torch.compile 6-8% at 512 MiB: notes/performance.md)."""
    from experiments.competitors import torch_stream_guard
    from experiments.timing import TimingConfig, time_gpu

    cfg = TimingConfig(warmup=warmup, min_reps=reps, max_reps=reps, max_batch=batch)
    with torch_stream_guard():
        return time_gpu(lambda _: fn(), [None], cfg).median_s


def metadata() -> dict:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    from experiments.env import git_info
    from experiments.timing import timing_cpu

    commit = git_info()["commit"] or "unknown"
    meta = dict(device=props["name"].decode(), sms=props["multiProcessorCount"],
                driver=cupy.cuda.runtime.driverGetVersion(), runtime=cupy.cuda.runtime.runtimeGetVersion(),
                cupy=cupy.__version__, numpy=np.__version__, python=platform.python_version(), commit=commit,
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                command=" ".join(sys.argv), timing_cpu=timing_cpu())
    try:
        import torch

        meta["torch"] = torch.__version__
    except ImportError:
        pass
    return meta


def make_input(rng, shape, dtype: str, torch):
    """(CuPy array, torch view or None, tcreduce keyword arguments): uniform [-0.25, 0.75) data of a format. bf16 and
    fp8 live as raw bits in CuPy (converted by torch, round to nearest, when torch is there; bf16 by truncation
    otherwise), with ``format=``."""
    import cupy

    xf = rng.uniform(-0.25, 0.75, shape, dtype=cupy.float32)
    if dtype in ("float16", "float32"):
        x = xf.astype(dtype)
        return x, (torch.from_dlpack(x) if torch is not None else None), {}
    if torch is None:
        if dtype != "bfloat16":
            raise RuntimeError(f"{dtype} inputs are made with torch")
        return (xf.view(cupy.uint32) >> 16).astype(cupy.uint16), None, {"format": dtype}
    xt = torch.from_dlpack(xf).to(getattr(torch, dtype))
    raw = xt.view(torch.int16) if dtype == "bfloat16" else xt.view(torch.uint8)
    x = cupy.from_dlpack(raw)
    return (x.view(cupy.uint16) if dtype == "bfloat16" else x), xt, {"format": dtype}


def within_fp32_bound(got, x, axis: int) -> bool:
    """Whether every sum in ``got`` (a CuPy array of the sums of float16 or float32 ``x`` over ``axis``) is within
    n 2^-23 sum|x| of the float64 sum, n the reduced length: recursive summation's bound for any order of n fp32
    additions, rounding toward zero included."""
    import cupy

    x64 = x.astype(cupy.float64)
    err = cupy.abs(got.astype(cupy.float64) - x64.sum(axis=axis))
    return bool(cupy.all(err <= x.shape[axis] * 2.0**-23 * cupy.abs(x64).sum(axis=axis)))


def within_method_bound(got, x, axis: int, method: str, dtype: str) -> bool:
    """Whether every sum in ``got`` (a CuPy array of ``tcreduce.sum(x, axis, method=method)``, ``x`` a CuPy array of
    format ``dtype``: bf16 and fp8 as raw bits, as make_input gives them) is within the method's a-priori bound on this
    GPU (tcreduce.bounds.error_bound, output rounding included: lossy methods such as tf32 included) of the float64
    sum. The bound is computed from a host copy of ``x``."""
    import cupy
    import ml_dtypes

    import tcreduce.bounds
    from tcreduce._device import current_device

    xh = x.get()
    if dtype not in ("float16", "float32"):
        xh = xh.view(getattr(ml_dtypes, dtype))
    x64 = cupy.asarray(xh.astype(np.float64))
    err = cupy.abs(got.astype(cupy.float64) - x64.sum(axis=axis))
    bound = tcreduce.bounds.error_bound(xh, axis, method=method, gpu=current_device()[1])
    return bool(cupy.all(err <= cupy.asarray(bound)))  # NaN (an output left unwritten) fails too


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--cases", default="", help="comma-separated case names to run (default: all), e.g. rows1024,rows4096")
    args = ap.parse_args()

    import cupy
    from cupy._core import _accelerator as acc

    import tcreduce
    from experiments.competitors import tuned_competitors, tuned_missing
    from experiments.methods import FULL_SUM_ONLY

    try:
        import torch
    except ImportError:
        torch = None
    meta = metadata()
    for why in tuned_missing():
        print(why, file=sys.stderr)
    rng = cupy.random.default_rng(1)
    rows = []

    def cupy_sum(x, axis, accel):
        old_r, old_red = acc.get_routine_accelerators(), acc.get_reduction_accelerators()
        acc.set_routine_accelerators(accel)
        acc.set_reduction_accelerators(accel)
        try:
            return cupy.sum(x, axis=axis, dtype=cupy.float32)
        finally:
            acc.set_routine_accelerators(old_r)
            acc.set_reduction_accelerators(old_red)

    # ceiling: device-to-device copy of 2 GiB
    src = cupy.empty(1 << 29, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    t = timed(lambda: cupy.copyto(dst, src), args.reps)
    ceiling = 2 * src.nbytes / t / 1e9
    src = dst = None  # free 4 GiB before the cases
    rows.append(dict(case="copy", method="d2d copy", dtype="float32", shape="(2^29,)", us=t * 1e6, gbs=ceiling))

    cases = [
        ("exact16", "float16", (1 << 28,), None),
        ("exact32", "float32", (1 << 28,), None),
        ("exact_rows", "float16", (1 << 16, 4096), -1),
        ("exact_cols", "float16", (4096, 1 << 16), 0),
        ("full", "float16", (1 << 28,), None),
        ("full", "float32", (1 << 28,), None),
        ("rows16", "float16", (1 << 24, 16), -1),
        ("cols16", "float16", (16, 1 << 24), 0),
        ("rows256", "float16", (1 << 20, 256), -1),
        ("rows1024", "float16", (1 << 18, 1024), -1),
        ("rows4096", "float16", (1 << 16, 4096), -1),
        ("rows2^20", "float16", (256, 1 << 20), -1),
        ("full_bf16", "bfloat16", (1 << 28,), None),
        ("rows16_bf16", "bfloat16", (1 << 24, 16), -1),
        ("rows256_bf16", "bfloat16", (1 << 20, 256), -1),
        ("rows1024_bf16", "bfloat16", (1 << 18, 1024), -1),
        ("cols16_bf16", "bfloat16", (16, 1 << 24), 0),
        ("full_e4m3", "float8_e4m3fn", (1 << 29,), None),
        ("rows32_e4m3", "float8_e4m3fn", (1 << 24, 32), -1),
        ("rows1024_e4m3", "float8_e4m3fn", (1 << 19, 1024), -1),
        ("full_e5m2", "float8_e5m2", (1 << 29,), None),
        # float32 on tensor cores (tensorcore's split, tensorcore_tf32) against shuffle, torch and CUB
        ("rows16", "float32", (1 << 24, 16), -1),
        ("rows4096", "float32", (1 << 16, 4096), -1),
        ("cols16", "float32", (16, 1 << 24), 0),
        ("cols4096", "float32", (4096, 1 << 16), 0),
    ]
    if args.cases:
        cases = [c for c in cases if c[0] in args.cases.split(",")]
    issue11 = ("shuffle", "tensorcore", "exact", "kahan", "tensorcore_kahan")
    from experiments import cub_determinism

    cub_missing = cub_determinism.missing()  # why CUB's gpu_to_gpu sum cannot be built here (None: it can)
    if cub_missing:
        print(cub_missing, file=sys.stderr)
    for case, dtype, shape, axis in cases:
        x, xt, kw = make_input(rng, shape, dtype, torch)
        nbytes = x.nbytes
        competitors = {}
        if case.startswith("exact"):  # issue 11: the exact and compensated sums against shuffle and float64 sums
            if xt is not None:
                competitors["torch.sum f64"] = (lambda xt=xt, axis=axis: torch.sum(xt, dtype=torch.float64)
                                                if axis is None else torch.sum(xt, dim=axis, dtype=torch.float64))
            competitors["cupy.sum f64"] = lambda x=x, axis=axis: cupy.sum(x, axis=axis, dtype=cupy.float64)
            if axis is None and dtype == "float32" and not cub_missing:
                competitors["cupy.sum cub"] = lambda x=x: cupy_sum(x, None, ["cub"])  # CUB run_to_run
                competitors["cub gpu_to_gpu"] = lambda x=x: cub_determinism.cub_sum_f32(x, gpu_to_gpu=True)
            for name in issue11:
                m = next((m for m in tcreduce.methods() if m.name == name), None)
                if m is not None and dtype in m.dtypes and (axis is None or name != "tensorcore_kahan"):
                    competitors[name] = (lambda x=x, axis=axis, name=name: tcreduce.sum(x, axis=axis, method=name))
            # the exact sum rounded once to float64: the reference of every method's relative error on this data
            ref = cupy.asnumpy(tcreduce.sum(x, axis=axis, method="exact", dtype=cupy.float64))
            times, errors = {}, {}
            for name, fn in competitors.items():
                try:
                    got = cupy.asnumpy(fn()).astype(np.float64)
                    errors[name] = float(np.max(np.abs(got - ref) / np.abs(ref)))
                    times[name] = timed(fn, args.reps)
                except Exception as e:  # report and go on
                    print(f"{case} {name}: {type(e).__name__}: {e}", file=sys.stderr)
            for name, t in times.items():
                row = dict(case=case, method=name, dtype=dtype, shape=str(shape), us=t * 1e6, gbs=nbytes / t / 1e9,
                           rel_err=errors[name])
                row["frac_ceiling"] = row["gbs"] / ceiling
                if "shuffle" in times:
                    row["x_shuffle"] = times["shuffle"] / t
                rows.append(row)
            del x, xt
            continue
        if xt is not None:
            dim = None if axis is None else axis
            competitors["torch.sum"] = (lambda xt=xt, dim=dim: torch.sum(xt, dtype=torch.float32) if dim is None
                                        else torch.sum(xt, dim=dim, dtype=torch.float32))
            if dtype.startswith("float8"):  # torch's other eager ways to sum fp8 (issue 9): convert, then sum
                competitors["torch x.float().sum()"] = (lambda xt=xt, dim=dim: xt.float().sum() if dim is None
                                                        else xt.float().sum(dim=dim))
                competitors["torch x.bfloat16().sum(f32)"] = (
                    lambda xt=xt, dim=dim: xt.to(torch.bfloat16).sum(dtype=torch.float32) if dim is None
                    else xt.to(torch.bfloat16).sum(dim=dim, dtype=torch.float32))
        if not kw:  # CuPy has no bf16 / fp8 dtype
            competitors["cupy.sum cub"] = lambda x=x, axis=axis: cupy_sum(x, axis, ["cub"])
            competitors["cupy.sum native"] = lambda x=x, axis=axis: cupy_sum(x, axis, [])
        for comp in (tuned_competitors(axis) if dtype in ("float16", "float32", "bfloat16") else ()):
            try:  # tuning, compilation and the correctness checks, before any timing
                wrapped = comp.wrap(x) if not kw else xt  # bf16: the torch tensor of that dtype
                comp.prepare(wrapped)
                competitors[comp.label] = lambda c=comp, w=wrapped: c.call(w)
            except Exception as e:  # a wrong or failing competitor is reported, never timed
                print(f"{case} {comp.label}: {type(e).__name__}: {e}", file=sys.stderr)
        for m in tcreduce.methods():
            if dtype in m.dtypes and (axis is None or not (m.name.startswith("ladder") or m.name in FULL_SUM_ONLY)):
                competitors[m.name] = (lambda x=x, axis=axis, name=m.name: tcreduce.sum(x, axis=axis, method=name,
                                                                                       **kw))
        competitors["auto"] = lambda x=x, axis=axis: tcreduce.sum(x, axis=axis, **kw)
        times = {}
        for name, fn in competitors.items():
            try:
                if "native" in name and dtype == "float16" and case == "full":
                    continue  # CuPy's native fp16 full sum takes minutes at this size (baselines file: 3 GB/s)
                times[name] = timed(fn, args.reps)
            except Exception as e:  # report and go on: one broken method must not hide the others
                print(f"{case} {name}: {type(e).__name__}: {e}", file=sys.stderr)
        for name, t in times.items():
            row = dict(case=case, method=name, dtype=dtype, shape=str(shape), us=t * 1e6, gbs=nbytes / t / 1e9)
            row["frac_ceiling"] = row["gbs"] / ceiling
            for comp in ("torch.sum", "cupy.sum cub"):
                if comp in times:
                    row[f"x_{comp}"] = times[comp] / t
            rows.append(row)
        del x, xt

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fields = ["case", "method", "dtype", "shape", "us", "gbs", "frac_ceiling", "x_torch.sum", "x_cupy.sum cub",
              "x_shuffle", "rel_err"]
    with open(out / "perf_floor.csv", "w", newline="") as f:
        f.write("# " + json.dumps(meta) + "\n")
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    print(json.dumps(meta))
    print(f"{'case':14} {'method':22} {'dtype':13} {'us':>9} {'GB/s':>7} {'ceil':>5} {'x torch':>7} {'x cub':>6} "
          f"{'x shuffle':>9} {'rel. error':>10}")
    for r in rows:
        print(f"{r['case']:14} {r['method']:22} {r['dtype']:13} {r['us']:9.1f} {r['gbs']:7.0f} "
              f"{r.get('frac_ceiling', 1):5.2f} {r.get('x_torch.sum', float('nan')):7.2f} "
              f"{r.get('x_cupy.sum cub', float('nan')):6.2f} {r.get('x_shuffle', float('nan')):9.3f} "
              f"{r.get('rel_err', float('nan')):10.2e}")


if __name__ == "__main__":
    main()
