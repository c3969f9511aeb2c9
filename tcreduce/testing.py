"""Helpers for testing reductions against references (used by the test suite; handy in notebooks too).

The tolerance of every check is an a-priori error bound (:func:`tcreduce.bounds.error_bound`) of the method's plan for
that input, never a constant picked to pass. ``check_sum`` compares a GPU result with the exact sum, elementwise.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np

__all__ = ["random_input", "adversarial_inputs", "adversarial_inputs_f32", "format_adversarial_inputs",
           "mixed_sign_inputs", "poisoned", "check_sum", "to_numpy", "bound_for", "assert_compiles_clean",
           "run_mma_probe", "MMA_PROBE_INDEX", "to_device", "patched_plans", "contiguous_problem"]


def random_input(rng: np.random.Generator, shape: tuple[int, ...] | int, dtype: str = "float16",
                 low: float = -0.25, high: float = 0.75) -> np.ndarray:
    """Fresh uniform random data in [low, high), never all zeros, as a NumPy array of ``dtype`` (a format name:
    bfloat16 and fp8 give ml_dtypes arrays)."""
    from .formats import numpy_dtype

    x = rng.uniform(low, high, size=shape).astype(numpy_dtype(dtype))
    if x.size and not np.any(x):
        x.flat[0] = 1
    return x


# An fp16 value just below half an fp32 ulp of 1024 (2^-14 - 2^-24, a subnormal): added to a running fp32 sum of
# 1024 or more it rounds away entirely, the worst loss one round-to-nearest addition can inflict on it.
_BELOW_HALF_ULP_OF_1024 = np.float16(2.0 ** -14 - 2.0 ** -24)
# Just below 2^-13: a tensor-core block aligned to 1024 truncates it (the worst case of the fused-block model).
_BELOW_2_POW_M13 = np.float16(2.0 ** -13 * (1 - 2.0 ** -11))


def _big_among_small(n: int, small: np.float16, big_at: slice) -> np.ndarray:
    x = np.full(n, small, np.float16)
    x[big_at] = 1024
    return x


def adversarial_inputs(rng: np.random.Generator, n: int, dtype: str = "float16") -> dict[str, np.ndarray]:
    """Same-sign inputs of length ``n`` built to make a reduction lose as much as it can, by name: float16 (below)
    or float32 (:func:`adversarial_inputs_f32`).

    No single input is worst for every order of additions, so this is a family; take the worst error over it.

    - ``big_first_1/2^j``: the first ``n >> j`` elements are 1024, the rest just below half an fp32 ulp of 1024.
      When ``n >> j`` is the grid stride of a method (or the size of a tree's subtree), every thread's sequential
      chain (every subtree) starts with 1024 and then rounds away each small element it adds: a chain of k
      additions loses about k·u of its sum, which is what the a-priori bound charges.
    - ``big_every_s``: 1024 at every s-th element, the same small values between.
    - ``big_then_trunc``, ``big_every_256_trunc``: 1024 then values just below 2^-13, which a tensor-core block
      aligned to 1024 truncates away, and which a round-to-nearest addition to 1024 rounds to 2^-13.
    - ``high_mantissa``: values in [1.93, 2), mantissas near all ones; ``fine_bits``: 1/16 plus a random
      multiple of 2^-14 (11 significant bits that fp32 partial sums soon cannot hold); ``uniform_positive``: U[0.5, 1).
    """
    if dtype == "float32":
        return adversarial_inputs_f32(rng, n)
    if dtype != "float16":
        raise ValueError(f"adversarial inputs are defined for float16 and float32, not {dtype}")
    out = {f"big_first_1/{1 << j}": _big_among_small(n, _BELOW_HALF_ULP_OF_1024, slice(0, max(1, n >> j)))
           for j in (3, 7, 11, 13, 15, 17)}
    out.update({f"big_every_{s}": _big_among_small(n, _BELOW_HALF_ULP_OF_1024, slice(None, None, s))
                for s in (32, 4096)})
    out["big_then_trunc"] = _big_among_small(n, _BELOW_2_POW_M13, slice(0, 1))
    out["big_every_256_trunc"] = _big_among_small(n, _BELOW_2_POW_M13, slice(None, None, 256))
    out["high_mantissa"] = (1 + (1023 - rng.integers(0, 64, n)) / 1024).astype(np.float16)
    out["fine_bits"] = (rng.integers(1, 1024, n) * 2.0 ** -14 + 2.0 ** -4).astype(np.float16)
    out["uniform_positive"] = rng.uniform(0.5, 1, n).astype(np.float16)
    return out


def format_adversarial_inputs(rng: np.random.Generator, n: int, fmt: str) -> dict[str, np.ndarray]:
    """The same-sign adversarial family for another input format (an ml_dtypes array each, by name).

    bfloat16 and float8_e5m2 hold every value of :func:`adversarial_inputs` exactly or nearly (rounded once to the
    format). float8_e4m3fn cannot (1024 is beyond its 448): its values have 4 significant bits, so sums of values of
    one scale are exact in fp32 for long; its family mixes scales instead: ``wide_positive`` (2^U(-9, 8.8)) and
    ``big_first_1/2^j_wide`` / ``big_every_32_wide`` (448 among values 2^U(-9, -2)), whose low bits every fp32 partial
    sum must round away. The fp8 formats get the wide family too.

    Rounded to bf16, the small values of :func:`adversarial_inputs` become powers of two (2^-14, 2^-13) that lose
    less: bfloat16 also gets the family's shapes with the largest bf16 values below them (``*_bf16``: 1024 among
    2^-14 (1 - 2^-8), which every round-to-nearest addition to 1024 rounds away, or among 2^-13 (1 - 2^-8), which a
    tensor-core block aligned to 1024 truncates away)."""
    from .formats import numpy_dtype

    dt = numpy_dtype(fmt)
    out: dict[str, np.ndarray] = {}
    if fmt != "float8_e4m3fn":
        out.update({name: x.astype(np.float32).astype(dt) for name, x in adversarial_inputs(rng, n).items()})
    if fmt == "bfloat16":
        below_half_ulp, below_2m13 = np.ldexp(1 - 2.0 ** -8, -14), np.ldexp(1 - 2.0 ** -8, -13)  # exact in bf16

        def big_among(small: float, big_at: slice) -> np.ndarray:
            x = np.full(n, small, dt)
            x[big_at] = 1024
            return x

        out.update({f"big_first_1/{1 << j}_bf16": big_among(below_half_ulp, slice(0, max(1, n >> j)))
                    for j in (3, 7, 11, 13, 15, 17)})
        out["big_every_32_bf16"] = big_among(below_half_ulp, slice(None, None, 32))
        out["big_then_trunc_bf16"] = big_among(below_2m13, slice(0, 1))
        out["big_every_256_trunc_bf16"] = big_among(below_2m13, slice(None, None, 256))
    if fmt.startswith("float8"):
        idx = np.arange(n)
        small = np.exp2(rng.uniform(-9, -2, n))
        out["wide_positive"] = np.exp2(rng.uniform(-9, 8.8, n)).astype(dt)
        out.update({f"big_first_1/{1 << j}_wide": np.where(idx < max(1, n >> j), 448.0, small).astype(dt)
                    for j in (3, 7, 11, 13, 15, 17)})
        out["big_every_32_wide"] = np.where(idx % 32 == 0, 448.0, small).astype(dt)
    return out


# float32: just below half an fp32 ulp of 1024 and bf16/tf32-exact (8 significant bits): added to a running fp32 sum
# of 1024 or more it rounds away; 16 of them (a bf16 mma row) or 8 (a tf32 row) stay below half an ulp of 16 * 1024
# or 8 * 1024, so row sums added to such accumulators round away too.
_F32_BELOW_HALF_ULP_OF_1024 = np.float32(2.0 ** -14 * (1 - 2.0 ** -8))


def adversarial_inputs_f32(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Same-sign float32 inputs of length ``n`` by name, the float32 counterparts of :func:`adversarial_inputs`:

    - ``big_first_1/2^j``, ``big_every_s``: 1024 among values just below half an fp32 ulp of 1024 (every chain of
      round-to-nearest additions that starts with 1024 rounds the small values away; see the fp16 family).
    - ``tf32_round_down``: 1 + 2^-11 - 2^-23, which tf32 rounding (10 fraction bits) lowers by almost 2^-11.
    - ``high_mantissa``: values in [1.5, 2) with random low mantissa bits; ``fine_bits``: 1/16 plus a random multiple
      of 2^-30 (bits that fp32 partial sums soon cannot hold); ``uniform_positive``: U[0.5, 1); ``wide_positive``:
      lognormal with sigma 4 (values over ~30 binades in every row of 16).
    """
    small = _F32_BELOW_HALF_ULP_OF_1024

    def big_among_small(big_at: slice) -> np.ndarray:
        x = np.full(n, small, np.float32)
        x[big_at] = 1024
        return x

    out = {f"big_first_1/{1 << j}": big_among_small(slice(0, max(1, n >> j))) for j in (3, 7, 11, 13, 15, 17)}
    out.update({f"big_every_{s}": big_among_small(slice(None, None, s)) for s in (32, 4096)})
    out["tf32_round_down"] = np.full(n, 1 + 2.0 ** -11 - 2.0 ** -23, np.float32)
    out["high_mantissa"] = (1.5 + rng.integers(0, 1 << 22, n) * 2.0 ** -23).astype(np.float32)
    out["fine_bits"] = (2.0 ** -4 + rng.integers(1, 1 << 26, n) * 2.0 ** -30).astype(np.float32)
    out["uniform_positive"] = rng.uniform(0.5, 1, n).astype(np.float32)
    out["wide_positive"] = rng.lognormal(0, 4, n).astype(np.float32)
    return out


