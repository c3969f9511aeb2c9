"""tcreduce.max / tcreduce.min (method "shuffle" of kinds "max" and "min": tcreduce/plans/minmax.py, kernels/minmax.cu)
and tcreduce.mean.

CPU: registration, the planners' choices for Flat/Rows/Cols, and every instantiation compiling for sm_80 and sm_90.
GPU (``@pytest.mark.gpu``): max and min equal NumPy's exactly (same values, NaN where NumPy has NaN, output dtype the
input dtype by default) over the size, axis and view grid of the sum suite, plus special values (NaN, +-inf,
all-negative data, signed zeros); mean equals sum / count and NumPy's mean within the sum's error bound.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tcreduce import registry
from tcreduce.testing import assert_compiles_clean
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Cols, Flat, Rows
from tcreduce._plan import Buf
from tcreduce.plans.minmax import THREAD_ROW_MAX, plan_minmax

H100, A100 = KNOWN_GPUS["H100"], KNOWN_GPUS["A100"]
KINDS = ("max", "min")

# ================================================================================================== CPU tests


def test_registered_for_max_and_min():
    for kind in KINDS:
        m = registry.get("shuffle", kind)
        assert m.kind == kind and m.deterministic and m.runner is None
        assert set(m.dtypes) == {"float32", "float16"}
        assert "seed 001" in m.reference and "FLT_MIN" in m.reference
        assert ("-inf" if kind == "max" else "+inf") in m.reference


def test_auto_picks_shuffle():
    from tcreduce._auto import choose_method

    for kind in KINDS:
        assert choose_method(kind, None, (0,), "float32", H100) == "shuffle"


def test_kernel_starts_from_infinity_not_flt_min():
    from tcreduce._compile import load_source

    src = load_source("minmax.cu")
    code = "\n".join(line.split("//")[0] for line in src.splitlines())  # comments may name FLT_MIN
    assert "FLT_MIN" not in code
    assert "0xff800000u" in code and "0x7f800000u" in code  # -inf, +inf
    assert "max.NaN.f32" in code and "min.NaN.f32" in code


def _plan(kind, problem, dt="float32", out=None, device=H100):
    return registry.get("shuffle", kind).plan(problem, dt, out or dt, device)


@pytest.mark.parametrize("kind", KINDS)
def test_flat_plan(kind):
    p = _plan(kind, Flat(10))
    (ln,) = p.launches
    assert ln.grid == (1, 1, 1) and p.workspace_floats == 0
    p = _plan(kind, Flat(10 ** 8, 4))
    (ln,) = p.launches
    assert ln.grid[0] == H100.sm_count * 8 and p.workspace_floats == ln.grid[0] and p.counters == 1
    assert ln.args[:3] == (Buf("x"), 10 ** 8, Buf("out"))
    assert ln.kernel == f"minmax_flat<{KINDS.index(kind)}, float, float, 256>"
    fp16 = _plan(kind, Flat(10), "float16").launches[0].kernel
    assert fp16.startswith(f"minmax_flat<{KINDS.index(kind)}, __half, __half")


@pytest.mark.parametrize("kind", KINDS)
def test_rows_plan_modes(kind):
    assert dict(_plan(kind, Rows(10 ** 6, 3, 3)).params)["mode"] == "thread"
    assert dict(_plan(kind, Rows(10 ** 6, THREAD_ROW_MAX, 16)).params)["mode"] == "thread"
    assert dict(_plan(kind, Rows(100, 17, 17)).params)["mode"] == "warp"
    assert dict(_plan(kind, Rows(1 << 20, 4096, 4096)).params)["mode"] == "warp"  # rows alone fill the GPU
    p = _plan(kind, Rows(3, 1 << 20, 1 << 20))
    d = dict(p.params)
    assert d["mode"] == "block" and d["splits"] > 1
    assert p.workspace_floats == 3 * d["splits"] and p.counters == 3
    assert p.launches[0].grid[0] == 3 * d["splits"]
    assert p.launches[0].args[-1] == d["splits"]
    p = _plan(kind, Rows(5000, 5000, 5000))
    assert dict(p.params)["splits"] == 1 and p.workspace_floats == 0 and p.counters == 0


@pytest.mark.parametrize("kind", KINDS)
def test_cols_plan(kind):
    p = _plan(kind, Cols(1, 1 << 20, 64, 0, 64))
    d = dict(p.params)
    assert d["vec"] == 4 and d["splits"] > 1 and p.counters == d["tiles"]
    assert p.workspace_floats == d["tiles"] * d["splits"] * d["block"][0] * 4
    (ln,) = p.launches
    assert ln.block[0] * ln.block[1] == 256 and ln.grid == (d["tiles"], d["splits"], 1)
    assert dict(_plan(kind, Cols(1, 1000, 64, 0, 64, 4)).params)["vec"] == 1  # misaligned base
    assert dict(_plan(kind, Cols(1, 1000, 62, 0, 62)).params)["vec"] == 1  # b not a multiple of 4
    assert dict(_plan(kind, Cols(3, 100, 8, 801, 8)).params)["vec"] == 1  # sa breaks the alignment
    assert dict(_plan(kind, Cols(3, 100, 8, 800, 8), "float16").params)["vec"] == 8
    assert dict(_plan(kind, Cols(5000, 1000, 5000, 5_000_000, 5000)).params)["splits"] == 1


def test_bad_kind():
    with pytest.raises(ValueError):
        plan_minmax("sum", Flat(10), "float32", "float32", H100)


PROBLEMS = (
    [Flat(n, a) for n in (1, 7, 100, 1 << 20, 1 << 28, (1 << 31) + 3) for a in (0, 2, 4, 8)]
    + [Rows(m, k, ld, a) for (m, k, ld) in ((1, 1, 1), (1 << 24, 16, 16), (1000, 17, 17), (1 << 16, 4096, 4096),
                                             (16, 1 << 20, 1 << 20), (3, 1000, 1000), (256, 64, 72), (50, 40, -40))
       for a in (0, 2)]
    + [Cols(a, r, b, sa, sr, al) for (a, r, b, sa, sr) in ((1, 16, 1 << 24, 0, 1 << 24), (1, 1 << 24, 16, 0, 16),
                                                            (64, 1000, 96, 96000, 96), (3, 5, 7, 35, 7),
                                                            (6, 7, 8, -56, 8))
       for al in (0, 2)]
)


def _instantiations() -> dict[tuple[str, str], set[str]]:
    seen: dict[tuple[str, str], set[str]] = {}
    for kind, device in itertools.product(KINDS, (A100, H100)):
        m = registry.get("shuffle", kind)
        for in_dt, out_dt, prob in itertools.product(m.dtypes, ("float16", "float32", "float64"), PROBLEMS):
            if in_dt == "float32" and prob.align % 4:
                continue
            for ln in m.plan(prob, in_dt, out_dt, device).launches:
                seen.setdefault((ln.source, ln.kernel), set()).add(device.arch)
    return seen


INSTANTIATIONS = _instantiations()


@pytest.mark.slow
@pytest.mark.parametrize("source,kernel", sorted(INSTANTIATIONS), ids=[k for _, k in sorted(INSTANTIATIONS)])
def test_instantiations_compile_clean(source, kernel):
    op = "max" if kernel.split("<")[1].startswith("0") else "min"
    for arch in sorted(INSTANTIATIONS[(source, kernel)]):
        assert_compiles_clean(source, kernel, arch, needle=f"{op}.NaN.f32")


# ================================================================================================== GPU tests

FULL_SIZES = [1, 2, 7, 8, 15, 16, 17, 31, 255, 256, 257, 1023, 1025, 4095, 4097, 65535, 65537,
              (1 << 20) + 3, 10 ** 6 + 3, (1 << 24) + 1]
# (shape, axis, view): the sum suite's grid plus row/column modes and negative kept strides
CASES = [
    ((1, 1), -1, None), ((3, 15), -1, None), ((17, 16), -1, None), ((100, 17), 1, None), ((33, 255), -1, None),
    ((16, 257), -1, None), ((5, 1000), -1, None), ((65537, 16), -1, None), ((64, 4097), -1, None),
    ((3, (1 << 20) + 1), -1, None), ((4, 33, 64), -1, None), ((100000, 3), -1, None), ((7, 5000), -1, None),
    ((16, 1000), 0, None), ((1000, 16), 0, None), ((257, 33), 0, None), ((5, 17, 40), 1, None),
    ((65537, 8), 0, None), ((16, 1 << 18), 0, None), ((7, 3, 5), (0, 2), None), ((6, 5, 4, 3), (1, 3), None),
    ((1 << 16, 3), 0, None), ((40, 50), None, None), ((40, 50), (0, 1), None),
    # views: misaligned, strided, transposed, reversed
    ((64, 257), -1, lambda x: x[:, 1:]), ((64, 257), 0, lambda x: x[1:, 1:]), ((1000,), None, lambda x: x[1:]),
    ((1000,), None, lambda x: x[3:-2]), ((1000,), None, lambda x: x[::-1]), ((1000,), None, lambda x: x[::3]),
    ((96, 80), 0, lambda x: x.T), ((96, 80), 1, lambda x: x.T), ((96, 80), -1, lambda x: x[:, ::2]),
    ((96, 80), 0, lambda x: x[::-1]), ((32, 48, 16), 1, lambda x: x.transpose(2, 0, 1)),
    ((20, 64), None, lambda x: x.T), ((50, 40), -1, lambda x: x[::-1]), ((6, 7, 8), 1, lambda x: x[::-1]),
    ((5, 3000), -1, lambda x: x[::-1, 1:]),
]
CASE_IDS = [f"{s}-{a}-{'view' if v else 'c'}{i}" for i, (s, a, v) in enumerate(CASES)]


def _np_reduce(kind: str, x: np.ndarray, axis, keepdims: bool = False) -> np.ndarray:
    return (np.max if kind == "max" else np.min)(x, axis=axis, keepdims=keepdims)


def _tc_reduce(kind: str):
    import tcreduce

    return tcreduce.max if kind == "max" else tcreduce.min


def _assert_same(got, expected: np.ndarray) -> None:
    """Same dtype and shape, equal values (NaN where NumPy has NaN; -0.0 == +0.0 here, signs are tested apart)."""
    from tcreduce.testing import to_numpy

    g = to_numpy(got)
    assert g.dtype == expected.dtype, (g.dtype, expected.dtype)
    assert g.shape == expected.shape, (g.shape, expected.shape)
    np.testing.assert_array_equal(g, expected)


def _data(rng, shape, dtype):
    return rng.uniform(-1000, 1000, size=shape).astype(dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("kind", KINDS)
def test_full_reduction(kind, dtype, rng):
    import cupy

    from tcreduce.testing import poisoned

    fn = _tc_reduce(kind)
    for n in FULL_SIZES:
        xh = _data(rng, n + 1, dtype)
        xd = cupy.asarray(xh)
        for sl in (slice(0, n), slice(1, n + 1)):
            out = poisoned((), dtype)
            res = fn(xd[sl], out=out)
            assert res is out
            _assert_same(res, _np_reduce(kind, xh[sl], None))
        # the extreme in the scalar head, the middle, and the tail of the vector loop
        for pos in {0, n // 2, n - 1}:
            y = xh[:n].copy()
            y[pos] = 5000 if kind == "max" else -5000
            _assert_same(fn(cupy.asarray(y)), _np_reduce(kind, y, None))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape,axis,view", CASES, ids=CASE_IDS)
def test_axis_reduction(kind, dtype, shape, axis, view, rng):
    import cupy

    from tcreduce.testing import poisoned

    fn = _tc_reduce(kind)
    xh = _data(rng, shape, dtype)
    xd = cupy.asarray(xh)
    xv, xdv = (view(xh), view(xd)) if view else (xh, xd)
    expected = _np_reduce(kind, xv, axis)
    out = poisoned(expected.shape, dtype)
    res = fn(xdv, axis=axis, out=out)
    assert res is out
    _assert_same(res, expected)
    _assert_same(fn(xdv, axis=axis, keepdims=True), _np_reduce(kind, xv, axis, keepdims=True))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("kind", KINDS)
def test_special_values(kind, dtype, rng):
    import cupy

    fn = _tc_reduce(kind)
    # all-negative data: seed 001's FLT_MIN start would return FLT_MIN here
    for n in (1, 17, 1000, 100_003):
        xh = -rng.uniform(1, 100, size=n + 1).astype(dtype)
        xd = cupy.asarray(xh)
        _assert_same(fn(xd[:n]), _np_reduce(kind, xh[:n], None))
        _assert_same(fn(xd[1:]), _np_reduce(kind, xh[1:], None))
    # NaN anywhere (head, vector body, tail) gives NaN, per output
    for n, pos in itertools.product((5, 1000, 100_003), (0, 1, 2, 500, -1, -3)):
        xh = _data(rng, n, dtype)
        xh[pos % n] = np.nan
        xd = cupy.asarray(xh)
        assert np.isnan(fn(xd).get())
        _assert_same(fn(xd[1:]), _np_reduce(kind, xh[1:], None))
    x2 = _data(rng, (6, 300), dtype)
    x2[2, 7] = np.nan
    x2[4, 299] = np.nan
    for axis in (0, 1, -1, None):
        _assert_same(fn(cupy.asarray(x2), axis=axis), _np_reduce(kind, x2, axis))
    # infinities
    xi = _data(rng, 10_001, dtype)
    xi[5000] = np.inf
    xi[17] = -np.inf
    _assert_same(fn(cupy.asarray(xi)), _np_reduce(kind, xi, None))
    xi[:] = -np.inf if kind == "max" else np.inf  # everything is the identity
    _assert_same(fn(cupy.asarray(xi)), _np_reduce(kind, xi, None))
    xi[:] = np.inf if kind == "max" else -np.inf
    _assert_same(fn(cupy.asarray(xi)), _np_reduce(kind, xi, None))
    # inf and NaN together: NaN
    xi[3] = np.nan
    assert np.isnan(fn(cupy.asarray(xi)).get())
    # signed zeros: all -0.0 gives -0.0 (max and min); mixed zeros order as +0.0 > -0.0 (IEEE 754-2019)
    for n in (1, 9, 4099):
        z = np.full(n, -0.0, dtype=dtype)
        r = fn(cupy.asarray(z)).get()
        assert r == 0 and np.signbit(r)
        if n > 1:
            z[n // 2] = 0.0
            r = fn(cupy.asarray(z)).get()
            assert r == 0 and np.signbit(r) == (kind == "min")
        z2 = np.full((3, n), 0.0, dtype=dtype)
        z2[1] = -0.0
        r = fn(cupy.asarray(z2), axis=1).get()
        assert list(np.signbit(r)) == [False, True, False]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_output_dtypes(kind, rng):
    import cupy

    fn = _tc_reduce(kind)
    x32 = _data(rng, (70, 301), "float32")
    x16 = x32.astype(np.float16)
    for xh, dtype in itertools.product((x32, x16), ("float16", "float32", "float64")):
        for axis in (None, 0, 1):
            res = fn(cupy.asarray(xh), axis=axis, dtype=dtype)
            _assert_same(res, _np_reduce(kind, xh, axis).astype(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_empty_and_errors(kind):
    import cupy

    fn = _tc_reduce(kind)
    with pytest.raises(ValueError, match="zero-size"):
        fn(cupy.zeros((0,), dtype=cupy.float32))
    with pytest.raises(ValueError, match="zero-size"):
        fn(cupy.zeros((3, 0), dtype=cupy.float32), axis=1)
    r = fn(cupy.zeros((0, 3), dtype=cupy.float32), axis=1)
    assert r.shape == (0,) and r.dtype == np.float32
    with pytest.raises(TypeError):
        fn(cupy.zeros(5, dtype=cupy.float64))


# ------------------------------------------------------------------------------------------------ mean

def _sum_method(xh: np.ndarray, axis) -> str:
    """The method tcreduce.mean(method="auto") sums with."""
    from tcreduce._auto import choose_method
    from tcreduce._device import current_device
    from tcreduce._layout import normalize_axes

    return choose_method("sum", xh, normalize_axes(axis, xh.ndim), str(xh.dtype), current_device()[1])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape,axis,view", CASES, ids=CASE_IDS)
def test_mean(shape, axis, view, dtype, rng):
    import cupy

    import tcreduce
    from tcreduce._layout import normalize_axes
    from tcreduce.reference import exact_sum
    from tcreduce.testing import bound_for, random_input

    xh = random_input(rng, shape, dtype)
    xd = cupy.asarray(xh)
    xv, xdv = (view(xh), view(xd)) if view else (xh, xd)
    count = math.prod(xv.shape[i] for i in normalize_axes(axis, xv.ndim))
    res = tcreduce.mean(xdv, axis=axis)
    assert res.dtype == np.float32  # float32 by default, also for float16 input (NumPy would return float16)
    # exactly the float32 sum divided by the count in float32
    s = tcreduce.sum(xdv, axis=axis)
    np.testing.assert_array_equal(res.get(), (s / np.float32(count)).get())
    # and NumPy's mean within the sum's bound / count plus the division's rounding
    exact = exact_sum(xv, axis=axis) / count
    tol = bound_for(xv, axis, _sum_method(xv, axis)) / count + 2.0 ** -23 * np.abs(exact)
    assert np.all(np.abs(res.get().astype(np.float64) - exact) <= tol)
    np.testing.assert_allclose(res.get(), np.mean(xv.astype(np.float64), axis=axis), rtol=1e-3, atol=1e-6)
    kd = tcreduce.mean(xdv, axis=axis, keepdims=True)
    assert kd.shape == np.mean(xv, axis=axis, keepdims=True).shape


@pytest.mark.gpu
def test_mean_dtype_methods_and_empty(rng):
    import cupy

    import tcreduce

    xh = rng.uniform(-1, 1, size=10 ** 5 + 7).astype(np.float32)
    xd = cupy.asarray(xh)
    ref = np.mean(xh.astype(np.float64))
    for dtype in ("float16", "float32", "float64"):
        r = tcreduce.mean(xd, dtype=dtype)
        assert r.dtype == np.dtype(dtype)
        np.testing.assert_allclose(float(r.get()), ref, rtol=2e-3 if dtype == "float16" else 1e-5, atol=1e-4)
    for name in ("ladder_sequential", "ladder_last_block"):  # mean over any sum method
        np.testing.assert_allclose(float(tcreduce.mean(xd, method=name).get()), ref, rtol=1e-5, atol=1e-6)
    with pytest.warns(RuntimeWarning):
        expected = np.mean(np.zeros((0, 3), dtype=np.float32), axis=0)
    r = tcreduce.mean(cupy.zeros((0, 3), dtype=cupy.float32), axis=0)
    assert r.shape == (3,) and np.all(np.isnan(r.get())) and np.all(np.isnan(expected))
    out = cupy.full((3,), 7, dtype=cupy.float64)
    assert tcreduce.mean(cupy.ones((4, 3), dtype=cupy.float32), axis=0, out=out) is out
    np.testing.assert_array_equal(out.get(), np.ones(3))
