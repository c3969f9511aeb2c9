"""GPU timing of one call.

:func:`time_gpu`: CUDA events on CuPy's current stream; warm-up calls first; then many samples, each a batch of
back-to-back calls bracketed by two events (batches of up to 64 calls while one call takes under 0.2 ms, so launch
gaps overlap with the previous call's work); the median sample over the batch size is the time of one call. Small
inputs rotate among several buffers (:func:`experiments.inputs.rotating_views`) so that the bytes touched between two
reads of one buffer exceed the L2 cache (60 MiB on H200, 50 MB on H100) where memory allows. Inputs are random, never
zeros. :func:`time_graph`: the same calls captured into a CUDA graph and replayed (host dispatch removed).
:func:`time_interleaved`: host-bound points (a call under 50 us: the time is the host's dispatch, not the GPU's)
are timed again sample by sample in turns, every method of one size once per turn in a random order, so that the
host's states (which come and go within a second on a lent H200) fall on every method alike; their time is the mean
of the samples' middle 80%. Every back-to-back timing runs with its thread pinned to one CPU (:func:`pinned`,
:func:`timing_cpu`; the CSV header names the CPU): unpinned, the host's time per call flipped between two levels as
the thread moved between CPUs.

Bandwidth: decimal GB/s of the fewest bytes a call must move (each input element read once, each output element
written once); :func:`fill_timing` writes both into a CSV row.
"""

from __future__ import annotations

import functools
import math
import os
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .env import gpu_local_cpus, torch_cuda

__all__ = ["Timing", "TimingConfig", "Timed", "time_gpu", "time_graph", "time_interleaved", "turn_order", "fill_timing",
           "interleaved_samples", "middle_mean", "contenders", "CONTEND_WITHIN", "HOST_BOUND_S", "HOST_SAMPLES",
           "timing_cpu", "pinned"]

HOST_BOUND_S = 5e-5  # calls faster than this are bound by host dispatch: time_interleaved re-times them
# samples per host-bound label in time_interleaved. Until session 26 host-bound points were re-timed in 7 rounds of
# 100 samples per label, round-robin, keeping each label's fastest round: on the H200 of session 26 (pinned) labels of
# one size still read 9 or 12-13 us per call by the rounds they met (bf16 2^11: tensorcore 12.9, auto 9.5; fp16 2^22
# the read kernel 12.6 against 8.9-9.5), and auto's derived table followed them (kahan at fp16 2^22)
HOST_SAMPLES = 300
# GPU-bound labels whose first (back-to-back) time at a point is within this factor of the fastest's are timed again
# together, in interleaved turns after a read of twice the L2 (the segment and throughput studies). Back to back, a
# 512 MiB call settles into one of two speeds about 2.5% apart and keeps it for seconds; which one is luck, so the
# first timings of two kernels of the same speed can differ by 2.5% either way (session 43, benchmarks/regimes.py
# --turns and inductor_replica.py: in turns each call's speed is drawn afresh, uncorrelated with the last call's)
CONTEND_WITHIN = 1.10


@dataclass(frozen=True)
class Timing:
    median_s: float
    p10_s: float
    p90_s: float
    reps: int
    batch: int
    buffers: int


@dataclass(frozen=True)
class TimingConfig:
    """How hard :func:`time_gpu` tries: about ``target_s`` of timed GPU work per measurement, within
    [min_reps, max_reps] samples after ``warmup`` calls."""

    target_s: float = 0.1
    warmup: int = 3
    min_reps: int = 5
    max_reps: int = 100
    batch_target_s: float = 2e-4
    max_batch: int = 64
    slow_s: float = 0.02  # above this per call: warm up once and take min_reps samples

    @staticmethod
    def for_mode(mode: str) -> "TimingConfig":
        if mode == "full":
            return TimingConfig()
        return TimingConfig(target_s=0.02, warmup=2, min_reps=3, max_reps=20, max_batch=32)


