"""Emulator twin of the float32 tensor-core kernels: the forms of ``kernels/tensorcore_f32.cuh`` (tc32_flat,
tc32_rows, tc32_cols, tc32_rows_stream, tc32_rows4) and the split format of ``kernels/tensorcore_fp32.cu`` (method
"tensorcore" on float32 input). ``tensorcore_tf32.py`` runs the same forms with the tf32 format.

A form replays which values each warp steps on, in which order, and how the lanes, warps, blocks and splits are
combined (CUDA-core additions as IEEE fp32 round-to-nearest NumPy additions, the folds of ``kernels/common.cuh``); a
format replays one step: the lane values [..., 32 lanes, 8] of a batch of warps -> their 16 mma-row accumulators,
every mma through :func:`~tcreduce.emulate.mma_model.fused_rowsum` (the tensor-core model). Time is linear in the
number of elements (three pieces per value through the model: about 0.1 us per value on one core), plus a Python loop
over the steps of one warp.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .._layout import Cols, Flat, Rows
from .._plan import Plan, param_dict
from ..plans._common import cdiv
from ..plans.tensorcore_fp32 import COLS_STRIP
from .mma_model import fused_rowsum
from .tensorcore import _fragment_rows, flat_grid

__all__ = ["emulate_tensorcore_fp32", "emulate_forms", "SplitFormat", "split_common", "split_own", "row_sigmas",
           "lane_sigmas",
           "two_sum", "add2", "value2"]

F32 = np.float32
U32 = np.uint32


def _bf16(bits: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return np.asarray(bits).astype(np.uint16).view(ml_dtypes.bfloat16)


def _top16(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, F32).view(U32) >> U32(16)


# ------------------------------------------------------------------------------------------------ F2 pairs
def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """tcr32::two_sum in float32: s = a + b, bb = s - a, t = (a - (s - bb)) + (b - bb)."""
    with np.errstate(invalid="ignore", over="ignore"):
        a, b = np.asarray(a, F32), np.asarray(b, F32)
        s = a + b
        bb = s - a
        return s, (a - (s - bb)) + (b - bb)


def add2(xs, xe, ys, ye) -> tuple[np.ndarray, np.ndarray]:
    """tcr32::add2: (s, t) = two_sum(xs, ys); e = (xe + ye) + t."""
    s, t = two_sum(xs, ys)
    with np.errstate(invalid="ignore", over="ignore"):
        return s, (np.asarray(xe, F32) + np.asarray(ye, F32)) + t


def value2(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """tcr32::value2: s + e, or s where s is infinite."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(np.isinf(s), s, s + e).astype(F32)


