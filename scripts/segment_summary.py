"""Issue 10's ratios from a segment study's CSV (``python3 -m experiments segments``): per format and form, `auto`
against the best competitor of the same run, `tensorcore` and `tensorcore_tf32` against `shuffle`, `auto` against the
read ceiling and against the fastest tcreduce method in its own column; the worst point of each with its length.

    python3 scripts/segment_summary.py [paper_figures/h200/segments.csv]

Every ratio compares GB/s measured in the one run the CSV holds (its header names the GPU and the commit). No GPU
needed.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


@dataclass(frozen=True)
class Point:
    """One (dtype, layout, n) point of the sweep: GB/s and kind (tcreduce or competitor) per method, and `auto`'s
    fraction of the run's read ceiling."""

    dtype: str
    layout: str
    n: int
    gbs: dict
    kind: dict
    auto_ceiling: float


def load(path: Path) -> list[Point]:
    """The points of a segments CSV (experiments.records.read_csv; methods without a reading left out)."""
    from experiments.records import num, read_csv

    grouped: dict[tuple, list[dict]] = defaultdict(list)
    for r in read_csv(path)[0]:
        grouped[(r["dtype"], r["layout"], int(r["n"]))].append(r)
    points = []
    for (dtype, layout, n), rs in sorted(grouped.items()):
        gbs = {r["method"]: num(r["gbs"]) for r in rs if math.isfinite(num(r["gbs"]))}
        auto = next(r for r in rs if r["method"] == "auto")
        points.append(Point(dtype, layout, n, gbs, {r["method"]: r["kind"] for r in rs}, num(auto["frac_ceiling"])))
    return points


def best_competitor(p: Point) -> tuple[float, str]:
    return max((v, m) for m, v in p.gbs.items() if p.kind[m] == "competitor")


def fastest_method(p: Point) -> tuple[float, str]:
    return max((v, m) for m, v in p.gbs.items() if p.kind[m] == "tcreduce" and m != "auto")


def ratio_range(points: list[Point], method: str) -> tuple[float, int, float, int] | None:
    """(lowest, its n, highest, its n) of ``method`` / `shuffle` over ``points``, or None without the method."""
    rs = [(p.gbs[method] / p.gbs["shuffle"], p.n) for p in points if method in p.gbs and "shuffle" in p.gbs]
    return (*min(rs), *max(rs)) if rs else None


def auto_vs_best(p: Point) -> tuple[float, str]:
    """`auto` / the best competitor at ``p``, and that competitor."""
    gbs, name = best_competitor(p)
    return p.gbs["auto"] / gbs, name


# issue 10's two groups of points: the formats its goals were written for, and fp8 (swept since session 34)
GROUPS = (("fp16/bf16/fp32", frozenset({"float16", "bfloat16", "float32"})),
          ("fp8", frozenset({"float8_e4m3fn", "float8_e5m2"})))


def group_lines(label: str, rated: list[tuple]) -> list[str]:
    """One line per group of ``rated`` ((ratio, ..., point) sorted by ratio, the point last): its range of ``label``,
    how many points below 1.0 and below 0.98, and its worst point."""
    lines = []
    for name, dtypes in GROUPS:
        vs = [r for r in rated if r[-1].dtype in dtypes]
        if vs:
            worst = vs[0][-1]
            lines.append(f"  {name}: {label} {vs[0][0]:.3f}-{vs[-1][0]:.3f}, {sum(r[0] < 1 for r in vs)} of {len(vs)} "
                         f"below 1.0, {sum(r[0] < 0.98 for r in vs)} below 0.98 (worst {worst.dtype} {worst.layout} "
                         f"n={worst.n})")
    return lines


