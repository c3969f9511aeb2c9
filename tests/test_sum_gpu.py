"""GPU suite for tcreduce.sum: every general method x dtype x axis pattern x awkward size, against exact references
with each plan's a-priori error bound as the tolerance; outputs poisoned with NaN before the launch."""

from __future__ import annotations

import numpy as np
import pytest

import tcreduce
from tcreduce.formats import get_format
from tcreduce.testing import check_sum, poisoned, random_input, to_device, to_numpy

pytestmark = pytest.mark.gpu

GENERAL = ["tensorcore", "tensorcore_chained", "wmma", "shuffle", "cub"]


def _methods(dtype: str) -> list[str]:
    avail = {m.name: m for m in tcreduce.methods()}
    return [n for n in GENERAL if n in avail and dtype in avail[n].dtypes]


def _params():
    return [pytest.param(m, d, id=f"{m}-{d}") for d in FORMATS for m in _methods(d)]


FORMATS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32")


FULL_SIZES = [1, 2, 7, 8, 15, 16, 17, 31, 255, 256, 257, 1023, 1025, 4095, 4097, 65535, 65537,
              (1 << 20) + 3, 10 ** 6 + 3, (1 << 24) + 1]
# (shape, axis, view): view(x) makes the array actually reduced
CASES = [
    ((1, 1), -1, None), ((3, 15), -1, None), ((17, 16), -1, None), ((100, 17), 1, None), ((33, 255), -1, None),
    ((16, 257), -1, None), ((5, 1000), -1, None), ((65537, 16), -1, None), ((64, 4097), -1, None),
    ((3, (1 << 20) + 1), -1, None), ((4, 33, 64), -1, None),
    # tensorcore's tc_rows_stream (rows of >= 256 aligned columns): one warp, a group, splits, masked tails, and
    # rows of <= 4 chunks several at a time per warp
    ((300, 1032), -1, None), ((2000, 1025 + 7), -1, None), ((4, 1 << 18), -1, None),
    ((5000, 256), -1, None), ((4500, 520), -1, None), ((100, 768), -1, None),
    ((70, 1024), -1, lambda x: x[:, :700]),
    ((64, 2048), -1, lambda x: x[:, :1500]), ((3, 8, 4096), -1, lambda x: x[:, ::2]),
    ((16, 1000), 0, None), ((1000, 16), 0, None), ((257, 33), 0, None), ((5, 17, 40), 1, None),
    ((65537, 8), 0, None), ((16, 1 << 18), 0, None), ((7, 3, 5), (0, 2), None), ((6, 5, 4, 3), (1, 3), None),
    ((40, 50), None, None), ((40, 50), (0, 1), None),
    # views: misaligned, strided, transposed, reversed
    ((64, 257), -1, lambda x: x[:, 1:]), ((64, 257), 0, lambda x: x[1:, 1:]), ((1000,), None, lambda x: x[1:]),
    ((1000,), None, lambda x: x[3:-2]), ((1000,), None, lambda x: x[::-1]), ((1000,), None, lambda x: x[::3]),
    ((96, 80), 0, lambda x: x.T), ((96, 80), 1, lambda x: x.T), ((96, 80), -1, lambda x: x[:, ::2]),
    ((96, 80), 0, lambda x: x[::-1]), ((32, 48, 16), 1, lambda x: x.transpose(2, 0, 1)),
    ((20, 64), None, lambda x: x.T),
]


def _device_input(xh: np.ndarray, view):
    xd, kw = to_device(xh)
    return ((view(xd), view(xh)) if view else (xd, xh)), kw


@pytest.mark.parametrize("method,dtype", _params())
@pytest.mark.parametrize("n", FULL_SIZES)
def test_full_sum(method, dtype, n, rng):
    xh = random_input(rng, n, dtype)
    for view in (None, lambda x: x[1:]):
        (xd, xv), kw = _device_input(xh, view)
        if xv.size == 0:
            continue
        out = poisoned((), "float32")
        res = tcreduce.sum(xd, method=method, out=out, **kw)
        assert res is out
        check_sum(res, xv, None, method=method)


