"""Reference sums for accuracy studies: the exactly rounded sum, the float64 sum, and relative errors.

- :func:`exact_sum`: the exact sum of each output's elements, correctly rounded (to nearest, ties to even) to
  float64, once. For float16/float32 input it is computed with an exact vectorised fixed-point accumulator (below);
  other dtypes fall back to :func:`math.fsum` per output, which is also exact and correctly rounded.
- :func:`float64_sum`: NumPy's ``sum`` in float64 (pairwise summation of the float64-converted values): what a careful
  user would take as "the truth"; accuracy studies report how far it is from :func:`exact_sum`.
- :func:`relative_error`: ``|computed - exact| / |exact|`` with ``exact == 0`` handled explicitly.

Exact accumulator (float16/float32 input).

- float16 (up to 2^23 elements per output): every fp16 value is an integer number of 2^-24 below 2^40, so the sum
  in int64 is exact; its conversion to float64 is the one rounding (to nearest even, by the hardware).
- float32 (and longer float16 rows): every finite value is ``sig * 2^(q - 149)`` with ``sig < 2^24`` and
  ``0 <= q <= 253``. It goes whole into exponent bucket ``q >> 3`` as the integer ``sig << (q & 7)`` < 2^32; per
  output, ``np.bincount`` sums the buckets (float64 weights, exact: at most 2^21 terms per bucket and call, so every
  partial sum is an integer below 2^53), partial sums are collected in int64, carries are propagated (base 2^8),
  the digits are regrouped into 32-bit limbs, and the multi-limb integer is rounded to float64 once: round-to-odd to
  63 bits, then the hardware's int64 -> float64 conversion (round to nearest). Rounding to odd at >= 53 + 2 bits
  first makes the second rounding the correct one.

Cost (one core): O(n) NumPy work. Measured here: 2^24 float32 elements into one output ~0.8 s; [2^20, 16] float16
~0.7 s; [2^20, 16] float32 ~3 s (the per-output carry and rounding then dominate: about 3 us per output). Limits: up
to 2^30 elements per output (int64 headroom).

NaN and infinities: an output containing NaN, or both +inf and -inf, is NaN; otherwise an infinity gives that
infinity. An exact zero sum is +0.0.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence, Union

import numpy as np

__all__ = ["exact_sum", "float64_sum", "relative_error"]

Axis = Union[None, int, Sequence[int]]

_NBUCKETS_USED = 32  # 8-bit-wide exponent buckets: q >> 3 for 0 <= q <= 253
_NLIMBS = 10  # 32-bit limbs: 277 bits of position and significand plus up to 30 bits of growth fit in 320
_NBUCKETS = 4 * _NLIMBS  # buckets (base 2^8 digits after carrying) including headroom for the carries
_COLS_PER_CALL = 1 << 21  # terms per bucket per bincount call: each < 2^32, so partial sums < 2^53 (exact)
_ELEMS_PER_BLOCK = 1 << 22  # elements processed at once (memory bound: a few temporaries of 8 bytes each)
_F16_MAX_LEN = 1 << 23  # int64 fast path for float16: 2^23 terms below 2^40 units
_MAX_LEN = 1 << 30


def _normalize_axis(axis: Axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for ax in axes:
        ax = int(ax)
        if not -ndim <= ax < ndim:
            raise np.exceptions.AxisError(ax, ndim)
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis!r}")
    return tuple(sorted(out))


def _to_rows(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """Move the reduced axes last and flatten: (rows [M, n], kept shape, keepdims shape)."""
    kept = [ax for ax in range(x.ndim) if ax not in axes]
    kept_shape = tuple(x.shape[ax] for ax in kept)
    keep_shape = tuple(1 if ax in axes else x.shape[ax] for ax in range(x.ndim))
    n = int(np.prod([x.shape[ax] for ax in axes], dtype=np.int64))
    m = int(np.prod(kept_shape, dtype=np.int64))
    rows = np.transpose(x, kept + list(axes)).reshape(m, n)
    return rows, kept_shape, keep_shape


def _finish(res: np.ndarray, kept_shape: tuple[int, ...], keep_shape: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return res.reshape(keep_shape if keepdims else kept_shape)


def _buckets_f32(rows: np.ndarray) -> np.ndarray:
    """Exact per-row sums of finite float32 values (non-finite entries must be zeroed), as signed int64 buckets
    [M, _NBUCKETS]: bucket l holds an integer count of 2^(8 l - 149); not yet carry-normalised.

    A value ``sig * 2^(q - 149)`` (0 <= q <= 253) goes whole into bucket ``q >> 3`` as the integer
    ``sig << (q & 7)`` < 2^32, so one ``np.bincount`` pass (float64 weights, exact: at most 2^21 of them per bin and
    call, sums < 2^53) does the accumulation."""
    m, n = rows.shape
    acc = np.zeros((m, _NBUCKETS), dtype=np.int64)
    if m == 0 or n == 0:
        return acc
    rows_per_block = max(1, _ELEMS_PER_BLOCK // n)
    for r0 in range(0, m, rows_per_block):
        blk = rows[r0:r0 + rows_per_block]
        nr = blk.shape[0]
        base = (np.arange(nr, dtype=np.int64) * _NBUCKETS_USED)[:, None]
        size = nr * _NBUCKETS_USED
        for c0 in range(0, n, _COLS_PER_CALL):
            part = np.ascontiguousarray(blk[:, c0:c0 + _COLS_PER_CALL])
            bits = part.view(np.uint32)
            field = ((bits >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)
            bucket = (np.maximum(field, 1) - 1) >> 3
            # value / 2^(8 bucket - 149): an integer below 2^32, exact in float64 (power-of-two scaling)
            weight = np.ldexp(part.astype(np.float64), 149 - 8 * bucket)
            sums = np.bincount((base + bucket).ravel(), weights=weight.ravel(), minlength=size)
            acc[r0:r0 + nr, :_NBUCKETS_USED] += sums.astype(np.int64).reshape(nr, _NBUCKETS_USED)
    return acc


def _carry(digits: np.ndarray, bits: int) -> np.ndarray:
    """Propagate carries in base 2^bits over digits [D, M] (digit-major: contiguous rows), in place: every digit but
    the last ends in [0, 2^bits); the last keeps the sign of the number."""
    mask = (1 << bits) - 1
    for l in range(digits.shape[0] - 1):
        digits[l + 1] += digits[l] >> bits  # floor division
        digits[l] &= mask
    return digits


def _buckets_to_f64(acc: np.ndarray) -> np.ndarray:
    """Correctly rounded float64 value of sum_l acc[:, l] * 2^(8 l - 149), vectorised over rows."""
    digits = _carry(np.ascontiguousarray(acc.T), 8)  # [_NBUCKETS, M]
    negative = digits[-1] < 0
    if negative.any():
        digits[:, negative] = _carry(-digits[:, negative], 8)
    d = digits.reshape(_NLIMBS, 4, -1)
    limbs = d[:, 0] | (d[:, 1] << 8) | (d[:, 2] << 16) | (d[:, 3] << 24)  # [_NLIMBS, M] 32-bit limbs, all >= 0
    res = _limbs_to_f64(np.ascontiguousarray(limbs.T))
    return np.where(negative, -res, res)


def _limbs_to_f64(acc: np.ndarray) -> np.ndarray:
    """Correctly rounded float64 value of sum_l acc[:, l] * 2^(32 l - 149) for limbs in [0, 2^32), vectorised."""
    m = acc.shape[0]
    # two zero limbs below, so that the top nonzero limb t always has two limbs under it
    lp = np.concatenate([np.zeros((m, 2), dtype=np.int64), acc], axis=1)  # limb j weighs 2^(32 (j - 2) - 149)
    nz = lp != 0
    any_nz = nz.any(axis=1)
    t = lp.shape[1] - 1 - np.argmax(nz[:, ::-1], axis=1)
    t = np.where(any_nz, t, 2)
    take = lambda j: np.take_along_axis(lp, j[:, None], axis=1)[:, 0]  # noqa: E731
    hi, mid, lo = take(t), take(t - 1), take(t - 2)
    nb = np.frexp(hi.astype(np.float64))[1].astype(np.int64)  # bit length of hi, 1..32 (0 for an all-zero row)
    nb = np.where(any_nz, nb, 1)
    # N = hi*2^64 + mid*2^32 + lo has 64 + nb bits; W = N >> (nb + 1) keeps its top 63 bits
    small = nb <= 31
    sh_mid = np.where(small, 31 - nb, 0)
    w = (hi << (63 - nb)) + np.where(small, mid << sh_mid, mid >> 1) + np.where(small, lo >> (nb + 1), 0)
    dropped_lo = np.where(small, lo & ((np.int64(1) << (nb + 1)) - 1), lo | (mid & 1))
    below = np.logical_or.accumulate(nz, axis=1)
    idx3 = t - 3
    below_t3 = np.where(idx3 >= 0, np.take_along_axis(below, np.maximum(idx3, 0)[:, None], axis=1)[:, 0], False)
    sticky = (dropped_lo != 0) | below_t3
    w = w | sticky.astype(np.int64)  # round to odd at 63 bits
    scale = 32 * (t - 4) - 149 + nb + 1  # lo = lp[t - 2] weighs 2^(32 (t - 4) - 149)
    res = np.ldexp(w.astype(np.float64), scale)  # int64 -> float64 rounds to nearest even: correct final rounding
    return np.where(any_nz, res, 0.0)


def _exact_f16(rows: np.ndarray) -> np.ndarray:
    """Exact sums of finite float16 rows with at most 2^23 columns: every fp16 value is an integer multiple of
    2^-24 below 2^40 units, so int64 sums are exact; the int64 -> float64 conversion rounds once, to nearest."""
    units = (rows.astype(np.float64) * 2.0 ** 24).astype(np.int64)
    return units.sum(axis=1).astype(np.float64) * 2.0 ** -24


def _special(rows64: np.ndarray) -> np.ndarray:
    """Per row: NaN if a NaN or both infinities, +-inf if one infinity sign, else 0.0."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(rows64), 0.0, rows64).sum(axis=1)