def summary(points: list[Point]) -> list[str]:
    """The report's lines: one per (dtype, layout), then the sweep's worst points."""
    rated = sorted(((*auto_vs_best(p), p) for p in points), key=lambda vp: vp[0])  # (ratio, competitor, point)
    lines = []
    for dtype in sorted({p.dtype for p in points}):
        for layout in ("rows", "cols"):
            vs = [(v, p.n, name) for v, name, p in rated if p.dtype == dtype and p.layout == layout]
            if not vs:
                continue
            sub = [p for p in points if p.dtype == dtype and p.layout == layout]
            parts = [f"{dtype:9} {layout:4} auto/best competitor {vs[0][0]:.3f} (n={vs[0][1]}, {vs[0][2]}), "
                     f"{sum(v < 1 for v, _, _ in vs)} of {len(vs)} below 1"]
            for method in ("tensorcore", "tensorcore_tf32"):
                rr = ratio_range(sub, method)
                if rr:
                    parts.append(f"{method}/shuffle {rr[0]:.3f} (n={rr[1]}) - {rr[2]:.3f} (n={rr[3]})")
            low = min(sub, key=lambda p: p.auto_ceiling)
            parts.append(f"auto/ceiling min {low.auto_ceiling:.3f} (n={low.n})")
            lines.append("; ".join(parts))
    lines.append(f"all: auto/best competitor {rated[0][0]:.3f}-{rated[-1][0]:.3f}, {sum(v < 1 for v, _, _ in rated)} "
                 f"of {len(rated)} below 1.0, {sum(v < 0.98 for v, _, _ in rated)} below 0.98")
    lines += group_lines("auto/best competitor", rated)
    lines += [f"  {v:.3f} {p.dtype} {p.layout} n={p.n} against {name}" for v, name, p in rated if v < 0.98]
    fs = sorted(((p.gbs["auto"] / fastest_method(p)[0], p) for p in points), key=lambda vp: vp[0])
    lines += [f"auto/fastest tcreduce method min {v:.3f}: {p.dtype} {p.layout} n={p.n} ({fastest_method(p)[1]})"
              for v, p in fs[:3]]
    return lines


def table_pick(p: Point, gpu: str) -> str:
    """The method the committed ``auto`` table (``tcreduce/_auto_table.py``) gives ``p`` on ``gpu``: what `auto`
    runs now, which may differ from what ran in the study's `auto` column (that run used the table of its commit)."""
    from tcreduce._auto import choose_method
    from tcreduce._device import named_device

    m = 1 << 20  # any kept length: the pick depends on the form and the reduced length only
    shape, axes = ((m, p.n), (1,)) if p.layout == "rows" else ((p.n, m), (0,))
    return choose_method("sum", SimpleNamespace(shape=shape), axes, p.dtype, named_device(gpu))


def pick_summary(points: list[Point], gpu: str) -> list[str]:
    """The table's pick in its own column: against the best competitor, the fastest method and the read ceiling."""
    rated = []
    for p in points:
        pick = table_pick(p, gpu)
        ceiling = p.gbs["auto"] / p.auto_ceiling
        competitor, name = best_competitor(p)
        rated.append((p.gbs[pick] / competitor, name, p.gbs[pick] / fastest_method(p)[0], p.gbs[pick] / ceiling, pick,
                      p))
    rated.sort(key=lambda r: r[0])
    lines = [f"committed table's picks, each in its own column: pick/best competitor {rated[0][0]:.3f}-"
             f"{rated[-1][0]:.3f}, {sum(r[0] < 1 for r in rated)} of {len(rated)} below 1.0, "
             f"{sum(r[0] < 0.98 for r in rated)} below 0.98"]
    lines += group_lines("pick/best competitor", rated)
    lines += [f"  {v:.3f} {p.dtype} {p.layout} n={p.n} ({pick}) against {name}"
              for v, name, _, _, pick, p in rated if v < 0.98]
    for label, i in (("pick/fastest tcreduce method", 2), ("pick/ceiling", 3)):
        low = sorted(rated, key=lambda r: r[i])[:3]
        lines += [f"{label} min {r[i]:.3f}: {r[5].dtype} {r[5].layout} n={r[5].n} ({r[4]})" for r in low]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", type=Path, default=ROOT / "paper_figures" / "h200" / "segments.csv")
    ap.add_argument("--picks", action="store_true",
                    help="also rate what the committed auto table picks now, each pick in its own column")
    args = ap.parse_args()
    points = load(args.csv)
    lines = summary(points)
    if args.picks:
        from experiments.records import read_csv

        gpu = read_csv(args.csv)[1]["device"].split(" (")[0]
        lines += pick_summary(points, gpu)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
