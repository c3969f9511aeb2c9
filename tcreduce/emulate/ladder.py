"""Emulator twin of ``kernels/ladder.cu``: the deterministic rungs of the reduction ladder, bit for bit.

A direct transcription of each kernel's order comment (and, where the comment is terse, of its code), in float32
NumPy arithmetic (every addition an IEEE fp32 round-to-nearest add, performed in the kernel's order; padding is +0.0
exactly where the kernel loads 0.0f, and additions the kernel skips are skipped, so signed zeros come out as on the
GPU). Vectorised over blocks and threads; Python loops only run over tree levels and grid-stride positions.

Per kernel (B = threads per block, G = blocks of the launch, "tree" = sequential addressing, "itree" = interleaved):

- ``ladder_reduce0`` / ``ladder_reduce1``: v[t] = x[b*B + t] (0.0 past n); itree: adjacent pairs, then pairs of
  pairs, ... (s = 1, 2, ..., B/2).
- ``ladder_reduce2``: the same loads; tree: v[:s] + v[s:2s] for s = B/2 .. 1.
- ``ladder_reduce3`` / ``ladder_reduce4``: v[t] = x[b*2B + t] (0.0 past n), + x[b*2B + t + B] where < n; tree
  (reduce4's unrolled last warp performs the same additions).
- ``ladder_reduce5<T, OutT, BLOCK, FOLD>``: v[t] = x[i0] (0.0 past n), + x[i0 + f*BLOCK] where < n; tree.
- ``ladder_reduce6`` / ``ladder_reduce7``: from 0.0, grid-stride positions r = 0, 1, ...: += x[i], += x[i + B] where
  < n (i = r*2BG + b*2B + t); then tree (reduce6) or tcr::block_fold (reduce7).
- ``ladder_float4`` / ``ladder_last_block`` / ``ladder_grid_sync`` / ``ladder_cluster``: lad::thread_sum_vec (scalar
  head from the problem's alignment, 16-byte vectors summed pairwise in memory order, grid-strided over W = G*B
  workers, scalar tail), then block_fold; float4 writes partials (relaunched on them by the plan), last_block and
  grid_sync combine the G block sums as common.cuh's "serial partials" (always, also for G = 1), cluster first
  warp_folds each cluster's CLUSTER block sums padded with 0.0 to 32 lanes, then "serial partials" over the clusters.

Multi-launch plans are replayed launch by launch: launch k > 0 reads launch k-1's fp32 partials (16-byte aligned
workspace regions: no scalar head). The atomic rungs (``ladder_atomic``, ``ladder_atomic_per_block``) have no
reproducible order; :func:`emulate` raises ValueError for them.
"""

from __future__ import annotations

import re

import numpy as np

from .._plan import Buf, Plan
from ..plans._common import cdiv as _cdiv
from .folds import block_fold, fold, serial_sum

__all__ = ["emulate", "replay", "ATOMIC", "DETERMINISTIC"]

F32 = np.float32

#: Rungs whose order of additions is that of the float atomics (not reproducible: no twin).
ATOMIC = ("ladder_atomic", "ladder_atomic_per_block")
#: The deterministic rungs this module reproduces bit for bit.
DETERMINISTIC = ("ladder_interleaved_divergent", "ladder_interleaved", "ladder_sequential", "ladder_first_add",
                 "ladder_unroll_last_warp", "ladder_unroll_complete", "ladder_multi_element", "ladder_warp_shuffle",
                 "ladder_float4", "ladder_last_block", "ladder_grid_sync", "ladder_cluster")

_VEC = {"float": 4, "__half": 8}  # Vec<T>::N
_ITEMSIZE = {"float": 4, "__half": 2}


# ------------------------------------------------------------------------------------------------ primitives

def _pad(x: np.ndarray, length: int) -> np.ndarray:
    """x (fp32, 1-D) followed by +0.0 up to ``length``."""
    if x.shape[0] == length:
        return x
    out = np.zeros(length, F32)
    out[:x.shape[0]] = x
    return out


def _tree(v: np.ndarray) -> np.ndarray:
    """tree(v[..., 0..B)): for s = B/2, ..., 1: v[t] = v[t] + v[t + s] (t < s); the result v[0]."""
    return fold(v)  # the halving fold is exactly this sequence of additions


def _itree(v: np.ndarray) -> np.ndarray:
    """itree(v[..., 0..B)): for s = 1, 2, ..., B/2: v[t] = v[t] + v[t + s] for t % 2s == 0. After level s, position
    t = 2s*j holds the sum of the pair (2s*j, 2s*j + s) of the previous level: adjacent pairs of what is left."""
    v = np.asarray(v, F32)
    b = v.shape[-1]
    if b & (b - 1):
        raise ValueError(f"itree needs a power-of-two block, got {b}")
    while v.shape[-1] > 1:
        v = v[..., 0::2] + v[..., 1::2]
    return v[..., 0]