@functools.lru_cache(maxsize=1)
def timing_cpu() -> int | None:
    """The one CPU the timing thread runs on while it times (:func:`pinned`): ``TCREDUCE_TIMING_CPU`` when set (a CPU
    number this process may run on, else ValueError; "none" turns pinning off), else the last of the GPU's local CPUs
    (sysfs) this process may run on, else the last CPU it may run on; None where the OS cannot pin threads. Why: on a
    lent H200 (one NUMA node, 16 vCPUs, benchmarks/host_probe.py, session 25) back-to-back calls of a 2^12 fp16 sum from
    an unpinned process read 4.8 us per call in some rounds and 6-7 us in others, a few seconds each, as the thread
    moved between CPUs; pinned to one CPU every round read 4.6-5.0 us. Unpinned, a study's host-bound points took
    whichever state their rounds met."""
    setting = os.environ.get("TCREDUCE_TIMING_CPU", "").strip().lower()
    if setting == "none" or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if setting:
        if not setting.isdigit() or int(setting) not in allowed:
            raise ValueError(f"TCREDUCE_TIMING_CPU={setting!r}: set it to one of the CPUs this process may run on "
                             f"({', '.join(map(str, allowed))}), or to 'none' to time unpinned")
        return int(setting)
    local = set(gpu_local_cpus())  # empty without a GPU or its sysfs entry: any CPU this process may use
    return ([cpu for cpu in allowed if cpu in local] or allowed)[-1]


@contextmanager
def pinned() -> Iterator[None]:
    """The calling thread on :func:`timing_cpu` alone for the block, its former CPUs restored after (Linux pins one
    thread at a time; threads it starts inside the block inherit the pin)."""
    cpu = timing_cpu()
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def time_gpu(fn: Callable[[Any], Any], inputs: Sequence[Any], cfg: TimingConfig = TimingConfig()) -> Timing:
    """Median device time of one ``fn(input)`` call, rotating through ``inputs`` (see the module docstring), timed
    from one CPU (:func:`pinned`)."""
    with pinned():
        return _time_gpu(fn, inputs, cfg)


def _time_gpu(fn: Callable[[Any], Any], inputs: Sequence[Any], cfg: TimingConfig) -> Timing:
    import cupy

    stream = cupy.cuda.get_current_stream()
    nb = len(inputs)
    if nb == 0:
        raise ValueError("time_gpu needs at least one input")
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
    e0.record(stream)
    fn(inputs[0])  # first call: compiles, plans, allocates
    e1.record(stream)
    e1.synchronize()
    t_first = cupy.cuda.get_elapsed_time(e0, e1) / 1e3
    k = 1
    if t_first < cfg.slow_s:
        for _ in range(cfg.warmup):
            fn(inputs[k % nb])
            k += 1
    e0.record(stream)
    fn(inputs[k % nb])
    k += 1
    e1.record(stream)
    e1.synchronize()
    t1 = max(cupy.cuda.get_elapsed_time(e0, e1) / 1e3, 1e-7)
    if t1 >= cfg.slow_s:
        batch, reps = 1, cfg.min_reps
    else:
        batch = int(min(cfg.max_batch, max(1, math.ceil(cfg.batch_target_s / t1))))
        reps = int(min(cfg.max_reps, max(cfg.min_reps, cfg.target_s / (t1 * batch))))
    events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)]
    for s, e in events:
        s.record(stream)
        for _ in range(batch):
            fn(inputs[k % nb])
            k += 1
        e.record(stream)
    events[-1][1].synchronize()
    times = np.array([cupy.cuda.get_elapsed_time(s, e) / 1e3 / batch for s, e in events])
    return Timing(float(np.median(times)), float(np.percentile(times, 10)), float(np.percentile(times, 90)), reps,
                  batch, min(nb, k))


