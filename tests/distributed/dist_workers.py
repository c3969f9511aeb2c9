"""Multi-process harness for the tcreduce.distributed tests: cases, rank workers (spawned with
torch.multiprocessing), and the expected results computed on one process.

Used by tests/test_distributed.py (CPU, gloo, protocol only), tests/test_distributed_gpu.py (gloo sharing one GPU,
NCCL with world size 1) and tests/distributed/run_two_gpus.py (torchrun, NCCL, two GPUs). Importable without torch,
CuPy or a GPU; each function imports what it needs.
"""

from __future__ import annotations

import os
import pickle
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

import numpy as np

from tcreduce.testing import same_bits, to_numpy as to_host  # noqa: F401  (run_two_gpus.py uses both too)

# NVLink multicast stays off on the shared GPU machines (never enable it): forced, not defaulted.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def set_safe_env() -> None:
    os.environ.update(SAFE_ENV)


# ---------------------------------------------------------------------------------------------------------------- cases

@dataclass(frozen=True)
class Case:
    """One call of tcreduce.distributed.sum on every rank.

    shape: the global shape with ``sum(lengths)`` at ``shard_axis``; lengths: each rank's length along it (group
    ranks, in order). view: applied to every shard before the call ("step": ``[..., ::2]``, "offset": ``[..., 1:]``,
    on the last axis, which then must not be the shard axis). kind: "torch" or "cupy" shards. overrides: (rank,
    field, value) for one rank only: "axis", "out_dtype", "keepdims", "method", "shard_axis", "dtype" (the shard's),
    "extra" (the shard gets one more column on the last axis), "kind" ("numpy": a host array).
    group: "world", or "even" (ranks 0, 2, ... of the world; the others do not call). stream: "torch" (call under a
    new torch stream) or "cupy" (under a new CuPy stream) or None. expect_error: exception class name every rank must
    raise with one message containing ``expect_in_msg``.
    """

    name: str
    shape: tuple[int, ...]
    lengths: tuple[int, ...]
    dtype: str = "float16"
    shard_axis: int = 0
    axis: Any = None
    out_dtype: Any = None
    keepdims: bool = False
    method: str = "auto"
    view: Optional[str] = None
    kind: str = "torch"
    overrides: tuple = ()
    group: str = "world"
    stream: Optional[str] = None
    seed: int = 0
    expect_error: Optional[str] = None
    expect_in_msg: str = ""
    special: Optional[str] = None  # "nan_inf": NaN in one shard, +inf/-inf in others

    def arg(self, rank: int, name: str, default: Any) -> Any:
        for r, f, v in self.overrides:
            if r == rank and f == name:
                return v
        return default

    def members(self, world: int) -> list[int]:
        return list(range(world)) if self.group == "world" else list(range(0, world, 2))


