"""A/B: does torch.compile's lead at [128, 2^21] (axis 0) and [8192, 32768] (axis -1) fp16 depend on the harness or
on the input buffer? torch.compile, shuffle and tensorcore timed on the segment study's pool view and on read_probe's
fresh array, by the study's time_gpu and by perf_floor.timed, alternating, twice."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import cupy
import tcreduce
from experiments.competitors import CompiledSum, torch_stream_guard
from experiments.inputs import random_pool, case_seed
from experiments.timing import TimingConfig, time_gpu
from perf_floor import timed

total = 512 << 20
pool = random_pool("float16", total // 2, seed=case_seed("segments", "float16"), low=-0.25, high=0.75)
for shape, axis in (((128, 1 << 21), 0), ((8192, 32768), -1)):
    study = pool[: shape[0] * shape[1]].reshape(shape)
    fresh = cupy.random.default_rng(3).uniform(0.0, 1.0, shape, dtype=cupy.float32).astype(cupy.float16)
    import torch
    comp = CompiledSum(axis)
    for rnd in range(2):
        for iname, x in (("study-pool", study), ("fresh", fresh)):
            t = torch.as_tensor(x, device="cuda")
            comp.prepare(t)
            fns = {"torch.compile": (lambda a: comp(a), t),
                   "shuffle": (lambda a: tcreduce.sum(a, axis=axis, method="shuffle"), x),
                   "tensorcore": (lambda a: tcreduce.sum(a, axis=axis, method="tensorcore"), x)}
            for name, (fn, arg) in fns.items():
                with torch_stream_guard():
                    g1 = total / time_gpu(fn, [arg], TimingConfig()).median_s / 1e9
                    g2 = total / timed(lambda: fn(arg), 15, batch=10) / 1e9
                print(f"round {rnd} {shape} {iname:10s} {name:14s} time_gpu {g1:7.0f}  timed {g2:7.0f} GB/s "
                      f"{comp.describe(t) if name == 'torch.compile' else ''}", flush=True)
    del fresh
    cupy.get_default_memory_pool().free_all_blocks()
