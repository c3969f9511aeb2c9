"""The canonical CUDA-core orders of ``kernels/common.cuh``, in fp32 round-to-nearest NumPy arithmetic.

fold            warp_fold / warp_fold_rows: xor butterfly = folding the values in halves, v[:h] + v[h:], repeatedly.
block_combine   per-warp totals -> warp 0 loads them (0.0 past the last warp) and folds 32 lanes.
block_fold      fold each warp's 32 lanes, then block_combine.
serial_sum      thread i of T adds p[i], p[i + T], ... left to right from 0.0 (combine_partials' first step);
                with T None, one thread adds everything in order from 0.0.
combine_grid    a grid's block partials -> the result (combine_grid_slots: combine_partials' order, or in two levels).
"""

from __future__ import annotations

import numpy as np

__all__ = ["fold", "block_combine", "block_fold", "serial_sum", "combine_grid"]

F32 = np.float32


def fold(v: np.ndarray) -> np.ndarray:
    """Halving fold over the last axis (a power of two long): the value every lane holds after the butterfly."""
    v = np.asarray(v, F32)
    n = v.shape[-1]
    if n & (n - 1):
        raise ValueError(f"fold needs a power-of-two length, got {n}")
    while v.shape[-1] > 1:
        h = v.shape[-1] // 2
        v = v[..., :h] + v[..., h:]
    return v[..., 0]


def block_combine(warp_totals: np.ndarray) -> np.ndarray:
    """[..., WARPS] per-warp totals -> block total (one warp: unchanged)."""
    warp_totals = np.asarray(warp_totals, F32)
    warps = warp_totals.shape[-1]
    if warps == 1:
        return warp_totals[..., 0]
    pad = np.zeros(warp_totals.shape[:-1] + (32 - warps,), F32)
    return fold(np.concatenate([warp_totals, pad], axis=-1))


def block_fold(v: np.ndarray) -> np.ndarray:
    """[..., BLOCK] thread values -> block total."""
    v = np.asarray(v, F32)
    block = v.shape[-1]
    return block_combine(fold(v.reshape(v.shape[:-1] + (block // 32, 32))))


def serial_sum(p: np.ndarray, threads: int | None) -> np.ndarray:
    """Thread i of ``threads`` adds p[..., i], p[..., i + threads], ... from 0.0 (returns [..., threads]); with
    ``threads`` None one running sum over the last axis from 0.0 (returns [...])."""
    p = np.asarray(p, F32)
    count = p.shape[-1]
    if threads is None:
        acc = np.zeros(p.shape[:-1], F32)
        for j in range(count):
            acc = acc + p[..., j]
        return acc
    acc = np.zeros(p.shape[:-1] + (threads,), F32)
    for j in range(0, count, threads):
        part = p[..., j:j + threads]
        acc[..., :part.shape[-1]] = acc[..., :part.shape[-1]] + part
    return acc


def combine_grid(partials: np.ndarray, block: int, two_level: bool) -> np.ndarray:
    """combine_grid_slots<BLOCK, TWO_LEVEL> of ``kernels/common.cuh`` (and combine_grid2's order, tensorcore_f32.cuh):
    [grid] block partials -> the result (a 0-d array).
    combine_partials (thread i of ``block`` adds p[i], p[i + block], ... from 0.0, then block_fold); ``two_level``:
    first each group of ``block`` consecutive partials (thread t: 0.0 + p[t], then block_fold), then the groups'
    totals the same way as one combine_partials."""
    p = np.asarray(partials, F32)
    if two_level:
        groups = -(-p.shape[-1] // block)
        padded = np.zeros(groups * block, F32)
        padded[:p.shape[-1]] = p
        p = block_fold(serial_sum(padded.reshape(groups, block), block))
    return block_fold(serial_sum(p, block))
