"""Sums of arrays sharded across GPUs, through torch.distributed (NCCL), deterministic.

>>> import torch, torch.distributed as dist, tcreduce
>>> dist.init_process_group("nccl")                       # torchrun --nproc_per_node=2 script.py
>>> x = torch.randn(1 << 20, device="cuda").half()        # this rank's shard of the global array
>>> s = tcreduce.distributed.sum(x)                       # the global sum, the same bits on every rank

The global array is the concatenation of the ranks' shards along ``shard_axis``, in group-rank order (shards may
differ in length along it, length 0 included). One call, on every rank of ``group``:

1. Each rank validates its call and prepares its local fp32 partial: a :func:`tcreduce.reducer` handle for the
   shard (``dtype=float32``, the same ``method``: validated, planned, compiled, its workspace and result allocated)
   when the shard axis is reduced, else (and for ``method="exact"``, :func:`tcreduce.exact.partial_state`) the local
   work itself, catching any exception.
2. Each rank all_gathers one fixed-size int64 metadata row (:mod:`tcreduce._dist`: its error, or its dtype, shape,
   axes, shard axis, keepdims, dtype and method) and checks the gathered table identically: if any rank failed or
   the ranks disagree, every rank raises the same exception with the same message, and no data moves.
3. If ``shard_axis`` is reduced, each rank launches its prepared partial, the ranks all_gather their partials
   (out-sized: one float32 per output; exact: ``L`` int64 limbs per output) and every rank folds them in rank order,
   ``((p0 + p1) + p2) + ...`` in fp32 round to nearest, over the ranks whose shard holds elements, then rounds once
   to ``dtype`` (one small kernel, :data:`_FOLD_SOURCE`; :func:`tcreduce._dist.fold_ranks` is its host reference);
   exact states are merged (:func:`tcreduce.exact.merge_states`) and finalised. Never the order a ring all-reduce
   uses: the result is bitwise identical run to run and on every rank. If ``shard_axis`` is not reduced, each rank
   returns its own shard of the result (:func:`tcreduce.sum` of its shard) and no data moves.

Work runs on torch's current CUDA stream of the shard's device (which torch.distributed orders its collectives
against), joined both ways with CuPy's current stream when they differ. The metadata check reads the gathered rows on
the host; it runs before the partial is launched, while that stream holds no work of the call, so the host waits for
the exchange only, and the launch, the partials' all_gather and the fold are queued after it without another wait.
The prepared partials (handle, result, gather buffers; results of up to 2^20 elements) and the exchange's buffers are
kept per shard layout and stream (the last 16), so a repeated call skips the build. torch is imported on the first
call only.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import math
import operator
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from . import _api
from ._api import AxisLike, Call, validate
from ._arrays import as_cupy
from ._dist import MAX_NDIM, Agreement, agree, encode_row

__all__ = ["sum"]

# the rank-order fold on the device (tcreduce._dist.fold_ranks is the host reference it must equal bit for bit):
# out[i] = ((p[r0][i] + p[r1][i]) + p[r2][i]) + ... in fp32 round to nearest over the listed ranks, starting from
# p[r0] itself, then converted once to T (round to nearest even), every NaN written as ``nan`` (the canonical NaN of T,
# made on the host)
_FOLD_SOURCE = """
float acc = parts[(long long)ranks[0] * width + i];
for (int r = 1; r < nranks; ++r) acc = __fadd_rn(acc, parts[(long long)ranks[r] * width + i]);
out = (acc != acc) ? nan : (T)acc;
"""
_fold_kernel = None
_CACHE_SIZE = 16  # prepared partials, fold rank lists and metadata buffers kept per process (least recently used out)
# prepared partials are kept only for results of at most this many elements (a kept one holds its fp32 result and the
# world's gathered partials: 4 MiB and world x 4 MiB here); larger ones are built per call, where the build is small
# beside the work
_CACHE_MAX_OUTPUTS = 1 << 20


def _torch():
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        raise ImportError("tcreduce.distributed needs PyTorch with torch.distributed; install it with "
                          "pip install 'tcreduce[distributed]'") from e
    return torch, dist


def _exact_module():
    try:
        from . import exact
    except ImportError as e:
        raise ImportError(f"method 'exact' needs tcreduce.exact, which this install lacks ({e})") from e
    return exact


def _group(dist, group) -> tuple[Any, int, int]:
    """(group, this rank in it, its size); raises before any collective, alike on every rank."""
    if not dist.is_available():
        raise RuntimeError("tcreduce.distributed.sum: this PyTorch build has no torch.distributed")
    if not dist.is_initialized():
        raise RuntimeError("tcreduce.distributed.sum: no torch.distributed process group is initialised; call "
                           "torch.distributed.init_process_group('nccl') on every rank first (torchrun sets the "
                           "rendezvous variables)")
    if group is None:
        group = dist.group.WORLD
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("tcreduce.distributed.sum: this process is not a member of `group`; call it only on the "
                         "group's ranks")
    return group, rank, dist.get_world_size(group)


def _uses_cuda(dist, group) -> bool:
    """Whether the group's backend takes CUDA tensors (NCCL); others (gloo) get host copies."""
    return "nccl" in str(dist.get_backend(group)).lower()


