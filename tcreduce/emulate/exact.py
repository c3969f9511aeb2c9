"""Emulator twin of ``kernels/exact.cu`` (method "exact"): the exact state of each output and its correct rounding.

The GPU's state does not depend on its order of additions (integer sums), so the twin computes the same state
directly: per output, the exact sum of the finite elements as normalised limbs (fixed point, unit 2^-24 for float16,
2^-149 for float32 and bfloat16: :mod:`tcreduce.exact` documents the encoding) plus the counts of NaN, +inf and -inf.
The sums go through :mod:`tcreduce.reference`'s exact accumulators (int64 for float16, exponent buckets for float32);
the rounding (:func:`round_state_bits`) is an independent transcription with Python integers of what
``round_state`` in exact.cu does (round to nearest, ties to even, once, straight to the output format: no double
rounding through float64).

Cost: linear in the elements (reference.py's accumulators) plus about 5 us of Python per output.
"""

from __future__ import annotations

import numpy as np

from .._layout import Cols, Flat, Rows
from .._plan import Plan

__all__ = ["emulate", "exact_states", "finalize_states", "round_state_bits", "normalize_limbs", "FORMATS",
           "CANONICAL_NAN"]

LIMBS = {"float16": 4, "float32": 11, "bfloat16": 11}
LSB = {"float16": -24, "float32": -149, "bfloat16": -149}
NCOUNT = 3
# (precision p, emin, emax, bits) of each output format
FORMATS = {"float16": (11, -14, 15, 16), "float32": (24, -126, 127, 32), "float64": (53, -1022, 1023, 64)}
CANONICAL_NAN = {"float16": 0x7E00, "float32": 0x7FC00000, "float64": 0x7FF8000000000000}
_UINT = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}
_F16_BLOCK = 1 << 22  # columns per int64 block sum: 2^22 values below 2^40 units stay below 2^62
_F32_BLOCK = 1 << 30  # columns per call of reference.py's exact fp32 accumulator (its limit)


def _as_float32(rows: np.ndarray, in_dtype: str) -> np.ndarray:
    """float32 view of the values (bfloat16 given as raw uint16 bits or an ml_dtypes bfloat16 array)."""
    if in_dtype == "bfloat16":
        bits = np.ascontiguousarray(rows).view(np.uint16).astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32)
    return np.asarray(rows, np.float32)


def normalize_limbs(s: np.ndarray, k: int) -> np.ndarray:
    """Carries over the value limbs s[..., :k] (int64, in place): limbs 0..k-2 end in [0, 2^32), limb k-1 signed."""
    for i in range(k - 1):
        c = s[..., i] >> 32  # arithmetic: floor division
        s[..., i] -= c << 32
        s[..., i + 1] += c
    return s


def exact_states(rows: np.ndarray, in_dtype: str) -> np.ndarray:
    """The normalised exact state [M, L] (int64) of each row of ``rows`` [M, n] (float16, float32, or bfloat16)."""
    from ..reference import _buckets_f32, _carry

    k = LIMBS[in_dtype]
    m, n = rows.shape
    st = np.zeros((m, k + NCOUNT), np.int64)
    if m == 0 or n == 0:
        return st
    r32 = _as_float32(rows, in_dtype)
    finite = np.isfinite(r32)
    st[:, k] = np.isnan(r32).sum(axis=1)
    st[:, k + 1] = np.isposinf(r32).sum(axis=1)
    st[:, k + 2] = np.isneginf(r32).sum(axis=1)
    if not finite.all():
        r32 = np.where(finite, r32, np.float32(0))
    if in_dtype == "float16":
        for c0 in range(0, n, _F16_BLOCK):
            units = (r32[:, c0:c0 + _F16_BLOCK].astype(np.float64) * 2.0 ** 24).astype(np.int64)
            s = units.sum(axis=1)  # |s| < 2^62
            st[:, 0] += s & 0xFFFFFFFF
            st[:, 1] += s >> 32
    else:
        for c0 in range(0, n, _F32_BLOCK):  # reference.py's buckets hold up to 2^30 elements per row
            digits = _carry(np.ascontiguousarray(_buckets_f32(r32[:, c0:c0 + _F32_BLOCK]).T), 8)  # [40, M], 2^-149
            d = digits.reshape(-1, 4, m)
            limbs = d[:, 0] + (d[:, 1] << 8) + (d[:, 2] << 16) + (d[:, 3] << 24)  # [10, M] 32-bit limbs, top signed
            st[:, :limbs.shape[0]] += limbs.T
            normalize_limbs(st, k)
    return normalize_limbs(st, k)


