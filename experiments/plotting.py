"""Figures of every study, drawn from its CSV alone (rows plus the ``# key: value`` header), as PNG and PDF, each
stamped in a footer with the device, commit, date and command of the run that measured it.

``python -m experiments <study> --replot`` redraws a study's figures from an existing CSV.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt   # noqa: E402
from matplotlib.lines import Line2D   # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from .inputs import DISTRIBUTIONS, dist_label  # noqa: E402
from .methods import LADDER_ORDER  # noqa: E402
from .records import num, read_csv  # noqa: E402

__all__ = ["plot_accuracy", "plot_throughput", "plot_segments", "plot_tradeoff", "plot_ladder", "PLOTTERS",
           "style_for", "save"]

plt.rcParams.update({
    "font.size": 9, "axes.titlesize": 9.5, "axes.labelsize": 9, "legend.fontsize": 8, "xtick.labelsize": 8,
    "ytick.labelsize": 8, "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5, "axes.spines.top": False,
    "axes.spines.right": False, "savefig.dpi": 200, "pdf.fonttype": 42, "ps.fonttype": 42,
})

# One style per method or competitor across all figures.
_STYLES: dict[str, dict[str, Any]] = {
    "tensorcore": dict(color="#d62728", marker="o", ls="-", lw=1.8),
    "tensorcore_chained": dict(color="#e377c2", marker="s", ls="--", lw=1.4),
    "wmma": dict(color="#ff7f0e", marker="^", ls="-", lw=1.4),
    "shuffle": dict(color="#1f77b4", marker="D", ls="-", lw=1.6),
    "cub": dict(color="#2ca02c", marker="v", ls="-", lw=1.4),
    "torch.sum": dict(color="#9467bd", marker="P", ls=":", lw=1.4),
    "torch.sum fp64": dict(color="#c5b0d5", marker="P", ls=":", lw=1.2),
    "cupy.sum CUB": dict(color="#17becf", marker="X", ls=":", lw=1.4),
    "cupy.sum no CUB": dict(color="#7f7f7f", marker="x", ls=":", lw=1.2),
    "cupy.sum fp64": dict(color="#bcbd22", marker="*", ls=":", lw=1.2),
    "triton (tuned)": dict(color="#8c564b", marker="h", ls=":", lw=1.4),
    "torch.compile": dict(color="#393b79", marker="p", ls=":", lw=1.2),
    "float64": dict(color="black", marker=".", ls="-", lw=0.8),
    "auto": dict(color="#444444", marker="*", ls="-.", lw=1.2),
    "read kernel": dict(color="black", marker="", ls="--", lw=1.0),
    "d2d copy": dict(color="#555555", marker="", ls="-.", lw=1.0),
}
_FALLBACK = ["#8c564b", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d",
             "#31a354", "#756bb1", "#636363"]

DTYPE_LABEL = {"float16": "fp16", "float32": "fp32", "bfloat16": "bf16", "float8_e4m3fn": "fp8 e4m3",
               "float8_e5m2": "fp8 e5m2"}
DTYPE_ORDER = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32")
ZERO_FLOOR = 1e-17  # relative errors of exactly 0 are drawn here on log axes


def style_for(label: str) -> dict[str, Any]:
    if label in _STYLES:
        return dict(_STYLES[label])
    base = label.split(" ")[0]
    if base in _STYLES:  # "tensorcore chain=16" -> a shade of tensorcore
        s = dict(_STYLES[base])
        s["ls"] = "--"
        return s
    if label.startswith("ladder_"):
        order = list(LADDER_ORDER)
        i = order.index(label) if label in order else len(order)
        cmap = plt.get_cmap("viridis")
        return dict(color=cmap(i / max(len(order) - 1, 1)), marker="o", ls="-", lw=1.2)
    i = zlib.crc32(label.encode()) % len(_FALLBACK)
    return dict(color=_FALLBACK[i], marker="o", ls="-", lw=1.2)


def _line_kw(label: str, **over) -> dict[str, Any]:
    s = style_for(label)
    kw = dict(color=s["color"], marker=s["marker"] or None, linestyle=s["ls"], linewidth=s["lw"], markersize=3.5,
              label=label)
    kw.update(over)
    return kw


# ----------------------------------------------------------------------------------------------- footer, save
def footer_text(meta: dict[str, str]) -> str:
    parts = [meta.get("device", "") or "unknown device"]
    if meta.get("driver"):
        parts.append(f"driver {meta['driver']}")
    if meta.get("cuda_runtime"):
        parts.append(f"CUDA {meta['cuda_runtime']}")
    parts.append(f"commit {meta.get('commit', 'unknown')}")
    if meta.get("date_utc"):
        parts.append(meta["date_utc"][:10])
    if meta.get("quick", "").lower() == "true":
        parts.append("QUICK RUN")
    cmd = meta.get("command", "")
    first, _, rest = cmd.partition(" ")
    if "/" in first and "python" in first.rsplit("/", 1)[-1]:
        cmd = first.rsplit("/", 1)[-1] + " " + rest
    if cmd:
        cmd = cmd if len(cmd) < 70 else cmd[:67] + "..."
        parts.append(cmd)
    return "  ·  ".join(parts)


def save(fig, out_dir: Path, stem: str, meta: dict[str, str]) -> list[Path]:
    """Stamp the footer and write ``stem.png`` and ``stem.pdf``."""
    fig.text(0.005, 0.004, footer_text(meta), fontsize=6, color="#666666", ha="left", va="bottom")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        p = out_dir / f"{stem}.{ext}"
        fig.savefig(p, bbox_inches="tight", pad_inches=0.08)
        paths.append(p)
    plt.close(fig)
    return paths


def _pow2_axis(ax, values: Iterable[float]) -> None:
    """Log2 x axis with 2^k tick labels."""
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    ax.set_xscale("log", base=2)
    if not vals:
        return
    lo, hi = int(math.floor(math.log2(min(vals)))), int(math.ceil(math.log2(max(vals))))
    step = max(1, math.ceil((hi - lo + 1) / 8))
    ticks = [2.0**k for k in range(lo, hi + 1, step)]
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"$2^{{{int(round(math.log2(v)))}}}$" if v > 0 else ""))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _ratio_axis(ax) -> None:
    """Log y axis for ratios with readable ticks (0.5x, 1x, 1.5x, 2x, 3x, ...), 1x always shown."""
    ys = [y for line in ax.get_lines() for y in line.get_ydata() if y > 0 and math.isfinite(y)] + [1.0]
    lo, hi = min(ys) / 1.15, max(ys) * 1.15
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    cands = [0.05, 0.1, 0.2, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256]
    ticks = [c for c in cands if lo <= c <= hi]
    while len(ticks) > 9:
        ticks = ticks[::2] if 1 in ticks[::2] else ticks[1::2]
    ax.set_yticks(ticks)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def _log_y(ax) -> None:
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, numticks=7))


def _finish(fig, title: str, handles: Sequence = (), labels: Sequence[str] = (), ncol: Optional[int] = None) -> None:
    """Title on top, a shared legend under it, the panels below, room for the footer at the bottom."""
    h = fig.get_figheight()
    ncol = ncol or max(1, min(len(handles), 6))
    legend_rows = math.ceil(len(handles) / ncol) if handles else 0
    title_lines = title.count("\n") + 1
    top_in = 0.12 + 0.2 * title_lines + (0.08 + 0.19 * legend_rows if legend_rows else 0.0)
    fig.tight_layout(rect=(0, 0.22 / h, 1, 1 - top_in / h))
    fig.suptitle(title, y=1 - 0.06 / h, va="top", fontsize=10.5)
    if handles:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1 - (0.1 + 0.2 * title_lines) / h),
                   ncol=ncol, frameon=False)


def _collect(axes_handles: dict[str, Any], ax) -> None:
    for h, lab in zip(*ax.get_legend_handles_labels()):
        axes_handles.setdefault(lab, h)


def _ordered(labels: Iterable[str]) -> list[str]:
    pref = list(_STYLES) + list(LADDER_ORDER)
    rank = {n: i for i, n in enumerate(pref)}
    return sorted(set(labels), key=lambda s: (rank.get(s.split(" ")[0], len(rank)), s))


def _tex_size(label: str) -> str:
    """'10^8' -> '$10^{8}$' (mathtext) for titles and legends."""
    base, sep, exp = str(label).partition("^")
    return f"${base}^{{{exp}}}$" if sep else str(label)


def _empty_figure(out_dir: Path, stem: str, meta: dict, text: str) -> list[Path]:
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    return save(fig, out_dir, stem, meta)


# -------------------------------------------------------------------------------------------------- accuracy
def plot_accuracy(csv_path: Path, out_dir: Path) -> list[Path]:
    rows, meta = read_csv(csv_path)
    paths = _accuracy_main(rows, meta, out_dir)
    if any(r.get("emu_equal") in ("true", "false") for r in rows):
        paths += _accuracy_emulator(rows, meta, out_dir)
    if any(r["method"].startswith("ladder_") for r in rows):
        paths += _accuracy_ladder(rows, meta, out_dir)
    return paths


def _acc_series(rows: list[dict], pred) -> dict[tuple[str, str, str], list[tuple[float, float, float]]]:
    series: dict = defaultdict(list)
    for r in rows:
        if not pred(r) or r.get("rel_error", "") == "":
            continue
        series[(r["dtype"], r["dist"], r["method"])].append((num(r["n"]), num(r["rel_error"]), num(r.get("rel_bound"))))
    for v in series.values():
        v.sort()
    return series


def _accuracy_grid(rows, meta, out_dir, stem, pred, title, with_bounds=True) -> list[Path]:
    series = _acc_series(rows, pred)
    if not series:
        return _empty_figure(out_dir, stem, meta, "no accuracy rows")
    dtypes = [d for d in DTYPE_ORDER if any(k[0] == d for k in series)]
    dists = [d for d in DISTRIBUTIONS if any(k[1] == d for k in series)]
    fig, axes = plt.subplots(len(dtypes), len(dists), figsize=(2.9 * len(dists) + 0.6, 2.5 * len(dtypes) + 1.2),
                             squeeze=False, sharex=True)
    handles: dict[str, Any] = {}
    all_n = [p[0] for v in series.values() for p in v]
    for i, dt in enumerate(dtypes):
        for j, dist in enumerate(dists):
            ax = axes[i][j]
            keys = [k for k in series if k[0] == dt and k[1] == dist]
            if not keys:
                ax.axis("off")
                ax.text(0.5, 0.5, f"{dist_label(dist)}:\nnot defined for {DTYPE_LABEL.get(dt, dt)}",
                        ha="center", va="center", transform=ax.transAxes, fontsize=8, color="#666666")
                continue
            shown = [k for k in keys if k[2] != "float64"]
            if not shown:
                ax.text(0.5, 0.55, "no method measured here\n(see the run's notes in the .json)", ha="center",
                        va="center", transform=ax.transAxes, fontsize=8, color="#666666")
            positive = [p[1] for k in shown for p in series[k] if p[1] > 0 and math.isfinite(p[1])]
            floor = min(positive) / 4 if positive else 1e-12
            for lab in _ordered(k[2] for k in shown):
                k = (dt, dist, lab)
                pts = [p for p in series[k] if not math.isinf(p[1])]  # inf: nonzero result, exact sum 0
                xs = [p[0] for p in pts]
                ys = [p[1] if p[1] > 0 else floor for p in pts]
                ax.plot(xs, ys, **_line_kw(lab))
                zeros = [(p[0], floor) for p in pts if p[1] == 0]
                if zeros:
                    s = style_for(lab)
                    ax.scatter([z[0] for z in zeros], [z[1] for z in zeros], marker="v", s=22, facecolors="white",
                               edgecolors=s["color"], zorder=4)
                if with_bounds:
                    bs = [(p[0], p[2]) for p in pts if 0 < p[2] < 1]  # a bound >= 1 says nothing: not drawn
                    if bs:
                        s = style_for(lab)
                        ax.plot([b[0] for b in bs], [b[1] for b in bs], color=s["color"], linestyle=(0, (2, 2)),
                                linewidth=0.9, alpha=0.8)
            f64 = series.get((dt, dist, "float64"))
            if f64:
                worst = max(p[1] for p in f64)
                ax.text(0.98, 0.03, f"float64 sum: rel. error ≤ {worst:.1e}" if worst else "float64 sum: exact",
                        transform=ax.transAxes, ha="right", va="bottom", fontsize=6.5, color="#333333")
            _log_y(ax)
            _pow2_axis(ax, all_n)
            ax.set_title(f"{DTYPE_LABEL.get(dt, dt)} · {dist_label(dist, dt)}")
            if j == 0:
                ax.set_ylabel("relative error |s − exact| / |exact|")
            if i == len(dtypes) - 1:
                ax.set_xlabel("N (elements summed)")
            _collect(handles, ax)
    labels = _ordered(handles)
    hs = [handles[lab] for lab in labels]
    if with_bounds:
        hs.append(Line2D([], [], color="#444444", linestyle=(0, (2, 2)), linewidth=0.9))
        labels.append("a-priori bound (dashed, same colour)")
    hs.append(Line2D([], [], color="#444444", marker="v", markerfacecolor="white", linestyle=""))
    labels.append("error exactly 0 (drawn at the panel's floor)")
    _finish(fig, title, hs, labels, ncol=min(len(hs), 7))
    return save(fig, out_dir, stem, meta)


def _accuracy_main(rows, meta, out_dir) -> list[Path]:
    backend = meta.get("backend", "")
    where = "measured on the GPU" if backend == "gpu" else f"through the {backend}" if backend else ""
    title = f"Relative error of full sums against the exact sum ({where}; fp32 accumulation)"
    return _accuracy_grid(rows, meta, out_dir, "accuracy", lambda r: not r["method"].startswith("ladder_"), title)


def _accuracy_ladder(rows, meta, out_dir) -> list[Path]:
    title = "Relative error of the CUDA-core ladder rungs against the exact sum (full sums, fp32 accumulation)"
    return _accuracy_grid(rows, meta, out_dir, "accuracy_ladder",
                          lambda r: r["method"].startswith("ladder_") or r["method"] in ("shuffle", "float64"), title)


def _accuracy_emulator(rows, meta, out_dir) -> list[Path]:
    """A matrix: methods x (dtype, distribution), each cell 'equal/compared' GPU vs emulator results."""
    cells: dict = defaultdict(lambda: [0, 0])
    for r in rows:
        if r.get("emu_equal") not in ("true", "false"):
            continue
        c = cells[(r["method"], r["dtype"], r["dist"])]
        c[1] += 1
        c[0] += r["emu_equal"] == "true"
    methods = _ordered({k[0] for k in cells})
    cols = [(dt, d) for dt in DTYPE_ORDER for d in DISTRIBUTIONS if any(k[1:] == (dt, d) for k in cells)]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 + 1.05 * len(cols)), 1.9 + 0.36 * len(methods)))
    ax.grid(False)
    for i, m in enumerate(methods):
        for j, col in enumerate(cols):
            c = cells.get((m, *col))
            if c is None:
                color, text = "#eeeeee", "–"
            else:
                color = "#b7e4b0" if c[0] == c[1] else "#f4a6a6"
                text = f"{c[0]}/{c[1]}"
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=color, edgecolor="white", linewidth=1.5))
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=7.5)
    ax.set_xlim(0, len(cols))
    ax.set_ylim(len(methods), 0)
    ax.set_xticks([j + 0.5 for j in range(len(cols))])
    ax.set_xticklabels([f"{DTYPE_LABEL.get(dt, dt)}\n{d}" for dt, d in cols], fontsize=7.5)
    ax.set_yticks([i + 0.5 for i in range(len(methods))])
    ax.set_yticklabels(methods, fontsize=7.5)
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    total = sum(c[1] for c in cells.values())
    equal = sum(c[0] for c in cells.values())
    ns = sorted({int(num(r["n"])) for r in rows if r.get("emu_equal") in ("true", "false")})
    span = f"N = $2^{{{int(math.log2(ns[0]))}}}$ to $2^{{{int(math.log2(ns[-1]))}}}$" if ns else ""
    _finish(fig, f"GPU result == emulator result, bit for bit: {equal} of {total} sums ({span})\n"
                 "each cell: equal / compared (one per size); green: all equal, red: a mismatch")
    return save(fig, out_dir, "accuracy_emulator", meta)


# ------------------------------------------------------------------------------------------------ throughput
def _ceiling_axis(ax, ceiling: float, log: bool) -> None:
    if not (ceiling and math.isfinite(ceiling)):
        return
    ax.axhline(ceiling, color="#444444", linewidth=0.8, linestyle=(0, (6, 3)))
    ax.annotate(f"ceiling {ceiling:,.0f} GB/s", xy=(0.01, ceiling), xycoords=("axes fraction", "data"),
                xytext=(0, 3), textcoords="offset points", fontsize=7, color="#444444")
    sec = ax.secondary_yaxis("right", functions=(lambda y: y / ceiling, lambda f: f * ceiling))
    sec.set_ylabel("fraction of ceiling")
    if log:
        sec.set_yscale("log")


def plot_throughput(csv_path: Path, out_dir: Path) -> list[Path]:
    """throughput.png: the GPU's cost (CUDA-graph replay where measured, else back-to-back calls);
    throughput_calls.png: back-to-back calls from Python, host dispatch included."""
    rows, meta = read_csv(csv_path)
    paths = _throughput_figure(rows, meta, out_dir, "throughput", graph=True,
                               title="Full-sum throughput vs N: GPU time per call (calls replayed from a CUDA graph; "
                                     "calls over 1 ms timed back to back)")
    paths += _throughput_figure(rows, meta, out_dir, "throughput_calls", graph=False,
                                title="Full-sum throughput vs N as a Python caller sees it: back-to-back calls "
                                      "(host dispatch included; small N is launch-bound)")
    return paths


def _throughput_figure(rows, meta, out_dir, stem: str, graph: bool, title: str) -> list[Path]:
    ceiling = num(meta.get("ceiling_gbs"))
    series: dict = defaultdict(list)
    for r in rows:
        g = r.get("graph_gbs", "") if graph else ""
        val = g if g != "" else r.get("gbs", "")
        if val == "":
            continue
        series[(r["dtype"], r["method"])].append((num(r["n"]), num(val)))
    if not series:
        return _empty_figure(out_dir, stem, meta, "no throughput rows")
    dtypes = [d for d in DTYPE_ORDER if any(k[0] == d for k in series)]
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5.2 * len(dtypes), 4.6), squeeze=False, sharey=True)
    handles: dict = {}
    for j, dt in enumerate(dtypes):
        ax = axes[0][j]
        labels = _ordered(k[1] for k in series if k[0] == dt)
        for lab in labels:
            pts = sorted(series[(dt, lab)])
            ax.plot([p[0] for p in pts], [p[1] for p in pts], **_line_kw(lab))
        _log_y(ax)
        _pow2_axis(ax, [p[0] for v in series.values() for p in v])
        ax.set_xlabel("N (elements, full sum)")
        if j == 0:
            ax.set_ylabel("effective bandwidth (GB/s, bytes read + written)")
        ax.set_title(f"{DTYPE_LABEL.get(dt, dt)} input, fp32 accumulation")
        _ceiling_axis(ax, ceiling, log=True)
        _collect(handles, ax)
    labs = _ordered(handles)
    _finish(fig, title, [handles[lab] for lab in labs], labs, ncol=min(len(labs), 7))
    return save(fig, out_dir, stem, meta)


# -------------------------------------------------------------------------------------------------- segments
LAYOUT_TITLE = {"rows": "[M, n] summed over the last axis", "cols": "[n, M] summed over the first axis"}


def plot_segments(csv_path: Path, out_dir: Path) -> list[Path]:
    rows, meta = read_csv(csv_path)
    ceiling = num(meta.get("ceiling_gbs"))
    series: dict = defaultdict(list)
    for r in rows:
        if r.get("gbs", "") == "":
            continue
        series[(r["dtype"], r["layout"], r["method"])].append((num(r["n"]), num(r["gbs"]), r.get("kind", "")))
    if not series:
        return _empty_figure(out_dir, "segments", meta, "no segment rows")
    dtypes = [d for d in DTYPE_ORDER if any(k[0] == d for k in series)]
    layouts = [lay for lay in ("rows", "cols") if any(k[1] == lay for k in series)]
    all_n = [p[0] for v in series.values() for p in v]
    total = meta.get("total_bytes", "")
    tb = f"{num(total) / 2**20:.0f} MiB per call" if total else ""
    paths = []
    # 1. GB/s per method and competitor (the headline chart)
    fig, axes = plt.subplots(len(dtypes), len(layouts), figsize=(5.0 * len(layouts), 3.3 * len(dtypes) + 1.1),
                             squeeze=False, sharex=True)
    handles: dict = {}
    for i, dt in enumerate(dtypes):
        for j, lay in enumerate(layouts):
            ax = axes[i][j]
            for lab in _ordered(k[2] for k in series if k[0] == dt and k[1] == lay):
                pts = sorted(series[(dt, lay, lab)])
                ax.plot([p[0] for p in pts], [p[1] for p in pts], **_line_kw(lab))
            _pow2_axis(ax, all_n)
            ax.set_ylim(bottom=0)
            top = max([p[1] for k, v in series.items() if k[0] == dt for p in v]
                      + [ceiling if math.isfinite(ceiling) else 0.0])
            ax.set_ylim(0, top * 1.08)
            ax.set_title(f"{DTYPE_LABEL.get(dt, dt)} · {LAYOUT_TITLE.get(lay, lay)}")
            if j == 0:
                ax.set_ylabel("GB/s (bytes read + written)")
            if i == len(dtypes) - 1:
                ax.set_xlabel("n (segment length: elements per output)")
            _ceiling_axis(ax, ceiling, log=False)
            _collect(handles, ax)
    labs = _ordered(handles)
    _finish(fig, f"Segmented sums with the total input fixed ({tb}): bandwidth vs segment length",
            [handles[lab] for lab in labs], labs, ncol=min(len(labs), 7))
    paths += save(fig, out_dir, "segments", meta)

    # 2. speedup of each tcreduce method over the fastest library call at the same n
    fig, axes = plt.subplots(len(dtypes), len(layouts), figsize=(5.0 * len(layouts), 3.0 * len(dtypes) + 1.1),
                             squeeze=False, sharex=True)
    handles = {}
    for i, dt in enumerate(dtypes):
        for j, lay in enumerate(layouts):
            ax = axes[i][j]
            best: dict[float, float] = {}
            for k, v in series.items():
                if k[0] == dt and k[1] == lay and v and v[0][2] == "competitor":
                    for n, g, _ in v:
                        best[n] = max(best.get(n, 0.0), g)
            for k in series:
                if k[0] != dt or k[1] != lay or series[k][0][2] != "tcreduce" or k[2] == "cub":
                    continue
                pts = sorted((n, g / best[n]) for n, g, _ in series[k] if best.get(n))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], **_line_kw(k[2]))
            ax.axhline(1.0, color="#444444", linewidth=0.8)
            _ratio_axis(ax)
            _pow2_axis(ax, all_n)
            ax.set_title(f"{DTYPE_LABEL.get(dt, dt)} · {LAYOUT_TITLE.get(lay, lay)}")
            if j == 0:
                ax.set_ylabel("speedup over the fastest library call")
            if i == len(dtypes) - 1:
                ax.set_xlabel("n (segment length)")
            _collect(handles, ax)
    labs = _ordered(handles)
    _finish(fig, "Speedup of each tcreduce method over the fastest competitor (torch.sum, cupy.sum with CUB on "
                 "or off, tuned Triton, torch.compile, where measured) at the same segment length",
            [handles[lab] for lab in labs], labs)
    paths += save(fig, out_dir, "segments_speedup", meta)
    return paths


# -------------------------------------------------------------------------------------------------- trade-off
def pareto(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (higher x = throughput, lower y = error)."""
    idx = []
    for i, (x, y) in enumerate(points):
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        dominated = any((x2 >= x and y2 <= y) and (x2 > x or y2 < y) for j, (x2, y2) in enumerate(points)
                        if j != i and math.isfinite(x2) and math.isfinite(y2))
        if not dominated:
            idx.append(i)
    return sorted(idx, key=lambda i: points[i][0])


