"""Derive the ``method="auto"`` table from the committed sweeps and write ``tcreduce/_auto_table.py``.

    python3 scripts/derive_auto.py [--csv-dir paper_figures] [--out tcreduce/_auto_table.py] [--check]

Reads ``throughput.csv`` (full sums, N = 2^10..2^30) and ``segments.csv`` ([M, n] over the last axis: "rows";
[n, M] over the first: "cols"; n = 16..2^20, 512 MiB per call), both written by ``python -m experiments``. For every
swept point (dtype, form, log2 of the reduced length) it keeps the fastest *eligible* method measured there, by the
median time per call of back-to-back calls (``time_us``); methods within ``TIE`` (1%) of the fastest count as tied
and the tie goes to the first in ``PREFERENCE`` (the tensor cores first: one fused 16-term block per mma, the smaller
error bound). Eligible: every registered sum method with a launch plan and an emulator twin except those in
``EXCLUDED`` (each with its reason). Points where an excluded method was more than 2% faster than the pick are
listed in the table's ``NOTES``.

``--check``: derive in memory and exit 1 if the committed table differs (what the CPU test checks too).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TIE = 0.01  # methods within 1% of the fastest are tied
PREFERENCE = ("tensorcore", "shuffle", "wmma")  # tie-break order (methods not listed follow, by name)
EXCLUDED = {
    "tensorcore_chained": "less accurate by design (one round-toward-zero tensor-core accumulator per warp)",
    "cub": "delegates to cupy.sum: no emulator twin, not capturable in a CUDA graph, CuPy's accelerator settings",
    "tensorcore_tf32": "less accurate by design (every float32 value rounded to tf32's 11 significant bits)",
    "exact": "its speed follows the data's exponent range (fp32 and bf16 values outside a thread's window take a "
             "slow path), which the sweeps' uniform data do not show: ask for it by name",
}
TOLERANCE = 0.02  # what the CPU test allows between auto's pick and the fastest eligible method


@dataclass(frozen=True)
class Point:
    """One swept point: dtype, form ("full", "rows", "cols"), the reduced length, the array's shape and reduced axes,
    and the median time per call (us) of every method measured there."""

    dtype: str
    form: str
    length: int
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    times: dict

    @property
    def bucket(self) -> int:
        return bucket_of(self.length)


def bucket_of(length: int) -> int:
    """The table's size bucket of a reduced length: log2 rounded to the nearest integer (0 for lengths below 2)."""
    return 0 if length < 2 else int(math.floor(math.log2(length) + 0.5))


def eligible(dtype: str) -> list[str]:
    """The methods auto may choose for ``dtype``, in :data:`PREFERENCE` order."""
    import tcreduce

    names = [m.name for m in tcreduce.methods() if dtype in m.dtypes and m.deterministic and m.emulated
             and not m.name.startswith("ladder_") and m.name not in EXCLUDED]
    return sorted(names, key=lambda n: (PREFERENCE.index(n) if n in PREFERENCE else len(PREFERENCE), n))


def load_points(csv_dir: Path) -> tuple[list[Point], dict]:
    """Every swept point of throughput.csv and segments.csv (tcreduce methods with a time), and their headers."""
    from experiments.records import num, read_csv

    points: list[Point] = []
    meta = {}
    acc: dict = defaultdict(dict)
    rows, meta["throughput"] = read_csv(csv_dir / "throughput.csv")
    for r in rows:
        if r.get("kind") == "tcreduce" and r.get("time_us"):
            n = int(r["n"])
            acc[(r["dtype"], "full", n, (n,), (0,))][r["method"]] = num(r["time_us"])
    rows, meta["segments"] = read_csv(csv_dir / "segments.csv")
    for r in rows:
        if r.get("kind") == "tcreduce" and r.get("time_us"):
            n, m = int(r["n"]), int(r["m"])
            shape, axes = ((m, n), (1,)) if r["layout"] == "rows" else ((n, m), (0,))
            acc[(r["dtype"], r["layout"], n, shape, axes)][r["method"]] = num(r["time_us"])
    for (dtype, form, n, shape, axes), times in sorted(acc.items()):
        points.append(Point(dtype, form, n, shape, axes, times))
    return points, meta