def gloo_cases(world: int = 3) -> list[Case]:
    """Cases for ``world`` ranks (3 by default; lengths are given for 3 and cut or padded for others)."""
    def L(*ls):  # noqa: E743
        ls = list(ls)[:world] + [ls[-1]] * max(0, world - len(ls))
        return tuple(ls)

    def tot(ls):
        return sum(ls)

    cases = []
    for method in ("auto", "tensorcore", "shuffle", "wmma", "cub"):
        ls = L(1000, 257, 4097)
        cases.append(Case(f"full-{method}", (tot(ls),), ls, method=method, seed=1))
    ls = L(300, 0, 17)  # an empty shard
    cases += [
        Case("full-empty-shard", (tot(ls),), ls, method="shuffle", seed=2),
        Case("full-f32", (tot(L(5000, 3, 70000)),), L(5000, 3, 70000), dtype="float32", method="shuffle", seed=3),
        Case("full-f32-auto", (tot(L(1, 2, 3)),), L(1, 2, 3), dtype="float32", seed=4),
        Case("all-empty", (0,), L(0, 0, 0), method="shuffle", seed=5),
        Case("rows-reduce-shard", (tot(L(64, 5, 100)), 33), L(64, 5, 100), axis=0, seed=6),
        Case("rows-reduce-shard-keepdims-f64", (tot(L(64, 5, 100)), 33), L(64, 5, 100), axis=0, keepdims=True,
             out_dtype="float64", method="shuffle", seed=7),
        Case("rows-reduce-all-f16out", (tot(L(40, 1, 9)), 257), L(40, 1, 9), axis=None, out_dtype="float16",
             method="tensorcore", seed=8),
        Case("rows-not-reduced", (tot(L(100, 0, 31)), 300), L(100, 0, 31), axis=1, seed=9),
        Case("rows-not-reduced-keepdims", (tot(L(100, 7, 31)), 300), L(100, 7, 31), axis=-1, keepdims=True,
             out_dtype="float16", method="shuffle", seed=10),
        Case("shard-axis-1-reduced", (6, tot(L(50, 0, 1000)), 4), L(50, 0, 1000), shard_axis=1, axis=(1, 2),
             method="shuffle", seed=11),
        Case("shard-axis-neg-reduced", (6, 5, tot(L(50, 60, 2))), L(50, 60, 2), shard_axis=-1, axis=-1,
             method="tensorcore", seed=12),
        Case("shard-axis-1-not-reduced", (7, tot(L(3, 4, 5)), 9), L(3, 4, 5), shard_axis=1, axis=(0, 2),
             keepdims=True, seed=13),
        Case("view-step", (tot(L(70, 30, 5)), 2 * 129), L(70, 30, 5), axis=None, view="step", method="shuffle",
             seed=14),
        Case("view-offset", (tot(L(70, 30, 5)), 301), L(70, 30, 5), axis=0, view="offset", seed=15),
        Case("cupy-shards", (tot(L(999, 1, 77)),), L(999, 1, 77), kind="cupy", method="tensorcore", seed=16),
        Case("torch-stream", (tot(L(2000, 3000, 1)), 16), L(2000, 3000, 1), axis=0, stream="torch", seed=17),
        Case("cupy-stream", (tot(L(2000, 3000, 1)), 16), L(2000, 3000, 1), axis=(0, 1), stream="cupy",
             kind="cupy", seed=18),
        Case("nan-inf", (tot(L(500, 500, 500)), 4), L(500, 500, 500), axis=0, special="nan_inf", method="shuffle",
             seed=19),
        Case("dtensor-reduced", (tot(L(4, 4, 2)), 6), L(4, 4, 2), axis=0, kind="dtensor", method="shuffle", seed=21),
        Case("dtensor-not-reduced", (5, tot(L(4, 4, 2)), 3), L(4, 4, 2), shard_axis=1, axis=(0, 2),
             kind="dtensor", seed=22),
        Case("dtensor-not-reduced-keepdims", (5, tot(L(4, 4, 2)), 3), L(4, 4, 2), shard_axis=1, axis=0,
             keepdims=True, kind="dtensor", seed=23),
    ]
    if world >= 3:
        cases.append(Case("subgroup-even", (tot(L(40, 50, 60)), 3), L(40, 50, 60), axis=0, group="even",
                          method="shuffle", seed=20))
    ls = L(10, 20, 30)
    shape = (tot(ls), 8)
    err = dict(shape=shape, lengths=ls, axis=0, seed=30)
    last = world - 1
    cases += [
        Case("err-bad-axis-one-rank", overrides=((last, "axis", 5),), expect_error="AxisError",
             expect_in_msg=f"failed on rank {last}", **err),
        Case("err-axis-differs", overrides=((0, "axis", 1),), expect_error="ValueError",
             expect_in_msg="disagree on axis", **err),
        Case("err-method-differs", overrides=((last, "method", "tensorcore"),), method="shuffle",
             expect_error="ValueError", expect_in_msg="disagree on method", **err),
        Case("err-unknown-method-all", method="no_such_method", expect_error="ValueError",
             expect_in_msg="failed on rank 0", **err),
        Case("err-dtype-differs", overrides=((last, "dtype", "float32"),), method="shuffle",
             expect_error="ValueError", expect_in_msg="disagree on the dtype", **err),
        Case("err-shape-off-axis", overrides=((last, "extra", 1),), expect_error="ValueError",
             expect_in_msg="shapes disagree off shard_axis", **err),
        Case("err-shard-axis-differs", overrides=((last, "shard_axis", 1),), expect_error="ValueError",
             expect_in_msg="disagree on shard_axis", **err),
        Case("err-keepdims-differs", overrides=((0, "keepdims", True),), expect_error="ValueError",
             expect_in_msg="disagree on keepdims", **err),
        Case("err-out-dtype-differs", overrides=((last, "out_dtype", "float64"),), expect_error="ValueError",
             expect_in_msg="disagree on dtype", **err),
        Case("err-bad-out-dtype-all", out_dtype="int32", expect_error="TypeError", expect_in_msg="failed on rank 0",
             **err),
        Case("err-f32-on-wmma", dtype="float32", method="wmma", expect_error="TypeError",
             expect_in_msg="takes float16", **err),
        Case("err-host-array-one-rank", overrides=((last, "kind", "numpy"),), expect_error="TypeError",
             expect_in_msg=f"failed on rank {last}", **err),
        Case("err-bad-shard-axis-all", shard_axis=2, expect_error="AxisError", expect_in_msg="shard_axis", **err),
        # after the errors the group must still work: the same healthy call once more
        Case("after-errors", **err),
    ]
    if world == 1:  # disagreement needs two ranks
        cases = [c for c in cases if "disagree" not in c.expect_in_msg]
    return cases