@pytest.mark.parametrize("method,dtype", _params())
@pytest.mark.parametrize("shape,axis,view", CASES, ids=[f"{s}-{a}-{'view' if v else 'c'}{i}" for i, (s, a, v) in
                                                        enumerate(CASES)])
def test_axis_sum(method, dtype, shape, axis, view, rng):
    xh = random_input(rng, shape, dtype)
    (xd, xv), kw = _device_input(xh, view)
    expected_shape = np.sum(xv.astype(np.float32), axis=axis).shape
    out = poisoned(expected_shape, "float32")
    res = tcreduce.sum(xd, axis=axis, method=method, out=out, **kw)
    check_sum(res, xv, axis, method=method)
    kd = tcreduce.sum(xd, axis=axis, method=method, keepdims=True, **kw)
    assert kd.shape == np.sum(xv.astype(np.float32), axis=axis, keepdims=True).shape
    np.testing.assert_array_equal(to_numpy(kd).reshape(expected_shape), to_numpy(res))


@pytest.mark.parametrize("method,dtype", _params())
@pytest.mark.parametrize("out_dtype", ["float16", "float64"])
def test_output_dtypes(method, dtype, out_dtype, rng):
    xh = random_input(rng, (300, 200), dtype)
    xd, kw = to_device(xh)
    res = tcreduce.sum(xd, axis=1, dtype=out_dtype, method=method, **kw)
    assert res.dtype == np.dtype(out_dtype)
    check_sum(res, xh, 1, method=method, out_dtype=out_dtype)
    ref32 = to_numpy(tcreduce.sum(xd, axis=1, method=method, **kw))
    np.testing.assert_array_equal(to_numpy(res), ref32.astype(out_dtype))  # one rounding of the fp32 result


@pytest.mark.parametrize("method,dtype", _params())
def test_empty(method, dtype):
    import cupy

    f = get_format(dtype)
    raw = f.name not in ("float16", "float32")
    kw = {"format": f.name} if raw else {}
    for shape, axis, expect in [((0,), None, ()), ((0, 5), 0, (5,)), ((5, 0), 1, (5,)), ((5, 0), 0, (0,))]:
        res = tcreduce.sum(cupy.zeros(shape, f.raw_dtype if raw else dtype), axis=axis, method=method, **kw)
        assert res.shape == expect and res.dtype == np.float32
        assert not cupy.any(res)


@pytest.mark.parametrize("method,dtype", _params())
def test_nan_inf_propagate(method, dtype, rng):
    import cupy

    xh = random_input(rng, (8, 300), dtype)
    xh[1, 5] = np.nan
    has_inf = get_format(dtype).has_inf  # float8_e4m3fn has no infinity
    if has_inf:
        xh[2, 7] = np.inf
        xh[3, 9] = -np.inf
        xh[4, 1], xh[4, 2] = np.inf, -np.inf
    xd, kw = to_device(xh)
    res = to_numpy(tcreduce.sum(xd, axis=1, method=method, **kw))
    ref = xh.astype(np.float64).sum(axis=1)
    np.testing.assert_array_equal(np.isnan(res), np.isnan(ref))
    np.testing.assert_array_equal(res[[2, 3]], ref[[2, 3]])
    full = to_numpy(tcreduce.sum(xd[2:4, :] if has_inf else xd[1:3, :], method=method, **kw))
    assert np.isnan(full)


@pytest.mark.parametrize("method,dtype", _params())
def test_deterministic_and_input_untouched(method, dtype, rng):
    import cupy

    for shape, axis in [((1 << 22) + 5, None), ((1 << 16, 64), -1), ((64, 1 << 16), 0), ((256, 1 << 14), -1)]:
        xh = random_input(rng, shape, dtype)
        xd, kw = to_device(xh)
        first = to_numpy(tcreduce.sum(xd, axis=axis, method=method, **kw))
        for _ in range(9):
            again = to_numpy(tcreduce.sum(xd, axis=axis, method=method, **kw))
            assert np.array_equal(first.view(np.uint32), again.view(np.uint32)), "not bitwise reproducible"
        assert np.array_equal(xd.get(), xh.view(xd.dtype)), "input was modified"