def _fsum_exact(v: np.ndarray) -> float:
    """math.fsum, or an exact rational sum where fsum's intermediate overflows (finite float64 input)."""
    try:
        return math.fsum(v)
    except OverflowError:
        total = sum((Fraction(float(t)) for t in v), Fraction(0))
        try:
            return float(total)
        except OverflowError:  # the exact sum itself is beyond float64: rounds to +-inf
            return math.copysign(math.inf, total)


def exact_sum(x, axis: Axis = None, keepdims: bool = False) -> np.ndarray:
    """The exact sum of ``x`` over ``axis``, rounded once to the nearest float64 (ties to even).

    x: array-like (float16 and float32 take the fast exact path; float64 and others are summed with
    :func:`math.fsum` per output, exact for float64 values). axis: None (all), an int or a tuple of ints.
    Returns a float64 ndarray (0-d for a full reduction without keepdims). Units: those of ``x``.
    Cost: linear in ``x.size`` (module docstring); the fsum fallback costs a Python call per output."""
    x = np.asarray(x)
    axes = _normalize_axis(axis, x.ndim)
    rows, kept_shape, keep_shape = _to_rows(x, axes)
    m, n = rows.shape
    if n > _MAX_LEN:
        raise ValueError(f"exact_sum supports at most 2^30 elements per output, got {n}")
    if x.dtype in (np.float16, np.float32):
        r32 = rows.astype(np.float32)
        finite = np.isfinite(r32)
        all_finite = bool(finite.all())
        if not all_finite:
            r32 = np.where(finite, r32, np.float32(0))
        if x.dtype == np.float16 and n <= _F16_MAX_LEN:
            res = _exact_f16(r32) + 0.0
        else:
            res = _buckets_to_f64(_buckets_f32(r32))
        if not all_finite:
            bad = ~finite.all(axis=1)
            res[bad] = _special(rows[bad].astype(np.float64))
    else:
        r64 = rows.astype(np.float64)
        res = np.empty(m, dtype=np.float64)
        special = _special(r64)
        for i in range(m):
            res[i] = _fsum_exact(r64[i]) if special[i] == 0.0 else special[i]  # NaN != 0: kept
        res = res + 0.0
    return _finish(res, kept_shape, keep_shape, keepdims)


