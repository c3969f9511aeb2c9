"""Method "cub": ``cupy.sum(x, axis, dtype=float32)`` with CuPy's CUB accelerator switched on for the call, the
reference competitor. It has no kernels and no launch plan of its own: :class:`~tcreduce.registry.Method` calls
:func:`run_cub` instead (``runner``), and its planner refuses to plan.

What CuPy launches (CuPy 13/14 sources: ``cupy/_core/_routines_math.pyx`` ``_ndarray_sum``, ``cupy/cuda/cub.pyx``
``cub_reduction`` and ``_cub_reduce_dtype_compatible``, ``cupy/_core/_cub_reduction.pyx``):

- The routine accelerator (``cupy._core.set_routine_accelerators(["cub"])``) hands ``sum`` to CUB's device-wide
  algorithms only when no dtype conversion is asked for (``dtype`` None or equal to the input dtype) and the array is
  C- or F-contiguous: ``cub::DeviceReduce::Sum`` for a full reduction, ``cub::DeviceSegmentedReduce::Sum`` when the
  reduced axes are the contiguous trailing (C) or leading (F) ones. Accumulation is in the input dtype.
  * float32 input (dtype=float32 is the input dtype): DeviceReduce / DeviceSegmentedReduce in fp32.
  * float16 input with dtype=float32: a conversion, so CUB's device-wide path is refused (an fp16 DeviceReduce would
    accumulate in fp16, which tcreduce never wants).
- Otherwise the reduction accelerator (``set_reduction_accelerators(["cub"])``) applies: CuPy's own reduction
  kernel built on ``cub::BlockReduce`` and ``cub::BlockLoad`` (BLOCK_LOAD_DIRECT, 4 items per thread, blocks of up to
  512 threads), when the array is C- or F-contiguous and the reduced axes are contiguous. fp16 elements are loaded,
  converted to float and reduced in fp32 (the 'f->f' loop chosen by dtype=float32; ``type_in0_raw`` stays half).
  Full reductions run two passes: the first writes one fp32 partial per 2048-element tile (512 x 4), the second
  reduces those partials in one block. Segmented reductions run one block per output.
- Anything else (non-contiguous views, reduced axes that are not the contiguous ones) falls back to CuPy's generic
  reduction kernel (``cupy_sum_with_dtype``), also fp32.

Determinism: every path above uses a fixed tree (``cub::BlockReduce``, DeviceReduce's default run-to-run
deterministic policy, two-pass reductions without atomics), so repeated calls on the same GPU with the same input
give identical bits. The order of additions is CUB's and CuPy's, not modelled by :mod:`tcreduce.emulate`
(not emulated). The accelerator settings are process-wide in CuPy; :func:`run_cub` restores the previous ones
after the call, so a concurrent ``cupy.sum`` in another thread may see them switched during the call.

The fp32 result is cast once to the requested output dtype (float16: one rounding; float64: exact widening).
"""

from __future__ import annotations

from typing import Any

from .._layout import Problem
from .._plan import DeviceSpec, Plan
from ..registry import Method, register

__all__ = ["run_cub", "plan_cub"]


def run_cub(x: Any, axes: tuple[int, ...], out_dtype: str) -> Any:
    """``cupy.sum(x, axis=axes, dtype=float32)`` with CuPy's CUB routine and reduction accelerators on for this
    call only (the previous settings are restored), cast to ``out_dtype``. Returns a CuPy array (0-d for a full
    sum), on CuPy's current stream, without keepdims."""
    import cupy
    from cupy import _core

    prev_routine = list(_core.get_routine_accelerators())
    prev_reduction = list(_core.get_reduction_accelerators())
    try:
        _core.set_routine_accelerators(["cub"])
        _core.set_reduction_accelerators(["cub"])
        res = cupy.sum(x, axis=tuple(axes), dtype=cupy.float32)
    finally:
        _core.set_routine_accelerators(prev_routine)
        _core.set_reduction_accelerators(prev_reduction)
    if out_dtype != "float32":
        res = res.astype(out_dtype)
    return res


def plan_cub(problem: Problem, in_dtype: str, out_dtype: str, device: DeviceSpec) -> Plan:
    """Method "cub" has no launch plan: it delegates to ``cupy.sum`` (see the module docstring)."""
    raise NotImplementedError("method 'cub' has no launch plan: it calls cupy.sum with CuPy's CUB accelerator "
                              "(tcreduce.sum(x, method='cub') runs it; tcreduce.emulate does not model it)")


register(Method(
    name="cub",
    description="cupy.sum(x, dtype=float32) with CuPy's CUB accelerator: DeviceReduce / DeviceSegmentedReduce for "
                "fp32, CuPy's cub::BlockReduce kernels (fp32 accumulation) for fp16",
    dtypes=("float16", "float32"),
    reference="CUB DeviceReduce / DeviceSegmentedReduce through cupy.sum with CuPy's CUB accelerator",
    planner=plan_cub,
    deterministic=True,
    runner=run_cub,
))