def time_graph(fn: Callable[[Any], Any], inputs: Sequence[Any], cfg: TimingConfig = TimingConfig(),
               lib: str = "cupy", max_calls: int = 256) -> Timing:
    """Median device time of one ``fn(input)`` call inside a CUDA graph: up to ``max_calls`` calls (rotating through
    ``inputs``) captured once on a fresh stream, the graph replayed many times between CUDA events. Host dispatch
    (Python, launch API) is out of the number: this is what the kernels cost back to back on the GPU. ``lib``:
    "cupy" (CuPy stream capture; tcreduce, cupy.sum and RawKernel launches run on CuPy's current stream) or "torch"
    (torch.cuda.graph). Raises if the calls cannot be captured."""
    if lib == "torch":
        return _time_graph_torch(fn, inputs, cfg, max_calls)
    import cupy

    nb = len(inputs)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        for i in range(max(2, cfg.warmup)):
            fn(inputs[i % nb])
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record(s)
        fn(inputs[0])
        e1.record(s)
        e1.synchronize()
        t1 = max(cupy.cuda.get_elapsed_time(e0, e1) / 1e3, 1e-7)
        per = int(min(max_calls, max(min(nb, max_calls), math.ceil(5 * cfg.batch_target_s / t1), 1)))
        s.begin_capture()
        try:
            for j in range(per):
                fn(inputs[j % nb])
        finally:
            graph = s.end_capture()
        graph.launch(s)
        s.synchronize()
        e0.record(s)
        graph.launch(s)
        e1.record(s)
        e1.synchronize()
        t_rep = max(cupy.cuda.get_elapsed_time(e0, e1) / 1e3, 1e-7)
        reps = int(min(cfg.max_reps, max(cfg.min_reps, cfg.target_s / t_rep)))
        events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)]
        for a, b in events:
            a.record(s)
            graph.launch(s)
            b.record(s)
        events[-1][1].synchronize()
        times = np.array([cupy.cuda.get_elapsed_time(a, b) / 1e3 / per for a, b in events])
    del graph
    return Timing(float(np.median(times)), float(np.percentile(times, 10)), float(np.percentile(times, 90)), reps,
                  per, min(nb, per))