def mixed_sign_inputs(rng: np.random.Generator, n: int, dtype: str = "float16") -> dict[str, np.ndarray]:
    """Mixed-sign inputs of length ``n`` by name: ``cancellation`` (N(0, 100^2): the sum is far smaller than
    sum|x|) and ``wide_range`` (signed lognormal, sigma 3, clipped to +-60000 for float16: terms across the fp16
    range; sigma 6 unclipped for float32)."""
    if dtype == "float32":
        return {
            "cancellation": (rng.standard_normal(n) * 100).astype(np.float32),
            "wide_range": (rng.lognormal(0, 6, n) * rng.choice([-1, 1], n)).astype(np.float32),
        }
    return {
        "cancellation": (rng.standard_normal(n) * 100).astype(np.float16),
        "wide_range": (rng.lognormal(0, 3, n) * rng.choice([-1, 1], n)).clip(-6e4, 6e4).astype(np.float16),
    }


def to_device(xh: np.ndarray) -> tuple[Any, dict]:
    """(CuPy array, keyword arguments for tcreduce.sum) holding a NumPy array of any input format: bfloat16 and fp8
    travel as their raw bits with ``format=``; float16 and float32 as themselves. Views of the returned array address
    the same elements as the same views of ``xh``."""
    import cupy

    from .formats import format_of_dtype

    f = format_of_dtype(xh.dtype)
    if f is None or f.name in ("float16", "float32"):
        return cupy.asarray(xh), {}
    return cupy.asarray(xh.view(f.raw_dtype)), {"format": f.name}


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


