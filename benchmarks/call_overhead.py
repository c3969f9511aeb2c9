"""Per-call cost of a small reduction (default: a full sum of 2^16 fp16 values), back to back, on one GPU:
``tcreduce.sum``, the build-once handle (``tcreduce.reducer``), CUDA graph replay, ``torch.sum`` and ``cupy.sum``,
and an empty CuPy kernel launch (the launch floor).

    python3 benchmarks/call_overhead.py [--n 65536 ...] [--dtype float16] [--calls 1000] [--reps 21] [--out DIR]
    python3 benchmarks/call_overhead.py --cpu      # no GPU: the Python cost with fake launches (tcreduce.fake_gpu)

GPU mode: everything runs on one non-blocking CuPy stream (torch through an ExternalStream on it). Per sample,
``--calls`` back-to-back calls are bracketed by two CUDA events; ``us_per_call`` is the median over ``--reps`` samples
of the event time divided by the calls (what a stream of calls costs: the larger of the host's issue cost and the GPU's
work), ``host_us`` the host time spent issuing them; every case is timed once per ``--rounds`` round, the cases
interleaved, and the row reports the median round with the lowest and highest. Cases marked "[no graph replay]" launch
the kernels at every call (tcreduce's replay of small calls switched off for that handle or launcher: what a call cost
before it; tcreduce._launch). "graph replay (1 call)": one handle call captured by the caller per ``graph.launch``;
"graph replay (100 calls)": 100 captured calls per launch, per call (the GPU's cost without host dispatch). ``--pool
N``: the same calls round-robin over N buffers, every address new to the graph replay (the throughput study's walk).
Several ``--n``: one set of rows per size (where the GPU's work, not the host, sets the pace). The number to look at:
``us_per_call`` of ``reducer(x, out=out)`` and ``tcreduce.sum(x)`` against ``torch.sum`` (target: the handle's host cost
<= 5 us). Writes call_overhead.csv (with a metadata line) to --out.

CPU mode: host microseconds per call with the kernels and allocations faked (what tcreduce's Python costs before
CuPy's launch), and what CuPy's argument conversion costs for 5 pre-converted arguments (``CIntptr``, what tcreduce
passes now) against 5 numpy scalars (what it passed before).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import statistics
import sys
import time
import timeit
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _gpu(args) -> list[dict]:
    rows: list[dict] = []
    for n in args.n:
        rows += _gpu_one(args, n)
    return rows


def _gpu_one(args, n: int) -> list[dict]:
    import cupy

    import tcreduce
    from tcreduce import _launch

    s = cupy.cuda.Stream(non_blocking=True)
    rows: list[dict] = []
    with s:
        x = cupy.random.default_rng(1).uniform(-0.25, 0.75, n, dtype=cupy.float32).astype(args.dtype)
        out = cupy.empty((), dtype=cupy.float32)
        r = tcreduce.reducer(like=x)
        tcreduce.sum(x)
        tcreduce.sum(x, out=out)
        # the same handle and tcreduce.sum with graph replay off (what every call cost before it; _launch)
        r_kernels = _reducer(x, graphs=False)
        bound = _sum_launches(x, s.ptr)
        sum_kernels = _without_graphs(bound, lambda: tcreduce.sum(x, out=out))

        cases = [("tcreduce.sum(x)", lambda: tcreduce.sum(x)),
                 ("tcreduce.sum(x, out=out)", lambda: tcreduce.sum(x, out=out)),
                 ("tcreduce.sum(x, out=out) [no graph replay]", sum_kernels),
                 ("reducer(x)", lambda: r(x)),
                 ("reducer(x, out=out)", lambda: r(x, out=out)),
                 ("reducer(x, out=out) [no graph replay]", lambda: r_kernels(x, out=out))]
        g1 = _graph(s, lambda: r_kernels(x, out=out), 1)
        g100 = _graph(s, lambda: r_kernels(x, out=out), 100)
        cases += [("graph replay (1 call)", lambda: g1.launch(s)), ("graph replay (100 calls)", lambda: g100.launch(s))]
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.set_stream(torch.cuda.ExternalStream(s.ptr))  # torch launches on our stream from here on
                t = torch.from_dlpack(x)
                cases.append(("torch.sum(t, dtype=float32)", lambda: torch.sum(t, dtype=torch.float32)))
        except ImportError:
            print("torch not installed: torch.sum not measured", file=sys.stderr)
        cases.append(("cupy.sum(x, dtype=float32)", lambda: cupy.sum(x, dtype=cupy.float32)))
        empty = cupy.RawKernel(r'extern "C" __global__ void tcr_empty() {}', "tcr_empty")
        cases.append(("empty CuPy kernel launch", lambda: empty((1,), (32,), ())))
        rows += _time_cases(s, cases, args, n)
        if args.pool:
            rows += _round_robin(s, args, n)
        # the pieces of a call, host cost only (where a call's microseconds go), and the handle on the legacy default
        # stream (which cannot capture: no capture query before a graph launch)
        xp, op = x.data.ptr, out.data.ptr
        graph = next(iter(r._launch.graphs.values())) if r._launch.graphs else None
        null = cupy.cuda.Stream.null
        with null:  # the legacy default stream current for the whole timing (no context switch per call)
            rows += _time_cases(null, [("reducer(x, out=out) on the legacy default stream", lambda: r(x, out=out)),
                                       ("tcreduce.sum(x) on the legacy default stream", lambda: tcreduce.sum(x))],
                                args, n)
        slab = cupy.cuda.alloc(1 << 16)  # a result carved from a slab (no pool allocation): what that costs
        offsets = itertools.cycle(range(0, 1 << 16, 256)).__next__
        cases = [("  piece: cupy.ndarray((), float32)", lambda: cupy.ndarray((), cupy.float32)),
                 ("  piece: cupy.ndarray((), float32, memptr=slab + offset)",
                  lambda: cupy.ndarray((), cupy.float32, memptr=slab + offsets())),
                 ("  piece: slab + offset (a MemoryPointer)", lambda: slab + offsets()),
                  ("  piece: cupy.cuda.runtime.getDevice()", cupy.cuda.runtime.getDevice),
                  ("  piece: cupy.cuda.get_current_stream()", cupy.cuda.get_current_stream),
                  ("  piece: is_capturing(stream)", lambda: _launch.is_capturing(s.ptr)),
                  ("  piece: the handle's checks of x", lambda: (x.shape != r.shape or x.strides != r.strides
                                                                or x.dtype != r.dtype or x.data.ptr & 15)),
                  ("  piece: launch the kernels (x_ptr, out_ptr, stream)", lambda: bound.launch(xp, op, s))]
        if graph is not None:
            cases.append(("  piece: graph_launch(graph, stream)", lambda: _launch.graph_launch(graph, s.ptr)))
        cases += [("  piece: lambda: None", lambda: None)]
        rows += _time_cases(s, cases, args, n)
        # correctness of what was timed: the handles, the graphs and tcreduce.sum agree bit for bit
        want = tcreduce.sum(x)
        for fn in (lambda: g1.launch(s), lambda: r(x, out=out), sum_kernels, lambda: tcreduce.sum(x, out=out)):
            out.fill(float("nan"))
            fn()
            s.synchronize()
            assert cupy.array_equal(want.view(cupy.uint32), out.view(cupy.uint32)), "a timed path differs"
        assert cupy.array_equal(want.view(cupy.uint32), r(x).view(cupy.uint32)), "handle differs"
    return rows


def _reducer(like, graphs: bool = True):
    """A handle for arrays like ``like``: with graph replay of repeated addresses or without (every call launches the
    kernels)."""
    import tcreduce

    r = tcreduce.reducer(like=like)
    if not graphs:
        r._launch.graphs = None
    return r


def _sum_launches(like, stream_ptr: int):
    """The launches tcreduce.sum bound on the stream for arrays like ``like`` (after a call with one)."""
    from tcreduce._api import _PREPARED

    prep = next(p for k, p in _PREPARED.items() if k[0] == "sum" and k[1] == like.shape and p.fast)
    return prep.launcher.bound_for(stream_ptr)


def _without_graphs(bound, fn):
    """``fn`` with graph replay switched off for ``bound`` while it runs (tcreduce.sum launching the kernels)."""

    def call():
        saved, bound.graphs = bound.graphs, None
        try:
            return fn()
        finally:
            bound.graphs = saved

    return call


def _round_robin(s, args, n: int) -> list[dict]:
    """The calls of the throughput study's small sizes: each call a different buffer of ``--pool`` (every address new
    to tcreduce's graph replay, as when inputs rotate to defeat the L2), with and without graph replay."""
    import cupy

    import tcreduce

    xs = [cupy.random.default_rng(2 + i).uniform(-0.25, 0.75, n, dtype=cupy.float32).astype(args.dtype)
          for i in range(args.pool)]
    for x in xs:  # plans and binds once per shape; every buffer has the same shape
        tcreduce.sum(x)
    r, r_kernels = _reducer(xs[0]), _reducer(xs[0], graphs=False)
    out = cupy.empty((), dtype=cupy.float32)
    nxt = itertools.cycle(xs).__next__
    label = f"round-robin over {args.pool} buffers:"
    cases = [(f"{label} tcreduce.sum(x)", lambda: tcreduce.sum(nxt())),
             (f"{label} tcreduce.sum(x) [no graph replay]",
              _without_graphs(_sum_launches(xs[0], s.ptr), lambda: tcreduce.sum(nxt()))),
             (f"{label} reducer(x, out=out)", lambda: r(nxt(), out=out)),
             (f"{label} reducer(x, out=out) [no graph replay]", lambda: r_kernels(nxt(), out=out)),
             (f"{label} cupy.sum(x, dtype=float32)", lambda: cupy.sum(nxt(), dtype=cupy.float32))]
    try:
        import torch

        if torch.cuda.is_available():
            ts = [torch.from_dlpack(x) for x in xs]
            tnext = itertools.cycle(ts).__next__
            cases.append((f"{label} torch.sum(t, dtype=float32)", lambda: torch.sum(tnext(), dtype=torch.float32)))
    except ImportError:
        pass
    rows = _time_cases(s, cases, args, n)
    for rep in range(3):  # the same case again: does its cost move between runs of one process?
        rows += _time_cases(s, [(f"{label} tcreduce.sum(x) (again, {rep + 1})", lambda: tcreduce.sum(nxt()))],
                            args, n)
    return rows


