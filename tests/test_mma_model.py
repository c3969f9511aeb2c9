"""CPU tests of the tensor-core model (tcreduce/emulate/mma_model.py): hand-worked cases with the arithmetic in the
comments, an independent exact-rational transcription of the published model, agreement between the general MMA and
the ones-operand fast paths, special values and speed.

Notation in the comments: eta = alignment exponent (largest unnormalised exponent of a nonzero term), F = 23 + extra
bits (H100 25, A100 24, V100 23), grid = 2^(eta - F), "u" = one grid unit. fp32 ulp of [1, 2) is 2^-23.
"""

from __future__ import annotations

import time
from pathlib import Path
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tcreduce.emulate import MODELS, fused_colsum, fused_rowsum, get_model, mma, mma_m16n8k16
from tcreduce.emulate.mma_model import round_toward_zero_f32

F32_MAX = float(np.finfo(np.float32).max)


def h(v: float) -> np.float16:
    """An fp16 value that must be exact."""
    x = np.float16(v)
    assert float(x) == v or (np.isnan(v) and np.isnan(x)), f"{v!r} is not an fp16 value"
    return x


def bits32(x) -> int:
    return int(np.asarray(x, dtype=np.float32).view(np.uint32))


def f32_from_bits(b: int) -> np.float32:
    return np.array([b], dtype=np.uint32).view(np.float32)[0]


def row(values: list[float], pad: int = 16) -> np.ndarray:
    out = np.zeros(pad, dtype=np.float16)
    out[: len(values)] = [h(v) for v in values]
    return out


def rowsum_bits(values: list[float], c: float, model: str = "H100") -> int:
    cc = np.float32(c)
    assert float(cc) == c, f"{c!r} is not an fp32 value"
    return bits32(fused_rowsum(row(values), cc, model=model))


def mma_single(a_row: list[float], b_col: list[float], c: float, model: str = "H100") -> int:
    """D[0][0] of one MMA whose A row 0 and B column 0 are given (everything else zero)."""
    a = np.zeros((16, 16), np.float16)
    b = np.zeros((16, 8), np.float16)
    cm = np.zeros((16, 8), np.float32)
    a[0, : len(a_row)] = [h(v) for v in a_row]
    b[: len(b_col), 0] = [h(v) for v in b_col]
    cm[0, 0] = c
    return bits32(mma_m16n8k16(a, b, cm, model=model)[0, 0])


# ------------------------------------------------------------------------------------------ hand-worked cases
def test_round_toward_zero():
    # c = 0; values 1, 2^-24, 2^-24, 2^-24.  eta = 0 (from 1.0), grid 2^-25: 1 = 2^25 u, 2^-24 = 2 u, kept.
    # Exact fixed-point sum 1 + 3*2^-24 = 1 + 1.5 ulp -> toward zero: 1 + 2^-23 = 0x3F800001.
    # (Round to nearest would give 1 + 2^-22 = 0x3F800002: 1.5 ulp is a tie, to even.)
    assert hex(rowsum_bits([1.0, 2**-24, 2**-24, 2**-24], 0.0)) == hex(0x3F800001)
    # Mirror image: toward zero, not toward -inf: -(1 + 2^-23) = 0xBF800001 (round-down would give 0xBF800002).
    assert hex(rowsum_bits([-1.0, -(2**-24), -(2**-24), -(2**-24)], 0.0)) == hex(0xBF800001)
    # 1 + 2^-24 + 2^-24 = 1 + 1 ulp exactly: no rounding at all -> 0x3F800001.
    assert hex(rowsum_bits([1.0, 2**-24, 2**-24], 0.0)) == hex(0x3F800001)
    # 1 + 2^-24 = 1 + 0.5 ulp -> toward zero: 1.0 (round to nearest even would also give 1.0, but 1 + 0.75 ulp...)
    assert hex(rowsum_bits([1.0, 2**-24], 0.0)) == hex(0x3F800000)
    # ... 1 + 3*2^-25 is not reachable from fp16 rows; 0.75 ulp via c: c = 1 + 2^-23 (exact in fp32, eta 0),
    # values -2^-24: sum = 1 + 2^-23 - 2^-24 = 1 + 0.5 ulp -> 1.0 (toward zero), not 1 + 2^-23.
    assert hex(rowsum_bits([-(2**-24)], 1.0 + 2**-23)) == hex(0x3F800000)