def exact_cases(world: int = 3) -> list[Case]:
    """method="exact" cases (need tcreduce.exact): bitwise the single-GPU exact result."""
    dup = {"full-tensorcore", "full-shuffle", "full-wmma", "full-cub"}  # full-auto stands for them
    out = [replace(c, name="exact-" + c.name, method="exact") for c in gloo_cases(world)
           if not c.expect_error and c.name not in dup]
    ls = tuple([123457] + [0] * (world - 2) + [98765])[:world] if world > 1 else (123457,)
    out.append(Case("exact-cancel", (sum(ls),), ls, method="exact", special="cancel", seed=40))
    return out


# ----------------------------------------------------------------------------------------------------------------- data

def global_host(case: Case) -> np.ndarray:
    """The case's global input (before views), fresh random values on the host, never all zeros."""
    from tcreduce.testing import random_input

    rng = np.random.default_rng(1000 + case.seed)
    x = random_input(rng, case.shape, case.dtype)
    if case.special == "cancel":  # large terms that cancel across shards: the exact sum is small
        x = (rng.standard_normal(case.shape) * 3e3).astype(case.dtype)
        k = x.size // 3
        x[x.size - k:] = -x[:k][::-1]
    return x


def host_shard(case: Case, rank: int, members: list[int]) -> np.ndarray:
    """Group-rank ``rank``'s shard (before views, with its overrides) on the host."""
    x = global_host(case)
    ax = case.shard_axis % len(case.shape)
    off = sum(case.lengths[:rank])
    idx = [slice(None)] * x.ndim
    idx[ax] = slice(off, off + case.lengths[rank])
    s = np.ascontiguousarray(x[tuple(idx)])
    if case.special == "nan_inf" and s.shape[ax] > 0:
        s = s.copy()
        # column 0: NaN on rank 0, +inf on rank 1, -inf on rank 2 (NaN, like NumPy); last column: +inf on rank 1
        s[(0,) * s.ndim] = [np.nan, np.inf, -np.inf][rank % 3]
        if rank == 1:
            s.flat[-1] = np.inf
    world_rank = members[rank]
    dt = case.arg(world_rank, "dtype", None)
    if dt is not None:
        s = s.astype(dt)
    if case.arg(world_rank, "extra", 0):
        s = np.concatenate([s, s[..., :1]], axis=-1)
    return s


def apply_view(a: Any, view: Optional[str]) -> Any:
    if view == "step":
        return a[..., ::2]
    if view == "offset":
        return a[..., 1:]
    return a