def _device_index(torch, x: Any) -> int:
    """The CUDA device of the shard (torch tensor or CuPy array), else torch's current device."""
    dev = getattr(x, "device", None)
    if isinstance(dev, torch.device):
        if dev.type == "cuda":
            return dev.index if dev.index is not None else torch.cuda.current_device()
    elif isinstance(getattr(dev, "id", None), int):  # cupy.cuda.Device
        return dev.id
    return torch.cuda.current_device()


@contextlib.contextmanager
def _on_torch_stream(torch, device: int):
    """Run CuPy work on torch's current stream of ``device``; when CuPy's current stream is another one, that
    stream's pending work comes first and its later work waits for ours."""
    import cupy

    with cupy.cuda.Device(device), torch.cuda.device(device):
        mine = cupy.cuda.get_current_stream()
        theirs = torch.cuda.current_stream(device)
        if mine.ptr == theirs.cuda_stream:
            yield
            return
        ext = cupy.cuda.ExternalStream(theirs.cuda_stream, device)
        ext.wait_event(mine.record())
        try:
            with ext:
                yield
        finally:
            mine.wait_event(ext.record())


def _all_gather(torch, dist, t, group, world: int, cuda_comm: bool):
    """All ranks' ``t`` (same shape and dtype everywhere) stacked in group-rank order: (world, t.numel()), on the
    device the collective ran on (``t``'s for NCCL, the host for gloo)."""
    flat = t.reshape(-1)
    if not cuda_comm:
        flat = flat.cpu()
    flat = flat.contiguous()
    if cuda_comm:
        out = torch.empty((world, flat.numel()), dtype=flat.dtype, device=flat.device)
        dist.all_gather_into_tensor(out, flat, group=group)
        return out
    parts = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(parts, flat, group=group)
    return torch.stack(parts)


def _exchange_rows(torch, dist, row: np.ndarray, group, world: int, cuda_comm: bool, device: int) -> np.ndarray:
    """The metadata table (world, META_LEN) on the host, identical on every rank."""
    row = np.ascontiguousarray(row, np.int64)
    if not cuda_comm:
        return _all_gather(torch, dist, torch.from_numpy(row), group, world, cuda_comm).numpy()
    # NCCL: pinned host buffers and device buffers made once per (device, world, stream); the host waits for the
    # stream after the copy back, so the next call on that stream finds them free
    stream = torch.cuda.current_stream(device)
    key = ("rows", device, world, row.size, stream.cuda_stream)
    bufs = _cached(key, lambda: (torch.empty(row.size, dtype=torch.int64).pin_memory(),
                                 torch.empty(row.size, dtype=torch.int64, device=torch.device("cuda", device)),
                                 torch.empty((world, row.size), dtype=torch.int64, device=torch.device("cuda", device)),
                                 torch.empty((world, row.size), dtype=torch.int64).pin_memory()))
    row_host, row_dev, table_dev, table_host = bufs
    row_host.numpy()[:] = row
    row_dev.copy_(row_host, non_blocking=True)
    dist.all_gather_into_tensor(table_dev, row_dev, group=group)
    table_host.copy_(table_dev, non_blocking=True)
    stream.synchronize()
    return table_host.numpy().copy()


_CACHE: "OrderedDict[tuple, Any]" = OrderedDict()


def _cached(key: tuple, make: Callable[[], Any]) -> Any:
    """``make()`` once per ``key`` (the last _CACHE_SIZE keys kept, least recently used out)."""
    hit = _CACHE.get(key)
    if hit is None:
        hit = _CACHE[key] = make()
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return hit