def test_truncated_alignment_drops_low_bits():
    # c = 1024 (eta = 10), grid 2^(10-25) = 2^-15. Each value 2^-6 + 2^-16 (fp16 0x2401) is 2^9 + 0.5 u:
    # truncated to 2^9 u = 2^-6, dropping its 2^-16 bit. 15 of them: 1024 + 15*2^-6 = 1024.234375 exactly,
    # which fp32 holds (ulp at 1024 is 2^-13 and 15*2^-6 = 1920*2^-13).
    # Exact sum 1024 + 15*2^-6 + 15*2^-16 = ... + 1.875 ulp, so RZ(exact) = 1024.234375 + 2^-13 and RN(exact) =
    # 1024.234375 + 2*2^-13: the model's answer differs from both because of the alignment truncation.
    v = 2**-6 + 2**-16
    assert np.float16(v).view(np.uint16) == 0x2401
    got = rowsum_bits([v] * 15, 1024.0)
    assert got == bits32(np.float32(1024.234375)), hex(got)
    assert got == bits32(np.float32(1024.234375 + 2**-13)) - 1


def test_accumulator_much_larger_absorbs_products():
    # c = 2^40: eta = 40, grid 2^15. Sixteen values 2^14 are 0.5 u each -> all truncated to 0. D = 2^40 exactly,
    # although the exact sum 2^40 + 16*2^14 = 2^40 + 2^18 is an fp32 value (ulp at 2^40 is 2^17).
    assert rowsum_bits([2.0**14] * 16, 2.0**40) == bits32(np.float32(2.0**40))
    assert float(np.float32(2.0**40 + 2.0**18)) == 2.0**40 + 2.0**18
    # A value 2^15 = 1 u survives alignment. Three: 2^40 + 3*2^15 = 2^40 + 0.75*2^17 -> toward zero to the fp32
    # grid of 2^17: 2^40. Seven: 2^40 + 1.75*2^17 -> 2^40 + 2^17.
    assert rowsum_bits([2.0**15] * 3, 2.0**40) == bits32(np.float32(2.0**40))
    assert rowsum_bits([2.0**15] * 7, 2.0**40) == bits32(np.float32(2.0**40 + 2.0**17))


def test_accumulator_much_smaller_is_truncated_away():
    # c = 3*2^-27 = 1.5*2^-26 (exponent -26). Values 1, -1: eta = max(0, 0, -26) = 0, grid 2^-25; c = 0.75 u -> 0.
    # Sum 2^25 - 2^25 + 0 = 0 -> +0.0, although the exact sum is 3*2^-27.
    c = 3 * 2.0**-27
    assert rowsum_bits([1.0, -1.0], c) == 0x00000000
    # Alone (all products zero) c is the only nonzero term: eta = -26, grid 2^-51, c kept exactly.
    assert rowsum_bits([], c) == bits32(np.float32(c))
    # c = 2^-20 with 16 ones: grid 2^-25 keeps c (32 u): 16 + 2^-20, but fp32 ulp at 16 is 2^-19 -> toward zero: 16.
    assert rowsum_bits([1.0] * 16, 2.0**-20) == bits32(np.float32(16.0))


def test_subnormal_inputs_and_outputs():
    # 16 x 2^-24 (fp16 0x0001, subnormal, unnormalised exponent -14, significand 1): eta = -14, grid 2^-39,
    # each 2^15 u; sum 2^19 u = 2^-20 = fp32 0x35800000.
    assert hex(rowsum_bits([2**-24] * 16, 0.0)) == hex(0x35800000)
    # Largest subnormal 1023*2^-24 plus smallest normal 2^-14 = 1024*2^-24: 2047*2^-24, exact in fp32.
    assert rowsum_bits([1023 * 2**-24, 2**-14], 0.0) == bits32(np.float32(2047 * 2.0**-24))
    # Subnormal next to 1.0: 1 + 2^-24 + 2^-24 = 1 + 2^-23 (grid 2^-25 keeps both) = 0x3F800001.
    assert hex(rowsum_bits([1.0, 2**-24, 2**-24], 0.0)) == hex(0x3F800001)
    # Product of two subnormals: 2^-24 * 2^-24 = 2^-48, unnormalised exponent -14 + -14 = -28; alone in its block:
    # eta = -28, grid 2^-53, the product is 2^5 u: D = 2^-48 = fp32 0x27800000 (a normal fp32).
    assert hex(mma_single([2**-24], [2**-24], 0.0)) == hex(0x27800000)
    # fp32 subnormal accumulator with zero products: eta = -126, grid 2^-151, c = 2^-140 (0x00000200) kept exactly.
    assert hex(rowsum_bits([], 2.0**-140)) == hex(0x00000200)
    assert hex(rowsum_bits([], -(2.0**-149))) == hex(0x80000001)
    # fp32 subnormal c next to nonzero products: eta = -14 (products), grid 2^-39: c truncated to 0; the products
    # cancel: D = +0.
    assert hex(rowsum_bits([2**-24, -(2**-24)], 2.0**-149)) == hex(0x00000000)