def _vec_sum(v: np.ndarray) -> np.ndarray:
    """lad::vec_sum over the last axis (4 or 8 values in memory order): (e0 + e1) + (e2 + e3), and
    ((e0 + e1) + (e2 + e3)) + ((e4 + e5) + (e6 + e7))."""
    while v.shape[-1] > 1:
        v = v[..., 0::2] + v[..., 1::2]
    return v[..., 0]


def _serial_partials(p: np.ndarray, block: int) -> F32:
    """tcr::combine_partials<BLOCK>(p, count, 1): thread t adds p[t], p[t + BLOCK], ... from 0.0f, then block_fold."""
    return block_fold(serial_sum(np.asarray(p, F32)[None, :], block))[0]


def _head_count(align: int, n: int, ctype: str) -> int:
    """lad::head_count: elements before the first 16-byte boundary (align = start address mod 16), at most n."""
    mis = align & 15
    h = (16 - mis) // _ITEMSIZE[ctype] if mis else 0
    return min(h, n)


def _thread_sum_vec(x: np.ndarray, n: int, head: int, vec: int, grid: int, block: int) -> np.ndarray:
    """lad::thread_sum_vec for every worker g = b*BLOCK + t of the grid: returns (grid, block)."""
    workers = grid * block
    acc = np.zeros(workers, F32)
    if head:
        acc[:head] = acc[:head] + x[:head]
    nv = (n - head) // vec
    t0 = head + nv * vec
    if nv:
        vs = _vec_sum(x[head:t0].reshape(nv, vec))
        for start in range(0, nv, workers):  # grid-stride position r = start / W
            cnt = min(workers, nv - start)
            acc[:cnt] = acc[:cnt] + vs[start:start + cnt]
    tail = n - t0
    if tail:
        acc[:tail] = acc[:tail] + x[t0:n]
    return acc.reshape(grid, block)


def _grid_stride_pairs(x: np.ndarray, n: int, grid: int, block: int) -> np.ndarray:
    """The per-thread loop of reduce6/reduce7: v = 0.0f; for i = b*2B + t, i + 2BG, ... < n: v += x[i], then
    v += x[i + B] if i + B < n. Returns (grid, block)."""
    step = 2 * block * grid
    rounds = _cdiv(n, step)
    xp = _pad(x, rounds * step).reshape(rounds, grid, 2, block)
    v = np.zeros((grid, block), F32)
    pos = np.arange(step, dtype=np.int64).reshape(grid, 2, block)
    for r in range(rounds):
        if (r + 1) * step <= n:  # every i and i + B of this position is in range
            v = v + xp[r, :, 0]
            v = v + xp[r, :, 1]
        else:
            idx = pos + r * step
            v = np.where(idx[:, 0] < n, v + xp[r, :, 0], v)
            v = np.where(idx[:, 1] < n, v + xp[r, :, 1], v)
    return v


# ------------------------------------------------------------------------------------------------ kernels

def _parse(kernel: str) -> tuple[str, list[str]]:
    m = re.fullmatch(r"\s*(\w+)\s*(?:<(.*)>)?\s*", kernel)
    if not m:
        raise ValueError(f"cannot parse kernel name {kernel!r}")
    args = [a.strip() for a in m.group(2).split(",")] if m.group(2) else []
    return m.group(1), args


