"""CPU tests of the bfloat16 and fp8 input formats: the format table, validation, the fp8 compute-capability error,
and every tensor-core and shuffle form through the emulator against the exact sum within the a-priori bound."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tcreduce
from tcreduce._api import validate
from tcreduce._device import KNOWN_GPUS
from tcreduce._layout import Flat
from tcreduce.formats import FORMATS, format_of_dtype, get_format, numpy_dtype
from tcreduce.testing import check_sum

NEW_FORMATS = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def test_format_table_matches_ml_dtypes():
    for name, f in FORMATS.items():
        dt = numpy_dtype(name)
        info = ml_dtypes.finfo(dt) if name not in ("float16", "float32") else np.finfo(dt)
        assert dt.itemsize == f.itemsize and info.nmant == f.mbits, name
        assert int(info.minexp) == f.emin, name
        assert format_of_dtype(dt) is f and get_format(name) is f
    assert get_format("bf16").name == "bfloat16" and get_format("e4m3").name == "float8_e4m3fn"
    with pytest.raises(ValueError, match="supported"):
        get_format("float4")


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_validate_takes_the_new_formats(fmt):
    c = validate("sum", (8, 4), numpy_dtype(fmt), 1, None, "tensorcore")
    assert c.in_dtype == fmt and c.out_dtype == "float32"
    assert validate("sum", (8,), fmt, None, "float16", "shuffle").in_dtype == fmt  # a format name works too
    with pytest.raises(TypeError, match="max method"):  # max/min stay fp16/fp32: a clear error, not a wrong answer
        validate("max", (8,), numpy_dtype(fmt), None, None, "shuffle")


@pytest.mark.parametrize("fmt", ("float8_e4m3fn", "float8_e5m2"))
def test_fp8_below_sm89_is_a_clear_error(fmt):
    method = tcreduce.registry.get("tensorcore") if hasattr(tcreduce, "registry") else None
    from tcreduce import registry

    for name in ("tensorcore", "shuffle"):
        with pytest.raises(ValueError, match="compute capability 8.9") as e:
            registry.get(name).plan(Flat(1024, 0), fmt, "float32", KNOWN_GPUS["A100"])
        assert "float16" in str(e.value)
    assert method is None or method.name == "tensorcore"
    plan = registry.get("tensorcore").plan(Flat(1024, 0), fmt, "float32", KNOWN_GPUS["H100"])
    assert "__nv_fp8" in plan.launches[0].kernel


CASES = [((0,), None), ((1,), None), ((15,), None), ((17,), None), ((255,), None), ((257,), None),
         ((4097,), None), ((65537,), None), ((33, 17), 1), ((40, 300), -1), ((20, 1030), 1), ((257, 16), 0),
         ((5, 33, 40), (0, 2)), ((3, 70, 9), 1)]


@pytest.mark.parametrize("fmt", NEW_FORMATS)
@pytest.mark.parametrize("method", ["tensorcore", "tensorcore_chained", "shuffle"])
def test_every_form_within_the_bound(fmt, method, rng):
    dt = numpy_dtype(fmt)
    for shape, axis in CASES:
        x = rng.uniform(-0.25, 0.75, shape).astype(dt)
        check_sum(tcreduce.emulate.sum(x, axis=axis, method=method), x, axis, method=method)
        if x.ndim == 1 and x.size > 2:  # a misaligned view
            v = x[1:]
            check_sum(tcreduce.emulate.sum(v, axis=axis, method=method), v, axis, method=method)


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_wide_values_and_specials_propagate(fmt, rng):
    dt = numpy_dtype(fmt)
    f = get_format(fmt)
    big = float(ml_dtypes.finfo(dt).max)
    x = (rng.standard_normal(4096) * min(big / 2 ** 16, 2.0 ** 60)).astype(dt)  # the whole range, no overflow
    for method in ("tensorcore", "shuffle"):
        check_sum(tcreduce.emulate.sum(x, method=method), x, None, method=method)
        y = x.copy()
        y[100] = np.nan
        assert np.isnan(tcreduce.emulate.sum(y, method=method))
        if f.has_inf:
            y = x.copy()
            y[7] = np.inf
            assert tcreduce.emulate.sum(y, method=method) == np.inf
            y[8] = -np.inf
            assert np.isnan(tcreduce.emulate.sum(y, method=method))