def same_bits(a: Any, b: Any) -> bool:
    """Two results (NumPy, CuPy or torch; 0-d too) of the same shape and dtype with the same bits, NaN bits included."""
    a, b = np.ascontiguousarray(to_numpy(a)), np.ascontiguousarray(to_numpy(b))
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


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


MMA_PROBE_INDEX = {"float16": 0, "bfloat16": 1, "float8_e4m3fn": 2, "float8_e5m2": 3, "float32": 4}


def run_mma_probe(fmt: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D of one ``mma.sync`` of format ``fmt`` per (a, b, c) triple on the current GPU (``kernels/mma_probe.cu``):
    a [n, 16, K] and b [n, K, 8] raw bits (or values of the format's NumPy dtype), c float32 [n, 16, 8]. The output is
    poisoned with NaN before the launch."""
    import cupy

    from ._compile import get_function
    from ._device import current_device

    device_id, spec = current_device()
    fn = get_function("mma_probe.cu", f"mma_probe<{MMA_PROBE_INDEX[fmt]}>", device_id, spec.arch)
    n = a.shape[0]
    da, db = cupy.asarray(np.ascontiguousarray(a)), cupy.asarray(np.ascontiguousarray(b))
    dc = cupy.asarray(np.ascontiguousarray(c, dtype=np.float32))
    dd = cupy.full((n, 16, 8), np.nan, dtype=np.float32)
    block = 256
    grid = (n * 32 + block - 1) // block
    args = tuple(np.uint64(p.data.ptr) for p in (da, db, dc, dd)) + (np.int64(n),)
    fn((grid, 1, 1), (block, 1, 1), args, 0, cupy.cuda.get_current_stream(), False)
    return cupy.asnumpy(dd)


@contextlib.contextmanager
def patched_plans(module: Any, setting: dict) -> Iterator[None]:
    """A planner module's (``tcreduce.plans.*``) constants set to ``setting`` for every GPU family: the module-level
    values, with the names dropped from the module's FAMILY_TUNING; plan caches cleared on entry and exit, and every
    constant restored on exit. Used by benchmarks/tune_plans.py and by tests that plan with other constants."""
    from . import _api

    old = {k: getattr(module, k) for k in setting}
    if hasattr(module, "FAMILY_TUNING"):
        old["FAMILY_TUNING"] = module.FAMILY_TUNING
        module.FAMILY_TUNING = {family: {k: v for k, v in own.items() if k not in setting}
                                for family, own in module.FAMILY_TUNING.items()}
    for k, v in setting.items():
        setattr(module, k, v)
    _api.get_plan.cache_clear()
    _api._PREPARED.clear()
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)
        _api.get_plan.cache_clear()
        _api._PREPARED.clear()


def contiguous_problem(shape: tuple[int, ...], axis: Any, dtype: str) -> Any:
    """The canonical problem (tcreduce._layout) of a C-contiguous, 16-byte aligned ``shape`` array of ``dtype``
    reduced over ``axis`` (NumPy's rules: None for all axes, negative ones from the end): what the planners see for
    such an input, without making one."""
    import math

    from ._layout import normalize_axes, plan_layout
    from .formats import get_format

    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    return plan_layout(shape, strides, normalize_axes(axis, len(shape)), get_format(dtype).itemsize, 0).problem