def _launch(base: str, targs: list[str], x: np.ndarray, n: int, align: int, grid: int, block: int) -> np.ndarray:
    """One launch of a deterministic ladder kernel: its G outputs (partials, or the result for one-output kernels)
    in fp32. x: the launch's input values (fp32, exact conversions), n of them; align: its start address mod 16."""
    ctype = targs[0]
    if base in ("ladder_reduce0", "ladder_reduce1", "ladder_reduce2"):
        v = _pad(x, grid * block).reshape(grid, block)
        return _itree(v) if base != "ladder_reduce2" else _tree(v)
    if base in ("ladder_reduce3", "ladder_reduce4"):
        return _tree(_folded_loads(x, n, grid, block, 2))
    if base == "ladder_reduce5":
        bl, fl = int(targs[2]), int(targs[3])
        _check(bl == block, f"{base}: template BLOCK {bl} != launch block {block}")
        return _tree(_folded_loads(x, n, grid, block, fl))
    if base in ("ladder_reduce6", "ladder_reduce7"):
        _check(int(targs[2]) == block, f"{base}: template BLOCK != launch block")
        v = _grid_stride_pairs(x, n, grid, block)
        return _tree(v) if base == "ladder_reduce6" else block_fold(v)
    if base in ("ladder_float4", "ladder_last_block", "ladder_grid_sync", "ladder_cluster"):
        _check(int(targs[2]) == block, f"{base}: template BLOCK != launch block")
        head = _head_count(align, n, ctype)
        sums = block_fold(_thread_sum_vec(x, n, head, _VEC[ctype], grid, block))  # (G,) block sums
        if base == "ladder_float4":
            return sums
        if base == "ladder_cluster":
            cluster = int(targs[3])
            _check(grid % cluster == 0 and 1 <= cluster <= 32, f"{base}: grid {grid} not whole clusters of {cluster}")
            lanes = np.zeros((grid // cluster, 32), F32)  # warp 0 of rank 0: lane r < CLUSTER holds rank r's sum
            lanes[:, :cluster] = sums.reshape(-1, cluster)
            sums = fold(lanes)  # tcr::warp_fold over the 32 lanes
        return np.array([_serial_partials(sums, block)], F32)
    raise ValueError(f"ladder emulator: unknown kernel {base!r}")


def _folded_loads(x: np.ndarray, n: int, grid: int, block: int, nfold: int) -> np.ndarray:
    """v[t] = x[i0] (0.0f if i0 >= n), then v += x[i0 + f*B] for f = 1..nfold-1 where < n (i0 = b*B*nfold + t)."""
    span = block * nfold
    xp = _pad(x, grid * span).reshape(grid, nfold, block)
    v = xp[:, 0]
    if nfold > 1:
        idx = (np.arange(grid, dtype=np.int64)[:, None, None] * span
               + np.arange(nfold, dtype=np.int64)[None, :, None] * block
               + np.arange(block, dtype=np.int64)[None, None, :])
        for f in range(1, nfold):
            v = np.where(idx[:, f] < n, v + xp[:, f], v)
    return v


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


# ------------------------------------------------------------------------------------------------ plans

def replay(plan: Plan, data: np.ndarray) -> np.ndarray:
    """The fp32 result (shape (1,)) of a deterministic ladder ``plan`` on the problem's n elements (``data``: float16
    or float32, 1-D, memory order), replaying every launch of the plan in order."""
    if plan.method in ATOMIC or any(_parse(ln.kernel)[0] in ("ladder_atomic", "ladder_atomic_block", "ladder_zero")
                                    for ln in plan.launches):
        raise ValueError(f"method {plan.method!r} adds with float atomics in the order the memory system serialises "
                         "them: its order of additions is not reproducible, so it has no bit-exact emulator")
    if plan.method not in DETERMINISTIC:
        raise ValueError(f"ladder emulator: not a ladder rung: {plan.method!r}")
    x = np.asarray(data).reshape(-1)
    n0 = plan.problem.n
    _check(x.shape[0] == n0, f"ladder emulator: {x.shape[0]} values for a problem of {n0}")
    cur = x.astype(F32)  # tcr::to_float: exact
    align = plan.problem.align
    ws_regions: dict[int, np.ndarray] = {}
    result = None
    for k, ln in enumerate(plan.launches):
        base, targs = _parse(ln.kernel)
        src, n, dst = ln.args[0], int(ln.args[1]), ln.args[2]
        grid, block = ln.grid[0], ln.block[0]
        if k == 0:
            _check(src == Buf("x") and n == n0, f"launch 0 of {plan.method} does not read x[0..n)")
            inp, a = cur, align
        else:
            _check(src.name == "ws" and src.offset in ws_regions, f"launch {k} of {plan.method}: unknown input {src}")
            inp = ws_regions[src.offset]
            _check(inp.shape[0] == n, f"launch {k} of {plan.method}: reads {n} values, {inp.shape[0]} written")
            a = (src.offset * 4) & 15  # the workspace is 256-byte aligned; regions start at multiples of 4 floats
        _check(targs[0] == ("float" if k else {"float32": "float", "float16": "__half"}[plan.in_dtype]),
               f"launch {k} of {plan.method}: input type {targs[0]}")
        outs = np.asarray(_launch(base, targs, inp, n, a, grid, block), F32).reshape(-1)
        if dst == Buf("out"):
            result = outs[:1]
        else:
            _check(dst.name == "ws", f"launch {k} of {plan.method}: unknown output {dst}")
            ws_regions[dst.offset] = outs
    _check(result is not None, f"{plan.method}: no launch writes out")
    return result


def emulate(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    """fp32 output (flattened, one value) of a deterministic ladder plan on the problem's data (``host_problem_data``);
    ``model`` unused (no tensor cores). ValueError for the atomic rungs."""
    with np.errstate(over="ignore", invalid="ignore"):  # fp32 overflow to inf (and inf - inf) as on the GPU
        return np.asarray(replay(plan, data), F32).reshape(-1)
