"""Emulator twin of ``kernels/wmma.cu`` (method "wmma": Dakkak et al., ICS 2019, on ``nvcuda::wmma`` 16x16x16;
float16 or ``ml_dtypes.bfloat16`` input).

A transcription of the kernels' order comments, vectorised with NumPy (Python loops only inside the model, over
chained products). Every quantity is computed exactly as the GPU computes it:

- One ``wmma::mma_sync`` (m16n16k16, T x T + f32) is two ``mma.sync`` m16n8k16 (SASS: two ``HMMA.16816.F32``, or
  ``HMMA.16816.F32.BF16`` for bf16, per ``wmma.mma.sync``, one per 8-column half of N, each with the full k = 16;
  checked on the cubins of all three rows kernels for sm_80 and sm_90, both formats). So every output element
  D[i][j] is one m16n8k16 block FMA of the 16 products A[i][q] * B[q][j] onto C[i][j]:
  :mod:`~tcreduce.emulate.mma_model` (bf16: fp16's rule with bf16's exponent range, validated on an H100). With one
  operand P / P^T (a row / column of ones, zeros elsewhere) the element the kernels read is ``TC(c; a_0..a_15)``,
  the fused sum of 16 data values onto c, i.e. :func:`~tcreduce.emulate.mma_model.fused_rowsum`; a chain
  ``acc = TC(acc; .)`` over n tiles starting from +0 is one ``fused_rowsum`` over 16n values (each MMA's D is the
  next one's C).
- HANDOFF (fp32 -> three parts of the input format -> three chained products with P^T) with the kernel's own
  operations. fp16 (scaled): the largest finite magnitude, the shift from its bits, ``ldexpf`` (``np.ldexp`` in
  float32: correctly rounded, like CUDA's ``ldexpf``; exact for every value reachable from fp16 data),
  ``__float2half_rn`` (``astype(float16)``: one round-to-nearest-even), ``__fsub_rn`` (float32 subtraction), and
  the scaling back. bf16 (no scaling): the three truncations RZ16 (the top 16 bits of the fp32 encoding, a mask on
  the bits), the two exact float32 subtractions, ``__float2bfloat16_rn`` for non-finite values (``astype`` to
  ``ml_dtypes.bfloat16``); the split is exact for every multiple of 2^-133, so for every value bf16 data can reach
  (kernels/wmma.cu, HANDOFF).
- CUDA-core additions (the block variant's grid combination) as float32 NumPy additions in the order of
  ``tcr::combine_partials`` (:mod:`~tcreduce.emulate.folds`).

Per plan (``params["variant"]``; a Flat problem is ``Rows(1, n, n)``, a Cols problem is first transposed into
``Rows(a*b, r, ldw)`` by ``wmma_transpose``, a bit copy, so its rows are ``x[i, :, l]`` for output ``i*b + l``):

- ``r16n``: out[row] = TC chain over the row's ceil(k/16) chunks of 16 (zero padded): one ``fused_rowsum``.
  (Every variant is the same for both formats except HANDOFF.)
- ``r256n``: per row, tiles A_t[i][j] = x[256t + 16i + j]; c[j] = chain over t of TC(.; A_t[0..15][j]) (column j of
  every tile, i ascending within a tile); out = HANDOFF(c[0..15]).
- ``block``: per (row, split), warp w (of 8) chains the split's tiles w, w + 8, ... like r256n into c_w[0..15];
  y_w = HANDOFF(c_w) (w < 8; rows 8..15 of the stacked matrix are +0, whose HANDOFF is +0); partial = HANDOFF(y_0..15);
  splits > 1: thread i of 256 adds p[i], p[i + 256], ... from +0, then the block fold.

Tiles a warp does not run are emulated as zero tiles appended to its chain: ``TC(c; 0..0) == c`` for every c the
chain can hold: with no nonzero product the alignment exponent is c's own, and the grid 2^(eta - 23 - extra bits)
is no coarser than c's ulp, so c is kept exactly (subnormal, inf and NaN too); the only change it could make,
-0 -> +0, cannot occur, as an accumulator starts at +0 and an exact-zero TC result is +0
(tests/test_emulate_wmma.py checks this on the model).

Cost: linear in the (padded) number of elements; the model dominates (about 0.1-0.2 s per 2^22 elements).
"""

from __future__ import annotations

import numpy as np

from .._layout import Cols, Flat, Rows
from .._plan import Plan, param_dict
from ..plans._common import cdiv as _cdiv
from .folds import block_fold, serial_sum
from .mma_model import fused_rowsum

__all__ = ["emulate", "handoff", "split_bf16", "rows_block", "rows_r16n", "rows_r256n"]

F32 = np.float32
F16 = np.float16
TILE = 256
_RZ16 = np.uint32(0xFFFF0000)  # RZ16: keep the top 16 bits of an fp32 encoding (a bf16 truncated toward zero)