def _place_labels(ax, items: Sequence[tuple[float, float, str, str]]) -> None:
    """Annotate points with their labels, moving a label to another side of its point where it would overlap one
    already placed (a small greedy repel in display space)."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    placed: list = []
    offsets = [(5, 2), (5, -9), (-5, 2), (-5, -9), (5, 10), (5, -17), (-5, 10), (-5, -17), (12, -3), (-12, -3)]
    for x, y, text, color in sorted(items, key=lambda t: (-t[1], t[0])):
        ann = None
        for dx, dy in offsets:
            if ann is not None:
                ann.remove()
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=6.5, color=color,
                              ha="left" if dx > 0 else "right", va="bottom")
            bb = ann.get_window_extent(renderer).expanded(1.02, 1.05)
            if not any(bb.overlaps(o) for o in placed):
                break
        placed.append(ann.get_window_extent(renderer))


_UNFILLED = {"x", "+", "1", "2", "3", "4", "|", "_"}
_SETTING_MARKERS = ["<", ">", "p", "h", "8", "d", "H", "*"]


def _point_styles(labels: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A distinct (color, marker) per trade-off point: the methods' own styles, and shades of the base method's
    colour with their own markers for settings such as "tensorcore chain=16"."""
    out: dict[str, dict[str, Any]] = {}
    variants: dict[str, list[str]] = defaultdict(list)
    for lab in labels:
        if lab in _STYLES or lab.split(" ")[0] not in _STYLES:
            out[lab] = style_for(lab)
        else:
            variants[lab.split(" ")[0]].append(lab)
    for base, labs in variants.items():
        rgb = matplotlib.colors.to_rgb(_STYLES[base]["color"])
        labs = sorted(labs, key=lambda t: (len(t), t))
        for i, lab in enumerate(labs):
            f = -0.45 + 1.2 * i / max(len(labs) - 1, 1)  # from darker than the base colour to much lighter
            color = tuple(c * (1 + f) if f < 0 else c + (1 - c) * f * 0.85 for c in rgb)
            out[lab] = dict(color=color, marker=_SETTING_MARKERS[i % len(_SETTING_MARKERS)], ls="--", lw=1.0)
    return out


