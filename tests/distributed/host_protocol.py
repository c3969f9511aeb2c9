"""One rank of the host-only protocol test (tests/test_distributed.py): gloo on the CPU, no GPU, no CuPy kernels.
Exercises tcreduce.distributed's collective helpers and the agreement step exactly as sum() calls them."""

from __future__ import annotations

import pickle
from datetime import timedelta
from pathlib import Path


def main(rank: int, world: int, store: str, out_dir: str) -> None:
    import torch
    import torch.distributed as dist
    from numpy.exceptions import AxisError

    from tcreduce import distributed as D
    from tcreduce._dist import agree, encode_row

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    rec: dict = {}
    try:
        group = dist.group.WORLD
        g = D._all_gather(torch, dist, torch.arange(3, dtype=torch.int64) + 10 * rank, group, world, False)
        rec["gathered"] = g.tolist()
        rec["order"] = [int(row[0]) // 10 for row in g]

        def row(shape, error=None):
            if error is not None:
                return encode_row(rank=rank, error=error)
            return encode_row(rank=rank, shape=shape, in_dtype="float16", out_dtype="float32", method="auto",
                              axes=(0,), shard_axis=0)

        table = D._exchange_rows(torch, dist, row((4, 4), AxisError(5, 2) if rank == 1 else None), group, world,
                                 False, 0)
        try:
            agree(table)
            rec["error"] = ("none", "")
        except Exception as e:  # noqa: BLE001
            rec["error"] = (type(e).__name__, str(e))
        ag = agree(D._exchange_rows(torch, dist, row(([2, 0, 5][rank], 4)), group, world, False, 0))
        rec["after"] = (ag.world, ag.shard_lengths, ag.active)
    finally:
        with open(Path(out_dir) / f"rank{rank}.pkl", "wb") as f:
            pickle.dump(rec, f)
        dist.destroy_process_group()
