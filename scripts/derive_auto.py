"""Derive the ``method="auto"`` table from the committed sweeps and write ``tcreduce/_auto_table.py``.

    python3 scripts/derive_auto.py [--csv-dir paper_figures] [--out tcreduce/_auto_table.py] [--check]

Reads ``throughput.csv`` (full sums, N = 2^10..2^30) and ``segments.csv`` ([M, n] over the last axis: "rows";
[n, M] over the first: "cols"; n = 16..2^20, 512 MiB per call), both written by ``python -m experiments``, into the
primary table (``TABLE``, the GPU those sweeps ran on). Sweeps of another GPU, committed in a subdirectory named after
its family (``paper_figures/h200/``: a :data:`tcreduce._device.KNOWN_GPUS` key in lower case; either CSV may be
missing), give that family's table (``DEVICE_TABLES``), which auto uses on that GPU for the forms it measured. For every
swept point (dtype, form, log2 of the reduced length) it keeps the fastest *eligible* method measured there, by the
time per call (``time_us``: the median of back-to-back calls, or the mean of the middle 80% of interleaved turns for
the labels the CSV's ``interleaved`` column marks); methods within ``TIE`` (1%) of the fastest count as tied, within
``TIE_INTERLEAVED`` (0.5%) where every run timed both in interleaved turns and both are GPU-bound (at least
``experiments.timing.HOST_BOUND_S`` a call; such turns follow a read of twice the L2 and resolve far less than 1%, so a
tie there would give away a measured 0.5-1%), and the tie goes to the first in ``PREFERENCE`` (the tensor cores first:
one fused 16-term block per mma, the smaller error bound). Where the sweep also timed the methods inside CUDA graphs
(``graph_us``, the GPU's own time per call: the throughput study's full sums) and that pick takes more than ``TIE`` more
GPU time than another method within ``TOLERANCE`` (2%) of the fastest back-to-back time, the pick is the method with the
least GPU time instead (within ``TIE`` of it, by ``PREFERENCE``): at small sizes back-to-back calls time the host, whose
noise would otherwise choose among methods whose GPU time differs by 20-60%. Eligible: every registered sum method with
a launch plan and an emulator twin except those in ``EXCLUDED`` (each with its reason). Points where an excluded method
was more than 2% faster than the pick are listed in the table's ``NOTES``.

More runs of the same plans: a directory's ``segments_runs/*.csv`` (other machines or other days, the same kernels
and plans as its ``segments.csv``; each with every point of the formats it measures) join the derivation point by
point. A method counts as tied with the fastest only if it is within ``TIE`` of the fastest in every run, and the tie
goes to the first of those in ``PREFERENCE``; where no method is, the pick is the one whose worst ratio to a run's
fastest is least. So a near-tie that one machine reads one way and another the other way goes to a method fast on
both, instead of flipping with every re-derivation (two H200s read the same 16-bit first-axis points 2-4% apart,
session 33).

``--check``: derive in memory and exit 1 if the committed table differs (what the CPU test checks too).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TIE = 0.01  # methods within 1% of the fastest are tied ...
TIE_INTERLEAVED = 0.005  # ... or 0.5% where every run timed both, GPU-bound, in interleaved turns (tie_of)
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
    the time per call (us; ``time_us``, see the module docstring) of every method measured there, and (full sums)
    inside CUDA graphs;
    ``more_times``: the same from the directory's other runs of the same plans (``segments_runs/``);
    ``interleaved``: per run, the set of methods it timed in interleaved turns (the CSV's ``interleaved`` column)."""

    dtype: str
    form: str
    length: int
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    times: dict
    graph_times: dict = field(default_factory=dict)
    more_times: tuple = ()
    interleaved: tuple = ()  # per run (times, *more_times): the methods it timed in interleaved turns

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


def family_of(meta: dict) -> str:
    """The GPU family (KNOWN_GPUS key) every CSV of one directory was measured on."""
    from tcreduce._device import gpu_family

    families = {gpu_family(h.get("device", "")) for h in meta.values() if h}
    if len(families) != 1 or None in families:
        raise ValueError(f"one directory's sweeps must come from one known GPU family, got {families}: {meta}")
    return families.pop()


def device_dirs(csv_dir: Path) -> dict[str, Path]:
    """The subdirectories of ``csv_dir`` holding another GPU family's sweeps, by family."""
    from tcreduce._device import KNOWN_GPUS

    return {fam: csv_dir / fam.lower() for fam in KNOWN_GPUS
            if any((csv_dir / fam.lower() / f"{s}.csv").is_file() for s in ("throughput", "segments"))}


def _read(path: Path, required: bool) -> tuple[list[dict], dict]:
    from experiments.records import read_csv

    return read_csv(path) if required or path.is_file() else ([], {})


