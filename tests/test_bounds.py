"""CPU tests of the a-priori error bounds (tcreduce.bounds): for every emulated method they hold on random and
adversarial inputs, and they are not vacuous: within a factor of 100 of the worst error seen on the adversarial
same-sign inputs of tcreduce.testing.adversarial_inputs, for lengths up to 2^24. (tests/test_bounds_gpu.py checks the
same on the GPU for every method, the non-emulated ones included.)"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import tcreduce
from tcreduce.bounds import error_bound, library_bound_factor
from tcreduce.reference import exact_sum
from tcreduce.testing import adversarial_inputs, mixed_sign_inputs

# the fp16 inputs below go to the emulated methods that take float16 (float32-only methods: their own test files)
EMULATED = [m for m in tcreduce.emulate.emulated_methods() if "float16" in tcreduce.registry.get(m).dtypes]


@functools.lru_cache(maxsize=None)
def _inputs_with_exact_sums(n: int) -> tuple[tuple[str, np.ndarray, float], ...]:
    """The adversarial same-sign family and two mixed-sign inputs of length n (seed 0), and their misaligned views
    x[1:], each with its exact sum."""
    rng = np.random.default_rng(0)
    xs = {**adversarial_inputs(rng, n), **mixed_sign_inputs(rng, n)}
    cases = [(name, x) for name, x in xs.items()] + [(name + "[1:]", x[1:]) for name, x in xs.items() if n > 1]
    return tuple((name, x, float(exact_sum(x))) for name, x in cases)


def test_every_default_method_has_a_twin():
    for method in ("tensorcore", "tensorcore_chained", "shuffle", "wmma"):
        assert method in EMULATED


@pytest.mark.parametrize("method", EMULATED)
@pytest.mark.parametrize("n", [1, 17, 4097, 1 << 16, (1 << 20) + 3])
def test_bound_holds(method, n):
    for name, x, exact in _inputs_with_exact_sums(n):
        err = abs(float(tcreduce.emulate.sum(x, method=method)) - exact)
        assert err <= float(error_bound(x, method=method)), (method, n, name)


@pytest.mark.parametrize("n", [1 << 16, 1 << 20, 1 << 22, 1 << 24])
def test_bound_is_within_100x_of_the_worst_adversarial_error(n):
    """For every emulated method and length up to 2^24, the bound at the worst same-sign adversarial input is at most
    100 times the error observed there (the inputs are generated one at a time: 2^24 x 13 would not fit in CI)."""
    worst = {m: (0.0, np.inf, "") for m in EMULATED}
    rng = np.random.default_rng(1)
    for name, x in adversarial_inputs(rng, n).items():
        exact = float(exact_sum(x))
        for method in EMULATED:
            err = abs(float(tcreduce.emulate.sum(x, method=method)) - exact)
            if err > worst[method][0]:
                worst[method] = (err, float(error_bound(x, method=method)), name)
    loose = {m: f"bound {b:.3e} / worst error {e:.3e} ({name})" for m, (e, b, name) in worst.items()
             if not (e > 0 and b / e <= 100)}
    assert not loose, loose


def test_library_bound_is_order_free_gamma():
    assert library_bound_factor(2) == pytest.approx(2.0 ** -24, rel=1e-6)
    assert library_bound_factor(1 << 25) == np.inf


def test_rows_and_cols_bounds_hold(rng):
    for method in ("tensorcore", "shuffle", "wmma", "kahan", "exact"):
        for shape, axis in [((300, 77), 1), ((77, 300), 0), ((5, 40, 33), (0, 2)), ((40, 3000), 1), ((3, 1 << 16), 1)]:
            x = adversarial_inputs(rng, int(np.prod(shape)))["high_mantissa"].reshape(shape)
            got = tcreduce.emulate.sum(x, axis=axis, method=method).astype(np.float64)
            err = np.abs(got - exact_sum(x, axis=axis))
            assert np.all(err <= error_bound(x, axis, method=method)), (method, shape, axis)


def test_vacuous_library_bound_is_inf_not_nan():
    x = np.ones((1 << 24) + 1, np.float16)
    for dtype in ("float32", "float16", "float64"):
        assert error_bound(x, method="cub", dtype=dtype) == np.inf


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_new_formats_bounds_hold_and_are_within_100x(fmt):
    """bf16 and fp8 inputs: every emulated method that takes them stays within its bound on the format's adversarial
    family (tcreduce.testing.format_adversarial_inputs) at n = 2^20, and the bound at the worst input is at most 100
    times the error there (printed: ``pytest -s``)."""
    from tcreduce.testing import format_adversarial_inputs

    methods = [m.name for m in tcreduce.methods() if fmt in m.dtypes and m.name in EMULATED]
    assert "tensorcore" in methods and "shuffle" in methods
    worst = {m: (0.0, np.inf, "") for m in methods}
    for name, x in format_adversarial_inputs(np.random.default_rng(2), 1 << 20, fmt).items():
        exact = float(exact_sum(x))
        for method in methods:
            err = abs(float(tcreduce.emulate.sum(x, method=method)) - exact)
            bound = float(error_bound(x, method=method))
            assert err <= bound, (fmt, method, name)
            if err > worst[method][0]:
                worst[method] = (err, bound, name)
    print(f"\n{fmt}: bound / worst error:", {m: f"{b / e:.1f} ({nm})" for m, (e, b, nm) in worst.items() if e})
    # Not asserted within 100x: tensorcore_chained on e4m3. Its bound charges every chained block the truncation
    # of 2^-25 of the running accumulator's size, which e4m3 data cannot realise at this length: each row's chain
    # holds at most ~2^14, so the truncation grid (2^-11) lies below e4m3's smallest value (2^-9); at 2^24 the
    # ratio is larger still (963 on wide_positive, notes/accuracy.md). Its bound still holds (asserted above).
    exempt = {"tensorcore_chained"} if fmt == "float8_e4m3fn" else set()
    loose = {m: (e, b, nm) for m, (e, b, nm) in worst.items() if m not in exempt and not (e > 0 and b / e <= 100)}
    assert not loose, loose