def device_shard(case: Case, rank: int, members: list[int], device: int = 0, host: bool = False) -> Any:
    """The shard as the rank passes it: torch CUDA tensor, CuPy array or (override "numpy") a host array; with
    ``host`` (the CPU tests' HostOps), a torch CPU tensor or a NumPy array."""
    s = host_shard(case, rank, members)
    kind = case.arg(members[rank], "kind", case.kind)
    if host:
        if kind == "torch":
            import torch

            return apply_view(torch.from_numpy(s), case.view)
        return apply_view(s, case.view)
    if kind == "numpy":
        return apply_view(s, case.view)
    if kind == "cupy":
        import cupy

        with cupy.cuda.Device(device):
            return apply_view(cupy.asarray(s), case.view)
    import torch

    return apply_view(torch.from_numpy(s).to(torch.device("cuda", device)), case.view)


# ------------------------------------------------------------------------------------------------------------- expected

def _exact_single(xg, axes: tuple[int, ...], in_dtype: str, out_dtype: str, ops: Any = None):
    """The single-GPU exact result (tcreduce.sum(method="exact") where registered; tcreduce.exact otherwise);
    with ``ops`` (HostOps), its stand-in's result on the host."""
    import tcreduce

    gpu = ops is None
    if gpu:
        from tcreduce.distributed import _CudaOps as ops
    ex = ops.exact()
    out_shape = tuple(d for i, d in enumerate(xg.shape) if i not in axes)
    if xg.size == 0:
        via_module = ops.xp().zeros(out_shape, out_dtype)
    else:
        via_module = ex.finalize(ex.partial_state(xg, axis=axes), in_dtype, out_dtype)
    if gpu and "exact" in {m.name for m in tcreduce.methods()} and xg.size:
        via_sum = tcreduce.sum(xg, axis=axes, dtype=out_dtype, method="exact")
        assert same_bits(to_host(via_sum), to_host(via_module)), "tcreduce.sum(method='exact') != tcreduce.exact"
    return via_module


def expected(case: Case, world: int, device: int = 0, check_bound: bool = True, ops: Any = None) -> list[np.ndarray]:
    """What each group rank must return (host arrays), computed on this one process from the shards:
    shard axis reduced: the rank-order fp32 fold of tcreduce.sum(shard, dtype=float32) over the shards holding
    elements, rounded once to the result dtype (exact: the single-GPU exact sum of the concatenation); not reduced:
    tcreduce.sum of the rank's own shard. With check_bound, the fp32 fold is also checked against the exact sum of
    the global array within the sum of the shards' a-priori bounds plus the fold's own rounding. ``ops``: None for
    the GPU (tcreduce.sum on ``device``), or the CPU tests' HostOps (the emulator's bits)."""
    from contextlib import nullcontext

    from tcreduce._arrays import canonical_nan
    from tcreduce._dist import fold_ranks
    from tcreduce._layout import normalize_axes

    host_ops = ops
    if ops is None:
        import cupy

        from tcreduce.distributed import _CudaOps as ops
        from tcreduce._device import _device_spec
        where, gpu = cupy.cuda.Device(device), _device_spec(device)
    else:
        where, gpu = nullcontext(), ops.gpu
    xp = ops.xp()
    members = case.members(world)
    with where:
        shards = [apply_view(xp.asarray(host_shard(case, r, members)), case.view) for r in range(len(members))]
        ndim = len(case.shape)
        axes = normalize_axes(case.axis, ndim)
        ax = case.shard_axis % ndim
        out_dtype = "float32" if case.out_dtype is None else str(np.dtype(case.out_dtype))
        if ax not in axes:
            if case.method == "exact":
                res = []
                for s in shards:
                    r = _exact_single(s, axes, case.dtype, out_dtype, host_ops)
                    res.append(to_host(r.reshape(tuple(1 if i in axes else d for i, d in enumerate(s.shape)))
                                       if case.keepdims else r))
                return res
            return [to_host(ops.local_sum(s, axes, out_dtype, case.keepdims, case.method)) for s in shards]
        keep = tuple(1 if i in axes else d for i, d in enumerate(shards[0].shape))
        if case.method == "exact":
            xg = xp.concatenate(shards, axis=ax)
            r = _exact_single(xg, axes, case.dtype, out_dtype, host_ops)
            r = to_host(r)
            return [r.reshape(keep) if case.keepdims else r] * len(members)
        other = int(np.prod([shards[0].shape[a] for a in axes if a != ax]))
        active = [r for r, s in enumerate(shards) if s.shape[ax] * other > 0]
        out_shape = tuple(d for i, d in enumerate(shards[0].shape) if i not in axes)
        parts = [to_host(ops.local_sum(shards[r], axes, "float32", False, case.method)) for r in active]
        f32 = fold_ranks(parts) if parts else np.zeros(out_shape, np.float32)
        if check_bound and case.method not in ("auto",) and parts:
            _check_fold_bound(f32, [to_host(shards[r]) for r in active], case.axis, case.method, gpu)
        res = canonical_nan(np.asarray(f32).astype(out_dtype))
        return [res.reshape(keep) if case.keepdims else res] * len(members)


