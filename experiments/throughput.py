"""Throughput study: GB/s and fraction of the measured bandwidth ceiling versus N for full sums, fp16 and fp32,
every tcreduce sum method (the ladder rungs have their own study) beside ``torch.sum``, ``cupy.sum`` with CUB on and
off, a tuned Triton two-stage sum and ``torch.compile``'d torch.sum (where torch and Triton are installed; each checked
against a float64 sum before it is timed: :mod:`experiments.competitors`), all accumulating in fp32, and the plain
read kernel at the same N.

N = 2^10 .. 2^30 (every power of two; --quick: 2^12, 2^16, 2^20, 2^24, 2^28). Inputs are uniform random in
[-0.25, 0.75) from one pool per dtype; small N rotate among views of the pool so that the bytes touched exceed twice
the L2 cache (up to 1024 views, so N below about 2^15 fp16 stays partly L2-resident, and is launch-bound anyway).
Two timings per point: back-to-back calls from Python (:func:`experiments.timing.time_gpu`; for small N the
per-call cost of a stream of calls, host dispatch included: ``time_us``, ``gbs``; calls under 50 us re-timed with
every label of their size in turns, :func:`experiments.timing.time_interleaved`, and longer calls within
``CONTEND_WITHIN`` of the fastest likewise, each sample after a read of twice the L2) and, where a call takes under
1 ms, the same calls captured into a CUDA graph and replayed (:func:`experiments.timing.time_graph`; the GPU's cost
without host dispatch: ``graph_us``, ``graph_gbs``; torch through torch.cuda.graph). Graphs replay up to 256
captured calls, so small N rotate among at most 256 buffers there. A method whose call takes longer than 50 ms
(10 ms with --quick) is not timed at larger N (the CSV says so). Bytes: the input once plus the 4-byte output.

Needs a GPU. Outputs: throughput.csv, throughput.json, throughput.png/.pdf (GPU time: graph replay where measured),
throughput_calls.png/.pdf (back-to-back calls from Python).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from .ceiling import l2_scrubber, measure_ceiling, read_launcher
from .competitors import competitor_context, competitors, torch_stream_guard, tuned_missing
from .context import Context
from .env import free_gpu_memory, l2_bytes, torch_missing_reason
from tcreduce.formats import get_format

from .inputs import NEW_FORMATS, case_seed, dtype_label, format_missing, random_pool, rotating_views, torch_view
from .methods import sum_methods
from .records import error_note, metadata, write_csv, write_metadata
from .timing import (CONTEND_WITHIN, HOST_BOUND_S, HOST_SAMPLES, Timed, TimingConfig, contenders, fill_timing,
                     time_gpu, time_graph, time_interleaved)

NAME = "throughput"
NEEDS_GPU = True
SUMMARY = "GB/s and fraction of the measured ceiling vs N, full sums, every method beside torch.sum and cupy.sum"
WHY_GPU = "it times kernels on a GPU with CUDA events"

COLUMNS = ["dtype", "n", "method", "kind", "time_us", "p10_us", "p90_us", "reps", "batch", "interleaved", "buffers",
           "working_set_mib", "l2_resident", "bytes", "gbs", "frac_ceiling", "graph_us", "graph_p10_us",
           "graph_p90_us", "graph_calls", "graph_gbs", "graph_frac_ceiling", "note"]
DTYPES = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32")


def config(ctx: Context) -> dict[str, Any]:
    if ctx.mode == "tiny":
        sizes = [2**12, 2**16]
    elif ctx.quick:
        sizes = [2**k for k in (12, 16, 20, 24, 28)]
    else:
        sizes = [2**k for k in range(10, 31)]
    return {
        "sizes": sizes,
        "ceiling_bytes": 2**28 if ctx.quick or ctx.mode == "tiny" else 2**30,
        "slow_cutoff_s": 0.01 if ctx.quick else 0.05,
        "graph_below_s": 1e-3,
        "host_bound_s": HOST_BOUND_S,  # calls faster than this: re-timed together, HOST_SAMPLES turns
        "host_samples": HOST_SAMPLES,
        "contend_within": CONTEND_WITHIN,  # GPU-bound labels this close to the fastest: re-timed together, gpu_turns
        "gpu_turns": {"tiny": 10, "quick": 100}.get(ctx.mode, HOST_SAMPLES),
        "host_bound_time": "rows with interleaved=true: time_us is the mean of the samples' middle 80% "
                           "(experiments.timing.time_interleaved: host-bound labels in host_samples turns, GPU-bound "
                           "ones within contend_within of the fastest in gpu_turns turns, each sample after a read of "
                           "twice the L2), elsewhere the median sample",
        "input": "uniform [-0.25, 0.75), one pool per dtype, 256-byte aligned views",
        "timing": TimingConfig.for_mode(ctx.mode).__dict__,
    }


def run(ctx: Context) -> list[Path]:
    import cupy

    cfg = config(ctx)
    tcfg = TimingConfig.for_mode(ctx.mode)
    gcfg = dataclasses.replace(tcfg, target_s=min(tcfg.target_s, 0.03))
    ceiling = measure_ceiling(cfg["ceiling_bytes"], tcfg)
    scrub = l2_scrubber()  # before every interleaved sample of GPU-bound labels
    ctx.note(f"ceiling: read kernel {ceiling.read_gbs:,.0f} GB/s, copy {ceiling.copy_gbs:,.0f} GB/s "
             f"({ceiling.bytes / 2**20:.0f} MiB)")
    comps = competitors(None, tuned=True)
    if not any(c.label == "torch.sum" for c in comps):
        ctx.note(f"torch.sum not measured: {torch_missing_reason()}")
    for why in tuned_missing():
        ctx.note(why)
    rows: list[dict] = []
    l2 = l2_bytes()
    plan = []
    for dt in DTYPES:
        if format_missing(dt):
            ctx.note(f"{dtype_label(dt)} not measured: {format_missing(dt)}")
            continue
        methods = [m.name for m in sum_methods(dt, ladder=False, ctx=ctx)] + (["auto"] if ctx.want("auto") else [])
        plan.append((dt, methods))
    total = sum(len(cfg["sizes"]) * (len(ms) + len(comps) + 1) for _, ms in plan)  # an upper bound
    bar = ctx.bar(total, NAME)
    for dt, methods in plan:
        itemsize = get_format(dt).itemsize
        fmt = {"format": dt} if dt in NEW_FORMATS else {}
        # bf16 / fp8 pools are raw bits: CuPy has no such dtype, so only torch's competitors (on torch views) apply
        dt_comps = [c for c in comps if c.lib == "torch"] if fmt else comps
        pool_n = max(max(cfg["sizes"]), (4 * l2) // itemsize)
        pool = random_pool(dt, pool_n, seed=case_seed(NAME, dt), low=-0.25, high=0.75)
        dropped: dict[str, int] = {}
        for n in cfg["sizes"]:
            views = rotating_views(pool, n)
            ws = len(views) * n * itemsize
            base = dict(dtype=dt, n=n, buffers=len(views), working_set_mib=ws / 2**20, l2_resident=ws < 2 * l2,
                        bytes=n * itemsize + 4)
            entries: list[tuple[str, str, Any, list]] = []
            for m in methods:
                entries.append((m, "tcreduce", _tc_call(m, **fmt), views))
            for c in dt_comps:
                entries.append((c.label, "competitor", c, [torch_view(v, dt) if fmt else c.wrap(v) for v in views]))
            entries.append(("read kernel", "ceiling", None, views))
            by_label = {label: (kind, call, inputs) for label, kind, call, inputs in entries}

            def timed(label: str) -> Any:
                calls = _timed(*by_label[label], ceiling)
                with calls.context():
                    return time_gpu(calls.fn, calls.inputs, tcfg)

            first, size_rows = {}, {}
            for label, kind, call, inputs in entries:
                row = size_rows[label] = dict(base, method=label, kind=kind)
                rows.append(row)
                if label in dropped:
                    row["note"] = (f"not timed: slower than {cfg['slow_cutoff_s'] * 1e3:.0f} ms per call at "
                                   f"n={dropped[label]}")
                    bar.update(1)
                    continue
                try:
                    if kind == "ceiling":
                        row["bytes"] = (n * itemsize) // 16 * 16
                    elif kind == "competitor":
                        with call.context(), torch_stream_guard():
                            call.prepare(inputs[0])  # tuning, compilation, correctness checks (not timed)
                        row["note"] = call.describe(inputs[0])  # the tuned or compiled kernels' configuration
                    first[label] = timed(label)
                except Exception as e:
                    row["note"] = error_note(e)
                    ctx.error(f"throughput {label} {dt} n={n}: {row['note'][7:]}")
                bar.update(1, f"{dtype_label(dt)} 2^{int(math.log2(n))} {label}")

            try:  # host-bound points: every label of the size re-timed together, sample by sample; GPU-bound ones
                # close to the fastest likewise, each sample after a read of twice the L2
                timed_calls = {label: _timed(*by_label[label], ceiling) for label in first}
                final = time_interleaved(first, timed_calls)
                close = contenders(first, cfg["contend_within"], HOST_BOUND_S)
                if len(close) > 1:
                    final = time_interleaved(final, {label: timed_calls[label] for label in close},
                                             samples=cfg["gpu_turns"], below_s=math.inf, before=scrub)
            except Exception as e:
                ctx.error(f"throughput {dt} n={n}, interleaved timing (the first timings kept): {error_note(e)[7:]}")
                final = first
            for label, t in final.items():
                row = size_rows[label]
                kind, call, inputs = by_label[label]
                fill_timing(row, t, ceiling.gbs)
                row["interleaved"] = t is not first[label]
                if t.median_s > cfg["slow_cutoff_s"]:
                    dropped[label] = n
                if t.median_s < cfg["graph_below_s"]:
                    _graph(row, label, kind, call, inputs, gcfg, ceiling)
            by_label.clear()  # the closures above hold it: clearing frees the views
            del views, entries
        del pool
        free_gpu_memory()
    bar.close()
    cupy.cuda.Device().synchronize()
    return write(ctx, rows, cfg, ceiling.as_dict())


def _timed(kind: str, call: Any, inputs: list, ceiling: Any) -> Timed:
    """A label's calls as :func:`experiments.timing.time_interleaved` makes them: the read kernel's launcher, a
    competitor inside its context on CuPy's stream, or a tcreduce call."""
    if kind == "ceiling":
        return Timed(read_launcher(ceiling.read_config), inputs)
    if kind == "competitor":
        return Timed(call.call, inputs, competitor_context(call))
    return Timed(call, inputs)


