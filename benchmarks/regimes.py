"""One kernel's speed alone and back to back: where tcreduce's sums and torch.compile's differ by regime.

    python3 benchmarks/regimes.py [--out DIR] [--reps 30] [--cases float16:cols:128,float16:rows:32768]

Nsight Compute timed `shuffle_cols` and inductor's kernel alike at [128, 2^21] fp16 (123.5 against 123.2 us, each
alone after a cache flush; notes/performance.md, session 16) while the segment study, which times calls back to back,
had ours 3% slower. Each case (dtype:form:n, 512 MiB as in the segment study) is timed by every method in these
regimes, GB/s = bytes read / median time:

- ``back_to_back``: the studies' ``experiments.timing.time_gpu`` (batches of calls between CUDA events, one input);
- ``back_to_back_out``: the same with a preallocated output (tcreduce's ``out=``: no allocation per call);
- ``alone``: per sample, a synchronisation, a one-thread kernel spinning about 200 us (so the host's launch path is
  not timed), then one call between CUDA events;
- ``alternating``: back to back over two inputs in turn (each call reads other memory than the last);
- ``back_to_back (again, k)``: the first regime repeated ``--rounds`` times after the others, in the same process
  (does a method's speed move within one process?);
- ``study input``: back to back on an input made as the segment study makes it (``experiments.inputs.random_pool``
  with the study's seed, reshaped; float16 and float32), timed with the study's ``TimingConfig(target_s=0.05)``
  (does the study's input or its timing explain why the study reads some of our kernels 2-5% slower than this
  script's fresh arrays?);
- ``placement k`` (``--placements K``): back to back on K more inputs of the same shape, each allocated after a gap
  of k * (2 MiB + 4 KiB + 256) bytes, so at other addresses and other physical pages (does a method's speed depend on
  where its input lies?).

With ``--pad P`` every input is a view of the case's shape in rows of P more elements (a row pitch that is no power
of two; 16-byte aligned where P x itemsize is a multiple of 16), without the study input and the walk: does the power
of two pitch of 512 MiB first-axis cases (rows 1-4 MiB apart) decide how fast a kernel reads them?

With ``--turns N`` each case then also takes N turns of one call per method, each turn in a new random order
(:func:`experiments.timing.interleaved_samples`, about N x 1 ms at 512 MiB; each sample after a read of twice the
L2's size unless ``--no-scrub``, so that no call finds in L2 what the call before it read): every method meets the
GPU's states of those seconds alike. Per method it prints GB/s at p10 / p50 / p90, the share of samples more than
1.5% slower than its p10 (a slow state), and the correlation of its per-turn times with each other method's (1: they
switch together, as a shared GPU state would make them; about 0: a state of that kernel alone); the samples, in the
order taken, go to regimes_series.csv.

Methods: tcreduce's ``shuffle``, ``tensorcore`` and ``auto``, ``torch.sum`` and ``torch.compile``'d torch.sum
(``experiments.competitors.CompiledSum``, as the studies compile it; the configurations its autotuners kept in this
process are printed and go to the CSV's note column: they differ from process to process) and, for first-axis cases,
read_probe's ``col_walk`` in shuffle_cols' one-item shape (its reads alone). Writes regimes.csv (with the metadata
line).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from read_probe import _write  # noqa: E402

TOTAL_BYTES = 1 << 29


_SPIN = r"""
extern "C" __global__ void tcr_spin(long long cycles) {  // one thread busy for `cycles` SM clocks
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}
"""


def _alone(fn, x, reps: int) -> float:
    """Median seconds of one call alone: a synchronisation, a one-thread kernel that spins about 200 us (the call's
    host launch path is hidden behind it, and the GPU has drained every earlier write), then the call between CUDA
    events."""
    import cupy

    spin = cupy.RawKernel(_SPIN, "tcr_spin")
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
    stream = cupy.cuda.get_current_stream()
    times = []
    for k in range(reps + 2):
        stream.synchronize()
        spin((1,), (1,), (cupy.int64(400_000),))
        e0.record(stream)
        fn(x)
        e1.record(stream)
        e1.synchronize()
        if k >= 2:
            times.append(cupy.cuda.get_elapsed_time(e0, e1) / 1e3)
    return statistics.median(times)


def _alternating(fn, x, y, cfg) -> float:
    """time_gpu over two inputs in turn (x, y, x, ...): back to back, each call reading other memory than the last."""
    from experiments.timing import time_gpu

    return time_gpu(fn, [x, y], cfg).median_s


def _col_walk(rows: int, words: int):
    """read_probe.cu's col_walk<4, 1, 256> over a [rows, words] matrix of 16-byte words at 4 blocks per SM (forced
    through dynamic shared memory): the reads of shuffle_cols' one-item plan with no additions and no output."""
    import cupy

    from read_probe import COL_WALK_SMEM_KIB, walk_module

    name = "probe::col_walk<4, 1, 256>"
    mod, sink = walk_module([name])
    fn = mod.get_function(name)
    kib = COL_WALK_SMEM_KIB[4]
    fn.max_dynamic_shared_size_bytes = kib << 10
    grid = -(-words // 256)
    return lambda a: fn((grid,), (256,), (a, cupy.int64(rows), cupy.int64(words), sink), shared_mem=kib << 10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cases", default="float16:cols:128,float16:cols:256,float32:cols:128,float16:rows:32768")
    ap.add_argument("--placements", type=int, default=0)
    ap.add_argument("--turns", type=int, default=0, help="interleaved turns of one call per method (0: none)")
    ap.add_argument("--no-scrub", action="store_true", help="--turns without the read of twice the L2 before each "
                    "sample (experiments.ceiling.l2_scrubber), as session 43 first ran it")
    ap.add_argument("--pad", type=int, default=0, help="elements added to each row's pitch (the inputs become views)")
    args = ap.parse_args()
    import cupy
    import torch

    import tcreduce
    from experiments.competitors import CompiledSum, torch_stream_guard
    from experiments.env import command_line, device_info, git_info
    from experiments.inputs import case_seed, random_pool
    from experiments.ceiling import l2_scrubber
    from experiments.timing import Timed, TimingConfig, interleaved_samples, time_gpu
    from perf_floor import make_input
    from tcreduce.formats import get_format

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = TimingConfig()
    scrub = None if args.no_scrub or not args.turns else l2_scrubber()
    rows, series_rows = [], []
    for case in args.cases.split(","):
        dtype, form, n_text = case.split(":")
        n = int(n_text)
        other = TOTAL_BYTES // get_format(dtype).itemsize // n
        shape, axis = ((n, other), 0) if form == "cols" else ((other, n), -1)

        def made(seed: int):
            """make_input's (array, torch view, kwargs) of ``shape``, in rows of ``--pad`` more elements."""
            a, ta, kwa = make_input(cupy.random.default_rng(seed), (shape[0], shape[1] + args.pad), dtype, torch)
            return (a[:, :shape[1]], ta[:, :shape[1]], kwa) if args.pad else (a, ta, kwa)

        x, t, kw = made(1)
        y, ty, _ = made(2)
        twin = {id(x): t, id(y): ty}  # the torch view of each CuPy input
        placed, gaps = [], []
        for k in range(args.placements):
            gaps.append(cupy.empty((k + 1) * ((2 << 20) + 4096 + 256), dtype=cupy.uint8))
            xk, tk, _ = made(3 + k)
            placed.append(xk)
            twin[id(xk)] = tk
        study = None
        if dtype in ("float16", "float32") and not args.pad:
            study = random_pool(dtype, TOTAL_BYTES // get_format(dtype).itemsize, seed=case_seed("segments", dtype),
                                low=-0.25, high=0.75).reshape(shape)
            twin[id(study)] = torch.from_dlpack(study)
        compiled = CompiledSum(axis)  # the study's torch.compile'd sum: compiled, autotuned and checked per shape
        with torch_stream_guard():
            compiled.prepare(t)
        picks = compiled.describe(t)  # the configurations inductor's autotuners kept in this process
        print(f"{case:20s} torch.compile kept: {picks}", flush=True)
        res_shape = tcreduce.sum(x, axis=axis, method="shuffle", **kw).shape
        o = cupy.empty(res_shape, dtype=cupy.float32)
        methods = {m: (lambda a, m=m: tcreduce.sum(a, axis=axis, method=m, **kw),
                       lambda a, m=m: tcreduce.sum(a, axis=axis, method=m, out=o, **kw))
                   for m in ("shuffle", "tensorcore", "auto")}
        if form == "cols" and not args.pad:  # shuffle_cols' walk alone (read_probe's col_walk: 4 rows in flight,
            # 4 blocks per SM)
            methods["walk (read_probe)"] = (_col_walk(n, x.nbytes // n // 16), None)
        methods["torch.sum"] = (lambda a, tw=twin: torch.sum(tw[id(a)], dim=axis, dtype=torch.float32), None)
        methods["torch.compile"] = (lambda a, tw=twin: compiled(tw[id(a)]), None)
        for name, (fn, fn_out) in methods.items():
            with torch_stream_guard():
                fn(x)
                regimes = {"back_to_back": time_gpu(fn, [x], cfg).median_s, "alone": _alone(fn, x, args.reps),
                           "alternating": _alternating(fn, x, y, cfg)}
                if fn_out is not None:
                    regimes["back_to_back_out"] = time_gpu(fn_out, [x], cfg).median_s
                for k in range(args.rounds):
                    regimes[f"back_to_back (again, {k + 1})"] = time_gpu(fn, [x], cfg).median_s
                if study is not None and name != "walk (read_probe)":
                    regimes["study input"] = time_gpu(fn, [study], TimingConfig(target_s=0.05)).median_s
                    regimes["fresh input, study timing"] = time_gpu(fn, [x], TimingConfig(target_s=0.05)).median_s
                for k, xk in enumerate(placed):
                    regimes[f"placement {k + 1}"] = time_gpu(fn, [xk], cfg).median_s
            for regime, sec in regimes.items():
                rows.append({"case": case, "method": name, "regime": regime, "us": round(sec * 1e6, 2),
                             "GBps": round(x.nbytes / sec / 1e9, 1), "note": picks if name == "torch.compile" else ""})
                print(f"{case:20s} {name:14s} {regime:26s} {sec * 1e6:9.2f} us {x.nbytes / sec / 1e9:8.1f} GB/s",
                      flush=True)
        if args.turns:
            timed = {name: Timed(fn, [x], torch_stream_guard) for name, (fn, _) in methods.items()}
            series = interleaved_samples(timed, args.turns, before=scrub)
            _print_series(case, series, x.nbytes)
            series_rows += [{"case": case, "turn": k, "method": name, "us": round(sec * 1e6, 2)}
                            for name, times in series.items() for k, sec in enumerate(times)]
        del x, t, y, ty, twin, placed, gaps, study
        cupy.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()
    meta = {**device_info(), **git_info(), "command": command_line()}
    _write(out / "regimes.csv", rows, meta)
    if series_rows:
        _write(out / "regimes_series.csv", series_rows, meta)


def _print_series(case: str, series: dict, nbytes: int, slow: float = 1.015) -> None:
    """Per method of one case's interleaved samples (label -> seconds per call, in the order taken): GB/s at p10 / p50
    / p90, the share of samples more than ``slow`` times its fastest tenth (p10 time), and the correlation of its
    per-turn times with each other method's."""
    import numpy as np

    names = list(series)
    corr = np.corrcoef(np.array([series[n] for n in names]))
    for i, name in enumerate(names):
        times = series[name]
        p10, p50, p90 = np.percentile(times, [10, 50, 90])
        share = float(np.mean(times > slow * p10))
        others = " ".join(f"{other[:10]} {corr[i, j]:+.2f}" for j, other in enumerate(names) if j != i)
        gbs = " / ".join(f"{nbytes / sec / 1e9:7.1f}" for sec in (p10, p50, p90))
        print(f"{case:20s} {name:17s} interleaved GB/s {gbs}  slow {share:4.0%}  r: {others}", flush=True)


if __name__ == "__main__":
    main()
