"""Segment-size sweep (the paper's headline chart): shapes [M, n] summed over the last axis and [n, M] summed over
the first, n from 16 to 2^20, the total input fixed at 512 MiB (128 MiB with --quick), fp16, bf16, fp32 and fp8
(e4m3), every tcreduce sum method (not the ladder rungs: full sums only) and ``method="auto"`` beside ``torch.sum``,
``cupy.sum`` with CUB on and off, tuned Triton row and column kernels and ``torch.compile``'d torch.sum (where torch
and Triton are installed; each checked against a float64 sum before it is timed: :mod:`experiments.competitors`), all
accumulating in fp32 into an fp32 output. bf16 and fp8 live in CuPy as raw bits (``format=``), so only the torch
competitors (on torch views of the same bytes) apply to them.

One random pool per dtype (uniform [-0.25, 0.75)) is reshaped for every n, so every method reads the same bytes; the
pool exceeds the L2 cache many times, so no rotation is needed. GB/s counts the input read once plus the fp32 outputs
written once (at n = 16 fp16 the outputs add 12.5 %). The bandwidth ceiling (read kernel, device copy) is measured
at the same total size in the same run.

Timing: every label back to back first (:func:`experiments.timing.time_gpu`); then the labels within CONTEND_WITHIN of
the point's fastest are timed again together, ``turns`` turns of one sample each in a random order
(:func:`experiments.timing.time_interleaved`), each sample after a read of twice the L2's size
(:func:`experiments.ceiling.l2_scrubber`: no label finds in L2 what the one before it read last), and keep the mean
of their samples' middle 80% (the CSV's ``interleaved`` column says which): back to back, a kernel can keep one of
two speeds 2.5% apart for seconds, so the close ones are compared over the same turns instead.

Needs a GPU. Outputs: segments.csv, segments.json, segments.png/.pdf (GB/s vs n), segments_speedup.png/.pdf
(each tcreduce method over the fastest library call).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .ceiling import l2_scrubber, measure_ceiling
from .competitors import competitor_context, competitors, torch_stream_guard, tuned_missing
from .context import Context
from .env import free_gpu_memory, torch_missing_reason
from tcreduce.formats import get_format

from .inputs import NEW_FORMATS, case_seed, dtype_label, format_missing, random_pool, torch_view
from .methods import FULL_SUM_ONLY, sum_methods
from .records import error_note, metadata, write_csv, write_metadata
from .timing import (CONTEND_WITHIN, HOST_SAMPLES, Timed, TimingConfig, contenders, fill_timing, time_gpu,
                     time_interleaved)

NAME = "segments"
NEEDS_GPU = True
SUMMARY = "GB/s per method and competitor for [M, n] (last axis) and [n, M] (first axis), n = 16..2^20"
WHY_GPU = "it times kernels on a GPU with CUDA events"

COLUMNS = ["dtype", "layout", "shape", "axis", "n", "m", "method", "kind", "time_us", "p10_us", "p90_us", "reps",
           "batch", "bytes", "gbs", "frac_ceiling", "interleaved", "note"]
DTYPES = ("float16", "bfloat16", "float32", "float8_e4m3fn")
LAYOUTS = ("rows", "cols")


def config(ctx: Context) -> dict[str, Any]:
    if ctx.mode == "tiny":
        seg = [16, 256]
        total = 2**22
    elif ctx.quick:
        seg = [16, 256, 4096, 65536]
        total = 2**27
    else:
        seg = [2**k for k in range(4, 21)]
        total = 2**29
    tcfg = TimingConfig.for_mode(ctx.mode)
    if ctx.mode == "full":
        tcfg = TimingConfig(target_s=0.05)
    return {"segment_lengths": seg, "total_bytes": total, "layouts": {"rows": "[M, n], axis=-1",
                                                                       "cols": "[n, M], axis=0"},
            "input": "uniform [-0.25, 0.75), one pool per dtype reshaped", "timing": tcfg.__dict__,
            "contend_within": CONTEND_WITHIN, "turns": {"tiny": 10, "quick": 100}.get(ctx.mode, HOST_SAMPLES),
            "time_us": "labels within contend_within of a point's fastest first timing: the mean of the middle 80% "
                       "of `turns` interleaved samples, each after a read of twice the L2 "
                       "(experiments.timing.time_interleaved); the others: the median back-to-back sample"}


def run(ctx: Context) -> list[Path]:
    cfg = config(ctx)
    tcfg = TimingConfig(**cfg["timing"])
    total = cfg["total_bytes"]
    ceiling = measure_ceiling(total, TimingConfig.for_mode(ctx.mode))
    scrub = l2_scrubber()  # before every interleaved sample
    ctx.note(f"ceiling: read kernel {ceiling.read_gbs:,.0f} GB/s, copy {ceiling.copy_gbs:,.0f} GB/s "
             f"({total / 2**20:.0f} MiB)")
    comps_probe = competitors(-1, tuned=True)
    if not any(c.label == "torch.sum" for c in comps_probe):
        ctx.note(f"torch.sum not measured: {torch_missing_reason()}")
    for why in tuned_missing():
        ctx.note(why)
    dtypes = []
    for dt in DTYPES:
        if format_missing(dt):
            ctx.note(f"{dtype_label(dt)} not measured: {format_missing(dt)}")
        else:
            dtypes.append(dt)
    methods = {dt: [m.name for m in sum_methods(dt, ladder=False, ctx=ctx) if m.name not in FULL_SUM_ONLY]
               + (["auto"] if ctx.want("auto") else []) for dt in dtypes}
    n_total = sum(len(cfg["segment_lengths"]) * len(LAYOUTS) * (len(methods[dt]) + len(comps_probe)) for dt in dtypes)
    bar = ctx.bar(n_total, NAME)
    rows: list[dict] = []
    for dt in dtypes:
        itemsize = get_format(dt).itemsize
        fmt = {"format": dt} if dt in NEW_FORMATS else {}
        elems = total // itemsize
        pool = random_pool(dt, elems, seed=case_seed(NAME, dt), low=-0.25, high=0.75)
        for n in cfg["segment_lengths"]:
            m_out = elems // n
            for layout in LAYOUTS:
                if layout == "rows":
                    x = pool[: m_out * n].reshape(m_out, n)
                    axis = -1
                else:
                    x = pool[: m_out * n].reshape(n, m_out)
                    axis = 0
                base = dict(dtype=dt, layout=layout, shape=f"{x.shape[0]}x{x.shape[1]}", axis=axis, n=n, m=m_out,
                            bytes=m_out * n * itemsize + m_out * 4)
                entries: list[tuple[str, str, Any, list]] = [(m, "tcreduce", _tc_call(m, axis, **fmt), [x])
                                                             for m in methods[dt]]
                for c in competitors(axis, tuned=True):
                    if fmt and c.lib != "torch":  # CuPy has no bf16 or fp8
                        continue
                    entries.append((c.label, "competitor", c, [torch_view(x, dt) if fmt else c.wrap(x)]))
                first, point_rows, timed = {}, {}, {}
                for label, kind, call, inputs in entries:
                    row = point_rows[label] = dict(base, method=label, kind=kind)
                    rows.append(row)
                    try:
                        if kind == "competitor":
                            with call.context(), torch_stream_guard():
                                call.prepare(inputs[0])  # tuning, compilation, correctness checks (not timed)
                                first[label] = time_gpu(call.call, inputs, tcfg)
                            row["note"] = call.describe(inputs[0])  # the tuned or compiled kernels' configuration
                            timed[label] = Timed(call.call, inputs, competitor_context(call))
                        else:
                            first[label] = time_gpu(call, inputs, tcfg)
                            timed[label] = Timed(call, inputs)
                    except Exception as e:
                        row["note"] = error_note(e)
                        ctx.error(f"segments {label} {dt} {layout} n={n}: {row['note'][7:]}")
                    bar.update(1, f"{dtype_label(dt)} {layout} n=2^{int(math.log2(n))} {label}")
                final = first
                if first:  # the contenders again, in turns
                    close = {label: timed[label] for label in contenders(first, cfg["contend_within"])}
                    try:
                        final = time_interleaved(first, close, samples=cfg["turns"], below_s=math.inf, before=scrub)
                    except Exception as e:
                        ctx.error(f"segments {dt} {layout} n={n}, interleaved timing (the first timings kept): "
                                  f"{error_note(e)[7:]}")
                for label, t in final.items():
                    fill_timing(point_rows[label], t, ceiling.gbs)
                    point_rows[label]["interleaved"] = t is not first[label]
                del x, entries
        del pool
        free_gpu_memory()
    bar.close()
    meta = metadata(NAME, ctx, cfg, {"ceiling": ceiling.as_dict(), "notes": list(ctx.notes),
                                            "csv_header": {"ceiling_gbs": ceiling.gbs,
                                                           "read_kernel_gbs": ceiling.read_gbs,
                                                           "copy_gbs": ceiling.copy_gbs, "total_bytes": total}})
    paths = [write_csv(ctx.out / f"{NAME}.csv", rows, COLUMNS, meta),
             write_metadata(ctx.out / f"{NAME}.json", meta)]
    from . import plotting

    return paths + plotting.plot_segments(ctx.out / f"{NAME}.csv", ctx.out)


def _tc_call(method: str, axis: int, **kw):
    import tcreduce

    def call(x):
        return tcreduce.sum(x, axis=axis, method=method, **kw)

    return call
