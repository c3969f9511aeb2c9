"""tcreduce.distributed on two GPUs with NCCL, checked bit for bit against one GPU.

    torchrun --standalone --nproc_per_node=2 tests/distributed/run_two_gpus.py [--large-only | --no-large]

(also run by tests/test_distributed_gpu.py, marker ``multigpu``). Prints "ALL OK" on rank 0 when every check held;
exits non-zero otherwise. Two parts:

1. Every case of ``dist_workers.gloo_cases(2)`` (and ``exact_cases(2)`` where tcreduce.exact exists), one rank per
   GPU: the ranks' outcomes are gathered and checked on rank 0 against ``dist_workers.expected`` computed on GPU 0
   (the rank-order fp32 fold of per-shard tcreduce.sum; exact: the single-GPU exact sum of the concatenation).
2. Large: 2^31 + 3 fp16 values in all (rank 0: 2^30 + 1, rank 1: 2^30 + 2; 4 GiB), full sum with methods "auto"
   and "shuffle" (and "exact" where available). Rank 0 regenerates both shards on GPU 0: the result must equal the fold of the
   two single-GPU partials bit for bit (exact: the single-GPU exact sum of the 2^31 + 3 values) and the exact sum,
   computed in int64 on the GPU, within the shards' a-priori bounds plus the fold's rounding.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's tcreduce

import dist_workers  # noqa: E402

dist_workers.set_safe_env()  # before torch / NCCL start: NVLink multicast stays off

LARGE = ((1 << 30) + 1, (1 << 30) + 2)  # 2^31 + 3 in all


def _shard_large(r: int, device: int):
    import cupy

    with cupy.cuda.Device(device):
        rng = cupy.random.default_rng(7000 + r)
        return rng.uniform(-0.25, 0.75, LARGE[r], dtype=cupy.float32).astype(cupy.float16)


def _exact_int(x) -> int:
    """sum(x) * 2^24 exactly (fp16 values are integer multiples of 2^-24), in int64 chunks on the GPU."""
    import cupy

    total = 0
    step = 1 << 26
    for i in range(0, x.size, step):
        c = (x[i:i + step].astype(cupy.float64) * float(1 << 24)).astype(cupy.int64)
        total += int(c.sum())  # |c| < 2^24 and 2^26 terms: no overflow
    return total


def _bound_factor(x, method: str) -> float:
    from tcreduce._api import get_plan
    from tcreduce._auto import choose_method
    from tcreduce._device import current_device
    from tcreduce._layout import plan_layout
    from tcreduce.bounds import error_bound_factor

    _, dev = current_device()
    name = method if method != "auto" else choose_method("sum", x, (0,), "float16", dev)
    layout = plan_layout(x.shape, (1,), (0,), 2, x.data.ptr % 16)
    return error_bound_factor(get_plan(name, layout.problem, "float16", "float32", dev))


def large(rank: int, device: int, methods: list[str]) -> list[str]:
    import cupy
    import numpy as np
    import torch.distributed as dist

    import tcreduce
    from tcreduce._dist import fold_ranks

    fails: list[str] = []
    x = _shard_large(rank, device)
    got = {m: tcreduce.distributed.sum(x, method=m).get() for m in methods}
    again = {m: tcreduce.distributed.sum(x, method=m).get() for m in methods}
    mine = _exact_int(x)
    del x
    every = [None, None]
    dist.all_gather_object(every, (got, mine))
    if rank != 0:
        return fails
    for m in methods:
        if not all(dist_workers.same_bits(e[0][m], got[m]) for e in every):
            fails.append(f"large {m}: ranks differ: {[e[0][m] for e in every]}")
        if not dist_workers.same_bits(again[m], got[m]):
            fails.append(f"large {m}: not reproducible run to run")
    with cupy.cuda.Device(device):
        shards = [_shard_large(r, device) for r in range(2)]
        exact_int = [_exact_int(s) for s in shards]
        if exact_int != [e[1] for e in every]:  # rank 0 must have regenerated the very shards the ranks summed
            return fails + [f"large: shards regenerated on GPU {device} differ from the ranks' own"]
        exact = Fraction(sum(exact_int), 1 << 24)
        for m in methods:
            if m == "exact":
                xg = cupy.concatenate(shards)
                want = dist_workers._exact_single(xg, (0,), "float16", "float32").get()
                del xg
                ulp = np.spacing(np.float32(abs(float(want))))
                if abs(Fraction(float(want)) - exact) > Fraction(float(ulp)) / 2:
                    fails.append(f"large exact: {float(want)!r} is not the exact sum {float(exact)!r} rounded")
            else:
                parts = [tcreduce.sum(s, dtype="float32", method=m).get() for s in shards]
                want = fold_ranks(parts)
                abs_sums = [float(cupy.sum(cupy.abs(s), dtype=cupy.float64)) for s in shards]
                b = [_bound_factor(s, m) * a for s, a in zip(shards, abs_sums)]
                e = [abs(float(Fraction(k, 1 << 24))) for k in exact_int]
                u = 2.0 ** -24
                allowed = sum(b) + u / (1 - u) * sum(ei + bi for ei, bi in zip(e, b))
                err = abs(float(Fraction(float(want)) - exact))
                if not err <= allowed:
                    fails.append(f"large {m}: |fold - exact| = {err:.3e} > bound {allowed:.3e}")
            if not dist_workers.same_bits(got[m], np.asarray(want, np.float32)):
                fails.append(f"large {m}: got {got[m]!r}, one GPU gives {want!r}")
            print(f"large {m}: 2^31 + 3 fp16 on 2 GPUs -> {float(got[m])!r} (one GPU: {float(want)!r}; exact "
                  f"{float(exact)!r})", flush=True)
    return fails


def small(rank: int, world: int, device: int) -> list[str]:
    import importlib.util

    import torch.distributed as dist

    cases = dist_workers.gloo_cases(world)
    if importlib.util.find_spec("tcreduce.exact") is not None:
        cases += dist_workers.exact_cases(world)
    else:
        print("tcreduce.exact missing: exact cases not run", flush=True)
    rec = {"outcomes": dist_workers.run_cases(cases, rank, world, device=device)}
    every = [None] * world
    dist.all_gather_object(every, rec)
    if rank != 0:
        return []
    fails = dist_workers.check_outcomes(cases, every, world, device=device)
    print(f"{len(cases)} cases on {world} GPUs, {len(fails)} failed", flush=True)
    return fails


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--large-only", action="store_true")
    ap.add_argument("--no-large", action="store_true")
    args = ap.parse_args()
    from datetime import timedelta
    import importlib.util

    import cupy
    import torch
    import torch.distributed as dist

    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if world != 2:
        print(f"run with --nproc_per_node=2 (world size {world})", flush=True)
        return 2
    torch.cuda.set_device(local)
    cupy.cuda.Device(local).use()
    dist.init_process_group("nccl", timeout=timedelta(seconds=300), device_id=torch.device("cuda", local))
    fails: list[str] = []
    try:
        if not args.large_only:
            fails += small(rank, world, local)
        if not args.no_large:
            methods = ["auto", "shuffle"] + (["exact"] if importlib.util.find_spec("tcreduce.exact") else [])
            fails += large(rank, local, methods)
    except Exception:  # noqa: BLE001
        fails.append(f"rank {rank}: {traceback.format_exc()}")
    every = [None] * world
    dist.all_gather_object(every, fails)
    dist.destroy_process_group()
    if rank == 0:
        allf = [f for fs in every for f in fs]
        for f in allf:
            print("FAIL", f, flush=True)
        print("ALL OK" if not allf else f"{len(allf)} FAILURES", flush=True)
        return 0 if not allf else 1
    return 0 if not every[rank] else 1


if __name__ == "__main__":
    sys.exit(main())
