"""CPU tests of tcreduce.reference: exact_sum against math.fsum and exact rationals, cancellation where a float64
sum is wrong, axis/keepdims shapes, special values, relative_error."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest

from tcreduce.reference import exact_sum, float64_sum, relative_error

F32_MAX = float(np.finfo(np.float32).max)


def fraction_rows(x: np.ndarray) -> np.ndarray:
    """Per row (last axis): float(exact rational sum); Python rounds int/int ratios correctly to nearest."""
    rows = x.reshape(-1, x.shape[-1])
    return np.array([float(sum((Fraction(float(v)) for v in r), Fraction(0))) for r in rows])


def random_f32_bits(rng, shape) -> np.ndarray:
    """Random finite float32 values over the whole range (subnormals included)."""
    b = rng.integers(0, 2**32, shape, dtype=np.uint64).astype(np.uint32)
    x = b.view(np.float32)
    return np.where(np.isfinite(x), x, np.float32(1.5))


def random_f16_bits(rng, shape) -> np.ndarray:
    b = rng.integers(0, 2**16, shape, dtype=np.uint64).astype(np.uint16)
    x = b.view(np.float16)
    return np.where(np.isfinite(x), x, np.float16(-2.5))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_exact_sum_matches_fractions(dtype):
    rng = np.random.default_rng(21 if dtype == np.float16 else 22)
    for trial in range(60):
        m, n = int(rng.integers(1, 12)), int(rng.integers(1, 80))
        x = random_f16_bits(rng, (m, n)) if dtype == np.float16 else random_f32_bits(rng, (m, n))
        if trial % 3 == 1:  # heavy cancellation: append the negated, reversed row and a tiny residue
            x = np.concatenate([x, -x[:, ::-1]], axis=1)
            x[:, -1] = x[:, -1] + dtype(2 ** -14)
        got = exact_sum(x, axis=1)
        want = fraction_rows(x)
        assert got.dtype == np.float64
        bad = np.nonzero(got.view(np.uint64) != want.view(np.uint64))[0]
        assert bad.size == 0, f"row {bad[0]}: got {got[bad[0]]!r} want {want[bad[0]]!r}; x = {x[bad[0]].tolist()}"


def test_exact_sum_matches_fsum_on_long_rows_and_many_outputs():
    rng = np.random.default_rng(23)
    x = (rng.standard_normal(1 << 20) * 2.0 ** rng.integers(-100, 100, 1 << 20)).astype(np.float32)
    assert exact_sum(x) == math.fsum(x.astype(np.float64))
    y = (rng.standard_normal((4096, 16)) * 2.0 ** rng.integers(-20, 20, (4096, 16))).astype(np.float32)
    got = exact_sum(y, axis=1)
    want = np.array([math.fsum(r) for r in y.astype(np.float64)])
    assert np.array_equal(got, want)
    y16 = (y * np.float32(2.0**-6)).astype(np.float16)  # |y| < 2^26: scaled into the fp16 range
    assert np.array_equal(exact_sum(y16, axis=1), np.array([math.fsum(r) for r in y16.astype(np.float64)]))


def test_rounding_ties_and_sticky_bits():
    # 1 + 2^-53 is a tie between 1 and 1 + 2^-52: to even gives 1.0; one more 2^-149 (sticky) breaks the tie upward.
    x = np.array([1.0, 2.0**-53], dtype=np.float64)
    assert exact_sum(x.astype(np.float64)) == 1.0
    # the same ties from float32 pieces: 2^-53 = 2^-29 * 2^-24 is an fp32 value
    assert exact_sum(np.array([1.0, 2.0**-53], np.float32)) == 1.0
    assert exact_sum(np.array([1.0, 2.0**-53, 2.0**-149], np.float32)) == 1.0 + 2.0**-52
    assert exact_sum(np.array([1.0 + 2.0**-23, 2.0**-53], np.float32)) == 1.0 + 2.0**-23  # tie, even stays
    assert exact_sum(np.array([1.0 + 2.0**-23, 3 * 2.0**-53], np.float32)) == \
        float(Fraction(1) + Fraction(1, 2**23) + Fraction(3, 2**53))
    # carries through every limb: FLT_MAX many times plus the smallest subnormal
    x = np.array([F32_MAX] * 1000 + [2.0**-149], np.float32)
    assert exact_sum(x) == float(Fraction(F32_MAX) * 1000 + Fraction(1, 2**149))


def test_cancellation_where_float64_sum_is_wrong():
    # 2^100 + 1 - 2^100: float64 (pairwise or left to right) loses the 1; the exact sum is 1.
    x = np.array([2.0**100, 1.0, -(2.0**100)], np.float32)
    assert float64_sum(x) == 0.0
    assert exact_sum(x) == 1.0
    # fp32 extremes: FLT_MAX + 2^-149 + 2^-149 - FLT_MAX: float64 returns 0, the exact sum is 2 * 2^-149
    x = np.array([F32_MAX, 2.0**-149, 2.0**-149, -F32_MAX], np.float32)
    assert float64_sum(x) == 0.0
    assert exact_sum(x) == 2 * 2.0**-149
    # exact zero is +0.0
    z = exact_sum(np.array([1.5, -1.5, -0.0], np.float32))
    assert z == 0.0 and not math.copysign(1.0, z) < 0


def test_axis_and_keepdims_shapes():
    rng = np.random.default_rng(24)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    assert exact_sum(x).shape == ()
    assert exact_sum(x, keepdims=True).shape == (1, 1, 1)
    assert exact_sum(x, axis=1).shape == (3, 5)
    assert exact_sum(x, axis=-1, keepdims=True).shape == (3, 4, 1)
    assert exact_sum(x, axis=(0, 2)).shape == (4,)
    assert exact_sum(x, axis=(2, 0), keepdims=True).shape == (1, 4, 1)
    for axis in [None, 0, 1, 2, (0, 1), (1, 2), (0, 2)]:
        want = np.sum(x.astype(np.float64), axis=axis)
        got = exact_sum(x, axis=axis)
        assert got.shape == np.shape(want)
        assert np.allclose(got, want, rtol=1e-15, atol=0)
    # exactness along a non-last axis, compared with fsum of the transposed data
    got = exact_sum(x, axis=1)
    want = np.array([[math.fsum(x[i, :, j].astype(np.float64)) for j in range(5)] for i in range(3)])
    assert np.array_equal(got, want)
    assert float64_sum(x, axis=(0, 2), keepdims=True).shape == (1, 4, 1)
    with pytest.raises(np.exceptions.AxisError):
        exact_sum(x, axis=3)
    assert exact_sum(np.zeros((0, 3), np.float32), axis=0).tolist() == [0.0, 0.0, 0.0]


def test_special_values():
    inf, nan = np.inf, np.nan
    assert exact_sum(np.array([1, inf, 2], np.float32)) == inf
    assert exact_sum(np.array([-inf, 1], np.float16)) == -inf
    assert np.isnan(exact_sum(np.array([inf, -inf], np.float32)))
    assert np.isnan(exact_sum(np.array([1, nan], np.float32)))
    got = exact_sum(np.array([[1, 2], [inf, 1], [3, 4]], np.float32), axis=1)
    assert got.tolist() == [3.0, inf, 7.0]
    assert exact_sum(np.array([inf, 1.0])) == inf  # float64 path
    assert np.isnan(exact_sum(np.array([inf, -inf])))


def test_float64_inputs_use_fsum():
    x = np.array([1e308, 1e308, -1e308, 1.0, -1e308])
    assert exact_sum(x) == 1.0
    assert float64_sum(np.array([1e16, 1.0, -1e16])) in (0.0, 1.0)  # not exact in general


def test_relative_error():
    assert relative_error(1.5, 1.0) == 0.5
    assert relative_error(0.0, 0.0) == 0.0
    assert relative_error(1e-30, 0.0) == np.inf
    assert np.isnan(relative_error(np.nan, 1.0))
    assert relative_error(np.inf, np.inf) == 0.0
    assert relative_error(1.0, np.inf) == np.inf
    got = relative_error(np.array([1.0, 2.0, -3.0]), np.array([1.0, 4.0, 3.0]))
    assert got.tolist() == [0.0, 0.5, 2.0]


def test_exact_sum_speed():
    rng = np.random.default_rng(25)
    x = rng.standard_normal(1 << 22).astype(np.float32)
    t0 = time.perf_counter()
    s = exact_sum(x)
    dt = time.perf_counter() - t0
    print(f"exact_sum: 2^22 float32 in {dt:.2f} s")
    assert s == math.fsum(x.astype(np.float64))
    assert dt < 20.0
