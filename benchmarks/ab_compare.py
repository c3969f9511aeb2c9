"""A/B timing of two tcreduce trees on one GPU in one run: the checkout this script lives in ("after") against another
checkout ("before", e.g. ``git archive HEAD~1 | tar x -C .before``), on shapes where a kernel change should show.

    python benchmarks/ab_compare.py --before .before [--after .] [--rounds 2] [--reps 20] [--cases cols,rows]
                                    [--dtypes float32] [--ns 128,1024] [--methods tensorcore,shuffle] [--out DIR]

Each round runs one child process per tree, alternating (before, after, before, after, ...), so that a drift of the
GPU's clocks over the run falls on both trees alike; a child imports tcreduce from its tree only, times every case
with perf_floor.timed (CUDA events around batches of back-to-back calls, warm-up, median; 512 MiB inputs, far larger
than L2), and checks its result against a float64 sum first, within the method's a-priori bound on the GPU
(perf_floor.within_method_bound: tcreduce.bounds.error_bound, so lossy methods such as tf32 are held to theirs).
``--check bits`` skips that host-side bound (about 15 s per case and method at 512 MiB on the device's CPU) where the
change is meant to keep every sum's bits: the table's last column says whether both trees' sums had the same bits
(an MD5 of the output) in every round, which holds only if the change kept the order of additions. The table gives
each tree's median GB/s over the rounds and after / before; ab_compare.csv (with perf_floor's metadata header) keeps
every round.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TOTAL = 1 << 29  # bytes per input
# (case group, dtype, reduced length n, form): first-axis sums [n, TOTAL / itemsize / n] over axis 0 and last-axis sums
# [TOTAL / itemsize / n, n]; few columns and few long rows are where the plans split the reduced axis over blocks
CASES = [(group, dtype, n) for group, ns in (("cols", (8192, 16384, 1 << 17, 1 << 20)), ("rows", (1 << 20,)))
         for dtype in ("float16", "float32", "bfloat16") for n in ns]
METHODS = ("tensorcore", "shuffle")


def _shape(group: str, dtype: str, n: int) -> tuple[tuple[int, int], int]:
    """(shape, axis) of a case: TOTAL bytes, n the length of the reduced axis."""
    from tcreduce.formats import get_format  # the tree's own tcreduce, imported first by the child

    other = TOTAL // get_format(dtype).itemsize // n
    return ((n, other), 0) if group == "cols" else ((other, n), -1)


def cases(groups: list[str], dtypes: list[str] | None = None, ns: list[int] | None = None) -> list[tuple]:
    """The (group, dtype, n) cases of ``groups``: CASES, or every dtype x n given."""
    if dtypes is None and ns is None:
        return [c for c in CASES if c[0] in groups]
    dtypes = dtypes or sorted({c[1] for c in CASES})
    return [(g, d, n) for g in groups for d in dtypes for n in (ns or sorted({c[2] for c in CASES if c[0] == g}))]


def child(tree: Path, todo: list[tuple], reps: int, methods: tuple[str, ...] = METHODS, check: str = "bound") -> None:
    """Time every case with the tcreduce of ``tree``; one JSON line per (case, method) on stdout, with the MD5 of the
    sums' bits. ``check``: "bound" also holds the sums to the method's error bound (see the module docstring)."""
    sys.path.insert(0, str(tree))
    sys.path.insert(1, str(HERE))
    import cupy
    import tcreduce

    assert Path(tcreduce.__file__).resolve().is_relative_to(tree.resolve()), tcreduce.__file__
    from perf_floor import make_input, timed, within_method_bound

    try:
        import torch
    except ImportError:
        torch = None
    rng = cupy.random.default_rng(1)
    for group, dtype, n in todo:
        shape, axis = _shape(group, dtype, n)
        x, _, kw = make_input(rng, shape, dtype, torch)
        for method in methods:
            got = tcreduce.sum(x, axis=axis, method=method, **kw)
            if check == "bound" and not within_method_bound(got, x, axis, method, dtype):
                raise AssertionError(f"{method} {dtype} {shape} axis={axis}: an error past the method's bound")
            bits = hashlib.md5(got.get().tobytes()).hexdigest()
            t = timed(lambda: tcreduce.sum(x, axis=axis, method=method, **kw), reps)
            print(json.dumps(dict(case=group, dtype=dtype, n=n, shape="x".join(map(str, shape)), method=method,
                                  gbs=x.nbytes / t / 1e9, bits=bits)), flush=True)
        x = None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--before", type=Path, help="the other checkout (its tcreduce/ and kernels/)")
    ap.add_argument("--after", type=Path, default=HERE.parent, help="the checkout under test (default: this one)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--cases", default="cols,rows", help="case groups: cols, rows")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated tcreduce methods")
    ap.add_argument("--dtypes", help="comma-separated dtypes (default: CASES')")
    ap.add_argument("--ns", help="comma-separated lengths of the reduced axis (default: CASES')")
    ap.add_argument("--check", choices=("bound", "bits"), default="bound",
                    help="bound: each tree's sums within the method's error bound; bits: only compare the trees' bits")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    groups = args.cases.split(",")
    todo = cases(groups, args.dtypes.split(",") if args.dtypes else None,
                 [int(v) for v in args.ns.split(",")] if args.ns else None)
    if args.child:
        child(args.child, todo, args.reps, tuple(args.methods.split(",")), args.check)
        return
    if args.before is None:
        ap.error("--before is required")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    results: list[dict] = []
    for rnd in range(args.rounds):
        for label, tree in trees.items():
            cmd = [sys.executable, __file__, "--child", str(tree), "--cases", args.cases, "--reps", str(args.reps),
                   "--check", args.check]
            cmd += [f"--{k}={v}" for k, v in (("dtypes", args.dtypes), ("ns", args.ns), ("methods", args.methods)) if v]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode:
                sys.exit(f"{label} round {rnd} failed:\n{proc.stderr}")
            results += [dict(json.loads(line), tree=label, round=rnd) for line in proc.stdout.splitlines()
                        if line.startswith("{")]
    print(f"{'case':5} {'dtype':9} {'shape':16} {'method':11} {'before':>7} {'after':>7}  after/before  same bits")
    keys = dict.fromkeys((r["case"], r["dtype"], r["shape"], r["method"]) for r in results)
    for key in keys:
        mine = [r for r in results if (r["case"], r["dtype"], r["shape"], r["method"]) == key]
        med = {t: float(np.median([r["gbs"] for r in mine if r["tree"] == t])) for t in trees}
        same = "yes" if len({r["bits"] for r in mine}) == 1 else "NO"
        print(f"{key[0]:5} {key[1]:9} {key[2]:16} {key[3]:11} {med['before']:7.0f} {med['after']:7.0f}  "
              f"{med['after'] / med['before']:12.3f}  {same}")

    sys.path.insert(0, str(HERE))
    from perf_floor import metadata

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "ab_compare.csv", "w", newline="") as f:
        for k, v in metadata().items():
            f.write(f"# {k}: {v}\n")
        w = csv.DictWriter(f, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)


if __name__ == "__main__":
    main()