def _keeps_partial(shape: tuple[int, ...], axes: tuple[int, ...]) -> bool:
    """Whether a prepared partial for a shard of ``shape`` reduced over ``axes`` is kept (_CACHE_MAX_OUTPUTS)."""
    return math.prod(n for i, n in enumerate(shape) if i not in axes) <= _CACHE_MAX_OUTPUTS


def _fold_cupy(gathered, active: tuple[int, ...], out_dtype: Any):
    """:func:`tcreduce._dist.fold_ranks` of ``gathered[r]`` for r in ``active`` on the device, in one kernel and
    without a host wait: a new CuPy array of ``out_dtype`` and shape ``gathered.shape[1:]``."""
    import cupy

    global _fold_kernel
    if _fold_kernel is None:
        _fold_kernel = cupy.ElementwiseKernel("raw float32 parts, raw int32 ranks, int32 nranks, int64 width, T nan",
                                              "T out", _FOLD_SOURCE, "tcreduce_fold_ranks")
    out_dtype = np.dtype(out_dtype)
    out = cupy.empty(gathered.shape[1:], out_dtype)
    width = out.size
    if width:
        parts = cupy.ascontiguousarray(gathered, np.float32)
        device = parts.data.device_id
        ranks = _cached(("ranks", device, active), lambda: cupy.asarray(np.asarray(active, np.int32)))
        _fold_kernel(parts, ranks, np.int32(len(active)), np.int64(width), out_dtype.type(np.nan), out)
    return out


def _gather_cupy(torch, dist, a, group, world: int, cuda_comm: bool, device: int):
    """All ranks' CuPy array ``a`` stacked in rank order as a CuPy array (world, *a.shape) on ``device``."""
    import cupy

    t = torch.from_dlpack(cupy.ascontiguousarray(a))
    out = _all_gather(torch, dist, t, group, world, cuda_comm)
    if out.device.type != "cuda":
        out = out.to(torch.device("cuda", device))
    return cupy.from_dlpack(out).reshape((world,) + tuple(a.shape))


class _PreparedPartial:
    """A shard's fp32 partial made ready before the metadata exchange: a :func:`tcreduce.reducer` handle (validated,
    planned, compiled, workspace allocated), its result array, and (made on the first NCCL gather) torch views of the
    partial and of the gathered partials. Kept per (shard layout, axes, method, stream): calls on one stream are
    ordered, so they may share the buffers."""

    def __init__(self, x: Any, axes: tuple[int, ...], method: str):
        import cupy

        from ._reducer import reducer

        self.handle = reducer(x, axis=axes, dtype="float32", method=method, warmup=False)
        self.partial = cupy.empty(self.handle.result_shape, np.float32)
        self._nccl: Optional[tuple] = None  # (world, partial as torch, gathered as torch, gathered as CuPy)

    def launch(self, x: Any) -> Any:
        """Queue the partial of ``x`` (the shard it was prepared for, or one like it) on CuPy's current stream, no
        host wait; returns the partial (CuPy, fp32)."""
        return self.handle(x, out=self.partial)

    def gather(self, torch, dist, group, world: int, cuda_comm: bool, device: int):
        """All ranks' partials in rank order, (world, *shape), as :func:`_gather_cupy` gives them."""
        if not cuda_comm:
            return _gather_cupy(torch, dist, self.partial, group, world, cuda_comm, device)
        import cupy

        if self._nccl is None or self._nccl[0] != world:
            mine = torch.from_dlpack(self.partial).reshape(-1)
            everyone = torch.empty((world, mine.numel()), dtype=mine.dtype, device=mine.device)
            self._nccl = (world, mine, everyone,
                          cupy.from_dlpack(everyone).reshape((world,) + tuple(self.partial.shape)))
        _, mine, everyone, gathered = self._nccl
        dist.all_gather_into_tensor(everyone, mine, group=group)
        return gathered


