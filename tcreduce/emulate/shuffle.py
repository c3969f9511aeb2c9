"""Emulator twin of ``kernels/shuffle.cu`` (method "shuffle"): a direct transcription of the order comments of
shuffle_flat, shuffle_rows and shuffle_cols. float32 NumPy additions round to nearest, like the GPU's fp32 adds;
padding elements are +0.0, and adding them never changes an accumulator that started at +0.0. Time is linear in the
number of elements (a few NumPy passes)."""

from __future__ import annotations

import numpy as np

from .._plan import Plan, param_dict
from ..plans._common import cdiv as _cdiv
from .folds import block_fold, combine_grid, fold, serial_sum

__all__ = ["emulate", "replay"]


def _xor_fold(v: np.ndarray, width: int, axis: int = -1) -> np.ndarray:
    """The xor butterfly over offsets width/2 .. 1 along ``axis`` (every lane ends with lane 0's value)."""
    return fold(np.moveaxis(np.asarray(v, np.float32), axis, -1)) if width > 1 else np.moveaxis(v, axis, -1)[..., 0]


def _serial_partials(p: np.ndarray, block: int) -> np.ndarray:
    """tcr::combine_partials: thread i adds p[i], p[i + block], ... from +0.0, then block_fold."""
    return block_fold(serial_sum(p, block))


def replay(plan: Plan, elems: np.ndarray) -> np.ndarray:
    """The fp32 result of ``plan`` on the problem's elements (Flat: (n,), Rows: (m, k), Cols: (a, r, b), in memory
    order), replaying the order of additions documented in kernels/shuffle.cu. Returns (1,), (m,) or (a, b)."""
    p = param_dict(plan)
    xf = np.asarray(elems, dtype=np.float32)
    vec, block = p["vec"], p["block"]
    if p["kernel"] == "flat":
        n, head, nv, grid, rounds = xf.shape[0], p["head"], p["nv"], p["grid"], p.get("rounds", 0)
        threads = grid * block
        acc = np.zeros(threads, np.float32)
        a0 = np.float32(0.0)
        for e in list(range(head)) + list(range(head + nv * vec, n)):
            a0 = np.float32(a0 + xf[e])
        acc[0] = a0
        if rounds:  # block b's thread t: chunks b P + t, b P + t + BLOCK, ... of its range, P = BLOCK UNROLL ROUNDS
            per_thread = rounds * p["unroll"]
            ch = np.zeros((grid * per_thread * block, vec), np.float32)
            ch[:nv] = xf[head:head + nv * vec].reshape(nv, vec)
            ch = ch.reshape(grid, per_thread, block, vec).transpose(1, 0, 2, 3).reshape(per_thread, threads, vec)
        else:  # thread g: chunks g, g + T, g + 2T, ...
            per_thread = _cdiv(nv, threads)
            ch = np.zeros((per_thread * threads, vec), np.float32)
            ch[:nv] = xf[head:head + nv * vec].reshape(nv, vec)
            ch = ch.reshape(per_thread, threads, vec)
        for t in range(per_thread):
            for e in range(vec):
                acc = acc + ch[t, :, e]
        blocks = block_fold(acc.reshape(grid, block))
        return blocks[:1] if grid == 1 else combine_grid(blocks, block, two_level=bool(rounds)).reshape(1)
    if p["kernel"] == "rows":
        m, k = xf.shape
        chunks, g, splits = p["chunks"], p["group"], p["splits"]
        if g <= 32:
            per_lane = _cdiv(chunks, g)
            pad = np.zeros((m, per_lane * g * vec), np.float32)
            pad[:, :k] = xf
            pad = pad.reshape(m, per_lane, g, vec)
            acc = np.zeros((m, g), np.float32)
            for t in range(per_lane):
                for e in range(vec):
                    acc = acc + pad[:, t, :, e]
            return _xor_fold(acc, g) if g > 1 else acc[:, 0]
        q = splits * g  # g: a multiple of 32 (several warps per row), BLOCK when a block takes a row or a split
        rounds = _cdiv(chunks, q)
        pad = np.zeros((m, rounds * q * vec), np.float32)
        pad[:, :k] = xf
        pad = pad.reshape(m, rounds, splits, g, vec)
        acc = np.zeros((m, splits, g), np.float32)
        for t in range(rounds):
            for e in range(vec):
                acc = acc + pad[:, t, :, :, e]
        per_split = block_fold(acc)  # (m, splits): warp folds, then the group's first warp folds their totals
        return per_split[:, 0] if splits == 1 else _serial_partials(per_split, block)
    # cols
    a, r, b = xf.shape
    ct, jt, nj, splits, cvecs = p["ct"], p["jt"], p["nj"], p["splits"], p["cvecs"]
    ncv = a * cvecs
    strips = _cdiv(ncv, ct)
    pad = np.zeros((a, r, cvecs * vec), np.float32)
    pad[:, :, :b] = xf
    chunked = pad.reshape(a, r, cvecs, vec).transpose(1, 0, 2, 3).reshape(r, ncv, vec)
    qj = splits * jt
    rounds = _cdiv(r, qj)
    xs = np.zeros((rounds * qj, strips * ct, vec), np.float32)
    xs[:r, :ncv] = chunked
    xs = xs.reshape(rounds, splits, jt, strips * ct, vec)
    acc = np.zeros((splits, jt, strips * ct, vec), np.float32)
    for t in range(rounds):
        acc = acc + xs[t]
    if ct < 32:
        lj = 32 // ct
        groups = _xor_fold(acc.reshape(splits, block // 32, lj, strips * ct, vec), lj, axis=2)
    else:
        groups = acc
    v = groups[:, 0]
    for gi in range(1, nj):
        v = v + groups[:, gi]
    if splits > 1:
        lanes = _cdiv(splits, 32) * 32
        sp = np.zeros((lanes,) + v.shape[1:], np.float32)
        sp[:splits] = v
        lane_acc = np.zeros((32,) + v.shape[1:], np.float32)
        for t in range(lanes // 32):
            lane_acc = lane_acc + sp[t * 32:(t + 1) * 32]
        v = _xor_fold(lane_acc, 32, axis=0)
    else:
        v = v[0]
    return v[:ncv].reshape(a, cvecs * vec)[:, :b]



def emulate(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    """fp32 outputs of a shuffle plan (flattened) for the problem's data (``host_problem_data``); ``model`` unused
    (no tensor cores)."""
    return np.asarray(replay(plan, data), np.float32).reshape(-1)