def pick(point: Point) -> tuple[str, float]:
    """(the method kept at this point, its time): the fastest eligible method, ties to the preferred."""
    cands = [(point.times[m], m) for m in eligible(point.dtype) if m in point.times and math.isfinite(point.times[m])]
    if not cands:
        raise ValueError(f"no eligible method measured at {point}")
    best = min(t for t, _ in cands)
    tied = [m for t, m in cands if t <= best * (1 + TIE)]
    order = eligible(point.dtype)
    m = min(tied, key=order.index)
    return m, point.times[m]


def derive(points: list[Point]) -> tuple[dict, list[str]]:
    """(table: (dtype, form) -> {bucket: method}, notes on points where an excluded method was clearly faster)."""
    table: dict = defaultdict(dict)
    notes = []
    for p in points:
        m, t = pick(p)
        if p.bucket in table[(p.dtype, p.form)] and table[(p.dtype, p.form)][p.bucket] != m:
            raise ValueError(f"two swept points share bucket {p.bucket} of {p.dtype} {p.form}")
        table[(p.dtype, p.form)][p.bucket] = m
        for other, to in sorted(p.times.items()):
            if other in EXCLUDED and math.isfinite(to) and to * (1 + TOLERANCE) < t:
                notes.append(f"{p.dtype} {p.form} n={p.length}: {other} {to:.1f} us, {m} {t:.1f} us "
                             f"(+{t / to - 1:.1%})")
    return {k: dict(sorted(v.items())) for k, v in sorted(table.items())}, notes


def render(table: dict, notes: list[str], meta: dict) -> str:
    def src(name: str) -> str:
        h = meta.get(name, {})
        return f"{name}.csv: {h.get('device', '?')}, commit {h.get('commit', '?')}, {h.get('date_utc', '?')}"

    lines = [
        '"""The ``method="auto"`` table: per (input dtype, form) and size bucket (log2 of the reduced length,',
        "rounded), the fastest eligible method measured in the committed sweeps. GENERATED by scripts/derive_auto.py:",
        "do not edit; re-run the sweep (python -m experiments throughput segments), then the script.",
        "",
        f"Sources: {src('throughput')};",
        f"{src('segments')}.",
        f"Measure: median time per call of back-to-back calls (time_us); ties within {TIE:.0%} go to",
        f"{', '.join(PREFERENCE)} in that order. Lookup and fallbacks: tcreduce/_auto.py.",
        '"""',
        "",
        f"TIE = {TIE!r}",
        f"PREFERENCE = {PREFERENCE!r}",
        "EXCLUDED = {",
        *(f"    {k!r}: {v!r}," for k, v in EXCLUDED.items()),
        "}",
        "",
        "TABLE = {",
    ]
    for (dtype, form), buckets in table.items():
        lines.append(f"    ({dtype!r}, {form!r}): {{")
        items = list(buckets.items())
        for i in range(0, len(items), 4):
            lines.append("        " + " ".join(f"{b}: {m!r}," for b, m in items[i:i + 4]))
        lines.append("    },")
    lines.append("}")
    lines.append("")
    lines.append("# Swept points where a method auto may not choose (EXCLUDED) was more than 2% faster than its pick.")
    lines.append("NOTES = (")
    for n in notes:
        lines.append(f"    {n!r},")
    lines.append(")")
    return "\n".join(lines) + "\n"


def generate(csv_dir: Path) -> str:
    points, meta = load_points(csv_dir)
    table, notes = derive(points)
    return render(table, notes, meta)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv-dir", type=Path, default=REPO / "paper_figures")
    ap.add_argument("--out", type=Path, default=REPO / "tcreduce" / "_auto_table.py")
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed table is not what the CSVs give")
    args = ap.parse_args(argv)
    text = generate(args.csv_dir)
    if args.check:
        same = args.out.is_file() and args.out.read_text() == text
        print(f"{args.out}: {'up to date' if same else 'OUT OF DATE: run scripts/derive_auto.py'}")
        return 0 if same else 1
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