def load_points(csv_dir: Path, required: bool = True) -> tuple[list[Point], dict]:
    """Every swept point of throughput.csv and segments.csv (tcreduce methods with a time), and their headers; with
    ``required`` off (a device's subdirectory) a missing CSV counts as no points."""
    from experiments.records import num

    points: list[Point] = []
    meta = {}
    acc: dict = defaultdict(dict)
    turns: dict = defaultdict(set)
    graph: dict = defaultdict(dict)
    rows, meta["throughput"] = _read(csv_dir / "throughput.csv", required)
    for r in rows:
        if r.get("kind") == "tcreduce" and r.get("time_us"):
            n = int(r["n"])
            key = (r["dtype"], "full", n, (n,), (0,))
            acc[key][r["method"]] = num(r["time_us"])
            if r.get("interleaved") == "true":
                turns[key].add(r["method"])
            if r.get("graph_us"):
                graph[key][r["method"]] = num(r["graph_us"])
    rows, meta["segments"] = _read(csv_dir / "segments.csv", required)
    _segment_times(rows, acc, turns)
    more: dict = defaultdict(list)
    more_turns: dict = defaultdict(list)
    for path in sorted((csv_dir / "segments_runs").glob("*.csv")):
        rows, meta[f"segments_runs/{path.stem}"] = _read(path, True)
        run: dict = defaultdict(dict)
        run_turns: dict = defaultdict(set)
        _segment_times(rows, run, run_turns)
        forms = {k[:2] for k in run}  # a run may lack whole formats (an older one, before fp8 joined the study)
        if set(run) != {k for k in acc if k[:2] in forms}:
            raise ValueError(f"{path} does not measure the points of {csv_dir / 'segments.csv'}")
        for key, times in run.items():
            more[key].append(times)
            more_turns[key].append(frozenset(run_turns[key]))
    for key, times in sorted(acc.items()):
        points.append(Point(*key, times, graph.get(key, {}), tuple(more.get(key, ())),
                            (frozenset(turns[key]), *more_turns.get(key, ()))))
    return points, meta


def _segment_times(rows: list[dict], acc: dict, turns: dict) -> None:
    """Add a segment study's tcreduce times to ``acc`` ((dtype, layout, n, shape, axes) -> {method: us}) and the
    methods it timed in interleaved turns to ``turns`` (the same key -> set)."""
    from experiments.records import num

    for r in rows:
        if r.get("kind") == "tcreduce" and r.get("time_us"):
            n, m = int(r["n"]), int(r["m"])
            shape, axes = ((m, n), (1,)) if r["layout"] == "rows" else ((n, m), (0,))
            key = (r["dtype"], r["layout"], n, shape, axes)
            acc[key][r["method"]] = num(r["time_us"])
            if r.get("interleaved") == "true":
                turns[key].add(r["method"])


def tie_of(point: Point, method: str, fastest: list[str]) -> float:
    """How close to the fastest ``method`` counts as tied at ``point``: TIE_INTERLEAVED where every run timed it and
    that run's fastest method (``fastest``, one per run) in interleaved turns and both took at least
    ``experiments.timing.HOST_BOUND_S`` a call (GPU-bound calls, whose turns follow a read of the L2; faster ones are
    timed in turns for the host's sake, and their host-bound times keep TIE), else TIE."""
    from experiments.timing import HOST_BOUND_S

    runs = (point.times, *point.more_times)
    precise = len(point.interleaved) == len(runs) and all(
        method in s and f in s and min(r[method], r[f]) >= HOST_BOUND_S * 1e6
        for r, s, f in zip(runs, point.interleaved, fastest))
    return TIE_INTERLEAVED if precise else TIE


def pick(point: Point) -> tuple[str, float]:
    """(the method kept at this point, its time): the fastest eligible method, ties (within :func:`tie_of` in every
    run) to the least GPU time in a graph where every near-fastest method has one, then to the preferred; where no
    method ties in every run, the least worst ratio to a run's fastest."""
    runs = (point.times, *point.more_times)
    order = eligible(point.dtype)
    measured = [m for m in order if all(m in r and math.isfinite(r[m]) for r in runs)]
    if not measured:
        raise ValueError(f"no eligible method measured at {point}")
    fastest_names = [min(measured, key=lambda k: r[k]) for r in runs]
    fastest = [r[k] for r, k in zip(runs, fastest_names)]
    worst = {m: max(r[m] / f for r, f in zip(runs, fastest)) for m in measured}
    tied = [m for m in measured if worst[m] <= 1 + tie_of(point, m, fastest_names)]
    m = tied[0] if tied else min(measured, key=lambda k: (worst[k], order.index(k)))
    cands = [(point.times[k], k) for k in measured]
    best = min(t for t, _ in cands)
    near = [m for t, m in cands if t <= best * (1 + TOLERANCE)]
    graph = {k: point.graph_times.get(k, math.nan) for k in near}
    if all(math.isfinite(g) for g in graph.values()):
        least = min(graph.values())
        if graph[m] > least * (1 + TIE):  # the pick takes clearly more GPU time than a near-fastest method: that one
            m = min((k for k in near if graph[k] <= least * (1 + TIE)), key=order.index)
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


