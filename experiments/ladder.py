"""Ladder study (issue 5): GB/s and fraction of the measured bandwidth ceiling for every rung of the seeds'
CUDA-core reduction ladder (methods ``ladder_*``, full fp32 sums), for 10^8 and 2^28 floats (10^8 and 2^26 with
--quick; both larger than L2), in one run, with ``shuffle`` (tcreduce's modern CUDA-core method), ``cupy.sum``
(CUB) and ``torch.sum`` as references, and seed 003's claimed figures (H100, N = 10^8) beside ours.

The ceiling at each N is the larger of the plain read kernel (``kernels/bandwidth.cu``, best launch configuration)
over the same N floats and a device-to-device copy of them (bytes read + written). Inputs: uniform [0, 1) fp32, one
buffer per N (larger than L2). Every rung's result is also compared with the exact sum (relative error column).

Needs a GPU. Outputs: ladder.csv, ladder.json, ladder.png/.pdf.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .ceiling import describe_read_config, time_copy, time_read_kernel
from .competitors import competitors, torch_stream_guard
from .context import Context
from .env import free_gpu_memory
from .exact import exact_sum_gpu, rel_error
from .inputs import case_seed, random_pool
from .methods import LADDER_ORDER, sum_methods
from .records import error_note, metadata, write_csv, write_metadata
from .timing import TimingConfig, time_gpu

NAME = "ladder"
NEEDS_GPU = True
SUMMARY = "GB/s and % of the measured ceiling per ladder rung, 10^8 and 2^28 floats, vs seed 003's claims"
WHY_GPU = "it times the ladder's kernels on a GPU"

COLUMNS = ["size_label", "n", "method", "kind", "order", "time_us", "p10_us", "p90_us", "reps", "bytes", "gbs",
           "frac_ceiling", "ceiling_gbs", "read_kernel_gbs", "copy_gbs", "rel_error", "seed_version",
           "seed_claim_gbs", "seed_claim_pct", "note"]

# Seed 003 (section 5.10's table and the text of 5.5): H100 SXM5, CUDA 12.3, N = 1e8; percent of a 3.35 TB/s peak.
SEED_003_CLAIMS: dict[str, tuple[str, float, float]] = {
    "ladder_atomic": ("v0 global atomicAdd", 50, 1.5),
    "ladder_interleaved_divergent": ("v1 smem tree, tid % (2s)", 700, 21),
    "ladder_sequential": ("v2 sequential addressing", 1100, 33),
    "ladder_first_add": ("v3 two loads per thread", 1500, 45),
    "ladder_multi_element": ("v3 four loads per thread", 1800, 54),
    "ladder_float4": ("v4 float4 loads", 2400, 72),
    "ladder_warp_shuffle": ("v5 warp shuffle", 2800, 84),
    "ladder_atomic_per_block": ("v6 one atomic per block", 3050, 91),
    "ladder_cluster": ("v7 cluster reduce", 3250, 97),
}


def config(ctx: Context) -> dict[str, Any]:
    if ctx.mode == "tiny":
        sizes = [("10^6", 10**6)]
    elif ctx.quick:
        sizes = [("10^8", 10**8), ("2^26", 2**26)]
    else:
        sizes = [("10^8", 10**8), ("2^28", 2**28)]
    return {"sizes": [list(s) for s in sizes], "dtype": "float32", "input": "uniform [0, 1)",
            "timing": TimingConfig.for_mode(ctx.mode).__dict__,
            "seed_003_claims": {k: list(v) for k, v in SEED_003_CLAIMS.items()}}


def run(ctx: Context) -> list[Path]:
    import tcreduce

    cfg = config(ctx)
    tcfg = TimingConfig.for_mode(ctx.mode)
    rungs = [m.name for m in sum_methods("float32", ladder=True, ctx=ctx)]
    if not rungs:
        raise RuntimeError("no ladder_* methods are registered in this tcreduce checkout (issue 5's methods); "
                           "the ladder study has nothing to measure")
    missing = [r for r in LADDER_ORDER if r not in rungs and ctx.want(r)]
    if missing:
        ctx.note(f"ladder rungs not registered (not measured): {', '.join(missing)}")
    refs: list[tuple[str, str, Any]] = []
    if ctx.want("shuffle"):
        refs.append(("shuffle", "tcreduce", None))
    for c in competitors(None, native=False):
        refs.append((c.label, "library", c))
    rows: list[dict] = []
    bar = ctx.bar(len(cfg["sizes"]) * (len(rungs) + len(refs) + 1), NAME)
    for size_label, n in cfg["sizes"]:
        x = random_pool("float32", n, seed=case_seed(NAME, n))
        exact = exact_sum_gpu(x)
        t_read, rc = time_read_kernel([x], tcfg)
        t_copy = time_copy(n * 4, tcfg)
        read_gbs = (n * 4) // 16 * 16 / t_read.median_s / 1e9
        copy_gbs = 2 * n * 4 / t_copy.median_s / 1e9
        ceiling = max(read_gbs, copy_gbs)
        base = dict(size_label=size_label, n=n, ceiling_gbs=ceiling, read_kernel_gbs=read_gbs, copy_gbs=copy_gbs)
        rows.append(dict(base, method="read kernel", kind="ceiling", time_us=t_read.median_s * 1e6,
                         p10_us=t_read.p10_s * 1e6, p90_us=t_read.p90_s * 1e6, reps=t_read.reps, bytes=n * 4,
                         gbs=read_gbs, frac_ceiling=read_gbs / ceiling,
                         note=describe_read_config(rc)))
        rows.append(dict(base, method="d2d copy", kind="ceiling", time_us=t_copy.median_s * 1e6,
                         p10_us=t_copy.p10_s * 1e6, p90_us=t_copy.p90_s * 1e6, reps=t_copy.reps, bytes=2 * n * 4,
                         gbs=copy_gbs, frac_ceiling=copy_gbs / ceiling))
        bar.update(1)
        entries: list[tuple[str, str, Any, Any]] = []
        for r in rungs:
            entries.append((r, "rung", _tc_call(r), x))
        for label, kind, c in refs:
            if c is None:
                entries.append((label, kind, _tc_call(label), x))
            else:
                entries.append((label, kind, c, c.wrap(x)))
        for order, (label, kind, call, inp) in enumerate(entries):
            claim = SEED_003_CLAIMS.get(label)
            row = dict(base, method=label, kind=kind, order=order, bytes=n * 4 + 4)
            if claim:
                row.update(seed_version=claim[0], seed_claim_gbs=claim[1], seed_claim_pct=claim[2])
            try:
                if kind == "library":
                    with call.context(), torch_stream_guard():
                        r = float(call.call(inp))
                        t = time_gpu(call.call, [inp], tcfg)
                else:
                    r = float(call(inp))
                    t = time_gpu(call, [inp], tcfg)
                gbs = row["bytes"] / t.median_s / 1e9
                row.update(time_us=t.median_s * 1e6, p10_us=t.p10_s * 1e6, p90_us=t.p90_s * 1e6, reps=t.reps,
                           gbs=gbs, frac_ceiling=gbs / ceiling, rel_error=rel_error(r, exact))
            except Exception as e:
                row["note"] = error_note(e)
                ctx.error(f"ladder {label} n={size_label}: {row['note'][7:]}")
            rows.append(row)
            bar.update(1, f"{size_label} {label}")
        del x, entries
        free_gpu_memory()
    bar.close()
    _ = tcreduce
    meta = metadata(NAME, ctx, cfg, {"notes": list(ctx.notes)})
    paths = [write_csv(ctx.out / f"{NAME}.csv", rows, COLUMNS, meta),
             write_metadata(ctx.out / f"{NAME}.json", meta)]
    from . import plotting

    return paths + plotting.plot_ladder(ctx.out / f"{NAME}.csv", ctx.out)


def _tc_call(method: str):
    import tcreduce

    def call(x):
        return tcreduce.sum(x, method=method)

    return call
