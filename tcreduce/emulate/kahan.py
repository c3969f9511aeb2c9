"""Emulator twin of ``kernels/kahan.cu`` (methods "kahan" and "tensorcore_kahan"): the kernels' order of operations
replayed bit for bit, vectorised over threads (kahan_flat), outputs and lanes (kahan_seg) or warps (tc_kahan_flat).
Every operation is an IEEE fp32
round-to-nearest NumPy operation, like the GPU's __fadd_rn / __fsub_rn; the mmas go through the tensor-core model
(:func:`~tcreduce.emulate.mma_model.fused_rowsum`). Time: linear in the elements, a few NumPy passes of the per-thread
chains plus the model for tensorcore_kahan.
"""

from __future__ import annotations

import numpy as np

from .._plan import Plan, param_dict
from ..plans._common import cdiv as _cdiv
from .mma_model import fused_rowsum
from .tensorcore import _fragment_rows, flat_grid

__all__ = ["emulate", "kahan_add", "pair_add", "pair_fold", "Pairs"]

F32 = np.float32


class Pairs:
    """Compensated values (hi, lo) with their plain sums p, fp32 arrays of one shape."""

    def __init__(self, hi, lo, p):
        self.hi, self.lo, self.p = np.asarray(hi, F32), np.asarray(lo, F32), np.asarray(p, F32)

    @staticmethod
    def zeros(shape) -> "Pairs":
        z = np.zeros(shape, F32)
        return Pairs(z, z, z)

    def take(self, fn) -> "Pairs":
        return Pairs(fn(self.hi), fn(self.lo), fn(self.p))

    def result(self) -> np.ndarray:
        """hi + lo, or p where that is NaN and p is not (kahan.cu's result())."""
        r = self.hi + self.lo
        return np.where(np.isnan(r) & ~np.isnan(self.p), self.p, r)


def kahan_add(s, c, p, x, active=True):
    """One Kahan step (s, c) += x with the plain sum p += x, where ``active``; returns (s, c, p)."""
    y = x - c
    t = s + y
    c2 = (t - s) - y
    return np.where(active, t, s), np.where(active, c2, c), np.where(active, p + x, p)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def pair_add(a: Pairs, b: Pairs) -> Pairs:
    s, e = _two_sum(a.hi, b.hi)
    e = e + (a.lo + b.lo)
    hi, lo = _two_sum(s, e)
    return Pairs(hi, lo, a.p + b.p)


def pair_fold(v: Pairs, axis: int = -1) -> Pairs:
    """The butterfly over ``axis`` (a power of two long) = folding in halves with pair_add (commutative)."""
    v = v.take(lambda a: np.moveaxis(a, axis, -1))
    while v.hi.shape[-1] > 1:
        h = v.hi.shape[-1] // 2
        v = pair_add(v.take(lambda a: a[..., :h]), v.take(lambda a: a[..., h:]))
    return v.take(lambda a: a[..., 0])


def _block_combine(warp_totals: Pairs) -> Pairs:
    """[..., WARPS] per-warp pairs -> warp 0 loads them ((0, 0, 0) past the last warp) and folds 32 lanes."""
    warps = warp_totals.hi.shape[-1]
    if warps == 1:
        return warp_totals.take(lambda a: a[..., 0])
    pad = lambda a: np.concatenate([a, np.zeros(a.shape[:-1] + (32 - warps,), F32)], axis=-1)  # noqa: E731
    return pair_fold(warp_totals.take(pad))