@dataclass(frozen=True)
class Sweep:
    """One GPU family's derived table: its family, table, notes and the CSV headers it came from."""

    family: str
    table: dict
    notes: list
    meta: dict


def derive_dir(csv_dir: Path, required: bool = True) -> Sweep:
    points, meta = load_points(csv_dir, required)
    table, notes = derive(points)
    return Sweep(family_of(meta), table, notes, meta)


def _render_table(table: dict, indent: str) -> list[str]:
    lines = []
    for (dtype, form), buckets in table.items():
        lines.append(f"{indent}({dtype!r}, {form!r}): {{")
        items = list(buckets.items())
        for i in range(0, len(items), 4):
            lines.append(f"{indent}    " + " ".join(f"{b}: {m!r}," for b, m in items[i:i + 4]))
        lines.append(f"{indent}}},")
    return lines


def render(primary: Sweep, devices: list[Sweep]) -> str:
    def src(sweep: Sweep, name: str) -> str:
        h = sweep.meta.get(name, {})
        return f"{name}.csv: {h.get('device', '?')}, commit {h.get('commit', '?')}, {h.get('date_utc', '?')}"

    def sources(sweep: Sweep) -> list[str]:
        return [f"  {src(sweep, name)}" for name, h in sweep.meta.items() if h]

    lines = [
        '"""The ``method="auto"`` table: per (input dtype, form) and size bucket (log2 of the reduced length,',
        "rounded), the fastest eligible method measured in the committed sweeps. GENERATED by scripts/derive_auto.py:",
        "do not edit; re-run the sweep (python -m experiments throughput segments), then the script.",
        "",
        f"Sources of TABLE ({primary.family}; used on every GPU for the forms DEVICE_TABLES lacks):",
        *sources(primary),
        *[line for d in devices
          for line in (f"Sources of DEVICE_TABLES[{d.family!r}] (paper_figures/{d.family.lower()}/):", *sources(d))],
        "Measure: time per call (time_us: the median of back-to-back calls, or for labels timed in interleaved",
        f"turns the mean of their middle 80%). A method within {TIE:.0%} of the fastest in every run of a directory",
        f"(segments.csv and segments_runs/*.csv: the same plans; {TIE_INTERLEAVED:.1%} where every run timed both in",
        "interleaved turns, each call taking at least experiments.timing.HOST_BOUND_S) ties with it, and the tie",
        f"goes to {', '.join(PREFERENCE)} in that order; where no method ties in every run, the least worst ratio",
        f"to a run's fastest wins. Where that pick took more than {TIE:.0%} more GPU time in a CUDA graph (graph_us:",
        f"full sums) than a method within {TOLERANCE:.0%} of the fastest, the least GPU time wins instead (within",
        f"{TIE:.0%}, by that order). Lookup and fallbacks: tcreduce/_auto.py.",
        '"""',
        "",
        f"TIE = {TIE!r}",
        f"TIE_INTERLEAVED = {TIE_INTERLEAVED!r}",
        f"TOLERANCE = {TOLERANCE!r}",
        f"PREFERENCE = {PREFERENCE!r}",
        "EXCLUDED = {",
        *(f"    {k!r}: {v!r}," for k, v in EXCLUDED.items()),
        "}",
        "",
        f"DEVICE = {primary.family!r}  # the GPU family TABLE was measured on",
        "TABLE = {",
        *_render_table(primary.table, "    "),
        "}",
        "",
        "# Other GPU families' tables, each covering the (dtype, form) pairs its sweeps measured.",
        "DEVICE_TABLES = {",
    ]
    for d in devices:
        lines += [f"    {d.family!r}: {{", *_render_table(d.table, "        "), "    },"]
    lines += ["}", "",
              "# Swept points where a method auto may not choose (EXCLUDED) was more than 2% faster than its pick.",
              "NOTES = ("]
    lines += [f"    {n!r}," for n in primary.notes]
    lines += [")", "DEVICE_NOTES = {"]
    for d in devices:
        lines += [f"    {d.family!r}: (", *(f"        {n!r}," for n in d.notes), "    ),"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def generate(csv_dir: Path) -> str:
    primary = derive_dir(csv_dir)
    devices = []
    for family, d in device_dirs(csv_dir).items():
        devices.append(derive_dir(d, required=False))
        if devices[-1].family != family or family == primary.family:
            raise ValueError(f"{d} holds {devices[-1].family} sweeps; the primary ones are {primary.family}'s")
    return render(primary, devices)


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
