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
        rec["dtensor"] = _dtensor(torch, dist, D, agree, encode_row, rank, world)
    finally:
        with open(Path(out_dir) / f"rank{rank}.pkl", "wb") as f:
            pickle.dump(rec, f)
        dist.barrier()  # every rank done before any tears the group down
        dist.destroy_process_group()


def _dtensor(torch, dist, D, agree, encode_row, rank: int, world: int) -> dict:
    """The DTensor adapter on a host mesh: unwrap a Shard(1) DTensor, rewrap results (reduced: Replicate; not
    reduced: Shard of the right dimension and global shape), refuse other placements."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    mesh = DeviceMesh("cpu", list(range(world)))
    lengths = [4, 4, 2][:world]
    local = torch.full((3, lengths[rank], 5), float(rank))
    dt = DTensor.from_local(local, mesh, [Shard(1)], run_check=False, shape=torch.Size((3, sum(lengths), 5)),
                            stride=(sum(lengths) * 5, 5, 1))
    out: dict = {}
    x, shard_axis, group, rewrap = D._dtensor_parts(torch, dist, dt, 0, None)
    out["unwrap"] = (x.shape == local.shape and bool(torch.equal(x, local)), shard_axis,
                     dist.get_process_group_ranks(group))

    def ag_for(axes, keepdims):
        shape = (3, lengths[rank], 5)
        return agree(D._exchange_rows(torch, dist, encode_row(rank=rank, shape=shape, in_dtype="float16",
                                                              out_dtype="float32", method="auto", axes=axes,
                                                              shard_axis=1, keepdims=keepdims),
                                      group, world, False, 0))

    red = rewrap(torch.zeros(3), ag_for((1, 2), False), False)
    out["reduced"] = (type(red).__name__, [str(p) for p in red.placements], tuple(red.shape))
    kept = rewrap(torch.zeros(lengths[rank]), ag_for((0, 2), False), False)
    out["not_reduced"] = ([str(p) for p in kept.placements], tuple(kept.shape), tuple(kept.to_local().shape))
    kd = rewrap(torch.zeros(1, lengths[rank], 1), ag_for((0, 2), True), True)
    out["keepdims"] = ([str(p) for p in kd.placements], tuple(kd.shape))
    try:
        D._dtensor_parts(torch, dist, dt, 2, None)
        out["bad_shard_axis"] = "none"
    except ValueError as e:
        out["bad_shard_axis"] = str(e)
    rep = DTensor.from_local(torch.zeros(2), mesh, [Replicate()], run_check=False)
    try:
        D._dtensor_parts(torch, dist, rep, 0, None)
        out["replicate"] = "none"
    except ValueError as e:
        out["replicate"] = str(e)
    return out


def run_cases_main(rank: int, world: int, store: str, out_dir: str, cases: list) -> None:
    """One rank running whole tcreduce.distributed.sum calls on the host: HostOps in place of the CUDA side (the
    emulator's bits; tcreduce.exact's stand-in), the real collectives over gloo. Writes rank{rank}.pkl."""
    import torch.distributed as dist

    import dist_workers
    import host_ops
    from tcreduce import distributed as D

    D._OPS = host_ops.HostOps
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    rec: dict = {}
    try:
        rec["outcomes"] = dist_workers.run_cases(cases, rank, world, host=True)
    finally:
        with open(Path(out_dir) / f"rank{rank}.pkl", "wb") as f:
            pickle.dump(rec, f)
        dist.barrier()  # every rank done before any tears the group down
        dist.destroy_process_group()