def test_cancellation_to_exact_zero_is_positive_zero():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(8).astype(np.float16)
    vals = np.concatenate([x, -x[::-1]])  # exact cancellation in any order
    assert bits32(fused_rowsum(vals, np.float32(0.0))) == 0x00000000
    assert bits32(fused_rowsum(-vals, np.float32(0.0))) == 0x00000000
    # c = -1, value 1: sum 0 -> +0.0 (not -0.0).
    assert rowsum_bits([1.0], -1.0) == 0x00000000
    # All terms zero, c = -0.0: the published model returns +0 (GEMM.m "d = 0"); the GPU test checks this case.
    assert bits32(fused_rowsum(np.zeros(16, np.float16), np.float32(-0.0))) == 0x00000000
    assert bits32(fused_rowsum(-np.zeros(16, np.float16), np.float32(-0.0))) == 0x00000000


def test_extra_alignment_bit_when_largest_product_is_at_least_two():
    # Both rows have the largest product 2.25 and 15 small products (3*2^-13)(2^-12) = 3*2^-25 (unnormalised
    # exponent -12 + -12 = -24).
    # X: 2.25 = 1.5 * 1.5: significand 2.25 in [2, 4), unnormalised exponent 0 -> eta = 0, grid 2^-25: each small
    #    product is 3 u, kept: 2.25 + 45*2^-25 = 2.25 + 5.625 ulp (ulp of [2, 4) is 2^-22 = 8 u) -> 2.25 + 5 ulp.
    # Y: 2.25 = 2.25 * 1.0: unnormalised exponent 1 -> eta = 1, grid 2^-24: each small product is 1.5 u -> 1 u:
    #    2.25 + 15*2^-24 = 2.25 + 3.75 ulp -> 2.25 + 3 ulp.
    small_a, small_b = 3 * 2**-13, 2**-12
    x = mma_single([1.5] + [small_a] * 15, [1.5] + [small_b] * 15, 0.0)
    y = mma_single([2.25] + [small_a] * 15, [1.0] + [small_b] * 15, 0.0)
    assert bits32(np.float32(2.25)) == 0x40100000
    assert hex(x) == hex(0x40100005)
    assert hex(y) == hex(0x40100003)


def test_block_structure_per_gpu():
    # v = [1, 2^-24, 0, 0, 2^-24 x4, 2^-24, 0 x7], c = 0.
    # H100 (one block of 16, grid 2^-25): 1 + 6*2^-24 = 1 + 3 ulp exactly -> 0x3F800003.
    # A100 (blocks k 0..7 and 8..15, grid 2^-24): block 1: 1 + 5*2^-24 = 1 + 2.5 ulp -> 1 + 2 ulp;
    #      block 2: c = 1 + 2^-22 (eta 0) + 2^-24 = 1 + 2.5 ulp -> 1 + 2 ulp = 0x3F800002.
    # V100 (blocks of 4, grid 2^-23): block 1: 2^-24 = 0.5 u -> 0: 1.0; block 2: c = 1 sets eta = 0, each 2^-24
    #      -> 0: 1.0; block 3 likewise; block 4: zeros: 1.0 = 0x3F800000.
    e = 2**-24
    vals = [1.0, e, 0, 0, e, e, e, e, e]
    expected = {"H100": 0x3F800003, "H200": 0x3F800003, "A100": 0x3F800002, "V100": 0x3F800000}
    for model, want in expected.items():
        assert hex(rowsum_bits(vals, 0.0, model)) == hex(want), model
        # the same through the general MMA with B = ones
        a = np.zeros((16, 16), np.float16)
        a[0] = row(vals)
        d = mma_m16n8k16(a, np.ones((16, 8), np.float16), np.zeros((16, 8), np.float32), model=model)
        assert {bits32(v) for v in d[0]} == {want}, model
    # A100 vs H100 on a split that matters in the other direction: [1, 2^-24 | 2^-24 ...] (k = 1 and k = 8).
    # H100: 1 + 2*2^-24 = 1 + 1 ulp = 0x3F800001. A100: block 1: 1 + 0.5 ulp -> 1.0; block 2: 1 + 2^-24 -> 1.0.
    v2 = [1.0, e, 0, 0, 0, 0, 0, 0, e]
    assert hex(rowsum_bits(v2, 0.0, "H100")) == hex(0x3F800001)
    assert hex(rowsum_bits(v2, 0.0, "A100")) == hex(0x3F800000)