class _CudaOps:
    """The array side of :func:`sum` in one place: CuPy views of CUDA shards, :func:`tcreduce.sum` for the local
    partials, torch's current stream. (The CPU tests put a NumPy stand-in with the same methods in ``_OPS`` to run
    the whole protocol over gloo on the host.)"""

    @staticmethod
    def xp():
        import cupy

        return cupy

    @staticmethod
    def as_array(x: Any) -> tuple[Any, Callable[[Any], Any]]:
        return as_cupy(x)

    @staticmethod
    def local_sum(x: Any, axes: tuple[int, ...], dtype: str, keepdims: bool, method: str) -> Any:
        return _api.sum(x, axis=axes, dtype=dtype, keepdims=keepdims, method=method)

    @staticmethod
    def prepare_partial(x: Any, axes: tuple[int, ...], method: str) -> "_PreparedPartial":
        """This shard's fp32 partial, built now (every failure but the launch's own happens here): a
        :class:`_PreparedPartial`, kept for later calls on shards like ``x`` on the same stream."""
        import cupy

        if not _keeps_partial(tuple(x.shape), axes):
            return _PreparedPartial(x, axes, method)
        stream = cupy.cuda.get_current_stream().ptr
        key = ("partial", tuple(x.shape), tuple(x.strides), x.dtype.str, x.data.ptr & 15, x.data.device_id, axes,
               method, stream)
        return _cached(key, lambda: _PreparedPartial(x, axes, method))

    fold = staticmethod(_fold_cupy)

    @staticmethod
    def exact():
        return _exact_module()

    @staticmethod
    def enter(torch, x: Any) -> tuple[int, Any]:
        """(device index, context manager to run the call in)."""
        if not torch.cuda.is_available():
            raise RuntimeError("tcreduce.distributed.sum needs CUDA; torch.cuda.is_available() is False")
        device = _device_index(torch, x)
        return device, _on_torch_stream(torch, device)

    gather = staticmethod(_gather_cupy)


_OPS = _CudaOps


def _dtensor_types():
    """(DTensor, Replicate, Shard), or None while no DTensor module is loaded (then no DTensor can exist)."""
    import sys

    mod = sys.modules.get("torch.distributed.tensor") or sys.modules.get("torch.distributed._tensor")  # < 2.5
    if mod is None or not hasattr(mod, "DTensor"):
        return None
    return mod.DTensor, mod.Replicate, mod.Shard


def _dtensor_parts(torch, dist, x: Any, shard_axis: Any, group: Any):
    """For a DTensor sharded on one dimension of a 1-D device mesh: (its local tensor, its shard dimension, the
    mesh's group, a function wrapping the result back into a DTensor). Anything else passes through with None.
    Raises before any collective, alike on every rank (placements and meshes are the same everywhere)."""
    types = _dtensor_types()
    if types is None or not isinstance(x, types[0]):
        return x, shard_axis, group, None
    DTensor, Replicate, Shard = types
    mesh, places = x.device_mesh, tuple(x.placements)
    if mesh.ndim != 1 or len(places) != 1 or type(places[0]) is not Shard:
        raise ValueError("tcreduce.distributed.sum takes DTensors sharded on one dimension of a 1-D device mesh "
                         f"(placements (Shard(d),)); got a {mesh.ndim}-D mesh and placements {places}")
    ndim = x.ndim
    dim = places[0].dim % ndim
    try:
        given = None if isinstance(shard_axis, bool) else operator.index(shard_axis)
    except TypeError:
        given = None
    if given not in (0, dim, dim - ndim):
        raise ValueError(f"shard_axis={shard_axis!r} disagrees with the DTensor's placement Shard({dim}); leave it "
                         "at its default")
    mesh_group = mesh.get_group()
    if group is not None and group is not mesh_group:
        raise ValueError("group differs from the DTensor's device-mesh group; leave it at its default")
    if dist.get_process_group_ranks(mesh_group) != [int(r) for r in mesh.mesh.flatten().tolist()]:
        raise ValueError("the DTensor's device mesh lists its ranks out of order (shards follow mesh order, the "
                         f"group's ranks ascend): mesh {mesh.mesh.tolist()}")

    def rewrap(res, ag: Agreement, keepdims: bool):
        if ag.reduced:
            return DTensor.from_local(res, mesh, [Replicate()], run_check=False)
        out_dim = dim if keepdims else dim - len([a for a in ag.axes if a < dim])
        shape = list(res.shape)
        shape[out_dim] = builtins.sum(ag.shard_lengths)
        stride = [math.prod(shape[i + 1:]) for i in range(len(shape))]
        return DTensor.from_local(res, mesh, [Shard(out_dim)], run_check=False, shape=torch.Size(shape),
                                  stride=tuple(stride))

    return x.to_local(), dim, mesh_group, rewrap