def _fmt(dtype: np.dtype) -> str:
    """"float16" or "bfloat16" for an input dtype of the wmma kernels (TypeError otherwise)."""
    from ..formats import format_of_dtype

    f = format_of_dtype(dtype)
    if f is None or f.name not in ("float16", "bfloat16"):
        raise TypeError(f"wmma sums float16 or bfloat16 data, got {dtype}")
    return f.name


def _padded(x: np.ndarray, length: int) -> np.ndarray:
    """(m, k) float16 / bfloat16 -> (m, length) of the same dtype with +0 past k (the kernels' masked loads)."""
    m, k = x.shape
    out = np.zeros((m, length), x.dtype)
    out[:, :k] = x
    return out


def split_bf16(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bf16 hand-off split of kernels/wmma.cu (``split3`` for ``__nv_bfloat16``) of float32 values ``v``:
    (hi, mid, lo) as ``ml_dtypes.bfloat16`` arrays. hi = RZ16(v), mid = RZ16(v - hi), lo = RZ16((v - hi) - mid), the
    subtractions exact in float32; non-finite v: hi = bf16_rn(v), mid = lo = 0. hi + mid + lo == v exactly for every
    finite multiple of 2^-133 (bits below bf16's smallest subnormal are dropped otherwise)."""
    from ..formats import numpy_dtype

    bf16 = numpy_dtype("bfloat16")
    v = np.ascontiguousarray(v, F32)

    def rz16(a: np.ndarray) -> np.ndarray:
        return (a.view(np.uint32) & _RZ16).view(F32)

    def bits(a: np.ndarray) -> np.ndarray:
        return (a.view(np.uint32) >> np.uint32(16)).astype(np.uint16).view(bf16)

    with np.errstate(all="ignore"):
        h = rz16(v)
        r1 = (v - h).astype(F32)
        m = rz16(r1)
        r2 = (r1 - m).astype(F32)
        finite = np.isfinite(v)
        zero = np.zeros((), bf16)
        hi = np.where(finite, bits(h), v.astype(bf16))
        mid = np.where(finite, bits(m), zero)
        lo = np.where(finite, bits(rz16(r2)), zero)
    return hi, mid, lo


def handoff(v: np.ndarray, model: str, fmt: str = "float16") -> np.ndarray:
    """HANDOFF of kernels/wmma.cu (``handoff_rows<T>``) over the last axis of ``v`` (float32 [..., 16]) -> [...],
    for T = ``fmt`` ("float16" or "bfloat16").

    float16: amax over the finite |v_j| (fmaxf of the shuffles: an exact maximum); sh = 14 - floor(log2 amax) from
    the bits (0 when amax == 0); w = ldexpf(v, sh); hi = half_rn(w), mid = half_rn(w - hi), lo = half_rn((w - hi) -
    mid), mid = lo = 0 for non-finite w; d = TC(TC(TC(+0; lo); mid); hi); result ldexpf(d, -sh).
    bfloat16: (hi, mid, lo) = :func:`split_bf16` (v); result d = TC(TC(TC(+0; lo); mid); hi), no scaling."""
    v = np.asarray(v, F32)
    if v.shape[-1] != 16:
        raise ValueError(f"handoff takes rows of 16 values, got shape {v.shape}")
    if fmt == "bfloat16":
        hi, mid, lo = split_bf16(v)
        return np.asarray(fused_rowsum(np.concatenate([lo, mid, hi], axis=-1), F32(0), model=model), F32)
    if fmt != "float16":
        raise ValueError(f"handoff: fmt must be float16 or bfloat16, got {fmt!r}")
    with np.errstate(all="ignore"):
        bits = v.view(np.uint32)
        finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
        amax = np.where(finite, np.abs(v), F32(0)).max(axis=-1)
        ab = amax.view(np.uint32)
        ef = (ab >> np.uint32(23)).astype(np.int64)
        # subnormal amax: floor(log2) = (31 - clz(bits)) - 149; frexp of the integer gives its bit length exactly
        sub_e = np.frexp(np.maximum(ab, 1).astype(np.float64))[1].astype(np.int64) - 1 - 149
        e = np.where(ef > 0, ef - 127, sub_e)
        sh = np.where(amax > 0, 14 - e, 0)
        w = np.ldexp(v, sh[..., None]).astype(F32)
        hi = w.astype(F16)
        r1 = (w - hi.astype(F32)).astype(F32)
        mid = r1.astype(F16)
        r2 = (r1 - mid.astype(F32)).astype(F32)
        lo = r2.astype(F16)
        wfin = np.isfinite(w)
        mid = np.where(wfin, mid, F16(0))
        lo = np.where(wfin, lo, F16(0))
        d = fused_rowsum(np.concatenate([lo, mid, hi], axis=-1), F32(0), model=model)
        return np.ldexp(d, -sh).astype(F32)


def rows_r16n(x: np.ndarray, model: str) -> np.ndarray:
    """wmma_rows16: (m, k) float16 / bfloat16 rows -> (m,) fp32 (acc[i][0] of the chained A_c * P^T products)."""
    k = x.shape[1]
    return fused_rowsum(_padded(x, _cdiv(k, 16) * 16), F32(0), model=model)


def _column_chains(tiles: np.ndarray, model: str) -> np.ndarray:
    """tiles: float16 / bfloat16 [..., n, 256] (n tiles chained in order, each a row-major 16x16 A_t) -> fp32
    [..., 16]: the row 0 of acc = P * A_{n-1} + (... + (P * A_0 + 0)): column j is the chain of TC(.; A_t[0..15][j]),
    t ascending."""
    lead, n = tiles.shape[:-2], tiles.shape[-2]
    t = tiles.reshape(lead + (n, 16, 16))  # [..., t, i, j]
    nd = len(lead)
    cols = np.moveaxis(t, nd + 2, nd)  # [..., j, t, i]
    return fused_rowsum(np.ascontiguousarray(cols).reshape(lead + (16, 16 * n)), F32(0), model=model)


def rows_r256n(x: np.ndarray, model: str) -> np.ndarray:
    """wmma_rows256n: (m, k) float16 / bfloat16 rows -> (m,) fp32 = HANDOFF(column sums of the chained P * A_t)."""
    m, k = x.shape
    tiles = _cdiv(k, TILE)
    c = _column_chains(_padded(x, tiles * TILE).reshape(m, tiles, TILE), model)  # [m, 16]
    return handoff(c, model, _fmt(x.dtype))


def rows_block(x: np.ndarray, splits: int, tpb: int, warps: int, model: str) -> np.ndarray:
    """wmma_rows_block: (m, k) float16 / bfloat16 rows -> (m,) fp32 (per split: warp chains, two hand-offs; then the
    grid combination when splits > 1)."""
    m, k = x.shape
    if not 1 <= warps <= 16:
        raise ValueError(f"the block variant stacks one hand-off row per warp (1..16 warps), got {warps}")
    tiles = _cdiv(k, TILE)
    if splits * tpb < tiles or (splits - 1) * tpb >= tiles:
        raise ValueError(f"splits={splits} x tpb={tpb} does not cover {tiles} tiles with work in every split")
    per_warp = _cdiv(tpb, warps)
    v = _padded(x, splits * tpb * TILE).reshape(m, splits, tpb, TILE)
    if per_warp * warps != tpb:  # positions tpb.. of a split: zero tiles (identity steps, module docstring)
        v = np.concatenate([v, np.zeros((m, splits, per_warp * warps - tpb, TILE), x.dtype)], axis=2)
    # position q = w + warps * j of the split belongs to warp w, as its j-th product
    v = v.reshape(m, splits, per_warp, warps, TILE).transpose(0, 1, 3, 2, 4)  # [m, s, w, j, 256]
    c = _column_chains(v, model)  # [m, s, w, 16]: row w of the stacked matrix
    stacked = np.zeros((m, splits, 16, 16), F32)
    stacked[:, :, :warps] = c
    fmt = _fmt(x.dtype)
    y = handoff(stacked, model, fmt)  # [m, s, 16]: y_w (+0 for the zero rows w >= warps)
    partial = handoff(y, model, fmt)  # [m, s]: the hand-off of row 0 = y (rows 1..15 are +0 and unused)
    if splits == 1:
        return partial[:, 0]
    return block_fold(serial_sum(partial, 32 * warps))  # tcr::combine_partials<WARPS * 32>


def _rows_of(plan: Plan, data: np.ndarray) -> np.ndarray:
    """The float16 / bfloat16 rows the plan's rows kernel reduces, (m, k): the problem's data, or for Cols the rows
    the transposing copy writes (row i*b + l holds x[i, 0..r, l])."""
    prob = plan.problem
    x = np.asarray(data)
    if _fmt(x.dtype) != plan.in_dtype:
        raise TypeError(f"a wmma plan for {plan.in_dtype} input got {x.dtype} data")
    if isinstance(prob, Flat):
        return x.reshape(1, prob.n)
    if isinstance(prob, Rows):
        return x.reshape(prob.m, prob.k)
    if isinstance(prob, Cols):
        a, r, b = x.shape
        return np.ascontiguousarray(np.transpose(x, (0, 2, 1))).reshape(a * b, r)
    raise TypeError(f"wmma: unknown problem {prob!r}")


def emulate(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    """fp32 outputs of a wmma plan (flattened problem outputs) for the problem's data (``host_problem_data``), on
    the tensor-core model ``model`` (a GPU name)."""
    p = param_dict(plan)
    x = _rows_of(plan, data)
    rows: Rows = p["rows"]
    if x.shape != (rows.m, rows.k):
        raise ValueError(f"data of shape {x.shape} for the plan's rows {rows}")
    variant = p["variant"]
    if variant == "r16n":
        res = rows_r16n(x, model)
    elif variant == "r256n":
        res = rows_r256n(x, model)
    elif variant == "block":
        res = rows_block(x, p["splits"], p["tpb"], p["warps"], model)
    else:
        raise ValueError(f"wmma: unknown variant {variant!r}")
    return np.asarray(res, F32).reshape(-1)
