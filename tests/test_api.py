"""CPU tests of the public API's argument handling (no GPU needed): every bad input gets a clear exception."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.exceptions import AxisError

import tcreduce
from tcreduce._api import validate


def test_import_needs_no_gpu_and_lists_methods():
    infos = tcreduce.methods()
    names = [m.name for m in infos]
    for expected in ("tensorcore", "wmma", "shuffle", "cub"):
        assert expected in names
    for m in infos:
        assert m.description and m.reference and m.dtypes


def test_numpy_input_names_the_ways_out():
    with pytest.raises(TypeError, match="cupy.asarray") as e:
        tcreduce.sum(np.ones(4, np.float16))
    assert "tcreduce.emulate" in str(e.value)
    with pytest.raises(TypeError, match="cupy.asarray"):
        tcreduce.sum([1.0, 2.0])


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.bool_, np.complex64, np.float64, np.uint16])
def test_unsupported_input_dtypes(dtype):
    with pytest.raises(TypeError, match="supported input dtypes: float16, bfloat16, float8_e4m3fn, float8_e5m2, "
                                        "float32") as e:
        validate("sum", (4,), dtype, None, None, "tensorcore")
    if dtype in (np.uint16, np.int8):
        assert "format=" in str(e.value)  # raw bf16 / fp8 bits: the message says how to name the format


def test_float64_message_says_no_method_takes_it():
    with pytest.raises(TypeError, match="shuffle included"):
        validate("sum", (4,), np.float64, None, None, "shuffle")


def test_a_dtype_a_method_lacks_is_not_implemented_and_names_alternatives():
    import ml_dtypes

    with pytest.raises(NotImplementedError, match="shuffle") as e:
        validate("sum", (4,), np.float32, None, None, "wmma")
    assert isinstance(e.value, TypeError)
    with pytest.raises(NotImplementedError, match="tensorcore"):
        validate("sum", (4,), ml_dtypes.float8_e5m2, None, None, "wmma")


def test_float32_on_fp16_only_methods_is_not_implemented_and_names_alternatives():
    with pytest.raises(NotImplementedError, match="shuffle") as e:
        validate("sum", (4,), np.float32, None, None, "tensorcore_chained")
    assert isinstance(e.value, TypeError) and "tensorcore_tf32" in str(e.value)
    with pytest.raises(NotImplementedError, match="shuffle"):
        validate("sum", (4,), np.float32, None, None, "wmma")
    assert validate("sum", (4,), np.float32, None, None, "tensorcore").in_dtype == "float32"
    with pytest.raises(NotImplementedError, match="tensorcore"):
        validate("sum", (4,), np.float16, None, None, "tensorcore_tf32")


def test_unknown_method_lists_methods():
    with pytest.raises(ValueError, match="tensorcore") as e:
        validate("sum", (4,), np.float16, None, None, "tensorcores")
    assert "auto" in str(e.value) and "shuffle" in str(e.value)
    with pytest.raises(TypeError):
        validate("sum", (4,), np.float16, None, None, 3)


def test_axis_errors_are_numpy_axis_errors():
    with pytest.raises(AxisError):
        validate("sum", (4, 5), np.float16, 2, None, "tensorcore")
    with pytest.raises(ValueError, match="duplicate"):
        validate("sum", (4, 5), np.float16, (1, -1), None, "tensorcore")


def test_output_dtypes():
    assert validate("sum", (4,), np.float16, None, None, "tensorcore").out_dtype == "float32"
    assert validate("sum", (4,), np.float16, None, np.float16, "tensorcore").out_dtype == "float16"
    assert validate("sum", (4,), np.float16, None, "float64", "tensorcore").out_dtype == "float64"
    with pytest.raises(TypeError, match="supported: float16, float32, float64"):
        validate("sum", (4,), np.float16, None, np.int32, "tensorcore")
    with pytest.raises(TypeError):
        validate("sum", (4,), np.float16, None, "not-a-dtype", "tensorcore")


def test_shapes():
    c = validate("sum", (2, 3, 4), np.float16, (0, 2), None, "auto")
    assert c.out_shape == (3,) and c.keep_shape == (1, 3, 1) and c.axes == (0, 2)
    c = validate("sum", (2, 3), np.float32, None, None, "auto")
    assert c.out_shape == () and c.keep_shape == (1, 1)


def test_auto_rule():
    from types import SimpleNamespace

    from tcreduce._auto import choose_method
    from tcreduce._device import KNOWN_GPUS

    h100 = KNOWN_GPUS["H100"]

    def pick(shape, axes, dtype="float16", kind="sum"):
        return choose_method(kind, SimpleNamespace(shape=shape), axes, dtype, h100)

    from tcreduce._auto import lookup  # the table derived from the sweeps (tests/test_auto.py checks it)

    assert pick((1 << 20,), (0,)) == lookup("float16", "full", 1 << 20)
    assert pick((4, 1, 8), (0, 2)) == lookup("float16", "full", 32)  # kept axes of size 1: a full sum
    assert pick((1 << 20, 16), (1,)) == lookup("float16", "rows", 16)
    assert pick((1 << 20, 64), (1,)) == lookup("float16", "rows", 64)
    assert pick((16, 1 << 20), (0,)) == lookup("float16", "cols", 16)
    assert pick((1 << 20,), (0,), "float32") == lookup("float32", "full", 1 << 20)
    assert pick((1 << 20,), (0,), kind="max") == "shuffle"  # only the sum has a table


def test_emulated_auto_matches_the_named_method(rng):
    x = rng.uniform(-1, 1, (64, 16)).astype(np.float16)
    from tcreduce._auto import lookup

    auto = tcreduce.emulate.sum(x, axis=1, method="auto")
    named = tcreduce.emulate.sum(x, axis=1, method=lookup("float16", "rows", 16))
    assert np.array_equal(auto.view(np.uint32), named.view(np.uint32))