@pytest.mark.parametrize("method,dtype", _params())
def test_torch_in_torch_out(method, dtype, rng):
    torch = pytest.importorskip("torch")
    xh = random_input(rng, (123, 77), dtype)
    raw = get_format(dtype).raw_dtype
    tdt = getattr(torch, dtype)
    xt = (torch.from_numpy(xh.view(raw).astype(np.int16 if raw == np.uint16 else raw)).view(tdt).cuda()
          if dtype not in ("float16", "float32") else torch.from_numpy(xh).cuda())
    res = tcreduce.sum(xt, axis=0, method=method)
    assert isinstance(res, torch.Tensor) and res.is_cuda and res.dtype == torch.float32
    check_sum(res, xh, 0, method=method)
    full = tcreduce.sum(xt, method=method)
    assert isinstance(full, torch.Tensor) and full.shape == ()


def test_does_not_synchronise_and_uses_current_stream(rng):
    import cupy

    xh = random_input(rng, 1 << 20, "float16")
    xd = cupy.asarray(xh)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        res = tcreduce.sum(xd, method="tensorcore")
    s.synchronize()
    check_sum(res, xh, None, method="tensorcore")


@pytest.mark.large
def test_more_than_2_31_elements():
    import cupy

    n = (1 << 31) + 3
    free, _ = cupy.cuda.runtime.memGetInfo()
    if free < 3 * n * 2:
        pytest.skip("needs about 13 GB of free GPU memory")
    # fresh random data, generated on the GPU (exact reference: the same data summed in float64 chunks is exact
    # enough here only within the bound, so compare against the bound with the float64 sum of |x|)
    rs = cupy.random.RandomState(7)
    x = rs.uniform(-0.25, 0.75, n, dtype=cupy.float32).astype(cupy.float16)
    x[-3:] = cupy.asarray([1.0, 2.0, 4.0], dtype=cupy.float16)  # the elements past 2^31 matter
    ref = float(cupy.sum(x, dtype=cupy.float64))  # float64 of <= 2^31 fp16 values: error << the fp32 bounds
    abs_sum = float(cupy.sum(cupy.abs(x), dtype=cupy.float64))
    from tcreduce._api import get_plan
    from tcreduce._device import current_device
    from tcreduce._layout import Flat
    from tcreduce.bounds import error_bound_factor

    for method in [m for m in _methods("float16") if m != "cub"]:
        res = float(tcreduce.sum(x, method=method))
        plan = get_plan(method, Flat(n, 0), "float16", "float32", current_device()[1])
        bound = error_bound_factor(plan) * abs_sum + abs_sum * 2.0 ** -40
        assert abs(res - ref) <= bound, (method, res, ref, bound)
        res_view = float(tcreduce.sum(x[1:], method=method))
        assert abs(res_view - (ref - float(x[0]))) <= bound, (method, "misaligned view")


def test_format_argument(rng):
    import cupy

    xh = random_input(rng, 1000, "bfloat16")
    raw = cupy.asarray(xh.view(np.uint16))
    check_sum(tcreduce.sum(raw, format="bfloat16"), xh, None, method="tensorcore")
    check_sum(tcreduce.sum(raw, format="bf16", method="shuffle"), xh, None, method="shuffle")
    with pytest.raises(TypeError, match="format="):  # raw bits without a format
        tcreduce.sum(raw)
    with pytest.raises(TypeError, match="uint8"):  # fp8 needs 8-bit raw data
        tcreduce.sum(raw, format="float8_e4m3fn")
    with pytest.raises(TypeError, match="unknown input format"):
        tcreduce.sum(raw, format="float4")
    with pytest.raises(TypeError, match="format"):  # a float16 array is not bf16 bits
        tcreduce.sum(cupy.ones(8, cupy.float16), format="bfloat16")
    assert float(tcreduce.sum(cupy.ones(8, cupy.float16), format="float16")) == 8.0
    assert float(tcreduce.mean(raw, format="bfloat16")) == pytest.approx(float(xh.astype(np.float64).mean()), rel=1e-5)
