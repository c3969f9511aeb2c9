"""Random MMA operands that stress a tensor-core model, for every input format (tests and the model probe).

An MMA of format ``fmt`` is D = A @ B + C with A [n, 16, K], B [n, K, 8] (raw bits of the format, unsigned integers)
and C [n, 16, 8] float32; K = 16 for float16/bfloat16, 32 for the fp8 formats, 8 for tf32 (the float32 format: all 32
register bits are drawn at random, so the low 13 bits that tf32 does not hold are exercised too).

Each distribution is named after what it stresses (see :data:`DISTRIBUTIONS`); exponents are drawn relative to the
format's range, so one definition serves every format. Values are returned as raw bits; :func:`decode` gives float64.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .formats import Format, get_format

__all__ = ["mma_k", "DISTRIBUTIONS", "make_operands", "decode", "encode", "random_bits", "f32_exp"]

F32_MAX = float(np.finfo(np.float32).max)


def mma_k(fmt: str | Format) -> int:
    """K of the mma.sync shape of a format: m16n8k16 (fp16, bf16), m16n8k32 (fp8), m16n8k8 (tf32 for float32)."""
    f = get_format(fmt)
    return {16: 16, 8: 32, 32: 8}[f.bits]


def decode(bits: np.ndarray, fmt: str | Format) -> np.ndarray:
    """float64 values of raw bits (NaN encodings give NaN)."""
    from .formats import numpy_dtype

    f = get_format(fmt)
    return np.asarray(bits, f.raw_dtype).view(numpy_dtype(f)).astype(np.float64)


def encode(values: np.ndarray, fmt: str | Format) -> np.ndarray:
    """Raw bits of float values rounded to the format (round to nearest even, ml_dtypes' conversion)."""
    from .formats import numpy_dtype

    f = get_format(fmt)
    return np.asarray(values).astype(numpy_dtype(f)).view(f.raw_dtype)


def random_bits(rng: np.random.Generator, fmt: str | Format, shape, lo: int | None = None,
                hi: int | None = None) -> np.ndarray:
    """Random finite values of a format as raw bits: uniform sign, exponent field uniform in [lo, hi] (clipped to
    the finite fields; 0 gives subnormals or zero), uniform fraction bits."""
    f = get_format(fmt)
    lo = 0 if lo is None else max(0, lo)
    hi = f.max_field if hi is None else min(hi, (1 << f.ebits) - 1 if not f.has_inf else f.max_field)
    hi = max(lo, hi)
    raw = f.raw_dtype.type
    sign = rng.integers(0, 2, shape).astype(f.raw_dtype) << raw(f.bits - 1)
    field = rng.integers(lo, hi + 1, shape).astype(f.raw_dtype)
    frac = rng.integers(0, 1 << f.mbits, shape).astype(f.raw_dtype)
    if not f.has_inf:  # e4m3fn: S.1111.111 is NaN, the only one; keep values finite
        frac = np.where((field == (1 << f.ebits) - 1) & (frac == (1 << f.mbits) - 1), frac - 1, frac)
    return (sign | (field << raw(f.mbits)) | frac).astype(f.raw_dtype)


def f32_exp(rng: np.random.Generator, shape, e_lo: int, e_hi: int, p_zero: float = 0.0) -> np.ndarray:
    """Random fp32 values +-(1 + f) * 2^e, e uniform in [e_lo, e_hi] (clipped to normal exponents), plus fp32
    subnormals where e < -126 was drawn, and zeros with probability p_zero."""
    e = rng.integers(e_lo, e_hi + 1, shape)
    sign = rng.integers(0, 2, shape).astype(np.uint32) << np.uint32(31)
    frac = rng.integers(0, 1 << 23, shape).astype(np.uint32)
    field = np.clip(e + 127, 0, 254).astype(np.uint32)
    x = (sign | (field << np.uint32(23)) | frac).view(np.float32)
    if p_zero:
        x = np.where(rng.random(shape) < p_zero, np.float32(0), x)
    return x.astype(np.float32)


def _shapes(f: Format, n: int):
    k = mma_k(f)
    return (n, 16, k), (n, k, 8), (n, 16, 8)


def _fields(f: Format, lo_exp: int, hi_exp: int) -> tuple[int, int]:
    """Exponent fields for unbiased exponents [lo_exp, hi_exp], clipped to the format."""
    return max(0, lo_exp + f.bias), min(f.max_field, hi_exp + f.bias)


def _span(f: Format) -> int:
    """Half the exponent span used for 'full range' draws: the whole range, but products kept inside fp32's."""
    return min(f.bias, 60)


def dist_full_range(rng, f, n):
    sa, sb, sc = _shapes(f, n)
    lo, hi = _fields(f, -_span(f), _span(f))
    return random_bits(rng, f, sa, 0, hi), random_bits(rng, f, sb, 0, hi), f32_exp(rng, sc, -50, 40, 0.1)


def dist_subnormal(rng, f, n):
    sa, sb, sc = _shapes(f, n)
    a = np.where(rng.random(sa) < 0.5, random_bits(rng, f, sa, 0, 0), random_bits(rng, f, sa, 1, 4))
    b = np.where(rng.random(sb) < 0.5, random_bits(rng, f, sb, 0, 0), random_bits(rng, f, sb, *_fields(f, 0, 8)))
    emin_prod = 2 * (f.emin - f.mbits)  # exponent of the smallest product (below fp32's range for bf16 and tf32)
    lo = max(-149, emin_prod - 10)
    c = f32_exp(rng, sc, lo, max(lo + 30, emin_prod + 40), 0.25)
    return a.astype(f.raw_dtype), b.astype(f.raw_dtype), c


def dist_mixed_sign_cancel(rng, f, n):
    # B[k + K/2] = B[k] (powers of two) and A[m][k + K/2] = -A[m][k]: products cancel in pairs; a few A elements are
    # then perturbed, leaving a residue of any size.
    sa, sb, sc = _shapes(f, n)
    k = sa[-1]
    half = random_bits(rng, f, (n, 16, k // 2), *_fields(f, -10, 10))
    sign = f.raw_dtype.type(1 << (f.bits - 1))
    a = np.concatenate([half, half ^ sign], axis=-1)
    pert = rng.random(sa) < 0.1
    a = np.where(pert, random_bits(rng, f, sa, *_fields(f, -14, 5)), a).astype(f.raw_dtype)
    s = rng.integers(-4, 4, (n, k // 2, 8))
    b_half = encode(rng.choice([-1.0, 1.0], (n, k // 2, 8)) * 2.0 ** s, f)
    b = np.concatenate([b_half, b_half], axis=1)
    return a, b, f32_exp(rng, sc, -40, 10, 0.5)


def dist_cancel_against_c(rng, f, n):
    # c = -(the fp32 rounding of the exact product sum): D is the leftover after massive cancellation with c
    sa, sb, sc = _shapes(f, n)
    a = random_bits(rng, f, sa, *_fields(f, -6, 6))
    b = random_bits(rng, f, sb, *_fields(f, -6, 6))
    exact = decode(a, f) @ decode(b, f)
    c = (-exact).astype(np.float32)
    c = np.where(rng.random(c.shape) < 0.3, np.nextafter(c, np.float32(np.inf)), c).astype(np.float32)
    return a, b, c


def dist_near_overflow(rng, f, n):
    sa, sb, sc = _shapes(f, n)
    top = f.max_field
    a = random_bits(rng, f, sa, top - min(6, top), top)
    b = random_bits(rng, f, sb, top - min(6, top), top) if f.bias < 60 else random_bits(rng, f, sb, *_fields(f, 0, 4))
    c = f32_exp(rng, sc, 120, 127)
    special = rng.random(c.shape)
    c = np.where(special < 0.1, np.float32(F32_MAX), c)
    c = np.where((special >= 0.1) & (special < 0.2), np.float32(-F32_MAX), c).astype(np.float32)
    return a, b, c


def dist_far_accumulator(rng, f, n):
    sa, sb, sc = _shapes(f, n)
    lo, hi = _fields(f, -5, 5)
    return random_bits(rng, f, sa, lo, hi), random_bits(rng, f, sb, lo, hi), f32_exp(rng, sc, -149, 127)


def dist_rounding_boundary(rng, f, n):
    # c in [1, 4), small products whose low bits straddle the alignment grid; sometimes one product >= 2
    sa, sb, sc = _shapes(f, n)
    a = random_bits(rng, f, sa, *_fields(f, -14, -1))
    b = random_bits(rng, f, sb, *_fields(f, -12, 0))
    big = rng.random(sa) < 0.1
    a = np.where(big, random_bits(rng, f, sa, *_fields(f, 0, 1)), a).astype(f.raw_dtype)
    return a, b, f32_exp(rng, sc, 0, 1)


def _ones(f: Format, shape) -> np.ndarray:
    return np.full(shape, encode(np.array(1.0), f), f.raw_dtype)


def dist_ones_b(rng, f, n):
    sa, sb, sc = _shapes(f, n)
    return random_bits(rng, f, sa), _ones(f, sb), f32_exp(rng, sc, -30, 30, 0.2)


def dist_ones_b_sums(rng, f, n):
    # the reduction's own case: A = data of one sign or mixed, B = ones, c = a running sum of similar magnitude
    sa, sb, sc = _shapes(f, n)
    a = random_bits(rng, f, sa, *_fields(f, -8, 3))
    pos = rng.random((n, 1, 1)) < 0.5
    a = np.where(pos, a & f.raw_dtype.type((1 << (f.bits - 1)) - 1), a).astype(f.raw_dtype)
    return a, _ones(f, sb), f32_exp(rng, sc, -4, 12, 0.3)


def dist_ones_a(rng, f, n):
    sa, sb, sc = _shapes(f, n)
    return _ones(f, sa), random_bits(rng, f, sb), f32_exp(rng, sc, -30, 30, 0.2)


def dist_powers_of_two_b(rng, f, n):
    sa, sb, sc = _shapes(f, n)
    lo, hi = _fields(f, -20, 15)
    s = rng.integers(lo - f.bias, hi - f.bias + 1, sb)
    b = encode(rng.choice([-1.0, 1.0], sb) * 2.0 ** s, f)
    return random_bits(rng, f, sa), b, f32_exp(rng, sc, -60, 40, 0.2)


def dist_signed_zeros(rng, f, n):
    # zero products of both signs, some nonzero products, c = +-0 or tiny; the first quarter has every product -0 with
    # c = -0 (A = -0, B > 0), the second quarter likewise with A = +0, B < 0
    sa, sb, sc = _shapes(f, n)
    sign = f.raw_dtype.type(1 << (f.bits - 1))
    a = random_bits(rng, f, sa, *_fields(f, -5, 5))
    zero = rng.random(sa) < 0.9
    a = np.where(zero, np.where(rng.random(sa) < 0.5, f.raw_dtype.type(0), sign), a).astype(f.raw_dtype)
    b = random_bits(rng, f, sb, *_fields(f, -5, 5))
    c = np.where(rng.random(sc) < 0.5, np.float32(0.0), np.float32(-0.0))
    c = np.where(rng.random(sc) < 0.1, f32_exp(rng, sc, -149, -100), c).astype(np.float32)
    q = n // 4
    a[:q], b[:q] = sign, b[:q] & ~sign
    a[q:2 * q], b[q:2 * q] = 0, b[q:2 * q] | sign
    c[:2 * q] = np.float32(-0.0)
    return a, b, c


def dist_specials(rng, f, n):
    sa, sb, sc = _shapes(f, n)
    a = random_bits(rng, f, sa, *_fields(f, -8, 8))
    b = random_bits(rng, f, sb, *_fields(f, -8, 8))
    c = f32_exp(rng, sc, -20, 40, 0.1)
    vals = [np.nan, 0.0] + ([np.inf, -np.inf] if f.has_inf else [])
    specials = encode(np.array(vals), f)
    ma, mb, mc = rng.random(sa) < 0.02, rng.random(sb) < 0.02, rng.random(sc) < 0.05
    a = np.where(ma, specials[rng.integers(0, len(vals), sa)], a).astype(f.raw_dtype)
    b = np.where(mb, specials[rng.integers(0, len(vals), sb)], b).astype(f.raw_dtype)
    sp32 = np.array([np.inf, -np.inf, np.nan], np.float32)
    c = np.where(mc, sp32[rng.integers(0, 3, sc)], c).astype(np.float32)
    return a, b, c


def dist_product_overflow(rng, f, n):
    # products beyond the fp32 range (bf16 and tf32 only; fp16/fp8 products cannot overflow fp32)
    sa, sb, sc = _shapes(f, n)
    lo, hi = _fields(f, 50, 90)
    return random_bits(rng, f, sa, lo, hi), random_bits(rng, f, sb, lo, hi), f32_exp(rng, sc, 100, 127, 0.2)


DISTRIBUTIONS: dict[str, Callable] = {
    "full_range": dist_full_range,
    "subnormal": dist_subnormal,
    "mixed_sign_cancel": dist_mixed_sign_cancel,
    "cancel_against_c": dist_cancel_against_c,
    "near_overflow": dist_near_overflow,
    "far_accumulator": dist_far_accumulator,
    "rounding_boundary": dist_rounding_boundary,
    "ones_B": dist_ones_b,
    "ones_B_sums": dist_ones_b_sums,
    "ones_A": dist_ones_a,
    "powers_of_two_B": dist_powers_of_two_b,
    "signed_zeros": dist_signed_zeros,
    "specials": dist_specials,
    "product_overflow": dist_product_overflow,
}


def make_operands(fmt: str | Format, dist: str, rng: np.random.Generator, n: int):
    """(a bits [n,16,K], b bits [n,K,8], c float32 [n,16,8]) of distribution ``dist`` for format ``fmt``."""
    f = get_format(fmt)
    if dist == "product_overflow" and f.bias < 60:
        raise ValueError(f"{f.name} products cannot overflow fp32")
    return DISTRIBUTIONS[dist](rng, f, n)