def _check_fold_bound(f32: np.ndarray, shards: list[np.ndarray], axis: Any, method: str, gpu: Any) -> None:
    """|fold - exact| <= sum_r b_r + gamma_{k-1} * sum_r (|e_r| + b_r): each shard's partial within its a-priori
    bound b_r of its exact sum e_r, then k - 1 fp32 round-to-nearest additions (recursive summation bound)."""
    from tcreduce.reference import exact_sum
    from tcreduce.testing import bound_for

    exact_parts = [np.asarray(exact_sum(s, axis=axis), np.float64) for s in shards]
    bounds = [bound_for(s, axis, method, "float32", gpu) for s in shards]
    k = len(shards)
    u = 2.0 ** -24
    gamma = (k - 1) * u / (1 - (k - 1) * u)
    with np.errstate(invalid="ignore"):
        total = np.sum(exact_parts, axis=0)
    allowed = np.sum(bounds, axis=0) + gamma * np.sum([np.abs(e) + b for e, b in zip(exact_parts, bounds)], axis=0)
    got = np.asarray(f32, np.float64)
    finite = np.isfinite(total) & np.isfinite(got)
    with np.errstate(invalid="ignore"):
        err = np.abs(got - total)
    bad = finite & ~(err <= allowed)
    assert not np.any(bad), f"fold exceeds its bound: max err {err[bad].max():.3e}, allowed {allowed[bad].min():.3e}"
    assert np.array_equal(np.isnan(got), np.isnan(total)), "NaN pattern differs from the exact sum's"


# -------------------------------------------------------------------------------------------------------------- workers

_MESH: dict = {}


def _dtensor_call(case: Case, x: Any, world: int, device: int, kwargs: dict, host: bool = False) -> np.ndarray:
    """Wrap the torch shard in a Shard(d) DTensor over a 1-D mesh of the world, call, check the result's
    placement and global shape, return its local part."""
    import torch
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    import tcreduce
    from tcreduce._layout import normalize_axes

    kind = "cpu" if host else "cuda"
    if (kind, world) not in _MESH:
        _MESH[kind, world] = DeviceMesh(kind, list(range(world)))
    mesh = _MESH[kind, world]
    ndim = len(case.shape)
    ax = case.shard_axis % ndim
    stride = tuple(int(np.prod(case.shape[i + 1:])) for i in range(ndim))
    dt = DTensor.from_local(x, mesh, [Shard(ax)], run_check=False, shape=torch.Size(case.shape), stride=stride)
    kwargs = {k: v for k, v in kwargs.items() if k not in ("shard_axis", "group")}
    r = tcreduce.distributed.sum(dt, **kwargs)
    axes = normalize_axes(case.axis, ndim)
    want_shape = tuple(1 if i in axes else d for i, d in enumerate(case.shape)) if case.keepdims else \
        tuple(d for i, d in enumerate(case.shape) if i not in axes)
    assert isinstance(r, DTensor), type(r)
    assert tuple(r.shape) == want_shape, (tuple(r.shape), want_shape)
    if ax in axes:
        assert tuple(r.placements) == (Replicate(),), r.placements
    else:
        out_dim = ax if case.keepdims else ax - len([a for a in axes if a < ax])
        assert tuple(r.placements) == (Shard(out_dim),), r.placements
    return to_host(r.to_local())


