"""Method "cub" (tcreduce/plans/cub.py): cupy.sum with CuPy's CUB accelerator, the reference competitor.

CPU: registration (not emulated, a runner, no launch plan). GPU: selected by name, within an a-priori bound of the
float64 sum, the accelerator settings restored after the call, repeatable.
"""

from __future__ import annotations

import numpy as np
import pytest

import tcreduce
from tcreduce import registry
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Flat

U = 2.0 ** -24


def gamma(n: int) -> float:
    return n * U / (1 - n * U)


# ============================================================================================== CPU
def test_registered_and_not_emulated():
    m = registry.get("cub")
    assert m.name in registry.names()
    assert m.dtypes == ("float16", "float32")
    assert m.emulated is False and m.deterministic is True
    assert m.runner is not None
    assert "CUB" in m.reference and "cupy.sum" in m.reference
    with pytest.raises(ValueError, match="no emulator .it delegates to a library"):
        tcreduce.emulate.sum(np.ones(10, np.float16), method="cub")


def test_listed_by_methods():
    import tcreduce

    info = {mi.name: mi for mi in tcreduce.methods()}
    assert "cub" in info and info["cub"].emulated is False


def test_planner_refuses_clearly():
    with pytest.raises(NotImplementedError, match="no launch plan"):
        registry.get("cub").plan(Flat(100), "float32", "float32", KNOWN_GPUS["H100"])


def test_float64_input_refused_with_the_supported_dtypes():
    with pytest.raises(TypeError, match="float16, float32"):
        registry.get("cub").plan(Flat(100), "float64", "float32", KNOWN_GPUS["H100"])


# ============================================================================================== GPU
def _tol(x64: np.ndarray, axis, out_dtype: str) -> np.ndarray:
    """An order-free bound: whatever tree CUB uses, each element goes through at most n - 1 fp32 additions."""
    n = x64.size if axis is None else int(np.prod([x64.shape[a] for a in np.atleast_1d(axis)]))
    abs_sum = np.sum(np.abs(x64), axis=axis)
    b = gamma(max(n - 1, 1)) * abs_sum
    if out_dtype == "float16":
        b = b + 2.0 ** -11 * (abs_sum + b)
    return b


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("shape,axis", [((1,), None), ((1000,), None), (((1 << 20) + 3,), None), ((257, 33), -1),
                                        ((257, 33), 0), ((1 << 16, 16), -1), ((16, 1 << 16), 0), ((5, 7, 9), (0, 2)),
                                        ((64, 257), 1)])
@pytest.mark.parametrize("out_dtype", ["float32", "float16", "float64"])
def test_gpu_cub_matches_float64(dtype, shape, axis, out_dtype, rng):
    import cupy

    import tcreduce

    xh = rng.uniform(-0.25, 0.75, size=shape).astype(dtype)
    xd = cupy.asarray(xh)
    res = tcreduce.sum(xd, axis=axis, dtype=out_dtype, method="cub")
    assert isinstance(res, cupy.ndarray) and res.dtype == np.dtype(out_dtype)
    x64 = xh.astype(np.float64)
    want = np.sum(x64, axis=axis)
    assert res.shape == np.shape(want)
    got = res.get().astype(np.float64)
    if out_dtype == "float16":  # sums past 65504 overflow to inf in a float16 result, as in NumPy
        overflow = np.abs(want) >= 65520.0  # the float16 rounding boundary past 65504
        assert np.array_equal(got[overflow], np.sign(want[overflow]) * np.inf)
        got, want = got[~overflow], np.asarray(want)[~overflow]
    err = np.abs(got - want)
    assert np.all(err <= _tol(x64, axis, out_dtype))
    again = tcreduce.sum(xd, axis=axis, dtype=out_dtype, method="cub")
    assert again.get().tobytes() == res.get().tobytes()


@pytest.mark.gpu
def test_gpu_cub_is_what_runs_and_settings_are_restored(rng, monkeypatch):
    """method="cub" goes through the registered runner (cupy.sum with the CUB accelerators on) and leaves CuPy's
    accelerator settings as they were."""
    import cupy
    from cupy import _core

    import tcreduce
    from tcreduce.plans import cub as cub_mod

    before = (list(_core.get_routine_accelerators()), list(_core.get_reduction_accelerators()))
    seen = {}
    real_sum = cupy.sum

    def spy(x, axis=None, dtype=None, **kw):
        seen["routine"] = list(_core.get_routine_accelerators())
        seen["reduction"] = list(_core.get_reduction_accelerators())
        seen["dtype"] = dtype
        return real_sum(x, axis=axis, dtype=dtype, **kw)

    monkeypatch.setattr(cupy, "sum", spy)
    _core.set_routine_accelerators([])
    _core.set_reduction_accelerators([])
    try:
        xd = cupy.asarray(rng.uniform(-0.25, 0.75, size=(300, 40)).astype("float16"))
        res = tcreduce.sum(xd, axis=-1, method="cub")
        assert seen["routine"] and seen["reduction"], "the CUB accelerators were not on during the call"
        assert np.dtype(seen["dtype"]) == np.float32
        assert list(_core.get_routine_accelerators()) == [] and list(_core.get_reduction_accelerators()) == []
        assert res.shape == (300,) and res.dtype == np.float32
        assert cub_mod.run_cub is registry.get("cub").runner
    finally:
        _core.set_routine_accelerators(before[0])
        _core.set_reduction_accelerators(before[1])


@pytest.mark.gpu
def test_gpu_cub_keepdims_and_out(rng):
    import cupy

    import tcreduce

    xd = cupy.asarray(rng.uniform(-0.25, 0.75, size=(64, 100)).astype("float32"))
    out = cupy.full((64, 1), np.nan, dtype=cupy.float32)
    res = tcreduce.sum(xd, axis=1, keepdims=True, method="cub", out=out)
    assert res is out and not bool(cupy.isnan(out).any())
    np.testing.assert_allclose(out.get()[:, 0], np.sum(xd.get().astype(np.float64), axis=1), rtol=1e-5)