def _tc_call(method: str, **kw):
    import tcreduce

    def call(x):
        return tcreduce.sum(x, method=method, **kw)

    return call


def _graph(row: dict, label: str, kind: str, call, inputs: list, tcfg: TimingConfig, ceiling) -> None:
    """Add the CUDA-graph timing of one point (errors go to the note: the call timing stands)."""
    try:
        if kind == "ceiling":
            g = time_graph(read_launcher(ceiling.read_config), inputs, tcfg)
        elif kind == "competitor" and call.lib == "torch":
            g = time_graph(call.call, inputs, tcfg, lib="torch")
        elif kind == "competitor":
            with call.context():
                g = time_graph(call.call, inputs, tcfg)
        else:
            g = time_graph(call, inputs, tcfg)
    except Exception as e:
        failed = f"graph timing failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        row["note"] = f"{row['note']}; {failed}" if row.get("note") else failed
        return
    row.update(graph_us=g.median_s * 1e6, graph_p10_us=g.p10_s * 1e6, graph_p90_us=g.p90_s * 1e6,
               graph_calls=g.batch)
    row["graph_gbs"] = row["bytes"] / g.median_s / 1e9
    row["graph_frac_ceiling"] = row["graph_gbs"] / ceiling.gbs if ceiling.gbs else None


def write(ctx: Context, rows: list[dict], cfg: dict, ceiling: dict) -> list[Path]:
    meta = metadata(NAME, ctx, cfg, {"ceiling": ceiling, "notes": list(ctx.notes),
                                            "csv_header": {k: ceiling[k] for k in ("ceiling_gbs", "read_kernel_gbs",
                                                                                   "copy_gbs", "ceiling_bytes")}})
    paths = [write_csv(ctx.out / f"{NAME}.csv", rows, COLUMNS, meta),
             write_metadata(ctx.out / f"{NAME}.json", meta)]
    from . import plotting

    return paths + plotting.plot_throughput(ctx.out / f"{NAME}.csv", ctx.out)