def call_case(case: Case, world_rank: int, rank: int, members: list[int], group: Any, device: int = 0,
              world: int = 1, host: bool = False) -> Any:
    """Run the case on this rank (in the process group): returns the result as a host array."""
    import tcreduce

    if case.kind == "dtensor":
        x = device_shard(replace(case, kind="torch"), rank, members, device, host)
        return _dtensor_call(case, x, world, device, dict(axis=case.axis, dtype=case.out_dtype,
                                                           keepdims=case.keepdims, method=case.method), host)
    x = device_shard(case, rank, members, device, host)
    kwargs = dict(axis=case.arg(world_rank, "axis", case.axis), dtype=case.arg(world_rank, "out_dtype", case.out_dtype),
                  keepdims=case.arg(world_rank, "keepdims", case.keepdims),
                  method=case.arg(world_rank, "method", case.method),
                  shard_axis=case.arg(world_rank, "shard_axis", case.shard_axis), group=group)
    if case.stream and host:
        raise ValueError("stream cases need a GPU")
    if case.stream == "torch":
        import torch

        s = torch.cuda.Stream(device)
        s.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(s):
            x = x * 1 if hasattr(x, "is_cuda") else x  # produced on the side stream
            r = tcreduce.distributed.sum(x, **kwargs)
            out = r.cpu().numpy() if hasattr(r, "is_cuda") else to_host(r)
        return out
    if case.stream == "cupy":
        import cupy

        with cupy.cuda.Device(device), cupy.cuda.Stream(non_blocking=True) as s:
            x = x.copy() if isinstance(x, cupy.ndarray) else x  # produced on the side stream
            r = tcreduce.distributed.sum(x, **kwargs)
            out = to_host(r)  # read back on the CuPy stream
            s.synchronize()
        return out
    return to_host(tcreduce.distributed.sum(x, **kwargs))


def run_cases(cases: list[Case], world_rank: int, world: int, device: int = 0, repeats: int = 2,
              host: bool = False) -> list[dict]:
    """Every case on this rank; each outcome is {"name", "result" (host array) or "error": (class name, message),
    "repeat_same": bool}. Errors are caught so that the next case runs (the group must stay usable)."""
    import torch.distributed as dist

    groups = {"world": None}
    if world >= 3:
        groups["even"] = dist.new_group(list(range(0, world, 2)))  # every rank takes part in creating it
    outcomes = []
    for case in cases:
        members = case.members(world)
        if world_rank not in members:
            outcomes.append({"name": case.name, "skipped": True})
            continue
        rank = members.index(world_rank)
        rec: dict = {"name": case.name}
        try:
            first = call_case(case, world_rank, rank, members, groups[case.group], device, world, host)
            rec["result"] = first
            rec["repeat_same"] = all(same_bits(first, call_case(case, world_rank, rank, members,
                                                                groups[case.group], device, world, host))
                                     for _ in range(repeats - 1))
        except Exception as e:  # noqa: BLE001
            rec["error"] = (type(e).__name__, str(e))
            rec["traceback"] = traceback.format_exc()
        outcomes.append(rec)
    return outcomes


def worker_main(rank: int, world: int, backend: str, store: str, out_dir: str, cases: list[Case],
                timeout_s: float) -> None:
    """torch.multiprocessing entry point: one rank of a ``world``-process group on GPU 0 (gloo: several processes
    share it; nccl: world 1). Writes rank{rank}.pkl with {"no_group": ..., "outcomes": [...]}."""
    set_safe_env()
    from datetime import timedelta

    import cupy
    import torch
    import torch.distributed as dist

    import tcreduce

    torch.cuda.set_device(0)
    cupy.cuda.Device(0).use()
    record: dict = {}
    try:  # before the group exists: a clear error, no hang
        tcreduce.distributed.sum(torch.ones(4, device="cuda", dtype=torch.float16))
        record["no_group"] = ("none", "")
    except Exception as e:  # noqa: BLE001
        record["no_group"] = (type(e).__name__, str(e))
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))
    try:
        record["outcomes"] = run_cases(cases, rank, world)
    finally:
        with open(Path(out_dir) / f"rank{rank}.pkl", "wb") as f:
            pickle.dump(record, f)
        dist.barrier()  # every rank done before any tears the group down
        dist.destroy_process_group()