def round_state_bits(value: int, lsb: int, out_dtype: str) -> int:
    """The bits of ``value * 2^lsb`` (an integer ``value``) rounded once to ``out_dtype`` (round to nearest, ties
    to even; beyond the range: the infinity; zero: +0.0)."""
    p, emin, emax, nbits = FORMATS[out_dtype]
    sign = 0
    if value < 0:
        sign, value = 1 << (nbits - 1), -value
    if value == 0:
        return 0
    e = value.bit_length() - 1 + lsb
    inf = ((1 << (nbits - p)) - 1) << (p - 1)
    if e > emax:
        return inf | sign
    qmin = emin - (p - 1)
    q = max(e - (p - 1), qmin)
    sh = q - lsb
    if sh <= 0:
        mant = value << -sh
    else:
        mant, rem = value >> sh, value & ((1 << sh) - 1)
        half = 1 << (sh - 1)
        if rem > half or (rem == half and mant & 1):
            mant += 1
    return (((q - qmin) << (p - 1)) + mant) | sign  # carries run into the exponent field, up to the infinity


def finalize_states(states: np.ndarray, in_dtype: str, out_dtype: str) -> np.ndarray:
    """Round normalised states [..., L] to ``out_dtype`` (float16/32/64): NaN (canonical bits) if a NaN or both
    infinities were summed, else the infinity, else the correctly rounded exact value. Returns shape [...]."""
    k = LIMBS[in_dtype]
    st = np.asarray(states, np.int64)
    if st.shape[-1] != k + NCOUNT:
        raise ValueError(f"a {in_dtype} exact state has {k + NCOUNT} int64 values per output, not {st.shape[-1]}")
    flat = st.reshape(-1, k + NCOUNT)
    p, emin, emax, nbits = FORMATS[out_dtype]
    inf = ((1 << (nbits - p)) - 1) << (p - 1)
    out = np.zeros(flat.shape[0], _UINT[out_dtype])
    for o, row in enumerate(flat.tolist()):
        nan, pinf, ninf = row[k], row[k + 1], row[k + 2]
        if nan > 0 or (pinf > 0 and ninf > 0):
            out[o] = CANONICAL_NAN[out_dtype]
        elif pinf > 0:
            out[o] = inf
        elif ninf > 0:
            out[o] = inf | (1 << (nbits - 1))
        else:
            value = sum(limb << (32 * i) for i, limb in enumerate(row[:k]))
            out[o] = round_state_bits(value, LSB[in_dtype], out_dtype)
    return out.view(out_dtype).reshape(st.shape[:-1])


def problem_rows(plan: Plan, data: np.ndarray) -> np.ndarray:
    """The problem's data as [outputs, length] rows (Flat (n,), Rows (m, k), Cols (a, r, b) -> (a*b, r))."""
    prob = plan.problem
    if isinstance(prob, Flat):
        return np.asarray(data).reshape(1, -1)
    if isinstance(prob, Rows):
        return np.asarray(data)
    if isinstance(prob, Cols):
        a, r, b = data.shape
        return np.ascontiguousarray(np.transpose(data, (0, 2, 1))).reshape(a * b, r)
    raise TypeError(prob)


def emulate(plan: Plan, data: np.ndarray, model: str) -> np.ndarray:
    """The plan's outputs (flattened) in its output dtype; for the state plan (out_dtype "int64") the states
    [outputs, L]. ``model`` is unused: the result does not depend on the GPU."""
    states = exact_states(problem_rows(plan, data), plan.in_dtype)
    if plan.out_dtype == "int64":
        return states
    return finalize_states(states, plan.in_dtype, plan.out_dtype)
