"""Accuracy study: relative error against the exact sum versus N, per method and input distribution, with the
a-priori error bound beside each measured curve.

With a GPU: N = 2^10 .. 2^30 (every power of two), every registered sum method that takes the dtype (the ladder
rungs too, drawn in a figure of their own), ``torch.sum`` and ``cupy.sum`` (CUB) with fp32 accumulation, and a float64
sum for comparison. Inputs are generated on the GPU with fixed seeds; exact sums come from a one-pass exponent-binned
integer accumulation on the GPU (:func:`experiments.exact.exact_sum_gpu`, checked against ``math.fsum`` at start).
Up to N = 2^20 (every other power) the same inputs also go through ``tcreduce.emulate.sum`` for the GPU's model, and
the second figure shows that the GPU and the emulator agree bit for bit.

Without a GPU: the emulator stands in for the GPU (emulated methods only, the deterministic ladder rungs included,
``gpu="H100"``), N = 2^10 .. 2^20 (2^16 with --quick), exact sums from ``tcreduce.reference.exact_sum``.

Bounds: ``tcreduce.bounds.error_bound`` on the data up to N = 2^22; above, the plan's factor
(``bounds.error_bound_factor``) times the exact sum of |x| (the same quantity; both are checked to agree where both are
computed).

Outputs: accuracy.csv, accuracy.json, accuracy.png/.pdf (error vs N), accuracy_emulator.png/.pdf (GPU == emulator,
GPU runs only), accuracy_ladder.png/.pdf (ladder rungs).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from tcreduce.testing import to_numpy

from .competitors import competitors, torch_stream_guard
from .context import Context, MissingInterface, require
from .env import device_info, free_gpu_memory, torch_missing_reason
from .exact import exact_sum_gpu, exact_sum_host, rel_error
from .inputs import DISTRIBUTIONS, NEW_FORMATS, case_seed, dtype_label, float32_copy, format_missing, make_input, \
    to_host
from .methods import sum_methods
from .records import error_note, metadata, write_csv, write_metadata

NAME = "accuracy"
NEEDS_GPU = False
SUMMARY = "relative error vs N per method and distribution, with error bounds (GPU, or the emulator without one)"

COLUMNS = ["dtype", "dist", "n", "seed", "kind", "method", "result", "exact", "abs_sum", "cond", "rel_error",
           "bound_abs", "rel_bound", "bound_kind", "within_bound", "emu_result", "emu_equal", "backend", "note"]

DTYPES = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32")


def config(ctx: Context) -> dict[str, Any]:
    if ctx.mode == "tiny":
        sizes = [2**8, 2**10]
        dists = {"float16": ["uniform", "near_overflow"], "float32": ["mixed"], "bfloat16": ["uniform"],
                 "float8_e4m3fn": ["normal"]}
    else:
        dists = {dt: [d for d, spec in DISTRIBUTIONS.items() if dt in spec["dtypes"]] for dt in DTYPES}
        if ctx.gpu:
            sizes = [2**k for k in (range(10, 23, 4) if ctx.quick else range(10, 31))]
        else:
            sizes = [2**k for k in (range(10, 17, 2) if ctx.quick else range(10, 21))]
    if ctx.gpu:
        emu_max = 2**14 if ctx.quick or ctx.mode == "tiny" else 2**20
        emu_sizes = [n for n in sizes if n <= emu_max and (ctx.quick or int(math.log2(n)) % 2 == 0)]
    else:
        emu_sizes = []
    return {
        "sizes": sizes,
        "distributions": dists,
        "distribution_params": {k: {kk: vv for kk, vv in v.items() if kk != "dtypes"}
                                for k, v in DISTRIBUTIONS.items()},
        "emulator_check_sizes": emu_sizes,
        "bound_direct_max": 2**22,
        "slow_call_s": 0.25,  # GPU runs: a method slower than this per call is not run at larger N
        # (seconds one emulated sum may take before the method is not emulated at larger N, total seconds)
        "emulation_budget_s": ((5.0, 90.0 if not ctx.quick else 20.0) if ctx.gpu
                               else (30.0, 420.0 if not ctx.quick else 120.0)),
        "seed": "crc32(dist/dtype/n)",
        "emulated_gpu": None if ctx.gpu else ctx.emulated_gpu,
    }


def _bits(v) -> int:
    return int(np.asarray(v, dtype=np.float32).reshape(()).view(np.uint32))


class _Bounds:
    """Bounds per (method, dtype, n): direct on the data where it is on the host, else the plan factor times sum|x|;
    both ways are compared wherever both can be computed."""

    def __init__(self, ctx: Context, gpu_model: str):
        self.ctx = ctx
        self.gpu = gpu_model
        self.mod = require("tcreduce.bounds", "the accuracy study's error bounds", ("error_bound",))
        self._warned: set[str] = set()

    def factor(self, method: str, dtype: str, n: int) -> float:
        from tcreduce import registry
        from tcreduce._api import get_plan
        from tcreduce._device import named_device
        from tcreduce._layout import Flat

        if not hasattr(self.mod, "error_bound_factor"):
            raise RuntimeError("tcreduce.bounds has no error_bound_factor(plan, gpu); bounds above the direct size "
                               "limit need it")
        m = registry.get(method)
        if m.runner is not None:  # library methods: the order-free bound, as bounds.error_bound computes it
            return self.mod.library_bound_factor(n)
        plan = get_plan(method, Flat(n, 0), dtype, "float32", named_device(self.gpu))
        return float(self.mod.error_bound_factor(plan, self.gpu))

    def __call__(self, method: str, dtype: str, n: int, host: Optional[np.ndarray], abs_sum: float,
                 direct_max: int, exact: Optional[float] = None) -> tuple[float, str]:
        if method == "exact" and exact is not None:  # one rounding of the exact sum: half an ulp of the fp32 result
            return 0.5 * float(np.spacing(np.abs(np.float32(exact)))), "half ulp"
        if host is not None and n <= direct_max:
            b = float(np.asarray(self.mod.error_bound(host, method=method, gpu=self.gpu)).reshape(()))
            try:
                f = self.factor(method, dtype, n) * abs_sum
                if not math.isclose(f, b, rel_tol=1e-9, abs_tol=0.0) and method not in self._warned:
                    self._warned.add(method)
                    self.ctx.note(f"bound of {method} ({dtype}, n={n}): error_bound {b:.6g} but factor*sum|x| "
                                  f"{f:.6g}; bounds above 2^22 use the factor")
            except Exception as e:  # the direct bound is what we record; the factor is only a cross-check here
                if method not in self._warned:
                    self._warned.add(method)
                    self.ctx.note(f"bound factor of {method} unavailable ({type(e).__name__}: {e})")
            return b, "direct"
        return self.factor(method, dtype, n) * abs_sum, "factor"


class _EmuBudget:
    """Keeps emulation inside the run's time budget: a method whose one emulated sum takes longer than
    ``per_call_s`` is not emulated at larger N, and once ``total_s`` is spent no more sums are emulated (each said in
    a note and in the rows' note column)."""

    def __init__(self, ctx: Context, per_call_s: float, total_s: float):
        self.ctx, self.per_call_s, self.total_s = ctx, per_call_s, total_s
        self.spent = 0.0
        self.stopped: dict[str, int] = {}
        self.exhausted = False

    def allowed(self, method: str) -> Optional[str]:
        """None if ``method`` may be emulated now, else why not."""
        if self.exhausted:
            return f"not emulated: the emulation budget of {self.total_s:.0f} s is spent"
        if method in self.stopped:
            return f"not emulated: one emulated sum took over {self.per_call_s:.0f} s at n={self.stopped[method]}"
        return None

    def record(self, method: str, n: int, seconds: float) -> None:
        self.spent += seconds
        if seconds > self.per_call_s and method not in self.stopped:
            self.stopped[method] = n
            self.ctx.note(f"emulating {method} took {seconds:.1f} s at n={n}: not emulated at larger n")
        if self.spent > self.total_s and not self.exhausted:
            self.exhausted = True
            self.ctx.note(f"emulation budget ({self.total_s:.0f} s) spent: no more emulated sums in this run")


def _twins(methods) -> set[str]:
    """The methods the emulator reproduces (``Method.emulated``: a twin in tcreduce.emulate)."""
    return {m.name for m in methods if m.emulated}


def _emulate(emulate, budget: _EmuBudget, x: np.ndarray, method: str, gpu: str, n: int):
    import time

    t0 = time.perf_counter()
    v = np.asarray(emulate.sum(x, method=method, gpu=gpu))
    budget.record(method, n, time.perf_counter() - t0)
    return v


def _check_exact_gpu(ctx: Context) -> None:
    """exact_sum_gpu must agree with math.fsum (and tcreduce.reference.exact_sum where present)."""
    import cupy

    try:
        from tcreduce import reference
    except ImportError:
        reference = None
    for dtype in ("float16", "float32"):  # the exact sums take these; bf16 and fp8 go through a float32 copy
        for dist in ("uniform", "mixed", "lognormal"):
            x = make_input(dist, dtype, 65537, seed=case_seed("check", dist, dtype), xp=cupy)
            h = cupy.asnumpy(x)
            for absolute in (False, True):
                got = exact_sum_gpu(x, absolute=absolute)
                want = exact_sum_host(np.abs(h) if absolute else h)
                if got != want:
                    raise RuntimeError(f"exact_sum_gpu({dist}, {dtype}, abs={absolute}) = {got!r} but math.fsum "
                                       f"gives {want!r}")
                if reference is not None and not absolute:
                    ref = float(reference.exact_sum(h))
                    if ref != want:
                        ctx.note(f"tcreduce.reference.exact_sum({dist}, {dtype}) = {ref!r}, math.fsum {want!r}")


def run(ctx: Context) -> list[Path]:
    cfg = config(ctx)
    if ctx.gpu:
        rows = _run_gpu(ctx, cfg)
    else:
        rows = _run_cpu(ctx, cfg)
    return write(ctx, rows, cfg)


def write(ctx: Context, rows: list[dict], cfg: dict) -> list[Path]:
    viol = [r for r in rows if r.get("within_bound") is False]
    mism = [r for r in rows if r.get("emu_equal") is False]
    for r in viol[:10]:
        ctx.note(f"BOUND VIOLATED: {r['method']} {r['dtype']} {r['dist']} n={r['n']}: rel error {r['rel_error']:.3g} "
                 f"> bound {r['rel_bound']:.3g}")
    for r in mism[:10]:
        ctx.note(f"GPU != emulator: {r['method']} {r['dtype']} {r['dist']} n={r['n']}: {r['result']!r} vs "
                 f"{r['emu_result']!r}")
    compared = [r for r in rows if r.get("emu_equal") in (True, False)]
    extra = {
        "summary": {
            "rows": len(rows),
            "bound_violations": len(viol),
            "emulator_compared": len(compared),
            "emulator_mismatches": len(mism),
            "errors": sum(1 for r in rows if str(r.get("note", "")).startswith("error")),
        },
        "notes": list(ctx.notes),
        "csv_header": {"emulator_compared": len(compared), "emulator_mismatches": len(mism),
                       "bound_violations": len(viol)},
    }
    meta = metadata(NAME, ctx, cfg, extra)
    out = ctx.out
    paths = [write_csv(out / f"{NAME}.csv", rows, COLUMNS, meta),
             write_metadata(out / f"{NAME}.json", meta)]
    from . import plotting

    paths += plotting.plot_accuracy(out / f"{NAME}.csv", out)
    return paths


# ------------------------------------------------------------------------------------------------ CPU (emulator)
def _run_cpu(ctx: Context, cfg: dict) -> list[dict]:
    emulate = require("tcreduce.emulate", "the accuracy study without a GPU (it runs through the emulator)",
                             ("sum",))
    reference = require("tcreduce.reference", "the accuracy study without a GPU (exact sums)",
                               ("exact_sum", "float64_sum"))
    bounds = _Bounds(ctx, ctx.emulated_gpu)
    rows: list[dict] = []
    methods = {dt: sum_methods(dt, ctx=ctx) for dt in DTYPES}  # the ladder rungs too (accuracy_ladder)
    twins = _twins([m for ms in methods.values() for m in ms])
    for dt, ms in methods.items():
        skipped = [m.name for m in ms if m.name not in twins]
        if skipped:
            ctx.note(f"{dtype_name(dt)}: not emulated, so not measured without a GPU: {', '.join(skipped)}")
    cases = [(dt, d, n) for dt in DTYPES for d in cfg["distributions"].get(dt, []) for n in cfg["sizes"]]
    budget = _EmuBudget(ctx, *cfg["emulation_budget_s"])
    bar = ctx.bar(len(cases), NAME)
    for dt, dist, n in cases:
        seed = case_seed(dist, dt, n)
        x = make_input(dist, dt, n, seed)
        exact = float(reference.exact_sum(x))
        abs_sum = float(reference.exact_sum(np.abs(x)))
        base = dict(dtype=dt, dist=dist, n=n, seed=seed, exact=exact, abs_sum=abs_sum,
                    cond=abs_sum / abs(exact) if exact else float("inf"), backend=f"emulator:{ctx.emulated_gpu}")
        for m in methods[dt]:
            if m.name not in twins:
                continue
            row = dict(base, kind="tcreduce", method=m.name)
            why = budget.allowed(m.name)
            if why:
                rows.append(dict(row, note=why))
                continue
            try:
                r = float(_emulate(emulate, budget, x, m.name, ctx.emulated_gpu, n).reshape(()))
                row.update(result=r, rel_error=rel_error(r, exact))
                b, kind = bounds(m.name, dt, n, x, abs_sum, cfg["bound_direct_max"], exact)
                row.update(bound_abs=b, rel_bound=b / abs(exact) if exact else float("inf"), bound_kind=kind,
                           within_bound=abs(r - exact) <= b)
            except Exception as e:
                row["note"] = f"error: {type(e).__name__}: {e}"
                ctx.error(f"accuracy {m.name} {dt} {dist} n={n}: {type(e).__name__}: {e}")
            rows.append(row)
        r64 = float(reference.float64_sum(x))
        rows.append(dict(base, kind="float64", method="float64", result=r64, rel_error=rel_error(r64, exact)))
        bar.update(1, f"{dtype_name(dt)} {dist} 2^{int(math.log2(n))}")
    bar.close()
    return rows


def dtype_name(dt: str) -> str:
    return dtype_label(dt)


# ----------------------------------------------------------------------------------------------------------- GPU
def _run_gpu(ctx: Context, cfg: dict) -> list[dict]:
    import cupy

    import tcreduce
    from tcreduce._device import named_device

    try:
        emulate = require("tcreduce.emulate", "the GPU == emulator panel", ("sum",))
    except MissingInterface as e:
        emulate = None
        ctx.error(str(e))
    dev_name = device_info().get("gpu_name", "H100")
    try:
        gpu_model = named_device(dev_name).name
    except ValueError:
        gpu_model = "H100"
        ctx.note(f"{dev_name} is not a GPU the emulator models; bounds and emulation use H100's parameters")
    try:
        bounds: Optional[_Bounds] = _Bounds(ctx, gpu_model)
    except MissingInterface as e:
        bounds = None
        ctx.error(str(e))
    _check_exact_gpu(ctx)
    dtypes = [dt for dt in DTYPES if not format_missing(dt)]
    for dt in DTYPES:
        if format_missing(dt):
            ctx.note(f"{dtype_name(dt)} not measured: {format_missing(dt)}")
    methods = {dt: sum_methods(dt, ctx=ctx) for dt in dtypes}
    twins = _twins([m for ms in methods.values() for m in ms]) if emulate is not None else set()
    comps = competitors(None, native=False)
    torch_comps = [c for c in comps if c.lib == "torch"]  # bf16 / fp8 inputs are torch tensors
    if not any(c.label.startswith("torch") for c in comps):
        ctx.note(f"torch.sum not measured: {torch_missing_reason()}")
    emu_sizes = set(cfg["emulator_check_sizes"])
    budget = _EmuBudget(ctx, *cfg["emulation_budget_s"])
    host_max = max([cfg["bound_direct_max"], *emu_sizes])
    cases = [(dt, d, n) for dt in dtypes for d in cfg["distributions"].get(dt, []) for n in cfg["sizes"]]
    bar = ctx.bar(len(cases), NAME)
    rows: list[dict] = []
    slow: dict[str, int] = {}  # method -> n at which one call took longer than cfg["slow_call_s"]
    warmed: set[str] = set()
    for dt, dist, n in cases:
        seed = case_seed(dist, dt, n)
        x = make_input(dist, dt, n, seed, xp=cupy)
        x32 = float32_copy(x)
        exact = exact_sum_gpu(x32)
        abs_sum = exact_sum_gpu(x32, absolute=True)
        host = to_host(x) if n <= host_max else None
        base = dict(dtype=dt, dist=dist, n=n, seed=seed, exact=exact, abs_sum=abs_sum,
                    cond=abs_sum / abs(exact) if exact else float("inf"), backend="gpu")
        for m in methods[dt]:
            row = dict(base, kind="tcreduce", method=m.name)
            if m.name in slow and n > slow[m.name]:
                rows.append(dict(row, note=f"not run: one call took over {cfg['slow_call_s']:g} s at "
                                           f"n={slow[m.name]}"))
                continue
            try:
                if m.name not in warmed:  # compile and plan outside the timed call
                    warmed.add(m.name)
                    to_numpy(tcreduce.sum(x, method=m.name))
                t0 = time.perf_counter()
                r32 = to_numpy(tcreduce.sum(x, method=m.name))
                dt_call = time.perf_counter() - t0
                if dt_call > cfg["slow_call_s"] and m.name not in slow:  # again: a first call may have compiled
                    t0 = time.perf_counter()
                    to_numpy(tcreduce.sum(x, method=m.name))
                    dt_call = time.perf_counter() - t0
                if dt_call > cfg["slow_call_s"] and m.name not in slow:
                    slow[m.name] = n
                    ctx.note(f"{m.name}: one call took over {cfg['slow_call_s']:g} s at n={n}; not run at larger n")
                r = float(r32)
                row.update(result=r, rel_error=rel_error(r, exact))
            except Exception as e:
                row["note"] = error_note(e)
                ctx.error(f"accuracy {m.name} {dt} {dist} n={n}: {row['note'][7:]}")
                rows.append(row)
                continue
            if bounds is not None:
                try:
                    b, kind = bounds(m.name, dt, n, host, abs_sum, cfg["bound_direct_max"], exact)
                    row.update(bound_abs=b, rel_bound=b / abs(exact) if exact else float("inf"), bound_kind=kind,
                               within_bound=abs(r - exact) <= b)
                except Exception as e:
                    row["note"] = f"no bound: {type(e).__name__}: {e}"
            why = budget.allowed(m.name)
            if why and m.name in twins and n in emu_sizes:
                row["note"] = why
            elif emulate is not None and m.name in twins and n in emu_sizes and host is not None:
                try:
                    e_val = _emulate(emulate, budget, host, m.name, gpu_model, n)
                    row.update(emu_result=float(e_val), emu_equal=_bits(e_val) == _bits(r32))
                except Exception as e:
                    row["note"] = f"error: emulator: {type(e).__name__}: {e}"
                    ctx.error(f"emulate {m.name} {dt} {dist} n={n}: {type(e).__name__}: {e}")
            rows.append(row)
        for c in (torch_comps if dt in NEW_FORMATS else comps):
            row = dict(base, kind="competitor", method=c.label)
            try:
                with c.context(), torch_stream_guard():
                    r = float(c.call(c.wrap(x)))
                row.update(result=r, rel_error=rel_error(r, exact))
            except Exception as e:
                row["note"] = f"error: {type(e).__name__}: {e}"
                ctx.error(f"accuracy {c.label} {dt} {dist} n={n}: {type(e).__name__}: {e}")
            rows.append(row)
        r64 = float(cupy.sum(x32, dtype=np.float64))
        rows.append(dict(base, kind="float64", method="float64", result=r64, rel_error=rel_error(r64, exact)))
        del x, x32, host
        if n >= 2**26:
            free_gpu_memory()
        bar.update(1, f"{dtype_name(dt)} {dist} 2^{int(math.log2(n))}")
    bar.close()
    return rows
