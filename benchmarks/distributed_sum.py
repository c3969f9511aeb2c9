"""Benchmark of tcreduce.distributed.sum: a global fp16 sum of WORLD x 2^30 values on WORLD GPUs (one shard of
2^30 per GPU) against tcreduce.sum of 2^30 values on one GPU, and the collectives' share of the time.

    torchrun --standalone --nproc_per_node=2 benchmarks/distributed_sum.py [--log2n 30] [--iters 30] \
        [--method auto] [--out DIR]

(--nproc_per_node=1 runs the same code on one GPU.) NVLink multicast stays off: NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 are forced before torch starts.

Every timed call is preceded by a barrier and a device synchronisation (all ranks start together), timed with CUDA
events on the current stream of each rank; the medians over ``--iters`` calls are reported, the slowest rank's for
each. Rows (milliseconds):

- local: tcreduce.sum of this rank's 2^30 shard (the one-GPU baseline, no communication).
- distributed: tcreduce.distributed.sum of the global array (metadata check, local partial, partial all_gather,
  rank-order fold), as committed (the partial launched after the metadata exchange).
- torch.sum + all_reduce: what a user would write without tcreduce, ``torch.sum(x, dtype=float32)`` then
  ``dist.all_reduce`` (NCCL's order of additions; the competitor).
- metadata: the metadata all_gather alone (one int64 row a rank, read on the host), as sum() issues it.
- partials: the all_gather of one fp32 partial a rank alone, as sum() issues it, plus the fold.
- collective share = (metadata + partials) / distributed; overhead = distributed - local.

Writes distributed_sum_2pLOG2N.json (numbers and metadata) under --out on rank 0.
"""

from __future__ import annotations

import os

