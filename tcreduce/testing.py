"""Helpers for testing reductions against references (used by the test suite; handy in notebooks too).

The tolerance of every check is an a-priori error bound (:func:`tcreduce.bounds.error_bound`) of the method's plan for
that input, never a constant picked to pass. ``check_sum`` compares a GPU result with the exact sum, elementwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["random_input", "poisoned", "check_sum", "to_numpy", "bound_for", "assert_compiles_clean"]


def random_input(rng: np.random.Generator, shape: tuple[int, ...] | int, dtype: str = "float16",
                 low: float = -0.25, high: float = 0.75) -> np.ndarray:
    """Fresh uniform random data in [low, high), never all zeros, as a NumPy array of ``dtype``."""
    x = rng.uniform(low, high, size=shape).astype(dtype)
    if x.size and not np.any(x):
        x.flat[0] = 1
    return x


def poisoned(shape: tuple[int, ...], dtype: str):
    """A CuPy array filled with NaN: any element a kernel fails to write stays NaN and fails the check."""
    import cupy

    return cupy.full(shape, np.nan, dtype=dtype)


def to_numpy(a: Any) -> np.ndarray:
    if hasattr(a, "get"):
        return a.get()
    if type(a).__module__.split(".")[0] == "torch":
        return a.detach().cpu().numpy()
    return np.asarray(a)


def bound_for(x: np.ndarray, axis, method: str, out_dtype: str = "float32", gpu: str = "H100") -> np.ndarray:
    """Absolute error bound per output: the plan's a-priori bound plus the final rounding to ``out_dtype``."""
    from .bounds import error_bound

    return np.asarray(error_bound(x, axis, method=method, gpu=gpu, dtype=out_dtype), dtype=np.float64)


def check_sum(result: Any, x: np.ndarray, axis=None, *, method: str, keepdims: bool = False,
              out_dtype: str = "float32", gpu: str = "H100") -> None:
    """Assert that ``result`` (GPU or NumPy) equals the exact sum of ``x`` over ``axis`` within the method's bound,
    has the right shape and dtype, and that NaN appears exactly where the float64 reference has NaN."""
    from .reference import exact_sum

    got = to_numpy(result)
    exact = np.asarray(exact_sum(x, axis=axis, keepdims=keepdims), dtype=np.float64)
    assert got.shape == exact.shape, f"shape {got.shape} != {exact.shape}"
    assert got.dtype == np.dtype(out_dtype), f"dtype {got.dtype} != {out_dtype}"
    g = got.astype(np.float64)
    nan_ref = np.isnan(exact)
    assert np.array_equal(np.isnan(g), nan_ref), "NaN where the reference has none (unwritten output?) or missing"
    inf_ref = np.isinf(exact)
    assert np.array_equal(g[inf_ref], exact[inf_ref]), "infinities differ from the reference"
    finite = ~(nan_ref | inf_ref)
    bound = bound_for(x, axis, method, out_dtype, gpu)
    bound = np.broadcast_to(bound.reshape(bound.shape if not keepdims else exact.shape), exact.shape)
    err = np.abs(g - exact)
    bad = finite & ~(err <= bound)
    if np.any(bad):
        i = np.flatnonzero(bad)[0]
        raise AssertionError(f"{method}: {int(bad.sum())} of {bad.size} outputs exceed the error bound; first at flat "
                             f"index {i}: got {g.flat[i]!r}, exact {exact.flat[i]!r}, |err| {err.flat[i]:.3e} > "
                             f"bound {bound.flat[i]:.3e}")


def assert_compiles_clean(source: str, kernel: str, arch: str, *, needle: str | None = None,
                          use_cache: bool = True):
    """Compile one kernel instantiation with the run-time NVRTC options and assert no warnings, no register spills
    and, if ``needle`` is given, that the PTX contains it (e.g. "mma.sync"). Returns the CompiledKernel."""
    import re

    from ._compile import compile_kernel

    ck = compile_kernel(source, kernel, arch, use_cache=use_cache)
    assert not re.search(r"warning", ck.log, re.I), f"{kernel} on {arch}:\n{ck.log}"
    assert not ck.spills, f"{kernel} spills registers on {arch}:\n{ck.log}"
    if needle is not None:
        assert needle in ck.ptx, f"{kernel} has no {needle} in its PTX on {arch}"
    return ck