def spawn_ranks(fn, world: int, args: tuple, deadline_s: float) -> None:
    """Run ``fn(rank, *args)`` in ``world`` spawned processes; kill all of them and raise if any fails or the
    deadline passes (no test hangs on a stuck collective)."""
    import torch.multiprocessing as mp

    ctx = mp.start_processes(fn, args=args, nprocs=world, join=False, start_method="spawn")
    end = time.monotonic() + deadline_s
    try:
        while not ctx.join(timeout=2):
            if time.monotonic() > end:
                alive = [i for i, p in enumerate(ctx.processes) if p.is_alive()]
                raise TimeoutError(f"ranks {alive} still running after {deadline_s:.0f} s (a hung collective?)")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()


def load_outcomes(out_dir: str, world: int) -> list[dict]:
    recs = []
    for r in range(world):
        with open(Path(out_dir) / f"rank{r}.pkl", "rb") as f:
            recs.append(pickle.load(f))
    return recs


def check_outcomes(cases: list[Case], recs: list[dict], world: int, device: int = 0, ops: Any = None) -> list[str]:
    """Compare every rank's outcome of every case with the expectation; returns the failures (empty: all good)."""
    fails: list[str] = []
    for i, case in enumerate(cases):
        members = case.members(world)
        outs = [recs[r]["outcomes"][i] for r in members]
        for r in range(world):
            if r not in members and not recs[r]["outcomes"][i].get("skipped"):
                fails.append(f"{case.name}: rank {r} is outside the group but ran")
        assert all(o["name"] == case.name for o in outs)
        if case.expect_error:
            errs = [o.get("error") for o in outs]
            if any(e is None for e in errs):
                fails.append(f"{case.name}: ranks {[m for m, e in zip(members, errs) if e is None]} raised nothing")
                continue
            if len(set(errs)) != 1:
                fails.append(f"{case.name}: the ranks raised different errors: {errs}")
            cls, msg = errs[0]
            if cls != case.expect_error or case.expect_in_msg not in msg:
                fails.append(f"{case.name}: raised {cls}: {msg!r}; expected {case.expect_error} with "
                             f"{case.expect_in_msg!r}")
            continue
        bad = [(m, o["error"], o.get("traceback", "")) for m, o in zip(members, outs) if "error" in o]
        if bad:
            fails.append(f"{case.name}: ranks raised: {bad}")
            continue
        for m, o in zip(members, outs):
            if not o["repeat_same"]:
                fails.append(f"{case.name}: rank {m} not bitwise reproducible run to run")
        try:
            want = expected(case, world, device, ops=ops)
        except Exception:  # noqa: BLE001
            fails.append(f"{case.name}: computing the expectation failed: {traceback.format_exc()}")
            continue
        for k, (m, o) in enumerate(zip(members, outs)):
            if not same_bits(o["result"], want[k]):
                got = o["result"]
                fails.append(f"{case.name}: rank {m} got {got.dtype}{got.shape} {got.ravel()[:4]}, expected "
                             f"{want[k].dtype}{want[k].shape} {want[k].ravel()[:4]}")
    return fails


def host_cases(world: int = 3) -> list[Case]:
    """The cases HostOps can run on the CPU (no GPU streams, no CuPy-only method, a host array is fine there), with
    the exact ones through its tcreduce.exact stand-in (finite values only)."""
    skip = {"full-cub", "torch-stream", "cupy-stream", "err-host-array-one-rank", "exact-torch-stream",
            "exact-cupy-stream", "exact-nan-inf"}
    return [c for c in gloo_cases(world) + exact_cases(world) if c.name not in skip]
