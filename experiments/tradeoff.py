"""Trade-off study: relative error against throughput, one point per method and setting, on the same inputs (the
Pareto picture).

Points (:func:`settings`): every tcreduce sum method (not the ladder rungs) with its default plan; the tensor-core
planner's chain lengths (MMAs accumulated in the tensor core's fp32 C before each round-to-nearest flush), when its
planner takes ``chain``; ``torch.sum`` and ``cupy.sum`` (CUB on and off) with fp32 accumulation, and both libraries
accumulating in float64. Extend :data:`EXTRA_SETTINGS` for new method settings: (label, method, {planner kwargs}).

N = 2^28 (2^24 with --quick), fp16 and fp32; inputs uniform [0, 1) and normal, 3 seeds each (1 with --quick),
generated on the GPU; errors against exact sums (:func:`experiments.exact.exact_sum_gpu`), median over the seeds.
Throughput is timed once per dtype on the first uniform input (bytes read: the input once).

Needs a GPU. Outputs: tradeoff.csv, tradeoff.json, tradeoff.png/.pdf.
"""

from __future__ import annotations

import inspect
import json
import statistics
from pathlib import Path
from typing import Any

from .competitors import competitors, torch_stream_guard
from .context import Context
from .env import free_gpu_memory, torch_missing_reason
from .exact import exact_sum_gpu, rel_error
from tcreduce.formats import get_format

from .inputs import NEW_FORMATS, case_seed, float32_copy, format_missing, make_input
from .methods import MethodSetting, run_setting, sum_methods
from .records import error_note, metadata, write_csv, write_metadata
from .timing import TimingConfig, time_gpu

NAME = "tradeoff"
NEEDS_GPU = True
SUMMARY = "relative error against GB/s, one point per method and setting, same inputs (Pareto front)"
WHY_GPU = "its x axis is throughput measured on a GPU"

COLUMNS = ["dtype", "dist", "n", "label", "method", "settings", "kind", "time_us", "gbs", "rel_error_median",
           "rel_error_min", "rel_error_max", "seeds", "note"]
DTYPES = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32")
DISTS = ("uniform", "normal")
CHAINS = (4, 16, 64, 256)

# More method settings for the trade-off plot: (label, method, planner keyword arguments). Points whose method is not
# registered, or whose planner does not take the keywords, are reported and skipped.
EXTRA_SETTINGS: list[tuple[str, str, dict[str, Any]]] = []


def config(ctx: Context) -> dict[str, Any]:
    quick = ctx.quick or ctx.mode == "tiny"
    return {"n": 2**16 if ctx.mode == "tiny" else 2**24 if quick else 2**28, "distributions": list(DISTS),
            "seeds": 1 if quick else 3, "chains": list(CHAINS), "timing": TimingConfig.for_mode(ctx.mode).__dict__,
            "extra_settings": [list(s) for s in EXTRA_SETTINGS]}


def settings(dtype: str, ctx: Context) -> list[MethodSetting]:
    """The tcreduce points of one dtype: each method by default, then the chain lengths, then EXTRA_SETTINGS."""
    from tcreduce import registry

    out = [MethodSetting(m.name, m.name) for m in sum_methods(dtype, ladder=False, ctx=ctx)]
    names = {s.method for s in out}
    if "tensorcore" in names and dtype == "float16":  # chains are a float16 setting (float32 flushes every step)
        params = inspect.signature(registry.get("tensorcore").planner).parameters
        if "chain" in params:
            out += [MethodSetting(f"tensorcore chain={c}", "tensorcore", (("chain", c),)) for c in CHAINS]
        else:
            ctx.note("the tensorcore planner takes no 'chain' setting: chain-length points skipped")
    for label, method, kw in EXTRA_SETTINGS:
        try:
            m = registry.get(method)
        except ValueError:
            ctx.note(f"setting {label!r}: method {method!r} is not registered; skipped")
            continue
        if dtype in m.dtypes:
            out.append(MethodSetting(label, method, tuple(sorted(kw.items()))))
    return out