@dataclass
class _Local:
    """One rank's own part of a call: its validated call or its error, and its partial or local result."""

    error: Optional[BaseException] = None
    call: Optional[Call] = None
    shard_axis: int = -1
    shape: tuple[int, ...] = ()
    keepdims: bool = False
    limbs: int = 0
    payload: Any = None  # shard axis reduced, exact: the exact state (*out_shape, L)
    prepared: Any = None  # shard axis reduced, not exact: the fp32 partial made ready (launch(x), gather(...))
    shard: Any = None  # ... and the shard (CuPy) it is launched on
    result: Any = None   # shard axis not reduced: this rank's shard of the result, final
    back: Callable[[Any], Any] = lambda r: r

    def row(self, rank: int) -> np.ndarray:
        if self.error is not None:
            return encode_row(rank=rank, error=self.error)
        c = self.call
        return encode_row(rank=rank, in_dtype=c.in_dtype, out_dtype=c.out_dtype, method=c.method, axes=c.axes,
                          shard_axis=self.shard_axis, keepdims=self.keepdims, shape=self.shape, limbs=self.limbs)


def _shard_axis(shard_axis: Any, ndim: int) -> int:
    from numpy.exceptions import AxisError

    if isinstance(shard_axis, bool):
        raise TypeError("shard_axis must be an int, not bool")
    try:
        ax = operator.index(shard_axis)
    except TypeError:
        raise TypeError(f"shard_axis must be an int, not {type(shard_axis).__name__}") from None
    if not -ndim <= ax < ndim:
        raise AxisError(f"shard_axis {ax} is out of bounds for a shard of dimension {ndim}")
    return ax % ndim


def _exact_partial(ops, ex, xc, call: Call, limbs: int, count: int):
    out_shape = call.out_shape + (limbs,)
    if count == 0:
        return ops.xp().zeros(out_shape, np.int64)
    state = ex.partial_state(xc, axis=call.axes)
    if tuple(state.shape) != out_shape or state.dtype != np.int64:
        raise RuntimeError(f"tcreduce.exact.partial_state returned {state.dtype} {tuple(state.shape)}, expected "
                           f"int64 {out_shape}")
    return state


def _exact_finalize(ex, state, call: Call):
    res = ex.finalize(state, call.in_dtype, call.out_dtype)
    if tuple(res.shape) != call.out_shape or res.dtype != np.dtype(call.out_dtype):
        raise RuntimeError(f"tcreduce.exact.finalize returned {res.dtype} {tuple(res.shape)}, expected "
                           f"{call.out_dtype} {call.out_shape}")
    return res


def _local_step(ops, x: Any, axis: AxisLike, dtype: Any, keepdims: bool, method: Any, shard_axis: Any) -> _Local:
    """Validate this rank's call and compute its part; any exception is kept (to travel), never raised."""
    loc = _Local(keepdims=keepdims)
    try:
        xc, loc.back = ops.as_array(x)
        loc.shape = tuple(int(d) for d in xc.shape)
        ndim = len(loc.shape)
        if ndim == 0:
            raise ValueError("a shard must have at least one dimension (the shard axis); got a 0-d array")
        if ndim > MAX_NDIM:
            raise ValueError(f"tcreduce.distributed.sum takes shards of at most {MAX_NDIM} dimensions, got {ndim}")
        loc.shard_axis = _shard_axis(shard_axis, ndim)
        if not isinstance(method, str):
            raise TypeError(f"method must be a string, not {type(method).__name__}")
        exact = method == "exact"
        call = validate("sum", loc.shape, xc.dtype, axis, dtype, "auto" if exact else method)
        ex = None
        if exact:
            call = dataclasses.replace(call, method="exact")
            ex = ops.exact()
            loc.limbs = int(ex.state_limbs(call.in_dtype))
        loc.call = call
        count = math.prod(loc.shape[a] for a in call.axes)
        if loc.shard_axis in call.axes:
            if exact:
                loc.payload = _exact_partial(ops, ex, xc, call, loc.limbs, count)
            else:
                loc.prepared, loc.shard = ops.prepare_partial(xc, call.axes, call.method), xc
        elif exact:
            if count == 0 or math.prod(call.out_shape) == 0:
                res = ops.xp().zeros(call.out_shape, call.out_dtype)
            else:
                res = _exact_finalize(ex, _exact_partial(ops, ex, xc, call, loc.limbs, count), call)
            loc.result = res.reshape(call.keep_shape) if keepdims else res
        else:
            loc.result = ops.local_sum(xc, call.axes, call.out_dtype, keepdims, call.method)
    except Exception as e:  # noqa: BLE001 - every local failure must reach the other ranks
        loc.error = e
    return loc