def plot_tradeoff(csv_path: Path, out_dir: Path) -> list[Path]:
    rows, meta = read_csv(csv_path)
    pts: dict = defaultdict(list)
    for r in rows:
        if r.get("gbs", "") == "" or r.get("rel_error_median", "") == "":
            continue
        pts[(r["dtype"], r["dist"])].append((num(r["gbs"]), num(r["rel_error_median"]), r["label"],
                                             num(r.get("rel_error_min")), num(r.get("rel_error_max"))))
    if not pts:
        return _empty_figure(out_dir, "tradeoff", meta, "no trade-off rows")
    dtypes = [d for d in DTYPE_ORDER if any(k[0] == d for k in pts)]
    dists = [d for d in DISTRIBUTIONS if any(k[1] == d for k in pts)]
    styles = _point_styles(_ordered({q[2] for v in pts.values() for q in v}))
    fig, axes = plt.subplots(len(dists), len(dtypes), figsize=(5.8 * len(dtypes), 4.0 * len(dists) + 1.4),
                             squeeze=False)
    n_meta = meta.get("n", "")
    nn = f", N = $2^{{{int(round(math.log2(num(n_meta))))}}}$" if n_meta else ""
    handles: dict[str, Any] = {}
    for i, dist in enumerate(dists):
        for j, dt in enumerate(dtypes):
            ax = axes[i][j]
            p = pts.get((dt, dist), [])
            if not p:
                ax.axis("off")
                continue
            # fp32-accumulating points set the y range; far more accurate ones (float64 accumulation) sit on the
            # bottom edge as down triangles with their value written beside them
            main = [q[1] for q in p if q[1] > 1e-13]
            lo = (min(main) / 4) if main else 1e-17
            hi = (max(main) * 3) if main else 1e-6
            front = pareto([(q[0], q[1]) for q in p])
            labels = []
            for k, (x, y, lab, emin, emax) in enumerate(p):
                st = styles[lab]
                on = k in front
                below = y < lo
                yy = lo if below else y
                if not below and math.isfinite(emin) and math.isfinite(emax) and emax > emin:
                    ax.plot([x, x], [max(emin, lo), emax], color=st["color"], linewidth=0.8, alpha=0.6, zorder=2)
                marker = "v" if below else (st["marker"] or "o")
                kw = dict(s=46 if on else 28, color=st["color"], marker=marker, zorder=3, clip_on=False)
                if marker not in _UNFILLED:
                    kw.update(edgecolors="black" if on else "none", linewidths=0.7)
                h = ax.scatter([x], [yy], **kw)
                if not below:
                    handles.setdefault(lab, h)
                else:
                    handles.setdefault(lab, ax.scatter([], [], color=st["color"], marker=st["marker"] or "o"))
                if on or below:
                    text = (f"{lab}: {y:.1e}" if y > 0 else f"{lab}: exact") if below else lab
                    labels.append((x, yy, text, "black"))
            if len(front) > 1:
                ax.step([p[k][0] for k in front], [max(p[k][1], lo) for k in front], where="post", color="#444444",
                        linewidth=0.9, linestyle="--", zorder=1)
            _log_y(ax)
            ax.set_ylim(lo / 1.3, hi)
            xs = [q[0] for q in p]
            ax.set_xlim(0, max(xs) * 1.12)
            ax.set_xlabel("throughput (GB/s, input bytes read once)")
            ax.set_ylabel("relative error vs the exact sum")
            ax.set_title(f"{DTYPE_LABEL.get(dt, dt)} · {dist_label(dist, dt)}{nn}")
            fig.canvas.draw()
            _place_labels(ax, labels)
    labs = [lab for lab in styles if lab in handles]
    _finish(fig, "Accuracy against throughput on the same inputs, one point per method and setting (median over "
                 "seeds, bars: min to max)\noutlined and joined: the Pareto front (lower right is better); "
                 "▼ on the bottom edge: far more accurate (value written)", [handles[lab] for lab in labs], labs,
            ncol=min(len(labs), 6))
    return save(fig, out_dir, "tradeoff", meta)