def _finish_grid(block_totals: Pairs, block: int) -> np.ndarray:
    """finish_grid: one block -> its pair; else thread i pair_adds p[i], p[i + BLOCK], ... from zero, then the
    block's pair fold. Returns the fp32 result (1,)."""
    grid = block_totals.hi.shape[-1]
    if grid == 1:
        return block_totals.result().reshape(1)
    acc = Pairs.zeros(block)
    for j in range(0, grid, block):
        part = block_totals.take(lambda a: a[j:j + block])
        k = part.hi.shape[0]
        mine = pair_add(acc.take(lambda a: a[:k]), part)
        acc = Pairs(np.concatenate([mine.hi, acc.hi[k:]]), np.concatenate([mine.lo, acc.lo[k:]]),
                    np.concatenate([mine.p, acc.p[k:]]))
    warps = pair_fold(acc.take(lambda a: a.reshape(block // 32, 32)))
    return _block_combine(warps).result().reshape(1)


def _kahan_flat(plan: Plan, data: np.ndarray) -> np.ndarray:
    p = param_dict(plan)
    x = np.asarray(data, F32)
    n, vec, block, grid, head, nv = x.shape[0], p["vec"], p["block"], p["grid"], p["head"], p["nv"]
    threads = grid * block
    s, c, ps = (np.zeros(threads, F32) for _ in range(3))
    first = np.arange(threads) == 0
    for e in list(range(head)) + list(range(head + nv * vec, n)):
        s, c, ps = kahan_add(s, c, ps, F32(x[e]), first)
    rounds = _cdiv(nv, threads)
    ch = np.zeros((rounds * threads, vec), F32)
    ch[:nv] = x[head:head + nv * vec].reshape(nv, vec)
    ch = ch.reshape(rounds, threads, vec)
    valid = (np.arange(rounds * threads) < nv).reshape(rounds, threads)
    with np.errstate(invalid="ignore", over="ignore"):
        for t in range(rounds):
            for e in range(vec):
                s, c, ps = kahan_add(s, c, ps, ch[t, :, e], valid[t])
        lanes = Pairs(s, -c, ps).take(lambda a: a.reshape(grid, block // 32, 32))
        blocks = _block_combine(pair_fold(lanes))  # [grid]
        return _finish_grid(blocks, block)


def _tc_kahan_flat(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    n, head, nvec, tail, block, grid, unroll, threads, warps, w, iters = flat_grid(plan)[:11]  # resident grid
    step = threads * unroll
    body = np.concatenate([np.asarray(data[head:head + 8 * nvec], np.float16).reshape(nvec, 8),
                           np.zeros((1, 8), np.float16)])
    lane = np.arange(32)
    s, c, ps = (np.zeros((warps, 16), F32) for _ in range(3))  # per warp: rows g (lo) and g + 8 (hi)

    def mma(rows: np.ndarray, active: np.ndarray) -> None:
        nonlocal s, c, ps
        d = fused_rowsum(rows, np.float32(0), model=model)  # [warps, 16], C = 0
        s, c, ps = kahan_add(s, c, ps, d, active[:, None])

    with np.errstate(invalid="ignore", over="ignore"):
        if head + tail:
            extras = np.zeros(256, np.float16)
            extras[:head + tail] = np.concatenate([data[:head], data[n - tail:]])
            rows = np.zeros((warps, 16, 16), np.float16)
            rows[0] = _fragment_rows(extras.reshape(32, 8))
            mma(rows, w == 0)
        for m in range(int(iters.max(initial=0)) * unroll):
            it, u = divmod(m, unroll)
            slot = it * step + u * threads + 32 * w  # the warp's first vector in this slot
            active = (it < iters) & (slot < nvec)  # slots with no vector in any lane do no mma
            idx = slot[:, None] + lane
            idx = np.where(idx < nvec, idx, nvec)  # past the end: the zero row
            mma(_fragment_rows(body[idx]), active)
        rowp = Pairs(s, -c, ps)
        lane_pair = pair_add(rowp.take(lambda a: a[:, :8]), rowp.take(lambda a: a[:, 8:]))  # [warps, 8 groups]
        warp_total = pair_fold(lane_pair)  # xor 16, 8, 4 over the groups
        blocks = _block_combine(warp_total.take(lambda a: a.reshape(grid, block // 32)))
        return _finish_grid(blocks, block)


def _kahan_seg(plan: Plan, data: np.ndarray) -> np.ndarray:
    """kahan_seg: per output and split, lane t of the G-lane group adds j = begin + t, begin + t + G, ...; the lanes'
    pairs fold in halves (G <= 32) or by warps then the block (G == BLOCK); the splits' pairs add in order from
    zero."""
    from .exact import problem_rows

    p = param_dict(plan)
    g, splits, block = p["group"], p["splits"], p["block"]
    rows = np.asarray(problem_rows(plan, data), F32)
    outputs, r = rows.shape
    per = _cdiv(r, splits)
    k = max(1, _cdiv(per, g))
    col = np.arange(splits)[:, None, None] * per + np.arange(k)[None, :, None] * g + np.arange(g)  # [splits, k, g]
    valid = (col < np.minimum(r, (np.arange(splits)[:, None, None] + 1) * per))
    vals = rows[:, np.minimum(col, r - 1)]  # [outputs, splits, k, g]
    s, c, ps = (np.zeros((outputs, splits, g), F32) for _ in range(3))
    with np.errstate(invalid="ignore", over="ignore"):
        for step in range(k):
            s, c, ps = kahan_add(s, c, ps, vals[:, :, step, :], valid[None, :, step, :])
        lanes = Pairs(s, -c, ps)
        if g == block:
            v = _block_combine(pair_fold(lanes.take(lambda a: a.reshape(outputs, splits, block // 32, 32))))
        else:
            v = pair_fold(lanes)  # [outputs, splits]
        if splits == 1:
            return v.result()[:, 0]
        acc = Pairs.zeros(outputs)
        for sp in range(splits):
            acc = pair_add(acc, v.take(lambda a: a[:, sp]))
        return acc.result()


def emulate(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    """fp32 outputs (flattened) of a kahan or tensorcore_kahan plan on the problem's data."""
    kernel = param_dict(plan)["kernel"]
    if kernel == "kahan_flat":
        return _kahan_flat(plan, data)
    if kernel == "kahan_seg":
        return _kahan_seg(plan, data)
    return _tc_kahan_flat(plan, data, model)