def _combine(ops, torch, dist, loc: _Local, ag: Agreement, group, world: int, cuda_comm: bool, device: int):
    """The reduced result from every rank's partial: rank-order fp32 fold (exact: merge and finalise)."""
    xp = ops.xp()
    call = loc.call
    if not ag.active or math.prod(call.out_shape) == 0:  # nothing to add anywhere: the empty sum, no collective
        res = xp.zeros(call.out_shape, call.out_dtype)
    else:
        if loc.prepared is not None:
            gathered = loc.prepared.gather(torch, dist, group, world, cuda_comm, device)
        else:
            gathered = ops.gather(torch, dist, loc.payload, group, world, cuda_comm, device)
        if call.method == "exact":
            ex = ops.exact()
            states = gathered if len(ag.active) == world else gathered[xp.asarray(ag.active)]
            res = _exact_finalize(ex, ex.merge_states(states), call)
        else:
            res = ops.fold(gathered, ag.active, call.out_dtype)
    return res.reshape(call.keep_shape) if loc.keepdims else res


def sum(x: Any, axis: AxisLike = None, dtype: Any = None, keepdims: bool = False, *, method: str = "auto",
        shard_axis: int = 0, group: Any = None) -> Any:
    """Sum over ``axis`` of the global array whose shards the ranks of ``group`` hold; call it on every rank.

    x: this rank's shard, a torch CUDA tensor or CuPy array (any array :func:`tcreduce.sum` takes), float16 or
    float32; the global array is the concatenation of the shards along ``shard_axis`` in group-rank order. Shards
    must agree in dtype and in shape off ``shard_axis``; every rank must pass the same axis, dtype, keepdims, method
    and shard_axis. group: a torch.distributed process group (default: the world), initialised; NCCL moves CUDA
    tensors, other backends (gloo) host copies.

    Result (same kind as ``x``): if ``shard_axis`` is reduced, the whole result on every rank, bitwise identical
    across ranks and runs: the rank-order fp32 fold of the ranks' ``tcreduce.sum(shard, axis, dtype=float32,
    method=method)`` partials (ranks whose shard holds no element are skipped), rounded once to ``dtype`` (float32 by
    default); with ``method="exact"`` the bits of the single-GPU exact sum of the global array, for any number of
    ranks and any partition. If ``shard_axis`` is not reduced, this rank's shard of the result,
    ``tcreduce.sum(x, axis, dtype, keepdims, method=method)``, with no data communication.

    A DTensor sharded on one dimension of a 1-D device mesh (placements ``(Shard(d),)``) may stand for ``x``: its
    local tensor is the shard, ``d`` the shard axis and the mesh's group the group; the result is a DTensor,
    ``Replicate()`` if ``d`` is reduced, else sharded on the result's dimension that ``d`` became.

    Errors (bad or disagreeing arguments, a failure computing any rank's partial) raise the same exception with the
    same message on every rank, after one all_gather of a small metadata row; no rank is left in a collective. A
    missing process group or PyTorch raises before any collective.
    """
    torch, dist = _torch()
    x, shard_axis, group, rewrap = _dtensor_parts(torch, dist, x, shard_axis, group)
    group, rank, world = _group(dist, group)
    ops = _OPS
    device, context = ops.enter(torch, x)
    cuda_comm = _uses_cuda(dist, group)
    with context:
        loc = _local_step(ops, x, axis, dtype, bool(keepdims), method, shard_axis)
        table = _exchange_rows(torch, dist, loc.row(rank), group, world, cuda_comm, device)
        try:
            ag = agree(table)
        except Exception as e:
            if loc.error is not None:
                raise e from loc.error
            raise
        if ag.reduced and loc.prepared is not None:
            loc.prepared.launch(loc.shard)  # its gather() reads the partial it holds
        res = _combine(ops, torch, dist, loc, ag, group, world, cuda_comm, device) if ag.reduced else loc.result
    out = loc.back(res)
    return rewrap(out, ag, loc.keepdims) if rewrap is not None else out