def run(ctx: Context) -> list[Path]:
    import cupy

    cfg = config(ctx)
    tcfg = TimingConfig.for_mode(ctx.mode)
    n = cfg["n"]
    rows: list[dict] = []
    comps = competitors(None, float64=True)
    if not any(c.label == "torch.sum" for c in comps):
        ctx.note(f"torch.sum not measured: {torch_missing_reason()}")
    dtypes = [dt for dt in DTYPES if not format_missing(dt)]
    for dt in DTYPES:
        if format_missing(dt):
            ctx.note(f"{dt} not measured: {format_missing(dt)}")
    points = {dt: settings(dt, ctx) for dt in dtypes}
    total = sum(len(points[dt]) + len(comps) for dt in dtypes) * (1 + len(DISTS) * cfg["seeds"])
    bar = ctx.bar(total, NAME)
    for dt in dtypes:
        itemsize = get_format(dt).itemsize
        entries: list[tuple[str, str, str, str, Any]] = []
        for s in points[dt]:
            entries.append((s.label, s.method, json.dumps(s.kwargs, sort_keys=True), "tcreduce", s))
        for c in (comps if dt not in NEW_FORMATS else [c for c in comps if c.lib == "torch"]):
            entries.append((c.label, c.label, "{}", "competitor", c))
        timing: dict[str, Any] = {}
        errors: dict[tuple[str, str], list[float]] = {}
        failed: dict[str, str] = {}
        for dist in DISTS:
            for k in range(cfg["seeds"]):
                seed = case_seed(NAME, dist, dt, n, k)
                x = make_input(dist, dt, n, seed, xp=cupy)  # bf16 / fp8: a torch tensor
                exact = exact_sum_gpu(float32_copy(x))
                for label, _method, _, kind, obj in entries:
                    if label in failed:
                        bar.update(1 + (1 if (dist, k) == (DISTS[0], 0) else 0))
                        continue
                    try:
                        inp = obj.wrap(x) if kind == "competitor" else x
                        fn = obj.call if kind == "competitor" else (lambda v, s=obj: run_setting(v, s))
                        ctx_mgr = obj.context() if kind == "competitor" else _null()
                        with ctx_mgr, torch_stream_guard():
                            r = float(fn(inp))
                            if (dist, k) == (DISTS[0], 0):
                                timing[label] = time_gpu(fn, [inp], tcfg)
                                bar.update(1)
                        errors.setdefault((label, dist), []).append(rel_error(r, exact))
                    except Exception as e:
                        failed[label] = error_note(e)
                        ctx.error(f"tradeoff {label} {dt}: {failed[label][7:]}")
                    bar.update(1)
                del x
        for dist in DISTS:
            for label, method, sjson, kind, _ in entries:
                row = dict(dtype=dt, dist=dist, n=n, label=label, method=method, settings=sjson, kind=kind)
                if label in failed:
                    row["note"] = failed[label]
                else:
                    t = timing.get(label)
                    errs = errors.get((label, dist), [])
                    if t is not None:
                        row.update(time_us=t.median_s * 1e6, gbs=n * itemsize / t.median_s / 1e9)
                    if errs:
                        row.update(rel_error_median=statistics.median(errs), rel_error_min=min(errs),
                                   rel_error_max=max(errs), seeds=len(errs))
                rows.append(row)
        free_gpu_memory()
    bar.close()
    meta = metadata(NAME, ctx, cfg, {"notes": list(ctx.notes), "csv_header": {"n": n}})
    paths = [write_csv(ctx.out / f"{NAME}.csv", rows, COLUMNS, meta),
             write_metadata(ctx.out / f"{NAME}.json", meta)]
    from . import plotting

    return paths + plotting.plot_tradeoff(ctx.out / f"{NAME}.csv", ctx.out)


def _null():
    import contextlib

    return contextlib.nullcontext()