def float64_sum(x, axis: Axis = None, keepdims: bool = False) -> np.ndarray:
    """NumPy's sum of ``x`` converted to float64 (pairwise summation in float64; not exact). Returns float64."""
    x64 = np.asarray(x, dtype=np.float64)
    return np.asarray(np.sum(x64, axis=_normalize_axis(axis, x64.ndim), keepdims=keepdims), dtype=np.float64)


def relative_error(computed, exact) -> np.ndarray:
    """Elementwise ``|computed - exact| / |exact|`` in float64 (dimensionless); a NumPy scalar for scalar inputs.

    Where ``exact == 0``: 0.0 if ``computed == 0`` too, else inf. NaN in either operand gives NaN; an infinite
    ``exact`` gives 0.0 when ``computed`` is the same infinity, else inf (NaN stays NaN)."""
    c = np.asarray(computed, dtype=np.float64)
    e = np.asarray(exact, dtype=np.float64)
    c, e = np.broadcast_arrays(c, e)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        err = np.abs(c - e) / np.abs(e)
        err = np.where(e == 0, np.where(c == 0, 0.0, np.inf), err)
        err = np.where(np.isinf(e), np.where(c == e, 0.0, np.inf), err)
        err = np.where(np.isnan(c) | np.isnan(e), np.nan, err)
    return err[()] if err.ndim == 0 else err
