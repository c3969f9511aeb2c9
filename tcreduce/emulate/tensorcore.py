"""Emulator twin of ``kernels/tensorcore.cu`` (methods "tensorcore" and "tensorcore_chained"; fp16, bf16, fp8).

Replays the plan's order of additions exactly: every mma through :func:`~tcreduce.emulate.mma_model.fused_rowsum`
(the tensor-core model), every CUDA-core addition as an IEEE fp32 round-to-nearest NumPy addition, the warp folds and
block combinations of ``kernels/common.cuh``. Time is linear in the number of elements (the model dominates:
about 1 s per 2^24 elements on one core), plus a Python loop over the per-warp mma sequence length.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .._layout import Cols, Flat, Rows
from .._plan import Plan, param_dict
from .folds import block_combine, combine_grid, fold, serial_sum
from .mma_model import fused_rowsum

__all__ = ["emulate_tensorcore"]

F32 = np.float32


class _Chain:
    """The flush rule of tensorcore.cu: per accumulator, mmas chained in C; every CHAIN-th mma (and once at the end
    if any are pending) ``acc += C`` (round to nearest) and C = 0. Vectorised over any batch of accumulators."""

    def __init__(self, shape: tuple[int, ...], chain: int, model: str):
        self.c = np.zeros(shape, F32)
        self.acc = np.zeros(shape, F32)
        self.pending = np.zeros(shape, np.int64)
        self.chain = chain
        self.model = model

    def mma(self, rows: np.ndarray, active: np.ndarray | bool = True) -> None:
        """rows: float16 or bfloat16 [..., 16] (one mma row per accumulator); active: which accumulators run it."""
        d = fused_rowsum(rows, self.c, model=self.model)
        active = np.broadcast_to(active, self.c.shape)
        self.c = np.where(active, d, self.c)
        self.pending = self.pending + active
        self._flush(self.pending == self.chain)

    def _flush(self, mask: np.ndarray) -> None:
        self.acc = np.where(mask, self.acc + self.c, self.acc)
        self.c = np.where(mask, F32(0), self.c)
        self.pending = np.where(mask, 0, self.pending)

    def finish(self) -> np.ndarray:
        self._flush(self.pending > 0)
        return self.acc


def _fragment_rows(lanes: np.ndarray) -> np.ndarray:
    """[..., 32 lanes, 8 halves] (a lane's 16-byte load as its A fragment) -> [..., 16 rows, 16 values]: row g takes
    halves 0, 1, 4, 5 of lanes 4g..4g+3, row g + 8 their halves 2, 3, 6, 7."""
    q = lanes.reshape(lanes.shape[:-2] + (8, 4, 8))  # [..., g, t, h]
    lo = q[..., [0, 1, 4, 5]].reshape(lanes.shape[:-2] + (8, 16))
    hi = q[..., [2, 3, 6, 7]].reshape(lanes.shape[:-2] + (8, 16))
    return np.concatenate([lo, hi], axis=-2)


class FlatGrid(NamedTuple):
    """The walk of a flat tensor-core plan (tc_flat, tc_kahan_flat, tc32_flat): ``nvec`` vectors of ``vec`` elements
    after a ``head``, a ``tail`` after them; ``threads`` = grid * block, ``w`` the warp indices. Warp w's lane l loads,
    in loop trip ``it`` (of ``iters[w]``) and unroll slot u, vector ``base[w] + it * step + u * stride + l``, zero at
    or past ``end[w]``: the resident grid-stride walk (every warp to nvec), or with ``rounds`` (a one-pass grid) the
    vectors [b P, (b + 1) P) of the warp's block b, P = block * unroll * rounds."""

    n: int
    head: int
    nvec: int
    tail: int
    block: int
    grid: int
    unroll: int
    threads: int
    warps: int
    w: np.ndarray
    iters: np.ndarray
    base: np.ndarray
    end: np.ndarray
    step: int
    stride: int


def flat_grid(plan: Plan, vec: int = 8) -> FlatGrid:
    """:class:`FlatGrid` of a flat plan whose vectors hold ``vec`` elements (8 halves; 4 floats for tc32_flat)."""
    p = param_dict(plan)
    n, head, nvec, block, grid, unroll = plan.problem.n, p["head"], p["nvec"], p["block"], p["grid"], p["unroll"]
    rounds = p.get("rounds", 0)
    threads = grid * block
    warps = threads // 32
    w = np.arange(warps)
    if rounds:  # a one-pass grid: block b owns vectors [b P, (b + 1) P), its warps stride by the block
        span, b = block * unroll * rounds, w // (block // 32)  # b: each warp's block
        base = b * span + 32 * (w % (block // 32))
        end = np.minimum((b + 1) * span, nvec)
        stride = block
    else:
        base, end, stride = 32 * w, np.full(warps, nvec), threads
    iters = np.where(base < end, -(-(end - base) // (stride * unroll)), 0)  # loop trips of each warp
    return FlatGrid(n, head, nvec, n - head - vec * nvec, block, grid, unroll, threads, warps, w, iters, base, end,
                    stride * unroll, stride)


def _flat(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    p = param_dict(plan)
    vec = p["vec"]  # a lane's 16-byte load: vec // 8 A fragments (fp8: 2)
    walk = flat_grid(plan, vec)
    n, head, nvec, tail, block, grid, unroll, warps, w, iters = (walk.n, walk.head, walk.nvec, walk.tail, walk.block,
                                                                 walk.grid, walk.unroll, walk.warps, walk.w, walk.iters)
    mmas = iters * unroll
    chain = _Chain((warps, 16), p["chain"], model)
    if head + tail:
        extras = np.zeros(256, data.dtype)
        extras[:head + tail] = np.concatenate([data[:head], data[n - tail:]])
        rows = np.zeros((warps, 16, 16), data.dtype)
        rows[0] = _fragment_rows(extras.reshape(32, 8))
        chain.mma(rows, (w == 0)[:, None])
    body = np.concatenate([data[head:head + vec * nvec].reshape(nvec, vec), np.zeros((1, vec), data.dtype)])
    lane = np.arange(32)
    for m in range(int(mmas.max(initial=0))):
        it, u = divmod(m, unroll)
        idx = walk.base[:, None] + it * walk.step + u * walk.stride + lane  # [warps, 32] vector indices
        idx = np.where(idx < walk.end[:, None], idx, nvec)  # past the end (of the block's range): the zero row
        for f in range(0, vec, 8):  # the load's A fragments in order
            chain.mma(_fragment_rows(body[idx][..., f:f + 8]), (m < mmas)[:, None])
    acc = chain.finish()
    lane_value = acc[:, :8] + acc[:, 8:]  # acc_lo + acc_hi of lanes with g = 0..7
    warp_total = fold(lane_value)  # warp_fold_rows: xor 16, 8, 4 over g
    block_total = block_combine(warp_total.reshape(grid, block // 32))
    if grid == 1:
        return block_total.reshape(1)
    return combine_grid(block_total, block, two_level=bool(p.get("rounds", 0))).reshape(1)


def _segments(values: np.ndarray, chunk: int, mma_rows: Callable[[np.ndarray], list[np.ndarray]], accumulators: int,
              warp_value: Callable[[np.ndarray], np.ndarray], splits: int, warps: int, chain_len: int,
              model: str) -> np.ndarray:
    """Shared by tc_rows, tc_rows_stream and tc_cols: ``values`` [S, L] float16 segments (rows, or columns), cut into
    chunks of ``chunk`` values; ``mma_rows`` maps chunks [..., chunk] to the mmas each makes, in order, as their mma
    rows [..., accumulators, 16] (one flush-rule accumulator per mma row a warp keeps for the segment);
    ``warp_value`` maps the finished accumulators [..., accumulators] to the warp's value. Chunk ranges per split;
    warp q of ``warps`` takes chunks q, q + warps, ...; per split the warps' values are added in q order from 0 (one
    warp: its value), then the splits in order from 0 (one split: its value)."""
    s_count, length = values.shape
    nchunks = -(-length // chunk)
    per_split = -(-nchunks // splits)
    per_warp = -(-per_split // warps)
    grid = np.zeros((s_count, splits * per_split, chunk), values.dtype)
    flat = np.zeros((s_count, nchunks * chunk), values.dtype)
    flat[:, :length] = values
    grid[:, :nchunks] = flat.reshape(s_count, nchunks, chunk)
    valid_chunk = np.arange(splits * per_split) < nchunks  # chunks past the end do not run (empty split tails)
    grid = grid.reshape(s_count, splits, per_split, chunk)
    valid_chunk = valid_chunk.reshape(splits, per_split)
    chain = _Chain((s_count, splits, warps, accumulators), chain_len, model)
    for i in range(per_warp):
        pos = np.arange(warps) + i * warps  # chunk position in the split, per warp
        ok = pos < per_split
        posc = np.minimum(pos, per_split - 1)
        block = grid[:, :, posc, :]  # [S, splits, warps, chunk]
        active = (ok[None, :] & valid_chunk[:, posc])[None, :, :, None]  # [1, splits, warps, 1]
        for rows in mma_rows(block):
            chain.mma(rows, active)
    value = warp_value(chain.finish())  # [S, splits, warps]
    group = value[..., 0] if warps == 1 else serial_sum(value, None)
    return group[:, 0] if splits == 1 else serial_sum(group, None)


def _rows(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    p = param_dict(plan)
    if p.get("stream"):  # tc_rows_stream: a chunk is a 16-byte load per lane, its mmas as in tc_flat, 16 accumulators
        chunk = p["chunk"]
        vec = chunk // 32  # elements per lane: 8, or 16 for fp8 (two A fragments, values 0..7 then 8..15)

        def mmas(b: np.ndarray) -> list[np.ndarray]:
            lanes = b.reshape(b.shape[:-1] + (32, vec))
            return [_fragment_rows(lanes[..., f:f + 8]) for f in range(0, vec, 8)]

        rpc = p.get("rows_per_chunk", 1)
        if rpc > 1:  # packed rows: a chunk holds rpc rows, each lane value (a quad) one row's; the row's quads folded
            m = data.shape[0]
            units = -(-m // rpc)
            packed = np.zeros((units * rpc, data.shape[1]), data.dtype)
            packed[:m] = data
            chain = _Chain((units, 16), p["chain"], model)
            for rows in mmas(packed.reshape(units, chunk)):
                chain.mma(rows)
            acc = chain.finish()
            lane_value = acc[:, :8] + acc[:, 8:]  # [units, quad g]: quad g in row g // (8 // rpc) of the chunk
            return fold(lane_value.reshape(units, rpc, 8 // rpc)).reshape(-1)[:m]

        return _segments(np.asarray(data), chunk, mmas, 16, lambda acc: fold(acc[..., :8] + acc[..., 8:]),
                         p["splits"], p["wpt"], p["chain"], model)
    vec = p["vec"]
    if vec == 4:
        columns = [np.arange(16)]
    else:  # two mmas per 32-column chunk: columns 8t + {0..3}, then 8t + {4..7}, t = 0..3
        t = np.arange(4)[:, None] * 8
        columns = [(t + np.arange(4)).reshape(-1), (t + 4 + np.arange(4)).reshape(-1)]
    return _segments(np.asarray(data), 4 * vec, lambda b: [b[..., None, cols] for cols in columns], 1,
                     lambda acc: acc[..., 0], p["splits"], p["wpt"], p["chain"], model)


def _cols(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    p = param_dict(plan)
    a, r, b = data.shape
    segs = np.ascontiguousarray(np.transpose(data, (0, 2, 1))).reshape(a * b, r)
    return _segments(segs, 16, lambda blk: [blk[..., None, :]], 1, lambda acc: acc[..., 0], p["splits"], p["wps"],
                     p["chain"], model)


def emulate_tensorcore(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    """fp32 outputs of the plan (flattened problem outputs) for the problem's data (see host_problem_data). fp8 data
    goes through the fp16 arithmetic, converted exactly, as the kernels convert it in registers."""
    if plan.in_dtype == "float32":  # three bf16 pieces per value: tcreduce/emulate/tensorcore_fp32.py
        from .tensorcore_fp32 import emulate_tensorcore_fp32
        return emulate_tensorcore_fp32(plan, data, model)
    prob = plan.problem
    if plan.in_dtype.startswith("float8"):
        data = np.asarray(data).astype(np.float16)
    if isinstance(prob, Flat):
        return _flat(plan, data, model)
    if isinstance(prob, Rows):
        return _rows(plan, data, model)
    if isinstance(prob, Cols):
        return _cols(plan, data, model)
    raise TypeError(prob)
