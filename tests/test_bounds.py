"""CPU tests of the a-priori error bounds (tcreduce.bounds): they hold for every emulated method on random and
adversarial inputs, and for the default methods they are not vacuous: within a factor of 100 of the worst error seen
on adversarial same-sign inputs."""

from __future__ import annotations

import numpy as np
import pytest

import tcreduce
from tcreduce.bounds import error_bound, library_bound_factor
from tcreduce.reference import exact_sum

def _big_then_small(n: int, every: int) -> np.ndarray:
    """1024 every ``every`` elements, the rest just below 2^-13: tensor-core blocks aligned to 1024 truncate the small
    values (the worst case of the fused-block model); fp32 additions to 1024 round them away."""
    x = np.full(n, np.float16(2.0 ** -13 * (1 - 2.0 ** -11)), np.float16)
    x[::every] = 1024
    return x


FAMILIES = {
    "big_then_small": lambda rng, n: _big_then_small(n, n),
    "big_every_256": lambda rng, n: _big_then_small(n, 256),
    # same sign, every fp16 mantissa bit set below the leading one: truncation and rounding lose the most
    "high_mantissa": lambda rng, n: (1 + (1023 - rng.integers(0, 64, n)) / 1024).astype(np.float16),
    "odd_small": lambda rng, n: (rng.integers(1, 1024, n) * 2.0 ** -14 + 2.0 ** -4).astype(np.float16),
    "uniform_positive": lambda rng, n: rng.uniform(0.5, 1, n).astype(np.float16),
}
MIXED = {
    "cancellation": lambda rng, n: (rng.standard_normal(n) * 100).astype(np.float16),
    "wide_range": lambda rng, n: (rng.lognormal(0, 3, n) * rng.choice([-1, 1], n)).clip(-6e4, 6e4).astype(np.float16),
}


@pytest.mark.parametrize("method", ["tensorcore", "tensorcore_chained", "shuffle", "wmma"])
@pytest.mark.parametrize("n", [1, 17, 4097, 1 << 16, (1 << 20) + 3])
def test_bound_holds(method, n, rng):
    if method not in tcreduce.emulate.emulated_methods():
        pytest.fail(f"{method} has no emulator twin")
    for name, make in {**FAMILIES, **MIXED}.items():
        x = make(rng, n)
        for view in (x, x[1:]):
            if view.size == 0:
                continue
            got = float(tcreduce.emulate.sum(view, method=method))
            err = abs(got - float(exact_sum(view)))
            assert err <= float(error_bound(view, method=method)), (method, n, name)


@pytest.mark.parametrize("method", ["tensorcore", "tensorcore_chained", "shuffle", "wmma"])
@pytest.mark.parametrize("n", [1 << 16, 1 << 20, 1 << 22])
def test_bound_is_within_100x_of_the_worst_adversarial_error(method, n):
    worst, bound_at_worst = 0.0, None
    for seed in range(2):
        rng = np.random.default_rng(seed)
        for make in FAMILIES.values():
            x = make(rng, n)
            err = abs(float(tcreduce.emulate.sum(x, method=method)) - float(exact_sum(x)))
            rel_bound = float(error_bound(x, method=method))
            if err > worst:
                worst, bound_at_worst = err, rel_bound
    assert worst > 0
    assert bound_at_worst / worst <= 100, f"bound {bound_at_worst:.3e} vs worst error {worst:.3e}"


def test_library_bound_is_order_free_gamma():
    assert library_bound_factor(2) == pytest.approx(2.0 ** -24, rel=1e-6)
    assert library_bound_factor(1 << 25) == np.inf


def test_rows_and_cols_bounds_hold(rng):
    for method in ("tensorcore", "shuffle", "wmma"):
        for shape, axis in [((300, 77), 1), ((77, 300), 0), ((5, 40, 33), (0, 2))]:
            x = FAMILIES["high_mantissa"](rng, int(np.prod(shape))).reshape(shape)
            got = tcreduce.emulate.sum(x, axis=axis, method=method).astype(np.float64)
            err = np.abs(got - exact_sum(x, axis=axis))
            assert np.all(err <= error_bound(x, axis, method=method)), (method, shape, axis)


def test_vacuous_library_bound_is_inf_not_nan():
    x = np.ones((1 << 24) + 1, np.float16)
    for dtype in ("float32", "float16", "float64"):
        assert error_bound(x, method="cub", dtype=dtype) == np.inf