def _time_graph_torch(fn, inputs, cfg: TimingConfig, max_calls: int) -> Timing:
    torch = torch_cuda()
    if torch is None:
        raise RuntimeError("torch is not available")
    nb = len(inputs)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(max(3, cfg.warmup)):
            fn(inputs[i % nb])
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn(inputs[0])
        e1.record()
    torch.cuda.current_stream().wait_stream(side)
    e1.synchronize()
    t1 = max(e0.elapsed_time(e1) / 1e3, 1e-7)
    per = int(min(max_calls, max(min(nb, max_calls), math.ceil(5 * cfg.batch_target_s / t1), 1)))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for j in range(per):
            fn(inputs[j % nb])
    graph.replay()
    torch.cuda.synchronize()
    e0.record()
    graph.replay()
    e1.record()
    e1.synchronize()
    t_rep = max(e0.elapsed_time(e1) / 1e3, 1e-7)
    reps = int(min(cfg.max_reps, max(cfg.min_reps, cfg.target_s / t_rep)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in events:
        a.record()
        graph.replay()
        b.record()
    events[-1][1].synchronize()
    times = np.array([a.elapsed_time(b) / 1e3 / per for a, b in events])
    del graph
    return Timing(float(np.median(times)), float(np.percentile(times, 10)), float(np.percentile(times, 90)), reps,
                  per, min(nb, per))


@dataclass(frozen=True)
class Timed:
    """A label's calls for :func:`time_interleaved`: ``fn(input)`` over ``inputs`` in turn, each sample of calls
    inside ``context()`` (a competitor's: torch on CuPy's stream), entered and left outside the sample's events."""

    fn: Callable[[Any], Any]
    inputs: Sequence[Any]
    context: Callable[[], Any] = nullcontext


def time_interleaved(first: dict[str, Timing], timed: dict[str, Timed], samples: int = HOST_SAMPLES,
                     below_s: float = HOST_BOUND_S, seed: int = 0,
                     before: Callable[[], None] | None = None) -> dict[str, Timing]:
    """The timings of one size: ``first`` (label -> :func:`time_gpu`'s Timing, which warmed the label up) where its
    median is ``below_s`` or more; the host-bound labels of ``timed`` re-timed together instead, ``samples`` turns of
    one sample each (one batch of back-to-back calls between two CUDA events, the same batch for every label: the
    largest of their first timings' batches, so that the cost of a label's first call after another label's, about a
    cold call's, weighs the same on each), each turn in a new random order (:func:`turn_order`), from one pinned CPU.
    All of them are taken over the same second or so, so the host's states, which last fractions of a second, fall on
    every label alike, and every label follows every other as often (a call after torch's code runs slower than after
    tcreduce's). Each label's time is the mean of its samples from the 10th to the 90th percentile (``median_s``; p10
    and p90 beside it): on a host that flips between two states the samples have two modes, whose median jumps between
    them for labels of the same cost, while their mean is the time per call of a long stream of calls. With
    ``below_s = math.inf`` every label of ``timed`` is re-timed (the segment study's contenders: GPU-bound calls whose
    back-to-back speed can settle into one of two levels for seconds). ``before``: see :func:`interleaved_samples`."""
    labels = [label for label, t in first.items() if t.median_s < below_s and label in timed]
    out = dict(first)
    if not labels:
        return out
    batch = max(first[label].batch for label in labels)
    series = interleaved_samples({label: timed[label] for label in labels}, samples, batch, seed, before)
    for label in labels:
        mean, p10, p90 = middle_mean(series[label])
        out[label] = Timing(mean, p10, p90, samples, batch, min(len(timed[label].inputs), samples * batch))
    return out


def contenders(first: dict[str, Timing], within: float, at_least_s: float = 0.0) -> list[str]:
    """The labels of ``first`` whose median is at least ``at_least_s`` and within ``within`` times the fastest such
    label's (none if no label reaches ``at_least_s``): the GPU-bound labels close enough to the fastest that a
    back-to-back state (two speeds about 2.5% apart that a 512 MiB kernel can keep for seconds) could reorder them."""
    slow_enough = {label: t.median_s for label, t in first.items() if t.median_s >= at_least_s}
    if not slow_enough:
        return []
    fastest = min(slow_enough.values())
    return [label for label, s in slow_enough.items() if s <= within * fastest]


def middle_mean(times: np.ndarray) -> tuple[float, float, float]:
    """(mean of the samples from the 10th to the 90th percentile, p10, p90) of one label's interleaved samples (any
    unit): :func:`time_interleaved`'s time per call."""
    p10, p90 = np.percentile(times, 10), np.percentile(times, 90)
    return float(times[(times >= p10) & (times <= p90)].mean()), float(p10), float(p90)


def interleaved_samples(timed: dict[str, Timed], samples: int, batch: int = 1, seed: int = 0,
                        before: Callable[[], None] | None = None) -> dict[str, np.ndarray]:
    """Seconds per call of each label's ``samples`` samples, in the order taken: ``samples`` turns, each taking one
    sample of every label of ``timed`` (``batch`` back-to-back calls between two CUDA events, the label's inputs in
    turn) in a new random order (:func:`turn_order`), from one pinned CPU (:func:`pinned`). ``before()``, when given,
    runs on the same stream before each sample, outside its events (e.g. :func:`experiments.ceiling.l2_scrubber`:
    labels that share one input far larger than L2 would otherwise find in L2 what the label before them read
    last)."""
    import cupy

    labels = list(timed)
    events: dict[str, list] = {label: [] for label in labels}
    k = dict.fromkeys(labels, 0)
    rng = np.random.default_rng(seed)
    with pinned():
        stream = cupy.cuda.get_current_stream()
        for _ in range(samples):
            for label in turn_order(labels, rng):
                t = timed[label]
                s, e = cupy.cuda.Event(), cupy.cuda.Event()
                if before is not None:
                    before()
                with t.context():
                    s.record(stream)
                    for _ in range(batch):
                        t.fn(t.inputs[k[label] % len(t.inputs)])
                        k[label] += 1
                    e.record(stream)
                events[label].append((s, e))
        stream.synchronize()
    return {label: np.array([cupy.cuda.get_elapsed_time(s, e) / 1e3 / batch for s, e in events[label]])
            for label in labels}


def turn_order(labels: list[str], rng: np.random.Generator) -> list[str]:
    """The order of one turn of :func:`time_interleaved`: ``labels`` in a random order drawn from ``rng``."""
    return [labels[i] for i in rng.permutation(len(labels))]


def fill_timing(row: dict, t: "Timing", ceiling_gbs: float | None = None) -> None:
    """Write a Timing into a CSV row: time_us, p10_us, p90_us, reps, batch, and, when the row has "bytes",
    gbs (bytes / median time) and frac_ceiling."""
    row.update(time_us=t.median_s * 1e6, p10_us=t.p10_s * 1e6, p90_us=t.p90_s * 1e6, reps=t.reps, batch=t.batch)
    if "bytes" in row:
        row["gbs"] = row["bytes"] / t.median_s / 1e9
        row["frac_ceiling"] = row["gbs"] / ceiling_gbs if ceiling_gbs else None