def test_chained_mmas_equal_long_rows():
    # K = 32 values = two chained MMAs: D1 = mma(first 16, c); D = mma(next 16, D1).
    rng = np.random.default_rng(3)
    v = (rng.standard_normal((64, 32)) * 2.0 ** rng.integers(-10, 10, (64, 32))).astype(np.float16)
    c = rng.standard_normal(64).astype(np.float32)
    for model in MODELS:
        two = fused_rowsum(v[:, 16:], fused_rowsum(v[:, :16], c, model=model), model=model)
        assert np.array_equal(fused_rowsum(v, c, model=model).view(np.uint32), two.view(np.uint32)), model


def test_special_values():
    inf, nan = float("inf"), float("nan")
    assert bits32(fused_rowsum(row([1.0, inf]), np.float32(0))) == bits32(np.float32(inf))
    assert bits32(fused_rowsum(row([-inf, 1.0, -inf]), np.float32(5))) == bits32(np.float32(-inf))
    assert np.isnan(fused_rowsum(row([inf, -inf]), np.float32(0)))
    assert np.isnan(fused_rowsum(row([nan, 1.0]), np.float32(0)))
    assert bits32(fused_rowsum(row([1.0, 2.0]), np.float32(inf))) == bits32(np.float32(inf))
    assert np.isnan(fused_rowsum(row([inf]), np.float32(-inf)))
    assert np.isnan(fused_rowsum(row([1.0]), np.float32(nan)))
    # inf * 0 = NaN in the general MMA; inf * -1 = -inf
    assert np.isnan(f32_from_bits(mma_single([inf], [0.0], 0.0)))
    assert mma_single([inf], [-1.0], 0.0) == bits32(np.float32(-inf))
    # A100: +inf in block 1 (k < 8), -inf in block 2: block 1 gives +inf, which is block 2's c: NaN
    a = np.zeros(16, np.float16)
    a[0], a[8] = np.inf, -np.inf
    assert np.isnan(fused_rowsum(a, np.float32(0), model="A100"))
    # FLT_MAX accumulator plus the largest fp16 products: grid 2^(127-25), products truncate to 0: no overflow
    assert bits32(fused_rowsum(np.full(16, 65504, np.float16), np.float32(F32_MAX))) == bits32(np.float32(F32_MAX))
    assert mma_single([65504.0] * 16, [65504.0] * 16, F32_MAX) == bits32(np.float32(F32_MAX))


def test_round_toward_zero_f32_helper():
    x = np.array([1 + 2**-24, -(1 + 2**-23 + 2**-24), 1.5 * 2**-149, -(2**-150), 2.0**128, -(2.0**129), 3.0,
                  F32_MAX, 0.0, -0.0])
    want = np.array([1.0, -(1 + 2**-23), 2**-149, -0.0, np.inf, -np.inf, 3.0, F32_MAX, 0.0, -0.0], np.float32)
    assert np.array_equal(round_toward_zero_f32(x).view(np.uint32), want.view(np.uint32))
    assert np.isnan(round_toward_zero_f32(np.array([np.nan])))[0]