def _time_cases(stream, cases: list, args, n: int) -> list[dict]:
    """One row per (label, fn): us per call and host us per call, timed with events on ``stream``, in ``--rounds``
    interleaved rounds (every case once per round, in order): the host's speed moves within a process (session 19,
    H100: the same case read 9.7 and 12.3 us per call minutes apart), so cases are compared within rounds. Reports the
    median over rounds of each round's median, and the lowest and highest round. Timed from one CPU, as the studies
    time (experiments.timing.pinned: unpinned, the thread's moves between CPUs flip the host's time per call)."""
    from experiments.timing import pinned

    per_round: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in cases}
    with pinned():
        for _ in range(args.rounds):
            for label, fn in cases:
                per = 100 if "100 calls" in label else 1
                gpu_us, host_us = _time(stream, fn, args.calls // per, args.reps)
                per_round[label].append((gpu_us / per, host_us / per))
    rows = []
    for label, _ in cases:
        gpu = [g for g, _ in per_round[label]]
        rows.append(dict(case=label, us_per_call=statistics.median(gpu), us_min=min(gpu), us_max=max(gpu),
                         host_us=statistics.median(h for _, h in per_round[label]), n=n, dtype=args.dtype))
    return rows


def _graph(s, fn, calls: int):
    s.synchronize()
    s.begin_capture()
    try:
        for _ in range(calls):
            fn()
    finally:
        graph = s.end_capture()
    return graph


def _time(s, fn, calls: int, reps: int) -> tuple[float, float]:
    import cupy

    for _ in range(50):
        fn()
    s.synchronize()
    gpu, host = [], []
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(reps):
        e0.record(s)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        e1.record(s)
        e1.synchronize()
        gpu.append(cupy.cuda.get_elapsed_time(e0, e1) * 1e3 / calls)
        host.append((t1 - t0) * 1e6 / calls)
    return statistics.median(gpu), statistics.median(host)


def _cpu(args) -> list[dict]:
    import tcreduce
    from tcreduce.formats import get_format
    from tcreduce.fake_gpu import fake_gpu

    def best(fn, n=20000, reps=9) -> float:
        t = timeit.Timer(fn, timer=time.process_time)
        return min(t.timeit(number=n) / n for _ in range(reps)) * 1e6

    rows = []
    with fake_gpu(record=False) as gpu:
        import cupy

        fmt = get_format(args.dtype)
        raw = fmt.name not in ("float16", "float32")  # bf16 and fp8: raw bits named by format= (no CuPy dtype)
        x = gpu.array((args.n[0],), fmt.raw_dtype if raw else args.dtype)
        kw = dict(format=fmt.name) if raw else {}
        out = gpu.array((), "float32")
        r = tcreduce.reducer(like=x, **kw)
        tcreduce.sum(x, **kw)
        how = f", format={fmt.name!r}" if raw else ""
        for label, fn in [("(fake allocation of the result)", lambda: cupy.ndarray((), np.float32)),
                          (f"tcreduce.sum(x{how})", lambda: tcreduce.sum(x, **kw)),
                          (f"tcreduce.sum(x{how}, out=out)", lambda: tcreduce.sum(x, out=out, **kw)),
                          ("reducer(x)", lambda: r(x)), ("reducer(x, out=out)", lambda: r(x, out=out))]:
            rows.append(dict(case=label, host_us=best(fn), n=args.n[0], dtype=args.dtype))
    rows += _conversion_cost()
    return rows


def _conversion_cost() -> list[dict]:
    """CuPy's conversion of 5 kernel arguments (a real cupy Function whose launch fails at the context check on a
    machine without a GPU, after converting the arguments), minus the same call with no arguments."""
    from cupy.cuda import function as F

    fn = F.Function.__new__(F.Function)

    class _S:
        ptr = 0

    stream = _S()

    def call(a):
        try:
            fn((1, 1, 1), (256, 1, 1), a, 0, stream, False)
        except Exception:
            pass

    def best(a) -> float:
        t = timeit.Timer(lambda: call(a), timer=time.process_time)
        return min(t.timeit(number=20000) / 20000 for _ in range(9)) * 1e6

    base = best(())
    rows = []
    cintptr = getattr(F, "CIntptr", None)
    for label, a in [("5 args as CIntptr (now)", tuple(cintptr(7 + i) for i in range(5)) if cintptr else None),
                     ("5 args as numpy uint64/int64 (before)",
                      (np.uint64(1), np.int64(2), np.uint64(3), np.uint64(4), np.int64(5)))]:
        if a is not None:
            rows.append(dict(case=f"CuPy argument conversion: {label}", host_us=best(a) - base))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[1 << 16], help="elements per call (several: one run each)")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds over the cases (GPU mode)")
    ap.add_argument("--pool", type=int, default=0,
                    help="also time calls round-robin over this many buffers (the throughput study's walk)")
    ap.add_argument("--cpu", action="store_true", help="no GPU: the Python cost with fake launches")
    ap.add_argument("--out", default=None, help="folder for call_overhead.csv (default: print only)")
    args = ap.parse_args()
    rows = _cpu(args) if args.cpu else _gpu(args)
    from experiments.env import device_info, git_info

    meta = {"mode": "cpu (fake GPU)" if args.cpu else "gpu", "device": device_info() if not args.cpu else {},
            "commit": git_info().get("commit"), "command": " ".join(sys.argv)}
    print(json.dumps(meta))
    nan = float("nan")
    print(f"{'case':45s} {'us/call':>9s} {'min':>7s} {'max':>7s} {'host us':>9s}")
    for row in rows:
        us = row.get("us_per_call")
        print(f"{row['case']:45s} {us if us is not None else nan:9.2f} {row.get('us_min', nan):7.2f} "
              f"{row.get('us_max', nan):7.2f} {row['host_us']:9.2f}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "call_overhead.csv", "w", newline="") as f:
            f.write("# " + json.dumps(meta, default=str) + "\n")
            w = csv.DictWriter(f, fieldnames=["case", "us_per_call", "us_min", "us_max", "host_us", "n", "dtype"],
                               extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