def fold2(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """warp_fold2 / warp_fold_rows2 over the last axis (a power of two long): pairs folded in halves with add2."""
    while s.shape[-1] > 1:
        h = s.shape[-1] // 2
        s, e = add2(s[..., :h], e[..., :h], s[..., h:], e[..., h:])
    return s[..., 0], e[..., 0]


def block_combine2(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[..., WARPS] warp pairs -> the block pair (block_combine2: padded with (0, 0) to 32, warp_fold2)."""
    warps = s.shape[-1]
    if warps == 1:
        return s[..., 0], e[..., 0]
    pad = np.zeros(s.shape[:-1] + (32 - warps,), F32)
    return fold2(np.concatenate([s, pad], -1), np.concatenate([e, pad], -1))


def serial2(s: np.ndarray, e: np.ndarray, threads: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Pairs added with add2 from (0, 0) in order: thread i of ``threads`` takes p[i], p[i + threads], ...
    (returns [..., threads]); with ``threads`` None one chain over the last axis (returns [...])."""
    count = s.shape[-1]
    if threads is None:
        acc_s, acc_e = np.zeros(s.shape[:-1], F32), np.zeros(s.shape[:-1], F32)
        for j in range(count):
            acc_s, acc_e = add2(acc_s, acc_e, s[..., j], e[..., j])
        return acc_s, acc_e
    acc_s, acc_e = np.zeros(s.shape[:-1] + (threads,), F32), np.zeros(s.shape[:-1] + (threads,), F32)
    for j in range(0, count, threads):
        k = min(threads, count - j)
        acc_s[..., :k], acc_e[..., :k] = add2(acc_s[..., :k], acc_e[..., :k], s[..., j:j + k], e[..., j:j + k])
    return acc_s, acc_e


# ------------------------------------------------------------------------------------------------ the split
def split_own(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The wide path's pieces (split_own, kernels/tensorcore_fp32.cu) as bfloat16: hi = x truncated to bf16 (NaN ->
    a bf16 NaN), r = x - hi, mid = r truncated, lo = r - mid truncated."""
    x = np.ascontiguousarray(x, F32)
    hi = np.where(np.isnan(x), U32(0x7FFF), _top16(x))
    with np.errstate(invalid="ignore", over="ignore"):
        r = x - (hi << U32(16)).view(F32)  # exact (Sterbenz); inf - inf = NaN
        ru = r.view(U32)
        lo = _top16(r - (ru & U32(0xFFFF0000)).view(F32))
    return _bf16(hi), _bf16(ru >> U32(16)), _bf16(lo)


def split_common(x: np.ndarray, sigma1: np.ndarray, sigma2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The normal path's split (split_common) with sigma1, sigma2 broadcast against x: hi = (sigma1 + x) - sigma1,
    t = x - hi, mid = (sigma2 + t) - sigma2, r2 = t - mid. Returns hi, mid as bfloat16 (exact) and r2 (float32)."""
    x = np.asarray(x, F32)
    with np.errstate(invalid="ignore", over="ignore"):
        hi = (sigma1 + x) - sigma1
        t = x - hi
        mid = (sigma2 + t) - sigma2
        r2 = t - mid
    return _bf16(_top16(hi)), _bf16(_top16(mid)), r2


# lane value slots of mma row g (lo) and row g + 8 (hi)
ROW_SLOTS = ((0, 1, 4, 5), (2, 3, 6, 7))


def row_sigmas(lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For lanes [..., 32, 8]: each mma row's maximum exponent field eb [..., 16] (rows g = 0..7, then g + 8; the
    largest |v| of the row's 16 values, NaN ignored; 255 for a row with inf or only NaNs), and sigma1, sigma2
    [..., 16] (1.5 * 2^(E + 16), 1.5 * 2^(E + 8) with E = max(eb, 17) - 127)."""
    q = np.abs(np.asarray(lanes, F32)).reshape(lanes.shape[:-2] + (8, 4, 8))  # [..., g, t, v]
    with np.errstate(invalid="ignore"):
        mx = np.concatenate([np.fmax.reduce(q[..., slots].reshape(q.shape[:-3] + (8, 16)), axis=-1)
                             for slots in ROW_SLOTS], axis=-1)
    eb = np.ascontiguousarray(mx, F32).view(U32) >> U32(23)
    ec = np.maximum(eb, U32(17))
    s1 = np.minimum(ec + U32(16), U32(254)) << U32(23) | U32(0x00400000)
    s2 = np.minimum(ec + U32(8), U32(254)) << U32(23) | U32(0x00400000)
    return eb, s1.view(F32), s2.view(F32)


def lane_sigmas(s: np.ndarray) -> np.ndarray:
    """Per-row values [..., 16] -> per lane value slot [..., 32, 8] (the row each slot belongs to)."""
    out = np.empty(s.shape[:-1] + (8, 4, 8), s.dtype)
    for row, slots in enumerate(ROW_SLOTS):
        out[..., list(slots)] = s[..., 8 * row:8 * row + 8, None, None]
    return out.reshape(s.shape[:-1] + (32, 8))


def _quad_sum(r: np.ndarray) -> np.ndarray:
    """Split::quad_sum on per-lane values [..., 32] -> per quad [..., 8]: (r0 + r1) + (r2 + r3)."""
    q = r.reshape(r.shape[:-1] + (8, 4))
    with np.errstate(invalid="ignore", over="ignore"):
        return (q[..., 0] + q[..., 1]) + (q[..., 2] + q[..., 3])


class SplitFormat:
    """Split of kernels/tensorcore_fp32.cu for a batch of warps ``shape``: per step the row maxima choose the path
    (any row field above 238: the wide path for the whole warp) and each row's grid; normal path: c1 = hi block then mid block, c3 = -0,
    each lane's remainders added to its rho_lo (v0, v1, v4, v5) and rho_hi (v2, v3, v6, v7); wide path: c1 = hi
    block, c3 = mid block then lo block. Each row pair becomes add2(pair, (c1, c3)); rows() adds the quad sums of rho
    to the e parts."""

    def __init__(self, shape: tuple[int, ...], model: str):
        self.s = np.zeros(shape + (16,), F32)
        self.e = np.zeros(shape + (16,), F32)
        self.rho = np.zeros(shape + (32, 2), F32)  # per lane: rows g, g + 8
        self.model = model

    def step(self, lanes: np.ndarray, active: np.ndarray | bool = True) -> None:
        """lanes: float32 [*shape, 32, 8] (each lane's v0..v7); active: which warps run this step."""
        lanes = np.asarray(lanes, F32)
        eb, s1, s2 = row_sigmas(lanes)
        wide = np.any(eb > 238, axis=-1)
        act = np.broadcast_to(np.asarray(active), self.s.shape[:-1])
        zero = np.zeros(self.s.shape, F32)
        hi, mid, r2 = split_common(lanes, lane_sigmas(s1), lane_sigmas(s2))
        c1 = fused_rowsum(np.concatenate([_fragment_rows(hi), _fragment_rows(mid)], axis=-1), zero,
                          model=self.model)  # hi block, then mid block
        c3 = np.full(self.s.shape, -0.0, F32)
        with np.errstate(invalid="ignore", over="ignore"):
            rho = self.rho.copy()
            for row, cols in ((0, (0, 1, 4, 5)), (1, (2, 3, 6, 7))):
                for c in cols:
                    rho[..., row] = rho[..., row] + r2[..., c]
        self.rho = np.where((act & ~wide)[..., None, None], rho, self.rho)
        if np.any(wide):
            whi, wmid, wlo = (_fragment_rows(p) for p in split_own(lanes))
            w1 = fused_rowsum(whi, zero, model=self.model)
            w3 = fused_rowsum(np.concatenate([wmid, wlo], axis=-1), zero, model=self.model)  # mid, then lo
            c1 = np.where(wide[..., None], w1, c1)
            c3 = np.where(wide[..., None], w3, c3)
        s, e = add2(self.s, self.e, c1, c3)
        self.s = np.where(act[..., None], s, self.s)
        self.e = np.where(act[..., None], e, self.e)

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The 16 row pairs (s, e), each [*shape, 16] (rows g = 0..7, then g + 8), rho's quad sums in e."""
        rho = np.concatenate([_quad_sum(self.rho[..., 0]), _quad_sum(self.rho[..., 1])], axis=-1)
        with np.errstate(invalid="ignore", over="ignore"):
            return self.s, self.e + rho


FormatFactory = Callable[[tuple[int, ...]], object]


def _warp_pair(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row pairs [..., 16] of a warp -> lane pair add2(row g, row g + 8) per quad g, then warp_fold_rows2."""
    ls, le = add2(s[..., :8], e[..., :8], s[..., 8:], e[..., 8:])
    return fold2(ls, le)


def _flat(plan: Plan, data: np.ndarray, new_format: FormatFactory) -> np.ndarray:
    walk = flat_grid(plan, vec=4)
    n, head, nvec, tail, block, grid, unroll, warps, w = (walk.n, walk.head, walk.nvec, walk.tail, walk.block,
                                                          walk.grid, walk.unroll, walk.warps, walk.w)
    steps = walk.iters * (unroll // 2)
    fmt = new_format((warps,))
    if head + tail:
        extras = np.zeros((warps, 32, 8), F32)
        extras[0, 0, :head + tail] = np.concatenate([data[:head], data[n - tail:]])
        fmt.step(extras, w == 0)
    body = np.concatenate([np.asarray(data[head:head + 4 * nvec], F32).reshape(nvec, 4), np.zeros((1, 4), F32)])
    lane = np.arange(32)
    for st in range(int(steps.max(initial=0))):
        it, j = divmod(st, unroll // 2)
        idx = walk.base[:, None] + it * walk.step + 2 * j * walk.stride + lane  # [warps, 32] first vector
        end = walk.end[:, None]
        first = body[np.where(idx < end, idx, nvec)]
        second = body[np.where(idx + walk.stride < end, idx + walk.stride, nvec)]
        fmt.step(np.concatenate([first, second], axis=-1), st < steps)
    ws, we = _warp_pair(*fmt.rows())
    bs, be = block_combine2(ws.reshape(grid, block // 32), we.reshape(grid, block // 32))
    if grid > 1:  # combine_grid2: its combine_slots on pairs (or each group's, then the groups' totals: one-pass grids)
        if param_dict(plan).get("rounds", 0):
            groups = -(-grid // block)
            gs, ge = (np.zeros(groups * block, F32) for _ in range(2))
            gs[:grid], ge[:grid] = bs, be
            bs, be = _combine_partials2(gs.reshape(groups, block), ge.reshape(groups, block), block)
        bs, be = _combine_partials2(bs[None, :], be[None, :], block)
    return value2(bs, be).reshape(-1)[:1]


def _combine_partials2(s: np.ndarray, e: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """tcr32::combine_grid2's combination (tcr::combine_slots on pairs) of each row of pairs [..., count]: serial pairs
    per thread of ``block``, warp_fold2, block_combine2 (returns [...])."""
    ts, te = serial2(s, e, block)
    shape = s.shape[:-1] + (block // 32, 32)
    return block_combine2(*fold2(ts.reshape(shape), te.reshape(shape)))


def _chunked(items: np.ndarray, chunk: int, splits: int, wpt: int, lanes_of: Callable[[np.ndarray], np.ndarray],
             new_format: FormatFactory) -> tuple[np.ndarray, np.ndarray]:
    """The warps' part of the tiles and stream kernels. items: float32 [I, ..., L] (the elements of each work item,
    the last axis cut into chunks of ``chunk``); lanes_of maps chunks [..., chunk-shaped] to lane values
    [..., 32, 8]. Chunks are cut into ``splits`` ranges; warp q of ``wpt`` takes chunks q, q + wpt, ... of its range,
    one step each. Returns the row pairs, each [I, splits, wpt, 16]."""
    count, length = items.shape[0], items.shape[-1]
    nchunks = cdiv(length, chunk)
    per_split = cdiv(nchunks, splits)
    per_warp = cdiv(per_split, wpt)
    total = splits * per_split
    padded = np.zeros(items.shape[:-1] + (total * chunk,), F32)
    padded[..., :length] = items
    grid = padded.reshape(items.shape[:-1] + (splits, per_split, chunk))
    grid = np.moveaxis(grid, (-3, -2), (1, 2))  # [I, splits, per_split, ..., chunk]
    valid = (np.arange(total) < nchunks).reshape(splits, per_split)  # empty split tails do not run
    fmt = new_format((count, splits, wpt))
    for i in range(per_warp):
        pos = np.arange(wpt) + i * wpt
        ok = pos < per_split
        posc = np.minimum(pos, per_split - 1)
        lanes = lanes_of(grid[:, :, posc])  # [I, splits, wpt, 32, 8]
        fmt.step(lanes, (ok[None, :] & valid[:, posc])[None])
    return fmt.rows()


def _combine(s: np.ndarray, e: np.ndarray, splits: int, wpt: int) -> np.ndarray:
    """[..., splits, wpt] warp pairs -> per output: the group's warps add2'ed in q order from (0, 0) (one warp: its
    pair), then the splits likewise; value2."""
    if wpt > 1:
        s, e = serial2(s, e, None)
    else:
        s, e = s[..., 0], e[..., 0]
    if splits > 1:
        s, e = serial2(s, e, None)
    else:
        s, e = s[..., 0], e[..., 0]
    return value2(s, e)


# lane (g, t) of a tiles step: v = (seg g: 4t, 4t+1; seg g+8: 4t, 4t+1; seg g: 4t+2, 4t+3; seg g+8: 4t+2, 4t+3)
_G, _T = np.arange(32) >> 2, np.arange(32) & 3
_TILE_SEG = np.stack([_G, _G, _G + 8, _G + 8, _G, _G, _G + 8, _G + 8], axis=-1)
_TILE_ELEM = np.stack([4 * _T, 4 * _T + 1, 4 * _T, 4 * _T + 1, 4 * _T + 2, 4 * _T + 3, 4 * _T + 2, 4 * _T + 3], axis=-1)
# lane l of a stream step: elements 4l .. 4l+3 and 128 + 4l .. 128 + 4l + 3 of the 256-element chunk
_STREAM_ELEM = np.concatenate([4 * np.arange(32)[:, None] + np.arange(4), 128 + 4 * np.arange(32)[:, None]
                               + np.arange(4)], axis=-1)


# lane (g, t) of a tc32_rows4 step: lo = row g >> 2 and hi = row 2 + (g >> 2) of the 4-row tile, elements
# 16(g & 3) + 4t .. +3 of the 64-element chunk; v = (lo0, lo1, hi0, hi1, lo2, lo3, hi2, hi3)
_ROWS4_SEG = np.stack([_G >> 2, _G >> 2, 2 + (_G >> 2), 2 + (_G >> 2)] * 2, axis=-1)
_ROWS4_ELEM = (16 * (_G & 3) + 4 * _T)[:, None] + np.array([0, 1, 0, 1, 2, 3, 2, 3])


def _rows4(data: np.ndarray, new_format: FormatFactory) -> np.ndarray:
    """tc32_rows4: data float32 [m, k] -> row sums [m]: each tile's 4 rows through the format, then per row
    add2(add2(m0, m1), add2(m2, m3)) of its 4 mma rows' pairs (row j: mma rows 4j .. 4j + 3 for j = 0, 1 (lo),
    8 + 4(j - 2) .. for j = 2, 3 (hi))."""
    m, k = data.shape
    tiles = cdiv(m, 4)
    seg = np.zeros((tiles * 4, k), F32)
    seg[:m] = data
    s, e = _chunked(seg.reshape(tiles, 4, k), 64, 1, 1, lambda c: c[..., _ROWS4_SEG, _ROWS4_ELEM], new_format)
    s, e = s[:, 0, 0].reshape(tiles, 4, 4), e[:, 0, 0].reshape(tiles, 4, 4)  # [tile, row j, mma row i of j]
    s01, e01 = add2(s[..., 0], e[..., 0], s[..., 1], e[..., 1])
    s23, e23 = add2(s[..., 2], e[..., 2], s[..., 3], e[..., 3])
    return value2(*add2(s01, e01, s23, e23)).reshape(-1)[:m]


def _tiles(plan: Plan, segments: np.ndarray, new_format: FormatFactory) -> np.ndarray:
    """segments: float32 [tiles, 16, L] (missing segments zero) -> segment sums [tiles, 16]."""
    p = param_dict(plan)
    s, e = _chunked(segments, 16, p["splits"], p["wpt"], lambda c: c[..., _TILE_SEG, _TILE_ELEM], new_format)
    return _combine(np.moveaxis(s, -1, 1), np.moveaxis(e, -1, 1), p["splits"], p["wpt"])  # [tiles, 16]


def _rows(plan: Plan, data: np.ndarray, new_format: FormatFactory) -> np.ndarray:
    p = param_dict(plan)
    m, k = data.shape
    if p["form"] == "rows4":
        return _rows4(np.asarray(data, F32), new_format)
    if p["form"] == "stream":
        s, e = _chunked(np.asarray(data, F32), 256, p["splits"], p["wpt"], lambda c: c[..., _STREAM_ELEM],
                        new_format)
        return _combine(*_warp_pair(s, e), p["splits"], p["wpt"])
    tiles = cdiv(m, 16)
    seg = np.zeros((tiles * 16, k), F32)
    seg[:m] = data
    return _tiles(plan, seg.reshape(tiles, 16, k), new_format).reshape(-1)[:m]


# tc32_cols: step h (0, 1) of a 32-column strip's chunk is the tiles step on the 16 segments (columns of the strip)
# 4s + 2h (mma row s < 8) and 4(s - 8) + 2h + 1 (s >= 8)
_COLS_STEP_COLUMNS = np.array([[4 * (s % 8) + 2 * h + s // 8 for s in range(16)] for h in range(2)])


def _cols(plan: Plan, data: np.ndarray, new_format: FormatFactory) -> np.ndarray:
    a, r, b = data.shape
    strips = cdiv(b, COLS_STRIP)
    cols = np.zeros((a * strips, COLS_STRIP, r), F32)
    cols.reshape(a, strips * COLS_STRIP, r)[:, :b] = np.transpose(np.asarray(data, F32), (0, 2, 1))
    sums = _tiles(plan, cols[:, _COLS_STEP_COLUMNS].reshape(a * strips * 2, 16, r), new_format)
    out = np.empty((a * strips, COLS_STRIP), F32)
    out[:, _COLS_STEP_COLUMNS] = sums.reshape(a * strips, 2, 16)
    return out.reshape(a, strips * COLS_STRIP)[:, :b].reshape(-1)


def emulate_forms(plan: Plan, data: np.ndarray, new_format: FormatFactory) -> np.ndarray:
    """fp32 outputs (flattened) of a float32 tensor-core plan for the problem's data, one format object per batch
    of warps from ``new_format(shape)`` (its ``step(lanes, active)`` and ``rows() -> (s, e)``)."""
    prob = plan.problem
    if isinstance(prob, Flat):
        return _flat(plan, data, new_format)
    if isinstance(prob, Rows):
        return _rows(plan, data, new_format)
    if isinstance(prob, Cols):
        return _cols(plan, data, new_format)
    raise TypeError(prob)


def emulate_tensorcore_fp32(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    """fp32 outputs of a "tensorcore" plan for float32 input."""
    return emulate_forms(plan, data, lambda shape: SplitFormat(shape, model))