# --------------------------------------------------------------------- independent exact-rational transcription
def _dec16(b: int) -> tuple[Fraction, int | None]:
    """(value, unnormalised exponent or None for zero) of an fp16 bit pattern (finite)."""
    field, frac = (b >> 10) & 31, b & 1023
    sig = frac | (1024 if field else 0)
    e = max(field, 1) - 15
    v = Fraction(sig) * Fraction(2) ** (e - 10) * (-1 if b >> 15 else 1)
    return v, (e if sig else None)


def _dec32(b: int) -> tuple[Fraction, int | None]:
    field, frac = (b >> 23) & 255, b & 0x7FFFFF
    sig = frac | ((1 << 23) if field else 0)
    e = max(field, 1) - 127
    v = Fraction(sig) * Fraction(2) ** (e - 23) * (-1 if b >> 31 else 1)
    return v, (e if sig else None)


def _rz32_bits(v: Fraction) -> int:
    if v == 0:
        return 0
    sign = 0x80000000 if v < 0 else 0
    mag = abs(v)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if mag < Fraction(2) ** e:
        e -= 1
    quantum = Fraction(2) ** (max(e, -126) - 23)
    t = (mag // quantum) * quantum
    if t >= Fraction(2) ** 128:
        return sign | 0x7F800000
    return sign | int(np.float32(float(t)).view(np.uint32))  # t is an fp32 value: exact conversions


def _spec_mma_element(a_bits: list[int], b_bits: list[int], c_bits: int, model: str) -> int:
    """Khattak & Mikaitis block FMA chain, written directly from the paper's description with exact rationals."""
    p = get_model(model)
    c = c_bits
    for k0 in range(0, 16, p.block):
        terms = [_dec32(c)]
        for k in range(k0, k0 + p.block):
            (va, ea), (vb, eb) = _dec16(a_bits[k]), _dec16(b_bits[k])
            terms.append((va * vb, None if va * vb == 0 else ea + eb))
        exps = [e for _, e in terms if e is not None]
        if not exps:
            c = 0
            continue
        eta = max(exps) if p.align_floor is None else max(max(exps), p.align_floor)
        grid = Fraction(2) ** (eta - p.frac_bits)
        total = sum(int(v / grid) for v, _ in terms)  # int() truncates toward zero
        c = _rz32_bits(total * grid)
    return c


def _random_finite_f16_bits(rng, shape, field_lo=0, field_hi=30):
    sign = rng.integers(0, 2, shape) << 15
    field = rng.integers(field_lo, field_hi + 1, shape) << 10
    frac = rng.integers(0, 1024, shape)
    return (sign | field | frac).astype(np.uint16)


@pytest.mark.parametrize("model", ["H100", "A100", "V100"])
def test_model_matches_exact_rational_spec(model):
    rng = np.random.default_rng({"H100": 11, "A100": 12, "V100": 13}[model])
    cases = []
    # full fp16 range, a random fp32 accumulator
    a = _random_finite_f16_bits(rng, (6, 16, 16))
    b = _random_finite_f16_bits(rng, (6, 16, 8))
    c = (rng.standard_normal((6, 16, 8)) * 2.0 ** rng.integers(-60, 60, (6, 16, 8))).astype(np.float32)
    cases.append((a, b, c))
    # subnormal-heavy operands, tiny or subnormal accumulators, zeros
    a = _random_finite_f16_bits(rng, (4, 16, 16), 0, 2)
    b = _random_finite_f16_bits(rng, (4, 16, 8), 0, 2)
    a[rng.random(a.shape) < 0.2] = 0
    c = (rng.standard_normal((4, 16, 8)) * 2.0 ** rng.integers(-149, -40, (4, 16, 8))).astype(np.float32)
    cases.append((a, b, c))
    # near-cancellation: second half of each A row is minus the first half, B rows repeat, small perturbation
    a16 = (rng.standard_normal((4, 16, 8)) * 2.0 ** rng.integers(-8, 8, (4, 16, 8))).astype(np.float16)
    a16 = np.concatenate([a16, -a16], axis=-1)
    a16[..., 15] += np.float16(2**-10)
    b16 = np.float16(2.0) ** rng.integers(-6, 6, (4, 8, 8)).astype(np.float16)
    b16 = np.concatenate([b16, b16], axis=1)
    c = (rng.standard_normal((4, 16, 8)) * 2.0 ** -20).astype(np.float32)
    cases.append((a16.view(np.uint16), b16.view(np.uint16), c))
    for a, b, c in cases:
        d = mma_m16n8k16(a.view(np.float16), b.view(np.float16), c, model=model).view(np.uint32)
        cb = c.view(np.uint32)
        for t in range(a.shape[0]):
            for i in range(16):
                for j in range(8):
                    want = _spec_mma_element([int(x) for x in a[t, i]], [int(x) for x in b[t, :, j]],
                                             int(cb[t, i, j]), model)
                    assert int(d[t, i, j]) == want, (
                        f"{model} mma {t} D[{i}][{j}]: model {int(d[t, i, j]):#010x} spec {want:#010x}\n"
                        f"  a row {[f'{int(x):04x}' for x in a[t, i]]}\n  b col {[f'{int(x):04x}' for x in b[t, :, j]]}"
                        f"\n  c {int(cb[t, i, j]):#010x}")


# ------------------------------------------------------------------------- fast paths agree with the general MMA
@pytest.mark.parametrize("model", list(MODELS))
def test_mma_with_ones_agrees_with_fused_rowsum_and_colsum(model):
    rng = np.random.default_rng(7)
    n = 64
    a = _random_finite_f16_bits(rng, (n, 16, 16)).view(np.float16)
    b = _random_finite_f16_bits(rng, (n, 16, 8)).view(np.float16)
    c = (rng.standard_normal((n, 16, 8)) * 2.0 ** rng.integers(-30, 30, (n, 16, 8))).astype(np.float32)
    ones_b = np.ones((16, 8), np.float16)
    ones_a = np.ones((16, 16), np.float16)
    d_rows = mma_m16n8k16(a, ones_b, c, model=model)  # D[t, i, j] = c[t, i, j] + sum_k a[t, i, k]
    want_rows = fused_rowsum(np.broadcast_to(a[:, :, None, :], (n, 16, 8, 16)), c, model=model)
    assert np.array_equal(d_rows.view(np.uint32), want_rows.view(np.uint32))
    d_cols = mma_m16n8k16(ones_a, b, c, model=model)  # D[t, i, j] = c[t, i, j] + sum_k b[t, k, j]
    for i in range(16):
        want_cols = fused_colsum(b, c[:, i, :], model=model)
        assert np.array_equal(d_cols[:, i, :].view(np.uint32), want_cols.view(np.uint32)), i
    # and both differ from plain round-to-nearest fp32 arithmetic somewhere (the test can tell models apart)
    rn = (a.astype(np.float64).sum(-1)[:, :, None] + c).astype(np.float32)
    assert not np.array_equal(rn.view(np.uint32), d_rows.view(np.uint32))


def test_models_and_validation():
    assert get_model("NVIDIA H100 80GB HBM3").name == "H100"
    assert get_model("h200").frac_bits == 25
    assert (MODELS["A100"].block, MODELS["A100"].frac_bits) == (8, 24)
    assert (MODELS["V100"].block, MODELS["V100"].frac_bits) == (4, 23)
    with pytest.raises(ValueError):
        get_model("B200")
    with pytest.raises(TypeError):
        fused_rowsum(np.zeros(16, np.float64), np.float32(0))
    with pytest.raises(ValueError):  # fp8 mma.sync needs sm_89+
        fused_rowsum(np.zeros(32, ml_dtypes.float8_e4m3fn), np.float32(0), model="A100")
    with pytest.raises(ValueError):  # tf32 rows come in multiples of 8
        fused_rowsum(np.zeros(12, np.float32), np.float32(0))
    with pytest.raises(TypeError):
        mma(np.zeros((16, 16), ml_dtypes.bfloat16), np.zeros((16, 8), np.float16), np.zeros((16, 8), np.float32))
    with pytest.raises(ValueError):
        fused_rowsum(np.zeros(15, np.float16), np.float32(0))
    with pytest.raises(ValueError):
        fused_rowsum(np.zeros(16, np.float16), 0.1)  # 0.1 is not an fp32 value
    with pytest.raises(ValueError):
        mma_m16n8k16(np.zeros((16, 8), np.float16), np.zeros((16, 8), np.float16), np.zeros((16, 8), np.float32))


def test_fused_rowsum_speed():
    rng = np.random.default_rng(9)
    v = rng.standard_normal((1 << 18, 16)).astype(np.float16)  # 2^22 elements
    t0 = time.perf_counter()
    d = fused_rowsum(v, np.float32(0))
    dt = time.perf_counter() - t0
    print(f"fused_rowsum: 2^22 fp16 elements in {dt:.2f} s")
    assert d.shape == (1 << 18,) and d.dtype == np.float32
    assert dt < 20.0


# ------------------------------------------------------------------------ every format against recorded H100 bits
RECORDS = Path(__file__).parent / "data" / "mma_h100_records.npz"
FORMATS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32")


@pytest.mark.parametrize("fmt", FORMATS)
def test_mma_reproduces_recorded_h100_bits(fmt):
    """12 MMAs per operand family, recorded on an NVIDIA H100 80GB HBM3 (scripts/probe_mma.py, 2026-11-23): the model
    gives the same bits for every D element (NaN == NaN). The GPU suite checks 10^5 fresh MMAs per format."""
    from tcreduce.formats import numpy_dtype

    rec = np.load(RECORDS)
    dt = numpy_dtype(fmt)
    dists = sorted({k.split("/")[1] for k in rec.files if k.startswith(fmt + "/") and k.count("/") == 2})
    assert len(dists) >= 12
    for dist in dists:
        a, b, c, d = (rec[f"{fmt}/{dist}/{x}"] for x in "abcd")
        got = mma(a.view(dt), b.view(dt), c, model="H100")
        same = (got.view(np.uint32) == d.view(np.uint32)) | (np.isnan(got) & np.isnan(d))
        assert same.all(), f"{fmt} {dist}: {int((~same).sum())} of {same.size} D elements differ"


@pytest.mark.parametrize("fmt", FORMATS)
def test_mma_with_ones_agrees_with_fused_rowsum_every_format(fmt):
    from tcreduce.formats import numpy_dtype
    from tcreduce.mma_operands import encode, mma_k, random_bits

    rng = np.random.default_rng(11)
    dt, k, n = numpy_dtype(fmt), mma_k(fmt), 32
    a = random_bits(rng, fmt, (n, 16, k)).view(dt)
    c = (rng.standard_normal((n, 16, 8)) * 2.0 ** rng.integers(-10, 10, (n, 16, 8))).astype(np.float32)
    ones = np.broadcast_to(encode(np.ones((k, 8)), fmt).view(dt), (k, 8))
    d = mma(a, ones, c)
    want = fused_rowsum(np.broadcast_to(a[:, :, None, :], (n, 16, 8, k)), c)
    assert np.array_equal(d.view(np.uint32), want.view(np.uint32))
    # a chain of two rows equals the two-mma recursion
    v = random_bits(rng, fmt, (n, 2 * k)).view(dt)
    two = fused_rowsum(v[:, k:], fused_rowsum(v[:, :k], c[:, 0, 0]), model="H100")
    assert np.array_equal(fused_rowsum(v, c[:, 0, 0]).view(np.uint32), two.view(np.uint32))


def test_tf32_reads_the_top_19_bits():
    x = np.float32(1.0) + np.float32(2.0 ** -20)  # a bit below tf32's 10 fraction bits: dropped, not rounded
    a = np.full((16, 8), x, np.float32)
    b = np.ones((8, 8), np.float32)
    assert np.all(mma(a, b, np.zeros((16, 8), np.float32)) == 8.0)


def test_fp8_is_two_fp16_blocks_then_a_round_to_nearest_add():
    import ml_dtypes

    # 2^8 in one half (k mod 4 < 2) and 2^-4 sixteen times in the other: the second block aligns to 2^8 with 25
    # fraction bits and keeps 1; c = 2^-30 is added with round to nearest afterwards and is lost (2^8 + 1 + 2^-30).
    v = np.zeros(32, np.float64)
    v[0] = 256.0
    v[2::4] = 2.0 ** -4
    v[3::4] = 2.0 ** -4
    d = fused_rowsum(v.astype(ml_dtypes.float8_e4m3fn), np.float32(2.0 ** -30))
    assert d == np.float32(257.0)
    # c enters last with round to nearest: 2^24 + 1 (exact block) + c = 1 rounds to even
    w = np.zeros(32, np.float64)
    w[0] = 1.0
    assert fused_rowsum(w.astype(ml_dtypes.float8_e5m2), np.float32(2.0 ** 24)) == np.float32(2.0 ** 24)