# ----------------------------------------------------------------------------------------------------- ladder
def plot_ladder(csv_path: Path, out_dir: Path) -> list[Path]:
    rows, meta = read_csv(csv_path)
    rungs = [r for r in rows if r.get("kind") == "rung"]
    if not rungs:
        return _empty_figure(out_dir, "ladder", meta, "no ladder rows")
    sizes = []
    for r in rungs:
        if r["size_label"] not in sizes:
            sizes.append(r["size_label"])
    order = _ordered(r["method"] for r in rungs)
    refs = [r for r in rows if r.get("kind") in ("library", "tcreduce")]
    ref_names = []
    for r in refs:
        if r["method"] not in ref_names:
            ref_names.append(r["method"])
    names = order + ref_names
    fig, ax = plt.subplots(figsize=(max(7.5, 0.62 * len(names) + 1.5), 5.2))
    width = 0.8 / max(len(sizes), 1)
    shades = ["#3b6fb6", "#f0a030", "#5aa05a", "#b05050"]
    by = {(r["method"], r["size_label"]): r for r in rows if r.get("kind") in ("rung", "library", "tcreduce")}
    for s_i, size in enumerate(sizes):
        xs, ys, labels = [], [], []
        for k, name in enumerate(names):
            r = by.get((name, size))
            if r is None or r.get("frac_ceiling", "") == "":
                continue
            xs.append(k + (s_i - (len(sizes) - 1) / 2) * width)
            ys.append(100 * num(r["frac_ceiling"]))
            labels.append(num(r["gbs"]))
        bars = ax.bar(xs, ys, width=width * 0.95, color=shades[s_i % len(shades)],
                      label=f"N = {_tex_size(size)} floats", zorder=3)
        for b, g in zip(bars, labels):
            ax.annotate(f"{g:,.0f}", (b.get_x() + b.get_width() / 2, b.get_height()), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=5.5, rotation=90)
    # the seed's claims (percent of the H100's 3.35 TB/s datasheet peak, N = 1e8)
    claim_x, claim_y = [], []
    for k, name in enumerate(names):
        rs = [r for r in rows if r["method"] == name and r.get("seed_claim_pct", "") != ""]
        if rs:
            claim_x.append(k)
            claim_y.append(num(rs[0]["seed_claim_pct"]))
    if claim_x:
        ax.scatter(claim_x, claim_y, marker="D", s=22, facecolors="white", edgecolors="black", zorder=4,
                   label="seed 003's claim (% of H100 peak)")
    ax.axhline(100, color="#444444", linewidth=0.8, linestyle=(0, (6, 3)))
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([n.replace("ladder_", "") for n in names], rotation=35, ha="right", fontsize=7.5)
    if ref_names:
        ax.axvline(len(order) - 0.5, color="#999999", linewidth=0.8)
        ax.text(len(order) - 0.4, 121, "references", fontsize=7, color="#666666", va="bottom")
    ax.set_ylim(0, 128)
    ax.set_ylabel("% of the measured ceiling (bar labels: GB/s)")
    ceil_of = {s: num(next((r["ceiling_gbs"] for r in rows if r["size_label"] == s), "nan")) for s in sizes}
    ceil_txt = ", ".join(f"N = {_tex_size(s)}: {ceil_of[s]:,.0f} GB/s" for s in sizes)
    ax.grid(axis="x", visible=False)
    hs, ls = ax.get_legend_handles_labels()
    _finish(fig, "The seeds' reduction ladder on this GPU: one bar per rung, full fp32 sums\nceiling = max(plain "
                 f"read kernel, device copy) at the same N: {ceil_txt}", hs, ls)
    return save(fig, out_dir, "ladder", meta)


PLOTTERS = {
    "accuracy": plot_accuracy,
    "throughput": plot_throughput,
    "segments": plot_segments,
    "tradeoff": plot_tradeoff,
    "ladder": plot_ladder,
}