for _k, _v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}.items():
    os.environ[_k] = _v  # forced (never enable NVLink multicast on the shared machines), before torch loads NCCL

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _time(fn, iters: int, warmup: int = 3) -> tuple[float, object]:
    """Median milliseconds of ``fn()`` over ``iters`` calls, each started together on every rank."""
    import torch
    import torch.distributed as dist

    out = None
    for _ in range(warmup):
        out = fn()
    torch.cuda.synchronize()
    times = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        out = fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return float(np.median(times)), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log2n", type=int, default=30, help="log2 of the values per GPU (default 30)")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--method", default="auto")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--pieces", action="store_true",
                    help="also time the call's pieces alone: the partials' gather, the fold, torch's all_gather and "
                         "all_reduce of one fp32, and the host time of a call and of its preparation")
    args = ap.parse_args()

    from datetime import timedelta

    import cupy
    import torch
    import torch.distributed as dist

    import tcreduce
    from tcreduce import distributed as D
    from tcreduce._dist import encode_row

    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    cupy.cuda.Device(local).use()
    dist.init_process_group("nccl", timeout=timedelta(seconds=300), device_id=torch.device("cuda", local))
    group = dist.group.WORLD
    n = 1 << args.log2n
    rng = cupy.random.default_rng(100 + rank)
    x = torch.from_dlpack(rng.uniform(-0.25, 0.75, n, dtype=cupy.float32).astype(cupy.float16))
    cupy.get_default_memory_pool().free_all_blocks()

    t_local, s_local = _time(lambda: tcreduce.sum(x, method=args.method), args.iters)
    t_dist, s_dist = _time(lambda: tcreduce.distributed.sum(x, method=args.method), args.iters)

    def torch_sum_all_reduce():
        s = torch.sum(x, dtype=torch.float32)
        dist.all_reduce(s)
        return s

    t_torch, _ = _time(torch_sum_all_reduce, args.iters)
    row = encode_row(rank=rank, in_dtype="float16", out_dtype="float32", method=args.method, axes=(0,),
                     shard_axis=0, shape=(n,))
    t_meta, _ = _time(lambda: D._exchange_rows(torch, dist, row, group, world, True, local), args.iters)
    shard = cupy.from_dlpack(x)
    prepared = D._CudaOps.prepare_partial(shard, (0,), args.method)  # as sum() keeps it
    prepared.launch(shard)

    def partials():
        g = prepared.gather(torch, dist, group, world, True, local)
        return D._fold_cupy(g, tuple(range(world)), "float32")

    t_part, _ = _time(partials, args.iters)

    pieces = {}
    if args.pieces:
        import time

        g_pre = prepared.gather(torch, dist, group, world, True, local).copy()
        scalar = torch.ones((), dtype=torch.float32, device="cuda")

        def host_ms(fn, iters=args.iters):
            ts = []
            for _ in range(iters):
                dist.barrier()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize()
            return float(np.median(ts))

        def torch_all_gather():
            out = torch.empty(world, dtype=torch.float32, device="cuda")
            dist.all_gather_into_tensor(out, scalar)
            return out

        pieces = {
            "gather_ms": _time(lambda: prepared.gather(torch, dist, group, world, True, local), args.iters)[0],
            "fold_ms": _time(lambda: D._fold_cupy(g_pre, tuple(range(world)), "float32"), args.iters)[0],
            "torch_all_gather_ms": _time(torch_all_gather, args.iters)[0],
            "torch_all_reduce_ms": _time(lambda: dist.all_reduce(scalar), args.iters)[0],
            "host_call_ms": host_ms(lambda: tcreduce.distributed.sum(x, method=args.method)),
            "host_prepare_cached_ms": host_ms(lambda: D._CudaOps.prepare_partial(shard, (0,), args.method)),
            "host_prepare_new_ms": host_ms(lambda: D._PreparedPartial(shard, (0,), args.method)),
            "host_local_sum_ms": host_ms(lambda: tcreduce.sum(x, method=args.method)),
        }
    mine = [t_local, t_dist, t_meta, t_part, t_torch] + list(pieces.values())
    every = [None] * world
    dist.all_gather_object(every, mine)
    sums = [None] * world
    dist.all_gather_object(sums, (float(s_dist), int(s_dist.float().view(torch.int32).item())))
    dist.destroy_process_group()
    if rank != 0:
        return 0
    worst = np.max(np.asarray(every), axis=0)  # the slowest rank sets the pace
    t_local, t_dist, t_meta, t_part, t_torch = (float(v) for v in worst[:5])
    pieces = dict(zip(pieces, (float(v) for v in worst[5:])))
    gib = world * n * 2 / 2 ** 30
    res = dict(world=world, values_per_gpu=n, method=args.method, local_ms=t_local, distributed_ms=t_dist,
               metadata_ms=t_meta, partials_ms=t_part, collective_share=(t_meta + t_part) / t_dist,
               overhead_ms=t_dist - t_local, distributed_gbps=world * n * 2 / (t_dist * 1e-3) / 1e9,
               local_gbps=n * 2 / (t_local * 1e-3) / 1e9, torch_all_reduce_ms=t_torch,
               distributed_over_torch=t_dist / t_torch, per_rank_ms=every,
               per_rank_columns=["local", "distributed", "metadata", "partials", "torch_all_reduce", *pieces],
               same_bits_on_every_rank=len({b for _, b in sums}) == 1, global_sum=sums[0][0], pieces=pieces)
    res["meta"] = dict(device=torch.cuda.get_device_name(local), torch=torch.__version__, cupy=cupy.__version__,
                       nccl=str(torch.cuda.nccl.version()),
                       date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       command=" ".join(sys.argv), env={k: os.environ[k] for k in (
                           "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")})
    print(f"{res['meta']['device']} x {world}, fp16, method {args.method}, medians of {args.iters} (slowest rank)")
    print(f"  local        tcreduce.sum of 2^{args.log2n} on one GPU      {t_local:8.3f} ms  "
          f"({res['local_gbps']:7.1f} GB/s)")
    print(f"  distributed  {world} x 2^{args.log2n} ({gib:.0f} GiB) on {world} GPUs      {t_dist:8.3f} ms  "
          f"({res['distributed_gbps']:7.1f} GB/s in all)")
    print(f"  torch        torch.sum(float32) + dist.all_reduce  {t_torch:8.3f} ms  (distributed / torch "
          f"{t_dist / t_torch:.3f})")
    print(f"  metadata     all_gather of the check row          {t_meta:8.3f} ms")
    print(f"  partials     all_gather of the fp32 partials+fold {t_part:8.3f} ms")
    print(f"  collective share {res['collective_share']:.1%}, overhead over one GPU {res['overhead_ms']:.3f} ms; "
          f"bitwise equal on every rank: {res['same_bits_on_every_rank']}")
    for k, v in pieces.items():
        print(f"  piece {k:24s} {v:8.3f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"distributed_sum_2p{args.log2n}.json").write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
